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
from tileport.frontends.triton.calls import DOT_PRECISIONS, TL_DTYPE_NAMES, TL_DTYPES
from tileport.frontends.triton.lower import TritonLowerer
from tileport.frontends.triton.values import Retry
from tileport.frontends.imports import FILES, Resolver, resolver_for
from tileport.frontends.triton.scan import TritonModule, dotted, helper_of, imported_module, loc_of, scan
from tileport.frontends.triton import memory_paths
from tileport.frontends.triton.launch_options import add_warps
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
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("to", "cast") \
                and not (dotted(e.func.value) or "").split(".")[0] in tm.tl_names | tm.triton_names:
            return roots(e.func.value, seen)  # `p.to(tl.pointer_type(..))`: the same pointer re-cast
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
    """Names used as range bounds, arange bounds, tile shapes (in a list or tuple passed to a call) or with `//`,
    `%` (integers in Triton)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2] in ("range", "static_range", "cdiv",
                                                                                    "arange"):
            out |= {a.id for a in n.args if isinstance(a, ast.Name)}
        if isinstance(n, ast.Call):
            out |= {e.id for a in [*n.args, *(k.value for k in n.keywords)] if isinstance(a, (ast.List, ast.Tuple))
                    for e in a.elts if isinstance(e, ast.Name)}
        elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Mod)):
            out |= {a.id for a in (n.left, n.right) if isinstance(a, ast.Name)}
    return out


# Calls whose value is their first argument's (hints): an offset through them is still an offset.
_SAME_VALUE = {"multiple_of", "max_contiguous", "max_constancy", "assume_aligned"}


def _offset_names(fn: ast.FunctionDef) -> set[str]:
    """Names whose values reach the pointer operand of a load, store or atomic through arithmetic (not through a
    call: `(x * scale).to(tl.int32)` makes an integer of anything): integers, as Triton's offsets are."""
    values: dict[str, list[ast.expr]] = {}
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(n.value)
    todo = [n.args[0] for n in ast.walk(fn) if isinstance(n, ast.Call) and n.args
            and (dotted(n.func) or "").rpartition(".")[2] in SINKS]
    out: set[str] = set()
    while todo:
        e = todo.pop()
        if isinstance(e, ast.Name):
            if e.id not in out:
                out.add(e.id)
                todo += values.get(e.id, [])
        elif isinstance(e, ast.Call):
            if (dotted(e.func) or "").rpartition(".")[2] in _SAME_VALUE and e.args:
                todo.append(e.args[0])
        elif isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.IfExp)):
            todo += [c for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)]
    return out


@dataclass
class KernelPlan:
    """Decisions about one kernel's parameters (refined by retries)."""

    pointers: list[str]
    scalars: dict[str, str]  # name -> dtype
    constexprs: list[str]
    runtime: set  # constexprs passed as runtime scalars (typed by `runtime_dtypes`, else i32)
    flat: set  # pointers accessed through gathers/scatters only
    index: set  # pointers whose elements index other arrays (i64)
    maybe_float: set = field(default_factory=set)  # i32 by assumption, f32 if met with float tiles
    floated: set = field(default_factory=set)  # of those, the ones a retry made f32 (since the last pointer decision)
    dtypes: set = field(default_factory=set)  # dtype constexprs: specialization values only, never parameters
    ints: set = field(default_factory=set)  # unconfigured pointers the kernel stores i32 tiles into
    bits: set = field(default_factory=set)  # unconfigured pointers whose values are used as integers (i32)
    narrow: set = field(default_factory=set)  # unconfigured pointers whose values are integer tl.dot operands (i8)
    configured: bool = False  # element dtypes come from the configuration
    assumed: set = field(default_factory=set)  # scalars whose dtype no configuration gives
    absent: set = field(default_factory=set)  # arguments every configuration passes as None (pinned None)
    descriptors: dict = field(default_factory=dict)  # host-side tensor descriptors -> rank (array params)
    configs: tuple = ()  # the configurations (descriptor block shapes per launch)
    runtime_dtypes: dict = field(default_factory=dict)  # runtime constexpr -> f32 / bool (its values' type)
    dynamic: set = field(default_factory=set)  # constexprs kept generic whose tests run at run time
    outcomes: dict = field(default_factory=dict)  # `_check`: True or the exception, by the lowering's inputs


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
                continue
            kind = constexpr_kind(tm, fn, a.arg, cfg)
            if kind != "int":
                plan.runtime_dtypes[a.arg] = RUNTIME_DTYPES[kind]
            if kind == "float" and not any(a.arg in c for c in value_sources(tm, fn.name, cfg)):
                plan.runtime.add(a.arg)  # no float const generics in Rust, no values to specialize on
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


RUNTIME_DTYPES = {"float": "f32", "bool": "bool", "int": "i32"}


def constexpr_kind(tm: TritonModule, fn: ast.FunctionDef, name: str, cfg) -> str:
    """"float", "bool" or "int": the type of a constexpr's values, from the values the configuration, autotune
    configs and launches give it, its default, its uses (range bounds, shapes, offsets, `//`, `%`: int; tested
    for truth: bool), its name (`n_cols`; `eps`, `softcap`: `_name_kind`) or a float literal it meets; int when
    nothing says."""
    values = [c[name] for c in value_sources(tm, fn.name, cfg) if name in c]
    defaults = dict(zip([a.arg for a in fn.args.args][len(fn.args.args) - len(fn.args.defaults):], fn.args.defaults))
    if name in defaults and isinstance(defaults[name], ast.Constant):
        values.append(defaults[name].value)
    numbers = [v for v in values if isinstance(v, (int, float))]
    if numbers and all(isinstance(v, bool) for v in numbers):
        return "bool"
    if any(isinstance(v, float) for v in numbers):
        return "float"
    if numbers:
        return "int"
    if name in _int_uses(fn) or name in _offset_names(fn):
        return "int"
    if name in _condition_uses(fn):
        return "bool"
    return _name_kind(name) or ("float" if name in _float_literal_uses(fn) else "int")


# Words of names that say an integer (counts, sizes, exponents, bit widths) or a real number; the last such word
# of a name decides (`eps_exp` is an exponent, `exp_scale` a scale).
INT_WORDS = {"n", "num", "size", "len", "idx", "index", "offset", "count", "row", "rows", "col", "cols", "stride",
             "exp", "bits", "nbits", "shift", "dim", "block"}
FLOAT_WORDS = {"eps", "epsilon", "scale", "alpha", "beta", "gamma", "temperature", "lr", "momentum", "decay",
               "softcap", "smoothing", "margin", "lambda", "lamb", "threshold", "dropout", "coef", "coeff"}


def _name_kind(name: str) -> str | None:
    for word in reversed(re.split(r"_+", re.sub(r"\d+$", "", name).lower())):
        if word in INT_WORDS or word.startswith("stride"):
            return "int"
        if word in FLOAT_WORDS:
            return "float"
    return None


def _condition_uses(fn: ast.FunctionDef) -> set[str]:
    """Names tested for truth (`if USE_G_GAMMA:`, `A or B`, `not A`): flags."""
    tests = [n.test for n in ast.walk(fn) if isinstance(n, (ast.If, ast.IfExp))]
    tests += [v for n in ast.walk(fn) if isinstance(n, ast.BoolOp) for v in n.values]
    tests += [n.operand for n in ast.walk(fn) if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)]
    return {t.id for t in tests if isinstance(t, ast.Name)}


def _float_literal_uses(fn: ast.FunctionDef) -> set[str]:
    """Names combined with or compared to a float literal (`x * (1.0 / T)`, `p == 2.0`)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        sides = (n.left, n.right) if isinstance(n, ast.BinOp) else (n.left, *n.comparators) \
            if isinstance(n, ast.Compare) else ()
        if any(isinstance(s, ast.Constant) and type(s.value) is float for s in sides):
            out |= {s.id for s in sides if isinstance(s, ast.Name)}
    return out


def value_sources(tm: TritonModule, kernel: str, cfg) -> list[dict[str, Any]]:
    """Value sets of a kernel's parameters: the configurations, the autotune configs, the file's launches."""
    return [dict(c) for c in cfg_configs(cfg)] + tm.candidates.get(kernel, []) + tm.launches.get(kernel, [])


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
            params.append(Param(name, ScalarT(plan.runtime_dtypes.get(name, "i32")), ident_name=ident))
        else:
            params.append(Param(name, ScalarT(plan.scalars[name]), ident_name=ident))
    blocks = D.resolve(tm.path, fn, list(plan.descriptors), plan.configs or D.hooked(tm.candidates.get(fn.name, [])),
                       [c for c in plan.constexprs if c not in plan.dtypes], pinned)
    lw = TritonLowerer(tm, fn, params, space, [], pinned, plan.flat, blocks)
    lw.maybe_float = {tm.naming.ident(n) for n in plan.maybe_float}
    lw.static = {tm.naming.ident(n) for n in plan.runtime}
    lw.dynamic = set(plan.dynamic)
    lw.default_float = set() if plan.configured else \
        {tm.naming.ident(n) for n in plan.pointers if n not in plan.index | plan.ints | plan.bits | plan.narrow}
    lw.assumed_ints = {tm.naming.ident(n) for n in (plan.ints | plan.bits) - plan.index - plan.narrow}
    kernel = lw.lower()
    ranks = {r: len(v) for r, v in lw.views.items()}
    kernel.params = [Param(p.name, ArrayT(p.ty.dtype, ranks.get(p.ident, plan.descriptors.get(p.name, 1))
                                          if p.name not in plan.flat else 1),
                           ident_name=p.ident_name) if p.is_array else p for p in kernel.params
                     if p.name not in plan.dtypes]  # an entry that does not need a dtype constexpr ignores it
    kernel.notes = assumption_notes(plan) + [f"pointer `{p}`: assumed to hold i32 (the kernel stores i32 values "
                                             "into it)" for p in sorted(plan.ints - plan.index)] + [
        f"pointer `{p}`: assumed to hold i32 (the kernel uses its values as integers: bitwise operands, `%`, `//`)"
        for p in sorted(plan.bits - plan.ints - plan.index - plan.narrow)] + [
        f"pointer `{p}`: assumed to hold i8 (its values are operands of an integer tl.dot)"
        for p in sorted(plan.narrow - plan.index)] + [
        f"constexpr `{c}` is passed at run time ({plan.runtime_dtypes.get(c, 'i32')}): no values are known"
        for c in sorted(plan.runtime)] + [f"constexpr `{c}`: no values are known, its tests run at run time (the value "
                                          "is still a const generic)" for c in sorted(plan.dynamic)] + kernel.notes
    return kernel


def lower_with_retries(tm, fn, plan: KernelPlan, dtypes: list[dict[str, str]], pinned: dict) -> Kernel:
    for _ in range(MAX_RETRIES):
        try:
            effective = [{**d, **{p: "i32" for p in plan.ints | plan.bits}, **{p: "i8" for p in plan.narrow},
                          **{p: INDEX_DTYPE for p in plan.index}} for d in dtypes]
            return lower_once(tm, fn, plan, effective, pinned)
        except Retry as r:
            if r.what == "float":
                plan.scalars[r.param], plan.maybe_float = "f32", plan.maybe_float - {r.param}
                plan.floated.add(r.param)
                continue
            target = {"flat": plan.flat, "int": plan.ints, "bits": plan.bits, "narrow": plan.narrow}.get(
                r.what, plan.index)
            if r.param in plan.descriptors:
                raise Diagnostic(f"host-side tensor descriptor `{r.param}`: its accesses are not partitions of one "
                                 "view (offsets must be multiples of the block shape)", loc_of(tm.path, fn),
                                 "tensor descriptor")
            if r.param in target:
                raise Diagnostic(f"internal: repeated decision about `{r.param}`", loc_of(tm.path, fn), "internal")
            target.add(r.param)
            # the float tiles those scalars met may have been this pointer's values, assumed float until now
            for name in plan.floated:
                plan.scalars[name] = "i32"
            plan.maybe_float |= plan.floated
            plan.floated = set()
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
    memory_paths.apply(kernels)
    add_warps(kernels, getattr(cfg, "launch_options", ()) or ())
    for k in kernels:  # decorators Triton does not know wrap the launch, not the kernel's code
        k.notes += [f"decorator `@{d}` is not Triton's: the port is the jit function it wraps"
                    for d in tm.wrappers.get(name, [])]
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
    return (frozenset(plan.runtime), frozenset(plan.dynamic), frozenset(plan.flat), frozenset(plan.index),
            frozenset(plan.ints), frozenset(plan.bits), tuple(sorted(plan.scalars.items())))


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


def _entries(tm, fn, plan: KernelPlan, cfg, pinned: dict, width: int = 1) -> list[Kernel]:
    """The kernel's entries for the `pinned` values; `width`: how many entries the enclosing specializations
    already make (past MAX_ENTRIES in all, a further constexpr goes without values, `_without_values`, where it
    can: not a dtype, not one that must be known)."""
    try:
        kernels = _typed(tm, fn, plan, cfg, pinned)
        unfit = frozenset().union(*(no_const_generic(k, value_sources(tm, fn.name, cfg), tm.naming) for k in kernels))
        if unfit:
            raise NeedsSpecialization(unfit, "constexprs no Rust const generic can be", kernels[0].loc)
        return kernels
    except NeedsSpecialization as need:
        values = specialization_values(tm, fn.name, cfg, need.constants)
        if not values:
            before = set(plan.runtime), set(plan.dynamic)
            try:
                return _without_values(tm, fn, plan, cfg, pinned, need, width)
            except Diagnostic:
                values = signature_defaults(fn, need.constants)
                if not values:
                    raise
                plan.runtime, plan.dynamic = before
        if width > 1 and width * len(values) > MAX_ENTRIES and not need.constants & plan.dtypes:
            before = set(plan.runtime), set(plan.dynamic)
            try:
                return _without_values(tm, fn, plan, cfg, pinned, need, width)
            except Diagnostic:  # not without values (strings, tile shapes): more entries than the cap
                plan.runtime, plan.dynamic = before
        enumerated = _enumerated_dtypes(tm, fn, plan, cfg, need.constants)
        out = _value_entries(tm, fn, plan, cfg, pinned, values[:MAX_ENTRIES], width, enumerated)
        if not out and enumerated:  # no float dtype type-checks (`x.to(OUT_DTYPE) << 4`): the integer ones
            choices = list(product(INT_DTYPE_CHOICES, repeat=len(need.constants)))
            out = _value_entries(tm, fn, plan, cfg, pinned, [dict(zip(sorted(need.constants), c)) for c in choices],
                                 width, False)
        return out


def signature_defaults(fn: ast.FunctionDef, names: frozenset) -> list[dict[str, Any]]:
    """The one value set of `names` the signature gives (`sem: tl.constexpr = "release"`, `USE_TMA=False`):
    what every launch that omits them passes; [] unless each has a literal default."""
    args = fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]], fn.args.defaults))
    out = {}
    for name in names:
        node = defaults.get(name)
        if not (isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str))):
            return []
        out[name] = node.value
    return [out]


def _value_entries(tm, fn, plan: KernelPlan, cfg, pinned: dict, values: list[dict], width: int,
                   droppable: bool) -> list[Kernel]:
    """One set of entries per value set, named after its values; with `droppable`, a value set whose lowering
    is a dtype diagnostic is left out (enumerated dtypes the kernel does not type-check with), unless all are."""
    out, first = [], None
    for v in values:
        try:
            kernels = _entries(tm, fn, plan, cfg, {**pinned, **v}, width * len(values))
        except Diagnostic as d:
            if not (droppable and d.construct == "dtype"):
                raise
            first = first or d
            continue
        for k in kernels:
            suffix = "_".join(f"{key.lower()}{_suffix(val)}" for key, val in sorted(v.items()))
            k.name = f"{k.name}_{suffix}"
            out.append(k)
    if not out and first is not None and not droppable:
        raise first
    return out


def _enumerated_dtypes(tm, fn, plan: KernelPlan, cfg, names: frozenset) -> bool:
    """Dtype constexprs whose values no configuration, autotune config or launch gives (enumerated choices)."""
    return names <= plan.dtypes and not any(names & c.keys() for c in value_sources(tm, fn.name, cfg))


def _without_values(tm, fn, plan: KernelPlan, cfg, pinned: dict, need: NeedsSpecialization,
                    width: int) -> list[Kernel]:
    """Constexprs whose values a test needs, with none known: they stay const generics and their tests run at
    run time (`if MODE == 2`, `K == K_POW2`: each launch's values still compile a kernel of their own); where
    that does not translate, or values are needed beyond tests, they are passed at run time (typed, weak
    as Triton's constants); else a diagnostic naming them."""
    names = need.constants
    listed = ", ".join(sorted(names))
    if names <= plan.runtime or not names <= set(plan.constexprs):
        raise Diagnostic(f"{need.reason}: constexpr(s) {listed} need values", need.loc, "specialization",
                         "give the values in use (--config)") from None
    first = None
    if not names & plan.dynamic:
        plan.dynamic |= names
        try:
            return _entries(tm, fn, plan, cfg, pinned, width)
        except Diagnostic as d:
            first = d
    plan.dynamic -= names
    plan.runtime |= names
    try:
        return _entries(tm, fn, plan, cfg, pinned, width)
    except Diagnostic as d:
        tried = f"tested at run time: {first.message}; " if first is not None else ""
        raise Diagnostic(f"{need.reason}: constexpr(s) {listed} need values ({tried}as runtime values instead: "
                         f"{d.message})", need.loc, "specialization",
                         "give the values in use (--config), or list them in @triton.autotune") from None


def no_const_generic(kernel: Kernel, sources: list[dict[str, Any]], naming: Naming) -> frozenset:
    """Constant parameters of `kernel` that cannot stay `const NAME: i32` generics: a value set (`value_sources`)
    gives them a value no i32 holds (a float, a bool, a string, None, a wide int; the cutile JIT parses const generic
    arguments as i32 or bool, Rust has no float const generics), or their name is no safe generic name (a
    Rust keyword, a DSL type such as `E`, which the cutile compiler resolves as the type; a dtype generic).
    They are specialized instead (with no values: passed at run time)."""
    def fits(v: Any) -> bool:
        return type(v) is int and I32_MIN <= v <= I32_MAX
    dtype_generics = {dv.name for dv in kernel.dtype_vars}
    return frozenset(p.name for p in kernel.const_params
                     if any(p.name in c and not fits(c[p.name]) for c in sources)
                     or naming.ident(p.name) != p.name or p.name in dtype_generics)


def _typed(tm, fn, plan: KernelPlan, cfg, pinned: dict) -> list[Kernel]:
    """The kernel over every element dtype that type-checks (one generic), as cuTile does unconfigured; where
    no one generic holds them (code that depends on the dtype, `if x.dtype == tl.float16:`), the element type a
    pinned dtype constexpr names (X_dtype = X.dtype), else one entry per dtype configuration (the launcher
    picks the entry by its arrays' dtypes)."""
    kept, first = [], None
    lowered: dict[tuple, Kernel] = {}  # the checks' lowerings, by their inputs (each reused once)

    def lowering(dtypes: list[dict[str, str]]) -> Kernel:
        found = lowered.pop(_inputs(plan, dtypes, pinned), None)
        return found if found is not None else lower_with_retries(tm, fn, plan, dtypes, pinned)
    for dtypes in candidate_dtypes(plan, cfg):
        try:
            _check(tm, fn, plan, dtypes, pinned, lowered)
            kept += [d for d in dtypes if d not in kept]
        except Diagnostic as d:
            if d.construct != "dtype":
                raise
            first = first or d
    if not kept:
        raise first
    try:
        return [lowering(kept)]
    except Diagnostic as d:
        if d.construct != "dtype":
            raise
    named = {TL_DTYPE_NAMES.get(v) for k, v in pinned.items() if k in plan.dtypes}
    pick = next((c for c in kept if set(c.values()) & named), None)
    if pick is not None:
        return [lowering([pick])]
    out = []
    for dtypes in kept:
        k = lowering([dtypes])
        k.name = f"{k.name}_{'_'.join(dict.fromkeys(dtypes.values()))}"
        out.append(k)
    return out


def _inputs(plan: KernelPlan, dtypes: list[dict[str, str]], pinned: dict) -> tuple:
    """What a lowering of the plan's kernel depends on: the dtypes, the pinned values, the plan's decisions."""
    return repr(dtypes), repr(list(pinned.items())), _decisions(plan), frozenset(plan.maybe_float)


def _check(tm, fn, plan: KernelPlan, dtypes: list[dict[str, str]], pinned: dict, lowered: dict) -> None:
    """Raise what lowering the kernel with `dtypes` raises. The specialization search asks again for inputs
    it tried before (each value set, every time a decision changes): their outcome (`plan.outcomes`) is not
    lowered again. A new lowering is kept in `lowered`, by its inputs."""
    key = _inputs(plan, dtypes, pinned)
    known = plan.outcomes.get(key)
    if known is not None:
        if isinstance(known, Exception):
            raise replace(known)
        return
    try:
        kernel = lower_with_retries(tm, fn, plan, dtypes, pinned)
    except (Diagnostic, NeedsSpecialization) as e:
        if _inputs(plan, dtypes, pinned) == key:  # no retry changed a decision: the outcome of these inputs
            plan.outcomes[key] = replace(e)
        raise
    after = _inputs(plan, dtypes, pinned)  # a retry's decisions taken: a lowering with them succeeds at once
    plan.outcomes[after] = True
    lowered[after] = kernel


def specialization_values(tm: TritonModule, kernel: str, cfg, names: frozenset) -> list[dict[str, Any]]:
    """Distinct value combinations of `names` from the configuration, the autotune configs and the file's
    launches; bool heuristics (EVEN_K...) enumerate both values."""
    fn = tm.kernels[kernel]
    sources = value_sources(tm, kernel, cfg)
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


def enumerable_values(tm: TritonModule, fn: ast.FunctionDef, name: str, seen: frozenset = frozenset()) -> tuple:
    """The values a constexpr can take that change the kernel, when its uses tell: a flag only used as a
    condition -> (False, True); a mode only compared (==, !=) with constants (numbers or strings) -> those
    constants; a dtype -> the float element types unconfigured pointers take; passed to a helper, what the
    helper's uses tell. Else ()."""
    if is_dtype_constexpr(tm, fn, name):
        return DTYPE_CHOICES
    if (fn.name, name) in seen:
        return ()
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    flags, compared = False, set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        p = parents.get(n)
        inner = _helper_parameter(tm, n, p, parents.get(p))
        if isinstance(p, ast.keyword) and p.arg in KEYWORD_DOMAINS:
            compared |= set(KEYWORD_DOMAINS[p.arg])
        elif inner is not None:
            values = enumerable_values(tm, *inner, seen | {(fn.name, name)})
            if not values:
                return ()
            flags |= values == (False, True)
            compared |= set(values) if values != (False, True) else set()
        elif isinstance(p, (ast.If, ast.IfExp)) and p.test is n or isinstance(p, ast.BoolOp) \
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


# Keyword arguments of tl functions that take one of a few strings: a constexpr passed there takes each.
KEYWORD_DOMAINS = {"input_precision": DOT_PRECISIONS}


def _helper_parameter(tm: TritonModule, n: ast.Name, parent: ast.AST, grandparent: ast.AST):
    """(helper, parameter name) when `n` is an argument of a call to a jit helper, else None."""
    call, keyword = (grandparent, parent.arg) if isinstance(parent, ast.keyword) else (parent, None)
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in tm.helpers):
        return None
    helper = tm.helpers[call.func.id]
    params = [a.arg for a in helper.args.args]
    if keyword is None:
        i = next((i for i, a in enumerate(call.args) if a is n), None)
        keyword = params[i] if i is not None and i < len(params) else None
    return (helper, keyword) if keyword in params else None


def _suffix(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return re.sub(r"[^0-9A-Za-z]", "_", str(v).replace(".", "p").replace("-", "m")).lower()


# ---------------------------------------------------------------- dtype constexprs

# A dtype constexpr with no configured value takes each float element type unconfigured pointers take, by the
# name `str(tl.<dtype>)` gives (the launch's value selects the entry).
DTYPE_CHOICES = ("bf16", "fp16", "fp32")
INT_DTYPE_CHOICES = ("int32", "int16", "int8", "uint8")  # where no float one type-checks
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
        tm = _package_scan(path, text, resolver) or scan(path, text, resolver)
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


def _package_scan(path: str, text: str | None, resolver: Resolver | None) -> TritonModule | None:
    """With a package's resolver, the file's scan is made once (package mode found its kernels with it, other
    modules import from it); a file read on its own (FILES) is scanned afresh: it may have just changed."""
    resolver = resolver_for(resolver)
    return imported_module(path, resolver) if text is None and resolver is not FILES else None


def _internal(e: Exception, loc: Loc, kernel: str) -> Diagnostic:
    return Diagnostic(f"internal translator error: {type(e).__name__}: {e}", loc, "internal",
                      "please report this kernel", kernel=kernel)
