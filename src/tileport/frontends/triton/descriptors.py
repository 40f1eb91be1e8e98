"""Host-side tensor descriptors: a kernel parameter the host passes as a `TensorDescriptor`
(`triton.tools.tensor_descriptor`), used in the kernel as `desc.load(offsets)` / `desc.store(offsets, v)`.

The kernel text shows the descriptor's rank (the length of its offset lists) but not its block shape, which
the host sets (often in an autotune `pre_hook`, from the config's constexprs). The block shape and padding
come from the launches (`tileport record` captures them) or the configuration, under the keys
`PARAM.block_shape` and `PARAM.padding`; unconfigured, from the autotune configs whose pre_hook sets them
(read by the scan). The port takes the descriptor as an array of its rank (its shape
and strides are the descriptor's), and each entry is pinned on the constexprs the configurations give, so
that one entry never serves two block shapes: the block shape is a literal of the entry that the launch's
constexpr values select.
"""

from __future__ import annotations

import ast
from typing import Any, Mapping, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.frontends.triton.scan import dotted, loc_of

ACCESS_METHODS = ("load", "store")
ACCESS_FUNCTIONS = ("load_tensor_descriptor", "store_tensor_descriptor")
PADDINGS = ("zero", "nan")
BLOCK_KEY, PADDING_KEY = "block_shape", "padding"


def config_key(param: str, field: str) -> str:
    """The configuration / launch key of a descriptor's field (`desc.block_shape`, `desc.padding`)."""
    return f"{param}.{field}"


def descriptor_params(fn: ast.FunctionDef) -> dict[str, int | None]:
    """Parameters used as host-side descriptors -> their rank (the length of their offset lists; None
    when no offset list is a literal). Only a descriptor has `.load(offsets)` / `.store(offsets, v)`."""
    params = {a.arg for a in fn.args.args}
    ranks: dict[str, set[int]] = {}
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        desc, offsets = None, None
        if isinstance(n.func, ast.Attribute) and n.func.attr in ACCESS_METHODS and \
                isinstance(n.func.value, ast.Name) and n.func.value.id in params:
            desc, offsets = n.func.value.id, (n.args[0] if n.args else None)
        elif (dotted(n.func) or "").rpartition(".")[2] in ACCESS_FUNCTIONS and n.args and \
                isinstance(n.args[0], ast.Name) and n.args[0].id in params:
            desc, offsets = n.args[0].id, (n.args[1] if len(n.args) > 1 else None)
        if desc is None:
            continue
        seen = ranks.setdefault(desc, set())
        if isinstance(offsets, (ast.List, ast.Tuple)):
            seen.add(len(offsets.elts))
    return {a.arg: (next(iter(ranks[a.arg])) if len(ranks[a.arg]) == 1 else None) for a in fn.args.args
            if a.arg in ranks}  # in parameter order (a diagnostic names the first)


def check_ranks(path: str, fn: ast.FunctionDef, found: Mapping[str, int | None],
                configured: Mapping[str, int]) -> dict[str, int]:
    """The rank of each descriptor (offset lists, else the configuration's `ranks`), or a located diagnostic."""
    out = {}
    for name, rank in found.items():
        rank = rank or configured.get(name)
        if not rank:
            raise Diagnostic(f"host-side tensor descriptor `{name}`: its rank is not shown (offsets are not a "
                             "literal list, or disagree in length)", _param_loc(path, fn, name), "tensor descriptor",
                             "give its rank under `ranks` in --config")
        out[name] = rank
    return out


def launch_fields(configs: Sequence[Mapping[str, Any]], descriptors: Sequence[str]) -> list[dict]:
    """Per configuration: {descriptor: (block shape, padding)} for the descriptors it describes."""
    out = []
    for c in configs:
        fields = {}
        for d in descriptors:
            block = c.get(config_key(d, BLOCK_KEY))
            if block is not None:
                fields[d] = (tuple(int(x) for x in block), str(c.get(config_key(d, PADDING_KEY)) or "zero"))
        out.append(fields)
    return out


def hooked(candidates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The autotune configs whose pre_hook gives a descriptor's block shape (read statically by the scan):
    the block shapes of an unconfigured kernel."""
    return [c for c in candidates if any(k.endswith(f".{BLOCK_KEY}") for k in c)]


def resolve(path: str, fn: ast.FunctionDef, descriptors: Sequence[str], configs: Sequence[Mapping[str, Any]],
            constexprs: Sequence[str], pinned: Mapping[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    """{descriptor: (block shape, padding)} of the entry pinned on `pinned`. `constexprs` are the kernel's value
    constexprs (not its dtype ones). Raises NeedsSpecialization on those the configurations give and `pinned`
    does not fix yet (one entry per value set); a located diagnostic when no configuration, or two with the
    same constexpr values, give a descriptor's block shape."""
    if not descriptors:
        return {}
    fields = launch_fields(configs, descriptors)
    given = [c for c in constexprs if c not in pinned and any(c in cfg for cfg in configs)]
    if given and any(fields):
        raise NeedsSpecialization(frozenset(given), "host-side tensor descriptors (their block shape follows the "
                                  "launch's constexprs)", loc_of(path, fn))
    keys = [k for k in constexprs if k in pinned]
    matching = [f for f, c in zip(fields, configs) if all(c.get(k, pinned[k]) == pinned[k] for k in keys)]
    out = {}
    for d in descriptors:
        seen = {f[d] for f in matching if d in f}
        if not seen:
            raise Diagnostic(f"host-side tensor descriptor `{d}`: its block shape is set by the host "
                             "(TensorDescriptor(..., block_shape=...)) and no launch or configuration gives it",
                             _param_loc(path, fn, d), "tensor descriptor",
                             "record the kernel's launches (`tileport record --out launches.json -- <program>`, "
                             f"then --launches launches.json), or give \"{config_key(d, BLOCK_KEY)}\" in --config")
        if len(seen) > 1:
            raise Diagnostic(f"host-side tensor descriptor `{d}`: launches with the same constexpr values give it "
                             f"different block shapes / paddings {sorted(seen)}", _param_loc(path, fn, d),
                             "tensor descriptor", "port those launches separately (one launch spec each)")
        block, padding = seen.pop()
        if padding not in PADDINGS:
            raise Diagnostic(f"host-side tensor descriptor `{d}`: padding {padding!r} is not supported",
                             _param_loc(path, fn, d), "tensor descriptor", "use 'zero' or 'nan'")
        out[d] = (block, padding)
    return out


def _param_loc(path: str, fn: ast.FunctionDef, name: str):
    arg = next((a for a in fn.args.args if a.arg == name), fn)
    return loc_of(path, arg)
