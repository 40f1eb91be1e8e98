"""Parameter roles the producers declare, for the diff's `reference_arg_roles` / `generated_arg_roles`.

A kernel parameter is identified by what it stands for (see match.FunctionIndex): the diff infers
a tensor's shape and stride parameters from the `make_tensor_view` that uses them, but a kernel
that only gathers/scatters through pointers uses them in plain arithmetic. Both frontends know
what they pass:

- cuTile Python passes every array parameter as its pointer, then one i32 per dimension for the
  shape, then one per dimension for the strides; a scalar parameter as one value; a constant not at
  all (`cutile_python_roles`).
- The generated crate's entries pass the same layout after the strides the launcher passes first,
  as leading i32 scalars, which the manifest (`kernels.json`) lists per specialized entry
  (`stride_args`, `manifest_generated_roles`); an array passed as `&mut Tensor` (the variant's
  `owned`) is followed by its partition's shape and strides as well (roles `partition_shape` /
  `partition_stride`: the diff gives them no meaning, the interpreter binds them).

A role map is {parameter index (negative: from the end) -> ("shape" | "stride" | "partition_shape" |
"partition_stride", tensor, dim)}.
"""

from __future__ import annotations

from typing import Any

from .model import Function
from .types import is_pointer_tile

Roles = dict[int, tuple]


def cutile_python_roles(params: list[dict[str, Any]], function: Function | None = None,
                        leading: int = 0, partitioned: frozenset[str] = frozenset()) -> Roles:
    """Roles of an entry's parameters in cuTile Python's layout, after `leading` other parameters, from
    the kernel's parameter list (manifest `params`: kind array (with rank) / scalar / const, in
    declaration order); an array named in `partitioned` takes its partition's shape and strides after
    its own. When `function` is given, the layout must match its parameters (pointers where the arrays
    are, the same count); otherwise no roles are declared (the diff then infers what it can)."""
    roles: Roles = {}
    pointers: list[int] = []
    i = leading
    tensor = 0
    for p in params:
        if p["kind"] == "array":
            rank = int(p["rank"])
            pointers.append(i)
            for d in range(rank):
                roles[i + 1 + d] = ("shape", tensor, d)
                roles[i + 1 + rank + d] = ("stride", tensor, d)
                if p.get("name") in partitioned:
                    roles[i + 1 + 2 * rank + d] = ("partition_shape", tensor, d)
                    roles[i + 1 + 3 * rank + d] = ("partition_stride", tensor, d)
            i += 1 + 2 * rank * (2 if p.get("name") in partitioned else 1)
            tensor += 1
        elif p["kind"] == "scalar":
            i += 1
    if function is not None:
        args = function.args
        if len(args) != i or [k for k, a in enumerate(args) if is_pointer_tile(a.type)] != pointers:
            return {}
    return roles


def manifest_variant(entry: dict[str, Any], function_name: str) -> dict[str, Any] | None:
    """The variant of a manifest entry whose generated entry function is `function_name`
    (cutile-rs names it `<variant entry>_entry`)."""
    for variant in entry["variants"]:
        if function_name in (variant["entry"], f"{variant['entry']}_entry"):
            return variant
    return None


def manifest_generated_roles(entry: dict[str, Any], variant: dict[str, Any],
                             function: Function | None = None) -> Roles:
    """The generated entry's shape/stride parameters for `variant`: the strides its launcher passes
    first, then cuTile Python's layout (checked against `function` when given)."""
    arrays = [p["name"] for p in entry["params"] if p["kind"] == "array"]
    strides = variant["stride_args"]
    owned = frozenset(variant.get("owned", ()))
    roles = cutile_python_roles(entry["params"], function, len(strides), owned) if function is not None else {}
    roles.update({i: ("stride", arrays.index(a), d) for i, (a, d) in enumerate(strides)})
    return roles
