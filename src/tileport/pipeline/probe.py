"""Probe specializations: values for a kernel's dtypes and `ct.Constant` parameters, synthesized from
the kernel itself when nothing else gives them (no recorded launch, no launch in the file's host code,
no `--config`).

A probe lets stage A capture a reference IR and stage B diff the port against it: the diff then proves
the translation faithful *for the probe's values only*. It says nothing about the shapes the kernel
really runs on, and the GPU stages still need real launches. Everything built here is labelled
synthesized (`SYNTHESIZED`), in the analysis, the verdicts, the report and the wild table.

What the kernel's text decides (read with `ast`, nothing runs):

| parameter                                    | probe value                                          |
|----------------------------------------------|------------------------------------------------------|
| array                                        | float32, and float16 in a second specialization      |
| array whose loaded values index another one  | int64                                                |
| `ct.Constant[int]` used in a tile shape      | a power of two (64, then 32 and 16 as alternatives)  |
| other `ct.Constant[int]` (a size, a count)   | 4 x the tile value (a multiple of every tile), then equal to it |
| `ct.Constant[bool]`                          | False in one specialization, True in another         |
| `ct.Constant[float]`                         | 0.5 (a neutral value that no compiler folds away)    |
| runtime scalar                               | its annotated or inferred dtype (as the translator)  |

Each specialization comes with alternatives (smaller tiles, sizes equal to a tile) tried in order when
cuTile's compiler rejects one (`select`); the kernel's target then carries the chosen values, for the
translator as for the reference IR, exactly as a `--config` with these values would.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tileport.diagnostics import Diagnostic
from tileport.frontends.cutile.lowerer import KernelConfig, _ct_call_name, index_arrays
from tileport.frontends.cutile.scan import ScannedModule, loc_of
from tileport.model.ir import Param
from tileport.dtypes import TORCH_DTYPES
from tileport.ops.spec import Capture

SYNTHESIZED = "probe (synthesized)"  # the config source of a probe: never a real launch
TILE_VALUES = (64, 32, 16)  # first choice, then the alternatives tried when cuTile rejects a probe
SIZE_FACTORS = (4, 1)  # a size constant is this many tiles (a multiple of every tile value)
FLOAT_DTYPES = ("float32", "float16")
INT_DTYPE = "int64"  # as the translator types index arrays (torch.long)
FLOAT_CONSTANT = 0.5

# ct calls and where their tile shape is: (positional index, keyword)
SHAPE_ARGS = {"load": (2, "shape"), "arange": (0, "size"), "full": (0, "shape"), "zeros": (0, "shape"),
              "ones": (0, "shape"), "empty": (0, "shape"), "reshape": (1, "shape"), "broadcast_to": (1, "shape"),
              "num_tiles": (2, "shape")}
METHOD_SHAPES = ("reshape", "broadcast_to")  # tile.reshape(shape)


@dataclass
class Probe:
    """One synthesized specialization and its alternatives (first = preferred)."""

    label: str  # what varies ("float32", "float16, flags=True")
    alternatives: list[Capture] = field(default_factory=list)


@dataclass
class ProbePlan:
    probes: list[Probe]
    notes: list[str]  # how each value was chosen (shown in analysis.json and the report)
    tiles: list[str] = field(default_factory=list)
    sizes: list[str] = field(default_factory=list)
    int_arrays: list[str] = field(default_factory=list)


@dataclass
class Selection:
    """The probes cuTile Python compiles, how they were chosen, and why none did (if so)."""

    captures: list[Capture]
    notes: list[str]
    diagnostic: Diagnostic | None = None


def _names_in(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _arg(call: ast.Call, pos: int | None, kw: str | None) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    return call.args[pos] if pos is not None and pos < len(call.args) else None


def tile_names(sm: ScannedModule, fn: ast.FunctionDef) -> set[str]:
    """Names used in a tile shape: `ct.load(..., shape=(TM, TN))`, `ct.arange(T)`, `ct.full((T,), ..)`,
    `t.reshape((T, 1))`."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = _ct_call_name(sm, node.func)
        if name in SHAPE_ARGS:
            out |= _names_in(_arg(node, *SHAPE_ARGS[name]))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in METHOD_SHAPES and name is None:
            out |= set().union(*(_names_in(a) for a in node.args)) if node.args else set()
    return out


def plan(sm: ScannedModule, fn: ast.FunctionDef, params: list[Param]) -> ProbePlan:
    """The probe specializations of one kernel (`params`: the frontend's classification)."""
    arrays = {p.name: p.ty.rank for p in params if p.is_array}
    scalars = {p.name: TORCH_LONG.get(p.ty.dtype, p.ty.dtype) for p in params if not p.is_array and not p.is_const}
    consts = {p.name: p.const_type or "int" for p in params if p.is_const}
    shaped = tile_names(sm, fn)
    tiles = [n for n, t in consts.items() if t == "int" and n in shaped]
    sizes = [n for n, t in consts.items() if t == "int" and n not in shaped]
    bools = [n for n, t in consts.items() if t == "bool"]
    floats = [n for n, t in consts.items() if t == "float"]
    ints = index_arrays(sm, fn) & set(arrays)
    notes = []
    if tiles:
        notes.append(f"tile-shape constants {', '.join(tiles)} = {TILE_VALUES[0]} (alternatives "
                     f"{', '.join(map(str, TILE_VALUES[1:]))})")
    if sizes:
        notes.append(f"other int constants {', '.join(sizes)} = {SIZE_FACTORS[0]} x the tile value "
                     f"({SIZE_FACTORS[0] * TILE_VALUES[0]}), alternative: equal to it")
    if floats:
        notes.append(f"float constants {', '.join(floats)} = {FLOAT_CONSTANT}")
    if ints:
        notes.append(f"arrays {', '.join(sorted(ints))} index other arrays: {INT_DTYPE}")
    if bools:
        notes.append(f"bool constants {', '.join(bools)}: False and True")
    probes = []
    for dtype in FLOAT_DTYPES:
        for flags in _bool_settings(bools):
            label = ", ".join([dtype] + [f"{k}={v}" for k, v in flags.items()])
            alts: list[Capture] = []
            for tile in TILE_VALUES:
                for factor in SIZE_FACTORS:
                    values = {n: tile for n in tiles} | {n: tile * factor for n in sizes}
                    values |= {n: FLOAT_CONSTANT for n in floats} | flags
                    cap = Capture(fn.name, {n: (INT_DTYPE if n in ints else dtype, r) for n, r in arrays.items()},
                                  dict(scalars), {n: values[n] for n in consts})
                    if cap not in alts:
                        alts.append(cap)
            probes.append(Probe(label, alts))
    return ProbePlan(probes, notes, tiles, sizes, sorted(ints))


def select(path: Path, sm: ScannedModule, fn: ast.FunctionDef, params: list[Param]) -> Selection:
    """Per probe, the first alternative cuTile Python compiles (on the CPU, from the module rebuilt from
    the file's AST: nothing of the file runs). A probe none of whose alternatives compiles is dropped
    (noted); when all are dropped, `diagnostic` says why, located at the kernel."""
    from tileport.capture import CaptureError, reference_bytecode
    p = plan(sm, fn, params)
    out = Selection([], list(p.notes))
    errors = []
    for pr in p.probes:
        for alt in pr.alternatives:
            try:
                reference_bytecode(path, alt)
            except CaptureError as e:
                errors.append(f"{alt.label}: {e}")
                continue
            out.captures.append(alt)
            if alt is not pr.alternatives[0]:
                out.notes.append(f"{pr.label}: cuTile Python rejects the first probe; {alt.label} compiles")
            break
        else:
            out.notes.append(f"{pr.label}: cuTile Python compiles none of its {len(pr.alternatives)} probe(s): dropped")
    if not out.captures:
        out.diagnostic = Diagnostic(
            f"cuTile Python compiles none of the synthesized probe specializations of `{fn.name}`; first error: "
            f"{errors[0] if errors else 'no probe'}", loc_of(str(path), fn), "probe specialization",
            hint="record the kernel's launches (tileport record) or give its values with --config", kernel=fn.name)
    return out


def kernel_config(captures: list[Capture]) -> KernelConfig:
    """The translator's configuration for the selected probes (as a --config with these values would be)."""
    entries = []
    for c in captures:
        entry = {n: TORCH_DTYPES.get(dt, dt) for n, (dt, _r) in c.arrays.items()}
        entry |= {n: TORCH_DTYPES.get(dt, dt) for n, dt in c.scalars.items()}
        entries.append(entry | dict(c.constants))
    return KernelConfig(tuple(entries), {n: r for c in captures for n, (_dt, r) in c.arrays.items()})


def _bool_settings(bools: list[str]) -> list[dict[str, bool]]:
    """All False, then all True (two specializations however many flags: cheap, and each branch is seen)."""
    return [{b: False for b in bools}, {b: True for b in bools}] if bools else [{}]


TORCH_LONG = {v: k for k, v in TORCH_DTYPES.items()}  # "f32" -> "float32"


__all__ = ["SYNTHESIZED", "Probe", "ProbePlan", "Selection", "plan", "select", "kernel_config", "tile_names"]
