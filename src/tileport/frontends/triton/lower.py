"""The Triton kernel visitor: one `@triton.jit` function -> one kernel-model `Kernel`.

Statements and expressions are visited as in the cuTile frontend (`stmt_<Node>`, `expr_<Node>`); `tl.*`
calls are typed by `calls`, loads and stores are placed by `memory.py`. Integer values carry a
polynomial form (`affine.py`) so that pointer arithmetic can be recognized as block accesses.

`TritonLowerer` keeps the scopes, variables and the kernel entry here; its statement methods are in
`control.py` (`ControlFlowMixin`), its expression and atom methods in `expressions.py` (`ExpressionMixin`).
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from typing import Any

from tileport.diagnostics import Diagnostic
from tileport.frontends.imports import Outside, WholeModule, outside_hint, submodule
from tileport.frontends.triton import affine as A
from tileport.frontends.triton import calls, memory
from tileport.frontends.triton.control import ControlFlowMixin, Scope
from tileport.frontends.triton.dtypes import promote
from tileport.frontends.triton.expressions import ExpressionMixin, describe
from tileport.frontends.triton.scan import TritonModule, defines, defining_module, helper_of, imported_module, loc_of
from tileport.frontends.triton.values import (CV, DT, BlockPtr, Builtin, Chosen, Descriptor, Gone, Helper, Module, Ptr,
                                              SourceModule)
from tileport.model.builder import Builder, DTypeSpace
from tileport.model.ir import Block, For, If, Kernel, Let, Loc, Op, Param, Ref, walk
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, ScalarT, Sym, TileT


class _Builder(Builder):
    """The model builder, telling the lowerer when a name is (re)bound: names are reused once their block
    closes, and what was known about an earlier value of that name must not stick to the new one."""

    def __init__(self, forget, *args):
        super().__init__(*args)
        self.forget = forget

    def value(self, *args, **kwargs) -> Ref:
        ref = super().value(*args, **kwargs)
        self.forget(ref.name)
        return ref

    def cast(self, x: Ref, dtype, loc: Loc, rounding: str | None = None) -> Ref:
        """As the model's cast, but scalar integer conversions go through 0-d tiles (cutile-rs converts
        integer scalars of different widths only as tiles)."""
        if isinstance(x.ty, ScalarT) and x.ty.dtype != dtype and _is_int(x.ty.dtype) and _is_int(dtype):
            t = self.value(OpKind.TILE0, (x,), TileT(x.ty.dtype, ()), loc, hint=f"{x.name}_t")
            t = super().cast(t, dtype, loc, rounding)
            return self.value(OpKind.SCALAR_OF, (t,), ScalarT(dtype), loc, hint=f"{x.name}_{dtype}")
        return super().cast(x, dtype, loc, rounding)


class TritonLowerer(ControlFlowMixin, ExpressionMixin):
    def __init__(self, tm: TritonModule, fn: ast.FunctionDef, params: list[Param], space: DTypeSpace,
                 const_values: list[dict[str, Any]], pinned: dict[str, Any], flat: set[str],
                 descriptor_blocks: dict[str, tuple[tuple[int, ...], str]] | None = None):
        self.tm, self.fn, self.path = tm, fn, tm.path
        self.descriptor_blocks = descriptor_blocks or {}  # host-side descriptor param -> (block shape, padding)
        self.calls, self.memory = calls, memory
        self.params = params
        self.pinned = pinned
        self.flat = flat  # pointer parameters accessed through gathers/scatters only
        self.b = _Builder(self.forget, self.path, space, const_values, tm.naming, promote)
        self.scopes: list[Scope] = []
        self.poly: dict[str, A.Poly] = {}  # Ref name -> affine form
        self.factors: dict[A.Factor, Ref] = {}  # ("v", name) -> the scalar Ref
        self.bounds: dict[str, list[A.Bound]] = {}  # bool Ref name -> mask conjuncts
        # bool Ref name -> the bounds a mask implies (its conjuncts that are bounds; the others are not)
        self.implied: dict[str, list[A.Bound]] = {}
        self.views: dict[str, tuple] = {}  # array param -> (stride keys) of its view
        self.extents: dict[str, list[set[str]]] = {}
        self.notes: list[str] = []
        self.inline_depth = 0
        self.active_aliases: set[tuple[str, str]] = set()  # (file, name) of module aliases being evaluated
        self.use_site: tuple[str, ast.AST] | None = None  # where a name chased through other modules is used
        self.chasing: set[tuple[str, str]] = set()  # (file, name) of imported names being looked up there
        self.skip: dict[int, Any] = {}  # statement id -> what it does instead (pointer increments)
        self.scalar_params = {p.ident for p in params if isinstance(p.ty, ScalarT)}
        self.loaded: dict[str, str] = {}  # Ref name -> the pointer parameter its values were loaded from
        self.maybe_float: set[str] = set()  # scalar parameters assumed i32 that may be Python floats
        self.default_float: set[str] = set()  # pointers whose float element type is assumed (none configured)
        self.assumed_ints: set[str] = set()  # pointers assumed to hold i32 (their values used as integers)
        # runtime values Triton knows at compile time (constexprs passed at run time, tests of constexprs kept
        # generic): they promote as Python numbers, and Triton folds the branches they steer
        self.static: set[str] = set()
        self.dynamic: set[str] = set()  # constexprs (const generics) whose tests run at run time

    def describe(self, v: Any) -> str:
        return describe(v)

    def forget(self, name: str) -> None:
        for table in (self.poly, self.bounds, self.implied, self.loaded):
            table.pop(name, None)
        self.static.discard(name)
        self.factors.pop(("v", name), None)

    def loc(self, node: ast.AST) -> Loc:
        return loc_of(self.path, node)

    def fail(self, node: ast.AST, message: str, construct: str = "", hint: str = "") -> Diagnostic:
        return Diagnostic(message, self.loc(node), construct, hint)

    def host_descriptor(self, p: Param, ptr: Ptr) -> Descriptor:
        """A descriptor parameter: the array with the descriptor's own shape and strides (symbols the launch
        fills: `PARAM__shape<d>`, `PARAM__stride<d>`; the last stride is 1, as TMA descriptors require)."""
        block, padding = self.descriptor_blocks[p.name]
        rank = p.ty.rank
        if len(block) != rank:
            raise Diagnostic(f"host-side tensor descriptor `{p.name}`: block shape {list(block)} for offsets of rank "
                             f"{rank}", loc_of(self.path, self.fn), "tensor descriptor")

        def symbol(field: str, d: int) -> Ref:
            ref = Ref(f"{p.ident}__{field}{d}", ScalarT("i32"))
            self.scalar_params.add(ref.name)
            return ref
        shape = tuple(symbol("shape", d) for d in range(rank))
        strides = tuple(symbol("stride", d) for d in range(rank - 1)) + (CV(1),)
        return Descriptor(ptr, shape, strides, block, padding)

    # ---- entry
    def lower(self) -> Kernel:
        fn = self.fn
        self.scopes.append(Scope("fn"))
        self.b.push()
        for p in self.params:
            if p.is_const:
                if p.name in self.pinned:
                    self.scopes[-1].vars[p.name] = pinned_value(self.pinned[p.name])
                else:
                    self.scopes[-1].vars[p.name] = CV(Sym(p.name))
            elif p.is_array:
                ptr = Ptr(Ref(p.ident, p.ty), None)
                self.scopes[-1].vars[p.name] = self.host_descriptor(p, ptr) if p.name in self.descriptor_blocks else ptr
                self.b.scope_names[-1].add(p.ident)
            else:
                ref = Ref(p.ident, p.ty)
                self.scopes[-1].vars[p.name] = ref
                self.b.scope_names[-1].add(p.ident)
                self.track_scalar(ref)
        for name, value in self.pinned.items():
            if name not in self.scopes[-1].vars:
                self.scopes[-1].vars[name] = pinned_value(value)
        try:
            self.block(fn.body)
        except RecursionError:
            raise self.fail(fn, "the kernel nests too deeply to translate", "nesting") from None
        body = self.b.pop()
        prune_dead(body)
        params = [p for p in self.params if not (p.is_const and p.name in self.pinned)]
        views = {p.name: self.view_of(p) for p in self.params if p.is_array and p.name not in self.flat
                 and p.ident in self.views}
        return Kernel(self.tm.naming.ident(fn.name), params, body, self.loc(fn), {}, dict(self.b.dspace.vectors),
                      ast.get_docstring(fn) or "", base_name=fn.name, pinned=dict(self.pinned),
                      signature=tuple(a.arg for a in fn.args.args), notes=self.notes + self.view_notes(),
                      views=views)

    def view_of(self, p: Param) -> dict:
        """The launch contract of a pointer parameter: its view's strides and mask-given extents (None: not
        bounded by a mask; the launch covers the buffer), as expressions over the kernel's parameters."""
        strides = list(self.views[p.ident])
        ext = self.extents.get(p.ident, [set() for _ in strides])
        return {"strides": strides, "extents": [next(iter(e)) if e else None for e in ext]}

    def view_notes(self) -> list[str]:
        out = []
        for p in self.params:
            if not p.is_array:
                continue
            if p.name in self.flat or p.ident not in self.views:
                out.append(f"pointer `{p.name}`: a 1-D array over the whole buffer (gather/scatter accesses)")
                continue
            strides = self.views[p.ident]
            ext = self.extents.get(p.ident, [set() for _ in strides])
            dims = ", ".join(f"extent {' | '.join(sorted(e)) or 'from the launch'} stride {s}"
                             for s, e in zip(strides, ext))
            out.append(f"pointer `{p.name}`: a {len(strides)}-D array view [{dims}]; partition loads/stores "
                       "assume the launch's strides and in-bounds extents match")
        return out

    # ---- variables
    def lookup(self, name: str, node: ast.AST) -> Any:
        for s in reversed(self.scopes):
            if name in s.vars:
                v = s.vars[name]
                if isinstance(v, Gone):
                    raise self.fail(node, f"pointer `{name}` is read after the loop that advances or reassigns it",
                                    "pointer", "recompute the pointer after the loop")
                if isinstance(v, Chosen):
                    raise self.fail(node, f"pointer `{name}` points into a different array in each branch of the "
                                    f"`if` on line {v.line} (a choice of arrays at run time): a port addresses one "
                                    "array per access", "pointer", "pass the chosen tensor as the kernel's argument, "
                                    "or load from each array under its own branch")
                return v
        if name in self.tm.constants:
            return CV(self.tm.constants[name])
        if name in self.tm.helpers:
            return Helper(self.tm.helpers[name], self.tm)
        if name in self.tm.tl_names:
            return Module("tl")
        if name in self.tm.triton_names:
            return Module("triton")
        if name in self.tm.libdevice_names:
            return Module("libdevice")
        if name in self.tm.tl_imports:
            return self.calls.attribute(self, Module("tl"), self.tm.tl_imports[name], node)
        if name in self.tm.libdevice_imports:
            return self.calls.attribute(self, Module("libdevice"), self.tm.libdevice_imports[name], node)
        if name in self.tm.value_aliases:
            return self.module_alias(name)
        imported = self.imported(name, node) if name in self.tm.imports.names or self.tm.imports.stars else None
        if imported is not None:
            return imported
        if name in ("range", "min", "max", "float", "int", "len", "abs", "bool", "print"):
            return Builtin(name)
        raise self.fail(node, f"undefined name `{name}`", "name")

    def module_alias(self, name: str) -> Any:
        """A module-level name bound to an expression (`exp = tl.exp`), evaluated in its module's scope."""
        key = (self.tm.path, name)
        if key in self.active_aliases:
            raise self.fail(self.tm.value_aliases[name], f"module-level name `{name}` is defined in terms of itself",
                            "name")
        saved, self.scopes = self.scopes, []
        self.active_aliases.add(key)
        try:
            return self.expr(self.tm.value_aliases[name])
        finally:
            self.active_aliases.discard(key)
            self.scopes = saved

    def imported(self, name: str, node: ast.AST) -> Any:
        """A name this module imports from another module of the package (`from .utils import helper`, a
        re-export, `from .a import *`), in that module's scope; None when no star import brings it."""
        binding = self.tm.imports.names.get(name)
        if isinstance(binding, Outside):
            raise self.fail_at_use(node, f"`{name}` is imported from `{binding.module}`, which tileport does not "
                                   "read", "import", outside_hint(self.tm.resolver, binding))
        if isinstance(binding, WholeModule):
            module = imported_module(binding.file, self.tm.resolver)
            if module is None:
                raise self.fail_at_use(node, f"{self.tm.imports.describe(name)}, which cannot be read or parsed",
                                       "import")
            return SourceModule(module)
        owner = defining_module(self.tm, name)
        if owner is None:
            if binding is None:
                return None
            raise self.fail_at_use(node, f"{self.tm.imports.describe(name)}, which cannot be read or parsed", "import")
        return self.module_attribute(SourceModule(owner[0]), owner[1], node, name)

    def module_attribute(self, module: SourceModule, attr: str, node: ast.AST, name: str | None = None) -> Any:
        """`attr` of another module of the package, in that module's scope (its names, imports, submodules)."""
        other = module.module
        if other.naming is None:
            other.naming = self.tm.naming
        found = helper_of(other, ast.Name(attr), 1)
        if found is not None:
            return Helper(found[1], found[0])
        with self.at_use(node):
            if defines(other, attr) or attr in other.imports.names or defining_module(other, attr) is not None:
                key = (other.path, attr)
                if key in self.chasing:  # modules that take the name from each other, none defining it
                    raise self.fail_at_use(node, f"`{name or attr}` is imported from module to module in a cycle; "
                                           "none of them defines it", "import")
                self.chasing.add(key)
                try:
                    with self.in_module(other):
                        return self.lookup(attr, node)
                finally:
                    self.chasing.discard(key)
            sub = submodule(other.resolver, other.path, attr)
            inner = imported_module(sub, other.resolver) if sub else None
            if inner is not None:
                return SourceModule(inner)
            what = f"`{name}` is imported from {Path(other.path).name}" if name else Path(other.path).name
            raise self.fail_at_use(node, f"{what}, which defines no jit function, constant or alias `{attr}`",
                                   "import")

    @contextlib.contextmanager
    def at_use(self, node: ast.AST):
        """While a name is chased through other modules, its resolution errors are located where the name is
        used (the node and file it started from), not in the modules it passes through."""
        outer = self.use_site is None
        if outer:
            self.use_site = (self.path, node)
        try:
            yield
        finally:
            if outer:
                self.use_site = None

    def fail_at_use(self, node: ast.AST, message: str, construct: str = "", hint: str = "") -> Diagnostic:
        path, node = self.use_site or (self.path, node)
        return Diagnostic(message, loc_of(path, node), construct, hint)

    @contextlib.contextmanager
    def in_module(self, tm: TritonModule, scopes: bool = False):
        """Names resolve in `tm` (a helper's or alias's own module) and diagnostics name its file; without
        `scopes` the kernel's variables are out of sight too."""
        saved = self.tm, self.path, self.scopes
        self.tm, self.path = tm, tm.path
        if not scopes:
            self.scopes = []
        try:
            yield
        finally:
            self.tm, self.path, self.scopes = saved

    def owner(self, name: str) -> int | None:
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i].vars:
                return i
            if self.scopes[i].kind == "fn":
                return None
        return None

    def assign(self, name: str, value: Any, node: ast.AST) -> None:
        owner = self.owner(name)
        cur = len(self.scopes) - 1
        if isinstance(value, Ref) and isinstance(value.ty, ArrayT):
            raise self.fail(node, "an array cannot be assigned", "assignment")
        if owner is not None and owner != cur and isinstance(self.scopes[owner].vars[name], Ref) \
                and not self.local_in(name, owner):
            old = self.scopes[owner].vars[name]
            value = self.as_value_of(value, old.ty, node, name)
            self.update(old.name, value)
            self.poly.pop(old.name, None)  # a reassigned variable has no single affine form
            self.bounds.pop(old.name, None)
            self.implied.pop(old.name, None)
            return
        if owner is not None and owner != cur and isinstance(value, Ptr) and not self.local_in(name, owner) \
                and all(sc.kind in ("if", "tail") for sc in self.scopes[owner + 1:]):
            self.scopes[cur].vars[name] = value  # joined with the other branch after the `if` (join_branch_pointers)
            return
        if owner is not None and owner != cur and isinstance(value, (Ptr, BlockPtr, Descriptor)) \
                and not self.local_in(name, owner):
            raise self.fail(node, f"pointer `{name}` is reassigned inside a loop or branch in a way that is not "
                            "a loop-invariant increment", "pointer", "advance pointers with `p += step` at the "
                            "top level of the loop body")
        if isinstance(value, Ref) and value.name in self.b.temps:
            value = self.rename(value, name)
            # bound to `name` now (renamed or not): a later `y = name` must not rename it under `name`'s feet
            self.b.temps.discard(value.name)
        self.scopes[cur].vars[name] = value

    def local_in(self, name: str, owner: int) -> bool:
        """True when blocks inside scope `owner` rebind `name` as a fresh local (not carried)."""
        return any(name in s.vars for s in self.scopes[owner + 1:])

    def rename(self, value: Ref, name: str, avoid: frozenset = frozenset()) -> Ref:
        """The temporary that produced `value` takes the variable's name (readable Rust), or a variant of it
        none of `avoid` is (names of blocks already closed that the value is assigned in)."""
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if not (isinstance(last, Let) and last.name == value.name) or name in self.b.scope_names[-1]:
            return value
        self.b.scope_names.append(set(avoid))
        try:
            new = self.b.fresh(name)
        finally:
            self.b.scope_names.pop()
        self.b.scope_names[-1].add(new)
        self.forget(new)
        self.b.temps.discard(last.name)
        self.b.release(last.name)
        last.name = new
        ref = Ref(new, value.ty)
        for table in (self.poly, self.bounds, self.implied, self.loaded):
            if value.name in table:
                table[new] = table.pop(value.name)
        if value.name in self.static:
            self.static.add(new)
        if ("v", value.name) in self.factors:
            self.factors.pop(("v", value.name))
            self.track_scalar(ref)
            self.poly[new] = A.factor(("v", new))
        return ref

    def update(self, target: str, value: Ref) -> None:
        if value.name == target:
            return  # `x = x.to(<x's dtype>)`: no assignment (an immutable parameter must not get one)
        last = self.b.blocks[-1].stmts[-1] if self.b.blocks[-1].stmts else None
        if isinstance(last, Let) and last.name == value.name and value.name in self.b.temps:
            self.b.temps.discard(last.name)
            self.b.release(last.name)
            last.name, last.update = target, True
        else:
            self.b.emit(Let(target, Op(OpKind.COPY, (value,), value.ty, Loc(self.path, 0, 0)), update=True))

    def as_value_of(self, value: Any, ty, node: ast.AST, name: str) -> Ref:
        """`value` converted to the type of the carried variable `name` (Triton keeps loop-carried types)."""
        if isinstance(value, Ref) and value.ty == ty:
            return value
        loc = self.loc(node)
        if isinstance(ty, ScalarT) and isinstance(value, Ref) and isinstance(value.ty, TileT) and value.ty.rank == 0:
            value = self.b.cast(value, ty.dtype, loc)  # Triton's scalars and 0-d tensors are one thing
            return self.b.value(OpKind.SCALAR_OF, (value,), ty, loc, hint=name)
        if isinstance(ty, TileT) and isinstance(value, (Ref, CV)):
            if isinstance(value, Ref) and isinstance(value.ty, TileT) and \
                    len(value.ty.shape) > len(ty.shape):
                raise self.fail(node, f"`{name}` changes shape inside a loop or branch ({value.ty} -> {ty})",
                                "loop-carried type")
            return self.b.to_tile(self.atom(value, node, ty.dtype), ty.dtype, ty.shape, self.loc(node))
        if isinstance(ty, ScalarT) and isinstance(value, (Ref, CV)) and not (
                isinstance(value, Ref) and isinstance(value.ty, TileT)):
            atom = self.atom(value, node, ty.dtype)
            if isinstance(atom, Ref):
                return self.b.cast(atom, ty.dtype, self.loc(node))
            return self.scalar_value(atom, ty, self.loc(node), name)
        raise self.fail(node, f"`{name}` changes type inside a loop or branch ({ty} -> {describe(value)})",
                        "loop-carried type", "keep loop-carried values the same type and shape")


def pinned_value(v: Any) -> Any:
    """A specialization value as the kernel sees it: a dtype constexpr is pinned by its Triton name
    (`"fp16"`, as `str(tl.float16)`), anything else is a constant."""
    return DT(calls.TL_DTYPE_NAMES[v]) if isinstance(v, str) and v in calls.TL_DTYPE_NAMES else CV(v)


def _is_int(dt) -> bool:
    return isinstance(dt, str) and dt[0] in "iu" and dt[1:].isdigit()


PURE_KINDS = {OpKind.BINARY, OpKind.COMPARE, OpKind.SELECT, OpKind.UNARY, OpKind.ASTYPE, OpKind.SPLAT, OpKind.FULL,
              OpKind.ARANGE, OpKind.RESHAPE, OpKind.BROADCAST, OpKind.SCALAR, OpKind.COPY, OpKind.BID,
              OpKind.NUM_BLOCKS, OpKind.SCALAR_OF, OpKind.TILE0, OpKind.PERMUTE, OpKind.REDUCE}


def prune_dead(body: Block) -> None:
    """Drop pure operations whose results are never read (the address arithmetic a block access replaced)."""
    while True:
        used: set[str] = set()
        for st in walk(body):
            if isinstance(st, (Let,)) or hasattr(st, "op"):
                used |= {a.name for a in st.op.args if isinstance(a, Ref)}
                if isinstance(st, Let) and st.update:
                    used.add(st.name)
            elif isinstance(st, For):
                used |= {a.name for a in (st.start, st.stop, st.step) if isinstance(a, Ref)} | set(st.carried)
            elif isinstance(st, If):
                used |= ({st.cond.name} if isinstance(st.cond, Ref) else set()) | set(st.assigned)
        removed = _remove_unused(body, used)
        if not removed:
            return


def _remove_unused(block: Block, used: set[str]) -> int:
    n = 0
    kept = []
    for st in block.stmts:
        if isinstance(st, Let) and not st.update and st.name not in used and st.op.kind in PURE_KINDS:
            n += 1
            continue
        if isinstance(st, For):
            n += _remove_unused(st.body, used)
        elif isinstance(st, If):
            n += _remove_unused(st.then, used) + _remove_unused(st.orelse, used)
        kept.append(st)
    block.stmts = kept
    return n


__all__ = ["TritonLowerer", "describe"]
