"""The Triton frontend's entry: a Triton source file -> kernel model, with located diagnostics.

`translate_file(path, configs, only)` has the shape of the cuTile frontend's entry and returns the
same `Translation` (a `KernelModule` plus per-kernel diagnostics). Facts the source does not state
come from the configuration (`configs[kernel].configs`: parameter -> dtype or constexpr value) or,
without one, from assumptions that are recorded as kernel notes: pointer element types are one
generic over f32/f16/bf16 (index arrays i64), scalar parameters i32 unless their name or use says float,
constexpr values from `@triton.autotune` configs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, Mapping, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.frontends.base import Translation
from tileport.frontends.triton import descriptors as D
from tileport.frontends.triton.calls import TL_DTYPE_NAMES, TL_DTYPES
from tileport.frontends.triton.lower import TritonLowerer
from tileport.frontends.triton.values import Retry
from tileport.frontends.imports import Resolver
from tileport.frontends.triton.scan import TritonModule, dotted, helper_of, loc_of, scan
from tileport.frontends.triton.occupancy import add_hints
from tileport.model import types as T
from tileport.model.builder import DTypeSpace
from tileport.model.ir import Kernel, KernelModule, Loc, Param
from tileport.model.naming import Naming
from tileport.model.types import ArrayT, ConstT, DVar, ScalarT

DEFAULT_FLOAT_DTYPES = ("f32", "f16", "bf16")
INDEX_DTYPE = "i64"
ARRAY_DTYPES = ("f32", "f16", "bf16", "f64", "i32", "i64", "i16", "i8", "u8", "bool")
SINKS = {"load": 0, "store": 0, "make_block_ptr": 0, "make_tensor_descriptor": 0, "atomic_add": 0, "atomic_max": 0,
         "atomic_min": 0, "atomic_xchg": 0, "atomic_cas": 0, "atomic_and": 0, "atomic_or": 0, "atomic_xor": 0}
# Scalar parameters whose names say they are real numbers (Triton passes Python floats as f32).
FLOAT_NAME = re.compile(r"(^|_)(eps|epsilon|scale|alpha|beta\d?|gamma|temperature|lr|momentum|weight_decay|"
                        r"softcap|smoothing|margin|lambda|lamb|threshold|dropout|z_loss|coeff?)($|_)",
                        re.IGNORECASE)
INT_NAME = re.compile(r"stride|(^|_)(n|num|size|len|idx|index|offset|count|rows?|cols?)($|_)", re.IGNORECASE)
POINTER_NAME = re.compile(r"ptr|Ptr|PTR")
MAX_RETRIES = 64
MAX_ENTRIES = 16  # constexpr specializations of one kernel
I32_MIN, I32_MAX = -2**31, 2**31 - 1




def is_triton_source(text: str) -> bool:
    """A file written against Triton (`import triton` and a `@triton.jit`/`@jit` function)."""
    return bool(re.search(r"^\s*(import triton|from triton)", text, re.M)) and "jit" in text


# ---------------------------------------------------------------- parameters

def pointer_params(tm: TritonModule, fn: ast.FunctionDef, memo: dict | None = None) -> set[str]:
    """Parameters that are pointers: they reach the pointer operand of a load/store/make_block_ptr (or
    of a helper that loads through them) through additions, and are never multiplied or compared."""
    memo = {} if memo is None else memo
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = set()
    params = {a.arg for a in fn.args.args}
    values: dict[str, list[ast.expr]] = {}
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for name in (e.id for e in ast.walk(t) if isinstance(e, ast.Name)):
                    values.setdefault(name, []).append(n.value)

    def roots(e: ast.AST, seen: frozenset) -> set[str]:
        if isinstance(e, ast.Name):
            out = {e.id} if e.id in params else set()
            if e.id not in seen:
                for v in values.get(e.id, []):
                    out |= roots(v, seen | {e.id})
            return out
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            left, right = roots(e.left, seen), roots(e.right, seen)
            if left and right:  # a pointer plus an offset: the side named like a pointer, else the left one
                named = [side for side in (left, right) if any(POINTER_NAME.search(n) for n in side)]
                return named[0] if len(named) == 1 else left
            return left | right
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub):
            return roots(e.left, seen)
        if isinstance(e, ast.Subscript):
            return roots(e.value, seen)
        if isinstance(e, ast.IfExp):
            return roots(e.body, seen) | roots(e.orelse, seen)
        if isinstance(e, ast.Call) and e.args and (dotted(e.func) or "").rpartition(".")[2] in (
                "multiple_of", "max_contiguous", "advance", "to"):
            return roots(e.args[0], seen)
        return set()

    found: set[str] = set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        name = (dotted(n.func) or "").rpartition(".")[2]
        if name in SINKS:
            arg = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg in ("pointer", "base")), None)
            if arg is not None:
                found |= roots(arg, frozenset())
        elif helper_of(tm, n.func) is not None:
            owner, helper = helper_of(tm, n.func)
            inner = pointer_params(owner, helper, memo)
            names = [a.arg for a in helper.args.args]
            for i, a in enumerate(n.args):
                if i < len(names) and names[i] in inner:
                    found |= roots(a, frozenset())
            for k in n.keywords:
                if k.arg in inner:
                    found |= roots(k.value, frozenset())
    memo[id(fn)] = found - _non_pointer_uses(fn)
    return memo[id(fn)]


def _non_pointer_uses(fn: ast.FunctionDef) -> set[str]:
    """Names multiplied, divided, compared or used as a range bound (never pointers)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        operands: list[ast.AST] = []
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.FloorDiv, ast.Mod, ast.Div)):
            operands = [n.left, n.right]
        elif isinstance(n, ast.Compare) and not all(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops):
            operands = [n.left, *n.comparators]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range":
            operands = list(n.args)
        out |= {o.id for o in operands if isinstance(o, ast.Name)}
    return out


def _is_constexpr(a: ast.arg) -> bool:
    return a.annotation is not None and (dotted(a.annotation) or "").endswith("constexpr")


def scalar_dtype(fn: ast.FunctionDef, name: str) -> str:
    """f32 for a scalar named like a real number or combined with a float literal, else i32."""
    if INT_NAME.search(name) or name in _int_uses(fn):
        return "i32"
    if FLOAT_NAME.search(name):
        return "f32"
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp):
            sides = (n.left, n.right)
            if any(isinstance(s, ast.Name) and s.id == name for s in sides) and \
                    any(isinstance(s, ast.Constant) and isinstance(s.value, float) for s in sides):
                return "f32"
    return "i32"


def _int_uses(fn: ast.FunctionDef) -> set[str]:
    """Names used as range bounds or with `//`, `%` (integers in Triton)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2] in ("range", "static_range", "cdiv"):
            out |= {a.id for a in n.args if isinstance(a, ast.Name)}
        elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Mod)):
            out |= {a.id for a in (n.left, n.right) if isinstance(a, ast.Name)}
    return out


@dataclass
class KernelPlan:
    """Decisions about one kernel's parameters (refined by retries)."""

    pointers: list[str]
    scalars: dict[str, str]  # name -> dtype
    constexprs: list[str]
    runtime: set  # constexprs passed as runtime i32 scalars
    flat: set  # pointers accessed through gathers/scatters only
    index: set  # pointers whose elements index other arrays (i64)
    maybe_float: set = field(default_factory=set)  # i32 by assumption, f32 if met with float tiles
    dtypes: set = field(default_factory=set)  # dtype constexprs: specialization values only, never parameters
    ints: set = field(default_factory=set)  # unconfigured pointers the kernel stores i32 tiles into
    configured: bool = False  # element dtypes come from the configuration
    assumed: set = field(default_factory=set)  # scalars whose dtype no configuration gives
    absent: set = field(default_factory=set)  # arguments every configuration passes as None (pinned None)
    descriptors: dict = field(default_factory=dict)  # host-side tensor descriptors -> rank (array params)
    configs: tuple = ()  # the configurations (descriptor block shapes per launch)


def plan_kernel(tm: TritonModule, fn: ast.FunctionDef, cfg) -> KernelPlan:
    if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.posonlyargs:
        raise Diagnostic("kernels take plain positional parameters only", loc_of(tm.path, fn), "signature")
    configured = cfg_configs(cfg)[0] if cfg_configs(cfg) else {}
    ptrs = pointer_params(tm, fn)
    plan = KernelPlan([], {}, [], set(), set(), set(), configured=bool(cfg_configs(cfg)), configs=cfg_configs(cfg))
    plan.absent = absent_params(tm, fn, cfg)
    found = {n: r for n, r in D.descriptor_params(fn).items() if n not in ptrs}  # a pointer misused stays one
    plan.descriptors = D.check_ranks(tm.path, fn, found, getattr(cfg, "ranks", {}) or {})
    for a in fn.args.args:
        if a.arg in plan.absent:
            continue  # a constant None: Triton specializes it (the kernel guards its use with `is not None`)
        if a.arg in plan.descriptors:
            plan.pointers.append(a.arg)
        elif _is_constexpr(a):
            plan.constexprs.append(a.arg)
            if is_dtype_constexpr(tm, fn, a.arg):
                plan.dtypes.add(a.arg)
        elif a.arg in ptrs or (str(configured.get(a.arg, "")) in ARRAY_DTYPES and a.arg in getattr(cfg, "ranks", {})):
            plan.pointers.append(a.arg)
        else:
            dt = configured.get(a.arg)
            dt = T.TORCH_DTYPES.get(str(dt), dt) if dt is not None else None
            if dt is None:
                dt = scalar_dtype(fn, a.arg)
                plan.assumed.add(a.arg)
                if dt == "i32" and not INT_NAME.search(a.arg) and a.arg not in _int_uses(fn) | _compared(fn):
                    plan.maybe_float.add(a.arg)
            plan.scalars[a.arg] = dt
    return plan


def absent_params(tm: TritonModule, fn: ast.FunctionDef, cfg) -> set[str]:
    """Parameters (pointers, scalars) every configuration passes as None. One passed as None by some
    configurations only is a located diagnostic: each form is its own specialization, and the launcher
    of a kernel takes one C signature (an array, a scalar or nothing) per parameter."""
    configs = cfg_configs(cfg)
    out = set()
    for a in fn.args.args:
        nones = [a.arg in c and c[a.arg] is None for c in configs]
        if nones and all(nones):
            out.add(a.arg)
        elif any(nones):
            raise Diagnostic(f"`{a.arg}` is None in some configurations and a value in others", loc_of(tm.path, a),
                             "specialization", "port the launches that pass None and the others separately "
                             "(one launch spec each)")
    return out


def _compared(fn: ast.FunctionDef) -> set[str]:
    return {o.id for n in ast.walk(fn) if isinstance(n, ast.Compare)
            for o in (n.left, *n.comparators) if isinstance(o, ast.Name)}


def assumption_notes(plan: KernelPlan) -> list[str]:
    return [f"scalar parameter `{name}`: assumed {dt} (Triton: a Python {'float' if dt == 'f32' else 'int'} "
            "argument)" for name, dt in plan.scalars.items() if name in plan.assumed]


def cfg_configs(cfg) -> tuple:
    return tuple(getattr(cfg, "configs", ()) or ())


# ---------------------------------------------------------------- lowering with retries

def lower_once(tm, fn, plan: KernelPlan, dtypes: list[dict[str, str]], pinned: dict[str, Any]) -> Kernel:
    space = DTypeSpace()
    by_vector: dict[tuple, Any] = {}
    params = []
    for a in fn.args.args:
        name = a.arg
        ident = tm.naming.ident(name)
        ident = "" if ident == name else ident
        if name in plan.pointers:
            vec = tuple(d.get(name, "f32") for d in dtypes)
            if len(set(vec)) == 1:
                dt = vec[0]
            else:
                dt = by_vector.get(vec)
                if dt is None:
                    dt = by_vector[vec] = DVar("E" if not by_vector else f"E{len(by_vector) + 1}")
                    space.vectors[dt] = vec
            params.append(Param(name, ArrayT(dt, plan.descriptors.get(name, 1)), ident_name=ident))
        elif name in plan.absent or name in plan.constexprs and name not in plan.runtime:
            params.append(Param(name, ConstT("int"), "int", ident_name=ident))
        elif name in plan.constexprs:
            params.append(Param(name, ScalarT("i32"), ident_name=ident))
        else:
            params.append(Param(name, ScalarT(plan.scalars[name]), ident_name=ident))
    blocks = D.resolve(tm.path, fn, list(plan.descriptors), plan.configs,
                       [c for c in plan.constexprs if c not in plan.dtypes], pinned)
    lw = TritonLowerer(tm, fn, params, space, [], pinned, plan.flat, blocks)
    lw.maybe_float = {tm.naming.ident(n) for n in plan.maybe_float}
    lw.default_float = set() if plan.configured else \
        {tm.naming.ident(n) for n in plan.pointers if n not in plan.index | plan.ints}
    kernel = lw.lower()
    ranks = {r: len(v) for r, v in lw.views.items()}
    kernel.params = [Param(p.name, ArrayT(p.ty.dtype, ranks.get(p.ident, plan.descriptors.get(p.name, 1))
                                          if p.name not in plan.flat else 1),
                           ident_name=p.ident_name) if p.is_array else p for p in kernel.params
                     if p.name not in plan.dtypes]  # an entry that does not need a dtype constexpr ignores it
    kernel.notes = assumption_notes(plan) + [f"pointer `{p}`: assumed to hold i32 (the kernel stores i32 values "
                                             "into it)" for p in sorted(plan.ints - plan.index)] + [f"constexpr `{c}` is passed at run time (i32): no values are known"
                                             for c in sorted(plan.runtime)] + kernel.notes
    return kernel


def lower_with_retries(tm, fn, plan: KernelPlan, dtypes: list[dict[str, str]], pinned: dict) -> Kernel:
    for _ in range(MAX_RETRIES):
        try:
            effective = [{**d, **{p: "i32" for p in plan.ints}, **{p: INDEX_DTYPE for p in plan.index}}
                         for d in dtypes]
            return lower_once(tm, fn, plan, effective, pinned)
        except Retry as r:
            if r.what == "float":
                plan.scalars[r.param], plan.maybe_float = "f32", plan.maybe_float - {r.param}
                continue
            target = {"flat": plan.flat, "int": plan.ints}.get(r.what, plan.index)
            if r.param in plan.descriptors:
                raise Diagnostic(f"host-side tensor descriptor `{r.param}`: its accesses are not partitions of one "
                                 "view (offsets must be multiples of the block shape)", loc_of(tm.path, fn),
                                 "tensor descriptor")
            if r.param in target:
                raise Diagnostic(f"internal: repeated decision about `{r.param}`", loc_of(tm.path, fn), "internal")
            target.add(r.param)
    raise Diagnostic("the kernel's pointer accesses could not be settled", loc_of(tm.path, fn), "pointer")


def candidate_dtypes(plan: KernelPlan, cfg) -> list[list[dict[str, str]]]:
    """Element-dtype configurations to try: the configured ones, else one uniform float dtype each."""
    configured = cfg_configs(cfg)
    if configured:
        return [[{p: T.TORCH_DTYPES.get(str(c[p]), c[p]) for p in plan.pointers if p in c} for c in configured]]
    return [[{p: dt for p in plan.pointers}] for dt in DEFAULT_FLOAT_DTYPES]


def lower_kernel(tm: TritonModule, name: str, cfg) -> list[Kernel]:
    fn = tm.kernels[name]
    plan = plan_kernel(tm, fn, cfg)
    pinned = {**dict(getattr(cfg, "pinned", {}) or {}), **{name: None for name in plan.absent}}
    kernels = _specialized(tm, fn, plan, cfg, pinned)
    add_hints(kernels, [*cfg_configs(cfg), *tm.candidates.get(name, [])])
    return kernels


def _specialized(tm, fn, plan: KernelPlan, cfg, pinned: dict) -> list[Kernel]:
    """One kernel, or one entry per constexpr value set; entries agree on their parameters (a pointer that
    is a view in one and a gather in another is taken flat in all)."""
    for _ in range(MAX_RETRIES):
        before = _decisions(plan)
        kernels = _entries(tm, fn, plan, cfg, pinned)
        if _decisions(plan) != before:
            continue  # a later entry changed a decision the earlier ones were lowered with: all again
        differ = set()
        for name in {p.name for k in kernels for p in k.array_params}:
            merged = merge_views([k.views.get(name) for k in kernels])
            if merged is False:
                differ.add(name)
            elif merged is not None:
                for k in kernels:  # entries that do not access the pointer take the view too (same signature)
                    k.views[name] = merged
                    k.params = [replace(p, ty=ArrayT(p.ty.dtype, len(merged["strides"]))) if p.name == name else p
                                for p in k.params]
        if not differ:
            return kernels
        plan.flat |= differ
    raise Diagnostic("the entries' pointer views could not be settled", loc_of(tm.path, fn), "pointer")


def _decisions(plan: KernelPlan) -> tuple:
    return (frozenset(plan.runtime), frozenset(plan.flat), frozenset(plan.index), frozenset(plan.ints),
            tuple(sorted(plan.scalars.items())))


def merge_views(views: list) -> dict | None | bool:
    """One view for every entry (extents a mask gives in one entry hold for the unmasked others; entries that
    do not access the pointer take it), None when the pointer is no view in any, False when entries disagree."""
    views = [v for v in views if v is not None]  # None: an entry that never accesses the pointer
    if not views:
        return None
    if len({tuple(v["strides"]) for v in views}) != 1:
        return False
    extents = []
    for dim in zip(*(v["extents"] for v in views)):
        given = {e for e in dim if e is not None}
        if len(given) > 1:
            return False
        extents.append(given.pop() if given else None)
    return {"strides": list(views[0]["strides"]), "extents": extents}


def _entries(tm, fn, plan: KernelPlan, cfg, pinned: dict) -> list[Kernel]:
    try:
        kernel = _typed(tm, fn, plan, cfg, pinned)
        unfit = no_const_generic(kernel, cfg, tm.naming)
        if unfit:
            raise NeedsSpecialization(unfit, "constexprs no Rust const generic can be", kernel.loc)
        return [kernel]
    except NeedsSpecialization as need:
        values = specialization_values(tm, fn.name, cfg, need.constants)
        if not values:
            if need.constants <= plan.runtime or not need.constants <= set(plan.constexprs):
                raise Diagnostic(f"{need.reason}: constexpr(s) {', '.join(sorted(need.constants))} need values",
                                 need.loc, "specialization", "give the values in use (--config)") from None
            plan.runtime |= need.constants
            try:
                return _entries(tm, fn, plan, cfg, pinned)
            except Diagnostic as d:
                names = ", ".join(sorted(need.constants))
                raise Diagnostic(f"{need.reason}: constexpr(s) {names} need values (as runtime values instead: "
                                 f"{d.message})", need.loc, "specialization",
                                 "give the values in use (--config), or list them in @triton.autotune") from None
        out = []
        for v in values[:MAX_ENTRIES]:
            for k in _entries(tm, fn, plan, cfg, {**pinned, **v}):
                suffix = "_".join(f"{key.lower()}{_suffix(val)}" for key, val in sorted(v.items()))
                k.name = f"{k.name}_{suffix}"
                out.append(k)
        return out


def no_const_generic(kernel: Kernel, cfg, naming: Naming) -> frozenset:
    """Constant parameters of `kernel` that cannot stay `const NAME: i32` generics: a configuration gives them a
    value no i32 holds (a float, a bool, a string, None, a wide int; the cutile JIT parses const generic
    arguments as i32 or bool, Rust has no float const generics), or their name is no safe generic name (a
    Rust keyword, a DSL type such as `E`, which the cutile compiler resolves as the type; a dtype generic).
    They are specialized instead (with no values: passed at run time)."""
    def fits(v: Any) -> bool:
        return type(v) is int and I32_MIN <= v <= I32_MAX
    dtype_generics = {dv.name for dv in kernel.dtype_vars}
    return frozenset(p.name for p in kernel.const_params
                     if any(p.name in c and not fits(c[p.name]) for c in cfg_configs(cfg))
                     or naming.ident(p.name) != p.name or p.name in dtype_generics)


def _typed(tm, fn, plan: KernelPlan, cfg, pinned: dict) -> Kernel:
    """The kernel over every element dtype that type-checks (one generic), as cuTile does unconfigured."""
    kept, first = [], None
    for dtypes in candidate_dtypes(plan, cfg):
        try:
            lower_with_retries(tm, fn, plan, dtypes, pinned)
            kept += dtypes
        except Diagnostic as d:
            if d.construct != "dtype":
                raise
            first = first or d
    if not kept:
        raise first
    try:
        return lower_with_retries(tm, fn, plan, kept, pinned)
    except Diagnostic as d:
        if d.construct != "dtype":
            raise
        # no one generic: the element type a pinned dtype constexpr names (X_dtype = X.dtype), else the first
        named = {TL_DTYPE_NAMES.get(v) for k, v in pinned.items() if k in plan.dtypes}
        pick = next((c for c in kept if set(c.values()) & named), kept[0])
        return lower_with_retries(tm, fn, plan, [pick], pinned)


def specialization_values(tm: TritonModule, kernel: str, cfg, names: frozenset) -> list[dict[str, Any]]:
    """Distinct value combinations of `names` from the configuration and the autotune configs; bool
    heuristics (EVEN_K...) enumerate both values."""
    fn = tm.kernels[kernel]
    sources = [dict(c) for c in cfg_configs(cfg)] + tm.candidates.get(kernel, [])
    seen, out = set(), []
    for c in sources:
        if names <= c.keys():
            key = tuple(sorted((n, dtype_name(c[n]) if is_dtype_constexpr(tm, fn, n) else c[n]) for n in names))
            if key not in seen:
                seen.add(key)
                out.append(dict(key))
    if out:
        return out
    choices = {n: (False, True) if n in tm.heuristics.get(kernel, set()) else enumerable_values(tm, fn, n)
               for n in sorted(names)}
    if not all(choices.values()):
        return []
    combos = list(product(*choices.values()))
    return [dict(zip(choices, c)) for c in combos] if len(combos) <= MAX_ENTRIES else []


def enumerable_values(tm: TritonModule, fn: ast.FunctionDef, name: str) -> tuple:
    """The values a constexpr can take that change the kernel, when its uses tell: a flag only used as a
    condition -> (False, True); a mode only compared (==, !=) with constants (numbers or strings) -> those
    constants; a dtype -> the float element types unconfigured pointers take. Else ()."""
    if is_dtype_constexpr(tm, fn, name):
        return DTYPE_CHOICES
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    flags, compared = False, set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        p = parents.get(n)
        if isinstance(p, (ast.If, ast.IfExp)) and p.test is n or isinstance(p, ast.BoolOp) \
                or isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not):
            flags = True
        elif isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], (ast.Eq, ast.NotEq)):
            other = p.comparators[0] if p.left is n else p.left
            value = other.value if isinstance(other, ast.Constant) else tm.constants.get(getattr(other, "id", None))
            if not isinstance(value, (int, bool, str)):
                return ()
            compared.add(value)
        else:
            return ()
    if compared:
        return tuple(sorted(compared, key=lambda v: (isinstance(v, str), v)))
    return (False, True) if flags else ()


def _suffix(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return re.sub(r"[^0-9A-Za-z]", "_", str(v).replace(".", "p").replace("-", "m")).lower()


# ---------------------------------------------------------------- dtype constexprs

# A dtype constexpr with no configured value takes each float element type unconfigured pointers take, by the
# name `str(tl.<dtype>)` gives (the launch's value selects the entry).
DTYPE_CHOICES = ("bf16", "fp16", "fp32")
DTYPE_POSITION = {"zeros": 1, "full": 2}  # the positional dtype argument of tl.zeros(shape, dtype), tl.full
_DTYPE_SPELLINGS = {**{k: k for k in TL_DTYPE_NAMES}, **{v: k for k, v in TL_DTYPE_NAMES.items()},
                    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


def dtype_name(v: Any) -> Any:
    """A configured dtype value (`"bf16"`, `"torch.bfloat16"`, `"tl.bfloat16"`, `"bfloat16"`) by its Triton name."""
    if not isinstance(v, str):
        return v
    return _DTYPE_SPELLINGS.get(v.rpartition(".")[2], v)


def is_dtype_constexpr(tm: TritonModule, fn: ast.FunctionDef, name: str, seen: frozenset = frozenset()) -> bool:
    """A constexpr used as a dtype: `.to(NAME)` / `.cast`, `dtype=NAME`, compared with `tl.<dtype>`, or
    passed to a helper parameter that is one."""
    key = (id(fn), name)
    if key in seen:
        return False
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and _is_name(n.left, name) != _is_name(
                    n.comparators[0], name):
                other = n.comparators[0] if _is_name(n.left, name) else n.left
                if (dotted(other) or "").rpartition(".")[2] in TL_DTYPES:
                    return True
            continue
        attr = n.func.attr if isinstance(n.func, ast.Attribute) else None
        if attr in ("to", "cast") and n.args and _is_name(n.args[-1] if attr == "cast" and len(n.args) > 1
                                                          else n.args[0], name):
            return True
        if any(k.arg in ("dtype", "out_dtype") and _is_name(k.value, name) for k in n.keywords):
            return True
        at = DTYPE_POSITION.get((dotted(n.func) or "").rpartition(".")[2])
        if at is not None and len(n.args) > at and _is_name(n.args[at], name):
            return True
        found = helper_of(tm, n.func)
        if found is not None:
            owner, helper = found
            params = [a.arg for a in helper.args.args]
            passed = [params[i] for i, a in enumerate(n.args) if i < len(params) and _is_name(a, name)]
            passed += [k.arg for k in n.keywords if _is_name(k.value, name)]
            if any(is_dtype_constexpr(owner, helper, p, seen | {key}) for p in passed):
                return True
    return False


def _is_name(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


# ---------------------------------------------------------------- the file

def translate_file(path: str, configs: Mapping[str, Any] | None = None, only: Sequence[str] | None = None, *,
                   naming: Naming, text: str | None = None, resolver: Resolver | None = None) -> Translation:
    """Parse `path` (or `text`) and lower every `@triton.jit` kernel (or those in `only`), naming
    identifiers with the target's `naming`; imports of other modules are read with `resolver`."""
    stem = Path(path).stem
    try:
        tm = scan(path, text, resolver)
        tm.naming = naming
    except Diagnostic as d:
        return Translation(KernelModule(path, stem, []), [d])
    except Exception as e:  # noqa: BLE001 - a translator bug: reported, never a traceback
        return Translation(KernelModule(path, stem, []), [_internal(e, Loc(path, 1, 1), "")])
    kernels, diags = [], []
    for name in (list(only) if only else list(tm.kernels)):
        if name not in tm.kernels:
            diags.append(Diagnostic(f"no `@triton.jit` kernel named `{name}`", Loc(path, 1, 1), "kernel"))
            continue
        where = loc_of(path, tm.kernels[name])
        try:
            lowered = lower_kernel(tm, name, (configs or {}).get(name))
            for k in lowered:
                k.notes += [n for n in tm.guard_notes if n not in k.notes]
            kernels += lowered
        except Diagnostic as d:
            d.kernel = d.kernel or name
            d.loc = d.loc or where
            diags.append(d)
        except NeedsSpecialization as n:
            diags.append(Diagnostic(n.reason, n.loc or where, "specialization", kernel=name))
        except RecursionError:
            diags.append(Diagnostic("the kernel nests too deeply", where, "recursion", kernel=name))
        except Exception as e:  # noqa: BLE001 - a translator bug must not hide the other kernels
            diags.append(_internal(e, where, name))
    if not tm.kernels:
        diags.append(Diagnostic("no `@triton.jit` kernels found", Loc(path, 1, 1), "kernel",
                                "decorate kernels with @triton.jit (import triton)"))
    return Translation(KernelModule(path, stem, kernels), diags)


def _internal(e: Exception, loc: Loc, kernel: str) -> Diagnostic:
    return Diagnostic(f"internal translator error: {type(e).__name__}: {e}", loc, "internal",
                      "please report this kernel", kernel=kernel)
