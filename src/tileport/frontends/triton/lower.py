"""The Triton kernel visitor: one `@triton.jit` function -> one kernel-model `Kernel`.

Statements and expressions are visited as in the cuTile frontend (`stmt_<Node>`, `expr_<Node>`); `tl.*`
calls are typed by `calls.py`, loads and stores are placed by `memory.py`. Integer values carry a
polynomial form (`affine.py`) so that pointer arithmetic can be recognized as block accesses.
"""

from __future__ import annotations

import ast
import contextlib
import math
from pathlib import Path
from typing import Any, Sequence

from tileport.diagnostics import Diagnostic, NeedsSpecialization
from tileport.frontends.liveness import assigned, exposed_read
from tileport.frontends.triton import affine as A
from tileport.frontends.triton import calls, memory
from tileport.frontends.triton.dtypes import promote
from tileport.frontends.imports import Outside, WholeModule, outside_hint, submodule
from tileport.frontends.triton.scan import (TritonModule, defines, defining_module, dotted, helper_of,
                                            imported_module, loc_of)
from tileport.frontends.triton.values import CV, Retry, DT, BlockPtr, Builtin, Descriptor, Gone, Helper, Method, \
    Module, Ptr, SourceModule
from tileport.model.builder import Builder, DTypeSpace, lit_dtype
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, For, If, Kernel, Let, Lit, Loc, Op, Param, Ref,
                               Return, While, sym_names, walk)
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, DimOp, ScalarT, Sym, TileT

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow",
            "&": "and", "|": "or", "^": "xor", "<<": "shl", ">>": "shr", "min": "min", "max": "max", "cdiv": "cdiv"}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
MAX_INLINE_DEPTH = 16


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


class Scope:
    def __init__(self, kind: str):
        self.kind = kind
        self.vars: dict[str, Any] = {}


class TritonLowerer:
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
        for table in (self.poly, self.bounds, self.loaded):
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
        for table in (self.poly, self.bounds, self.loaded):
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

    # ---- statements
    def block(self, stmts: Sequence[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            if id(s) in self.skip:
                self.skip[id(s)]()
                continue
            if isinstance(s, ast.If) and self.at_kernel_top() and (_returns(s.body) or _returns(s.orelse)):
                # `if c: ...; return` then the rest: the rest becomes the other branch (cutile-rs returns
                # only at the top level of the kernel)
                rest = list(stmts[i + 1:])
                if _returns(s.body):
                    s = ast.If(s.test, s.body[:-1] or [ast.Pass()], list(s.orelse) + rest)
                else:
                    s = ast.If(s.test, list(s.body) + rest, s.orelse[:-1])
                ast.copy_location(s, stmts[i])
                self.stmt_If(s, [])  # both branches now run to the kernel's end
                return
            if isinstance(s, ast.If) and self.at_kernel_top() and _returns_inside(s):
                self.stmt_If(s, list(stmts[i + 1:]))  # a folded test: its branch and the rest are one block
                return
            handler = getattr(self, f"stmt_{type(s).__name__}", None)
            if handler is None:
                raise self.fail(s, f"`{type(s).__name__}` statements are not supported in Triton kernels",
                                type(s).__name__)
            handler(s)

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant):
            return  # docstring
        self.expr(s.value)

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Assert(self, s: ast.Assert) -> None:
        pass  # device asserts are debugging aids; Triton drops them unless debug mode is on

    def stmt_Assign(self, s: ast.Assign) -> None:
        value = self.expr(s.value)
        for t in s.targets:
            self.assign_target(t, value, s)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is None:
            raise self.fail(s, "a declaration without a value is not supported", "assignment")
        self.assign_target(s.target, self.expr(s.value), s)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        if not isinstance(s.target, ast.Name):
            raise self.fail(s, "augmented assignment to anything but a name is not supported", "assignment")
        op = BINOPS.get(type(s.op))
        cur = self.lookup(s.target.id, s.target)
        self.assign(s.target.id, self.calls.binary(self, op, cur, self.expr(s.value), s), s)

    def assign_target(self, target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.fail(node, "tuple unpacking needs a tuple of the same length", "assignment")
            for t, v in zip(target.elts, value):
                self.assign_target(t, v, node)
        else:
            raise self.fail(node, f"assignment to `{type(target).__name__}` is not supported", "assignment")

    def at_kernel_top(self) -> bool:
        """Lowering the kernel's own body, or branches that run to its end (no loop, no helper)."""
        return not self.inline_depth and all(sc.kind in ("fn", "tail") for sc in self.scopes)

    def stmt_Return(self, s: ast.Return) -> None:
        if self.inline_depth:
            inner = self.scopes[max(i for i, sc in enumerate(self.scopes) if sc.kind == "fn"):]
            if any(sc.kind == "loop" for sc in inner):
                raise self.fail(s, "`return` inside a loop of a helper is not supported (cutile-rs has no early "
                                "exit from a loop)", "return", "break out of the loop, then return")
            self.scopes[-1].vars[RETURN] = CV(None) if s.value is None else self.expr(s.value)
            return
        if s.value is not None:
            raise self.fail(s, "kernels cannot return a value", "return")
        if len(self.scopes) > 1:
            raise self.fail(s, "`return` inside a loop or not at the end of a branch is not supported "
                            "(cutile-rs returns only at the top level)", "return",
                            "restructure with if/else so that the kernel ends at its last statement")
        self.b.emit(Return(self.loc(s)))

    def stmt_Break(self, s: ast.Break) -> None:
        self.b.emit(Break(self.loc(s)))

    def stmt_Continue(self, s: ast.Continue) -> None:
        self.b.emit(Continue(self.loc(s)))

    def stmt_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.fail(s, "`while ... else` is not supported", "while-else")
        tested = frozenset(n.id for n in ast.walk(s.test) if isinstance(n, ast.Name))
        self.materialize_carried(s, also=tested)
        fresh = [name for name in self.fresh_pointers(s) if name not in tested]
        self.scopes.append(Scope("loop"))
        self.scopes[-1].vars.update({name: Gone(name) for name in fresh})
        cond = self.b.push()
        test = self.while_test(s)
        self.b.pop()
        if test is False:  # `while False:` never runs (Triton folds the constant condition)
            self.scopes.pop()
            return
        body = self.b.push()
        self.block(s.body)
        self.b.pop()
        self.scopes.pop()
        for name in fresh:
            self.scopes[self.owner(name)].vars[name] = Gone(name)
        self.b.emit(While(cond, test, body, self.loc(s), self.outer_updates(cond, body)))

    def while_test(self, s: ast.While) -> Ref | None | bool:
        """The loop's scalar condition, evaluated in the condition block; None for a constant true
        condition, False for a constant false one."""
        test = self.expr(s.test)
        if isinstance(test, CV) and any(isinstance(n, ast.Name) and n.id in assigned(s.body)
                                        for n in ast.walk(s.test)):
            raise self.fail(s.test, "the `while` condition is a compile-time value that the body reassigns",
                            "while", "start the loop variables from runtime values")
        if isinstance(test, CV) and not isinstance(test.value, (Sym, DimOp)):
            return None if test.value else False
        if isinstance(test, CV):
            raise NeedsSpecialization(frozenset(sym_names(test.value)), "a `while` on a constexpr", self.loc(s))
        if not (isinstance(test, Ref) and (isinstance(test.ty, ScalarT) or test.ty.rank == 0)):
            raise self.fail(s.test, "a `while` condition must be a scalar", "while",
                            "reduce the tile to a scalar (tl.max, tl.sum) first")
        return self.scalar_condition(test, s.test)

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.fail(s, "`for ... else` is not supported", "for-else")
        if not isinstance(s.target, ast.Name):
            raise self.fail(s.target, "the loop variable must be a single name", "for")
        start, stop, step, static = self.loop_bounds(s.iter)
        if static is not None:
            return self.unrolled(s, static)
        incs = self.pointer_increments(s)
        self.materialize_carried(s)
        fresh = self.fresh_pointers(s)
        self.scopes.append(Scope("loop"))
        self.b.push()
        index = self.b.fresh(s.target.id)
        self.forget(index)
        ref = Ref(index, ScalarT("i32"))
        self.scopes[-1].vars.update({name: Gone(name) for name in fresh})
        self.scopes[-1].vars[s.target.id] = ref
        self.track_scalar(ref)
        iteration = self.loop_iteration(ref, start, step, s)
        for name, (p0, inc, st) in incs.items():
            self.scopes[-1].vars[name] = self.memory.advanced(self, p0, inc, iteration, s)
            # after the increment statement, the rest of the body sees the next iteration's pointer
            self.skip[id(st)] = (lambda name=name, p0=p0, inc=inc, st=st: self.scopes[-1].vars.__setitem__(
                name, self.memory.advanced(self, p0, inc, A.add(iteration, A.const(1)), st)))
        self.block(s.body)
        body = self.b.pop()
        self.scopes.pop()
        for name in [*incs, *fresh]:
            self.scopes[self.owner(name)].vars[name] = Gone(name)
        self.b.emit(For(index, start, stop, step, body, self.loc(s), self.outer_updates(body)))

    def loop_bounds(self, it: ast.expr):
        """(start, stop, step, None) atoms of a range loop, or (.., values) for `tl.static_range` of
        compile-time bounds (unrolled)."""
        if not isinstance(it, ast.Call):
            raise self.fail(it, "only `for ... in range(...)` loops are supported", "for")
        f = self.expr(it.func)
        kind = f.name if isinstance(f, Builtin) else getattr(f, "name", None)
        if not (isinstance(f, Builtin) and f.name == "range") and not (
                isinstance(f, Method) and f.name in ("range", "static_range")):
            raise self.fail(it, "only range / tl.range / tl.static_range loops are supported", "for")
        if not 1 <= len(it.args) <= 3:
            raise self.fail(it, "range() takes 1 to 3 positional arguments", "for")
        values = [self.expr(a) for a in it.args]
        if kind == "static_range" and all(isinstance(v, CV) and type(v.value) is int for v in values):
            return None, None, None, list(range(*[v.value for v in values]))
        bounds = [self.int_atom(v, a) for v, a in zip(values, it.args)]
        start, stop, step = (CDim(0), bounds[0], CDim(1)) if len(bounds) == 1 else \
            (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else CDim(1))
        if isinstance(step, CDim) and isinstance(step.dim, int) and step.dim <= 0:
            raise self.fail(it, "only positive range() steps are supported", "for")
        return start, stop, step, None

    def unrolled(self, s: ast.For, values: list[int]) -> None:
        for v in values:
            self.scopes[-1].vars[s.target.id] = CV(v)
            self.block(s.body)

    def loop_iteration(self, index: Ref, start: Atom, step: Atom, node: ast.AST) -> A.Poly:
        """The iteration number's affine form in terms of the loop index: `(k - start) / step`."""
        k = A.factor(("v", index.name))
        start_p, step_p = self.atom_poly(start), self.atom_poly(step)
        if start_p is not None and step_p == A.const(1):
            return A.sub(k, start_p)
        # k = start + step * i: name i as a fresh scalar so that `k` itself stays divisible by the step
        i = self.b.value(OpKind.BINARY, (self.b.value(OpKind.BINARY, (index, start), ScalarT("i32"), self.loc(node),
                                                      hint="k0", op="sub", rounding=None, ftz=None, nan=None), step),
                         ScalarT("i32"), self.loc(node), hint=f"{index.name}_iter", op="floordiv", rounding=None,
                         ftz=None, nan=None)
        self.track_scalar(i)
        if start_p is not None and step_p is not None:
            self.poly[index.name] = A.add(start_p, A.mul(step_p, A.factor(("v", i.name))))
        return A.factor(("v", i.name))

    def pointer_increments(self, s: ast.For) -> dict[str, tuple[Any, Any]]:
        """`p += inc` / `p = tl.advance(p, offs)` at the top of the loop body, with loop-invariant `inc`:
        (initial pointer, increment) per name; the statements are then skipped in the body."""
        written = assigned(s.body) | {s.target.id}
        out = {}
        for st in s.body:
            name, inc_node = _increment(st)
            if name is None or name in out:
                continue
            owner = self.owner(name)
            cur = self.scopes[owner].vars.get(name) if owner is not None else None
            if not isinstance(cur, (Ptr, BlockPtr)):
                continue
            if any(isinstance(n, ast.Name) and n.id in written for n in ast.walk(inc_node)):
                raise self.fail(st, f"pointer `{name}` advances by an amount that changes inside the loop",
                                "pointer", "advance by a loop-invariant step")
            if sum(1 for t in ast.walk(ast.Module(s.body, [])) if isinstance(t, (ast.Assign, ast.AugAssign))
                   and name in _target_names(t)) != 1:
                raise self.fail(st, f"pointer `{name}` is assigned more than once in the loop", "pointer")
            out[name] = (cur, self.expr(inc_node), st)
        if out and any(isinstance(n, ast.Continue) for n in _same_loop(s.body)):
            raise self.fail(s, "a loop that advances pointers cannot `continue` (the increment would be skipped)",
                            "pointer", "advance the pointers before `continue`, or recompute them from the index")
        return out

    def fresh_pointers(self, s: ast.For | ast.While) -> list[str]:
        """Pointers of the enclosing code that the loop body assigns before reading them (`p = base + offs`
        at the top of each iteration): a new pointer each time round, local to the body; after the loop,
        where Python would see the last iteration's, reading them is a diagnostic."""
        out = []
        for name in sorted(assigned(s.body)):
            owner = self.owner(name)
            if owner is not None and isinstance(self.scopes[owner].vars[name], (Ptr, BlockPtr)) \
                    and not exposed_read(s.body, name):
                out.append(name)
        return out

    def materialize_carried(self, s: ast.For | ast.While, also: frozenset = frozenset()) -> None:
        """Compile-time numbers a loop body reassigns and reads become runtime scalars first; so do those
        the loop's test reads (`also`), bools included (`while not done:`)."""
        self.unshare_assigned(s.body, s)
        for name in sorted(assigned(s.body)):
            owner = self.owner(name)
            if owner is None or not (name in also or exposed_read(s.body, name)):
                continue
            v = self.scopes[owner].vars[name]
            if isinstance(v, CV) and isinstance(v.value, (int, float)) and (
                    name in also or not isinstance(v.value, bool)):
                atom = self.atom(v, s, None)
                ty = ScalarT(lit_dtype(v.value)) if isinstance(atom, Lit) else ScalarT("i32")
                self.scopes[owner].vars[name] = self.scalar_value(atom, ty, self.loc(s), name)

    def unshare_assigned(self, stmts: list[ast.stmt], node: ast.AST) -> None:
        """A variable the statements reassign in place (a loop, a branch) that shares its value with another
        variable (`steps = n`) gets its own copy first: its updates must not change the other."""
        for name in sorted(assigned(stmts)):
            owner = self.owner(name)
            v = self.scopes[owner].vars[name] if owner is not None else None
            if not isinstance(v, Ref) or isinstance(v.ty, ArrayT):
                continue
            if any(other != name and isinstance(w, Ref) and w.name == v.name
                   for sc in self.scopes for other, w in sc.vars.items()):
                copy = self.b.value(OpKind.COPY, (v,), v.ty, self.loc(node), hint=name)
                self.b.temps.discard(copy.name)
                self.scopes[owner].vars[name] = copy

    def stmt_If(self, s: ast.If, rest: list[ast.stmt] | None = None) -> None:
        """`rest`: the statements after the `if` (at the kernel's top, with a `return` inside), lowered after
        it; a folded branch is lowered with them, so that its early return still skips them."""
        self.unshare_assigned([*s.body, *s.orelse], s)
        cond = self.expr(s.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, DimOp)):
            self.block([*(s.body if cond.value else s.orelse), *(rest or [])])  # a constexpr condition folds
            return
        self.runtime_if(s, cond, rest)

    def runtime_if(self, s: ast.If, cond: Any, rest: list[ast.stmt] | None = None) -> None:
        """A test at run time; with `rest` (a `return` inside), each branch continues with it (a "tail"
        scope, where a nested `if ..: return` still ends the kernel)."""
        if self.calls.dynamic(self, cond):
            cond = self.calls.compare(self, "!=", self.calls.at_run_time(self, cond, s.test), CV(0), s.test)
        tests_constexpr = isinstance(cond, Ref) and cond.name in self.static
        if isinstance(cond, CV):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a branch on a constexpr", self.loc(s))
        if not (isinstance(cond, Ref) and (isinstance(cond.ty, ScalarT) or cond.ty.rank == 0)):
            raise self.fail(s.test, "an `if` condition must be a scalar", "if",
                            "use tl.where for element-wise choices")
        cond = self.scalar_condition(cond, s.test)
        branches, scopes = [], []
        for stmts in (s.body, s.orelse):
            self.scopes.append(Scope("if" if rest is None else "tail"))
            blk = self.b.push()
            self.block(stmts if rest is None else [*stmts, *rest])
            names = set(self.b.scope_names[-1])
            self.b.pop()
            branches.append((blk, names))
            scopes.append(self.scopes.pop())
        self.join_branch_locals(scopes, branches, s, tests_constexpr)
        self.join_branch_pointers(scopes, branches, s, tests_constexpr)
        blocks = [blk for blk, _ in branches]
        self.b.emit(If(cond, blocks[0], blocks[1], self.loc(s), self.outer_updates(*blocks)))

    def join_branch_locals(self, scopes: list[Scope], branches: list, node: ast.If, tests_constexpr: bool) -> None:
        """A new variable both branches define (`if c: loss = a  else: loss = b`) is declared before the
        `if` and each branch assigns it, so that it is defined after the `if`. Under a test of a constexpr (run
        at run time for want of values) a variable one branch defines is declared too, zero in the other
        branch: Triton folds the test, so the source reads it only where the same test holds."""
        names = scopes[0].vars.keys() & scopes[1].vars.keys()
        if tests_constexpr:
            names = scopes[0].vars.keys() | scopes[1].vars.keys()
        for name in sorted(names):
            if self.owner(name) is not None:
                continue
            values = [sc.vars.get(name) for sc in scopes]
            refs = [v for v in values if isinstance(v, Ref) and isinstance(v.ty, (ScalarT, TileT))]
            if not refs or not all(isinstance(v, (Ref, CV)) or v is None for v in values):
                continue
            ty = refs[0].ty
            values = [CV(False if ty.dtype == "bool" else 0) if v is None else v for v in values]
            converted = []
            for (blk, names), v in zip(branches, values):
                self.b.resume(blk, names)
                try:
                    converted.append(self.as_value_of(v, ty, node, name))
                finally:
                    self.b.pop()
            zero = Lit(False if ty.dtype == "bool" else 0.0 if self.b.is_float(ty.dtype) else 0, ScalarT(ty.dtype))
            loc = self.loc(node)
            declared = self.b.to_tile(zero, ty.dtype, ty.shape, loc) if isinstance(ty, TileT) else \
                self.b.value(OpKind.SCALAR, (zero,), ty, loc, hint=name)
            # not a name a branch binds: its `name = value` would assign the branch's own variable
            declared = self.rename(declared, name, frozenset().union(*(names for _, names in branches)))
            for (blk, _), v in zip(branches, converted):
                blk.stmts.append(Let(declared.name, Op(OpKind.COPY, (v,), ty, loc), update=True))
            self.scopes[-1].vars[name] = declared

    def join_branch_pointers(self, scopes: list[Scope], branches: list, node: ast.If, tests_constexpr: bool) -> None:
        """A pointer a branch moves (`if c: p += off`): its offset becomes a variable declared before the `if`,
        which each branch assigns; accesses through it are gathers (the offset has no single affine form). Under
        a test of a constexpr, a pointer a branch defines is joined too (as `join_branch_locals` does)."""
        for name in sorted(scopes[0].vars.keys() | scopes[1].vars.keys()):
            owner = self.owner(name)
            values = [sc.vars.get(name) for sc in scopes]
            if not any(isinstance(v, Ptr) for v in values) or owner is None and not tests_constexpr:
                continue
            if owner is None:
                arrays = {v.array.name: v.array for v in values if isinstance(v, Ptr)}
                if len(arrays) != 1 or not all(isinstance(v, Ptr) or v is None for v in values):
                    continue  # not one pointer after the `if`: undefined there
                elems = {v.elem for v in values if isinstance(v, Ptr)}
                if len(elems) != 1:
                    continue
                outer = Ptr(next(iter(arrays.values())), None, elems.pop())
            else:
                outer = self.lookup(name, node)
            values = [outer if v is None else v for v in values]
            if not all(isinstance(v, Ptr) and (v.array.name, v.elem) == (outer.array.name, outer.elem)
                       for v in [outer, *values]):
                raise self.fail(node, f"pointer `{name}` points into different arrays (or element types) after this "
                                "`if`", "pointer")
            offsets = [v.offset for v in values]
            refs = [o for o in offsets if o is not None]
            dtype = "i64" if any(o.ty.dtype == "i64" for o in refs) else "i32"
            tiles = [o.ty.shape for o in refs if isinstance(o.ty, TileT) and o.ty.rank]
            ty = TileT(dtype, tiles[0]) if tiles else ScalarT(dtype)
            loc = self.loc(node)
            zero = Lit(0, ScalarT(dtype))
            declared = self.b.to_tile(zero, dtype, ty.shape, loc) if isinstance(ty, TileT) else \
                self.b.value(OpKind.SCALAR, (zero,), ty, loc, hint=f"{name}_off")
            declared = self.rename(declared, f"{name}_off", frozenset().union(*(names for _, names in branches)))
            for (blk, names), off in zip(branches, offsets):
                self.b.resume(blk, names)
                try:
                    v = self.as_value_of(CV(0) if off is None else off, ty, node, f"{name}_at")
                finally:
                    self.b.pop()
                blk.stmts.append(Let(declared.name, Op(OpKind.COPY, (v,), ty, loc), update=True))
            self.scopes[-1].vars[name] = Ptr(outer.array, declared, outer.elem)

    def scalar_condition(self, cond: Ref, test: ast.AST) -> Ref:
        if isinstance(cond.ty, TileT):
            cond = self.b.value(OpKind.SCALAR_OF, (cond,), ScalarT(cond.ty.dtype), self.loc(test), hint="cond")
        if cond.ty.dtype != "bool":
            cond = self.b.value(OpKind.COMPARE, (cond, Lit(0, ScalarT(cond.ty.dtype))), ScalarT("bool"),
                                self.loc(test), hint="cond", op="!=")
        return cond

    def outer_updates(self, *blocks: Block) -> tuple[str, ...]:
        outside = self.b.scope_names_outside()
        return tuple(sorted({st.name for blk in blocks for st in walk(blk)
                             if isinstance(st, Let) and st.update and st.name in outside}))

    # ---- expressions
    def expr(self, node: ast.expr) -> Any:
        handler = getattr(self, f"expr_{type(node).__name__}", None)
        if handler is None:
            raise self.fail(node, f"`{type(node).__name__}` expressions are not supported in Triton kernels",
                            type(node).__name__)
        return handler(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (int, float, bool, str)) or node.value is None:
            return CV(node.value)
        raise self.fail(node, f"constant {node.value!r} is not supported", "constant")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, SourceModule):
            return self.module_attribute(base, node.attr, node)
        return self.calls.attribute(self, base, node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        return self.calls.subscript(self, self.expr(node.value), node)

    def expr_Call(self, node: ast.Call) -> Any:
        f = self.expr(node.func)
        if isinstance(f, Helper):
            return self.inline(f.node, node, f.module)
        if isinstance(f, Method) and isinstance(f.obj, Module) and f.name in self.calls.NO_OP:
            return CV(None)  # asserts and prints: their arguments are not computed either
        if isinstance(f, Method) and isinstance(f.obj, Module) and f.name in self.calls.UNSUPPORTED:
            return self.calls.tl_call(self, f.name, [], {}, node, f.obj.name)  # its diagnostic, before the args'
        args = [self.expr(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.fail(node, "*args / **kwargs in calls are not supported", "call")
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        return self.calls.call(self, f, args, kwargs, node)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported", "operator")
        return self.calls.binary(self, op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return self.calls.unary(self, type(node.op).__name__, self.expr(node.operand), node)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and`/`or` as a truth: a known operand that decides it (`False and ..`) is the answer, one that does not
        drops out; the others are tested (`!= 0`) and combined with `&` / `|`."""
        is_and = isinstance(node.op, ast.And)
        values = [(self.expr(v), v) for v in node.values]  # every operand, as Triton does (no short circuit)
        out = None
        for x, v in values:
            if isinstance(x, CV) and not isinstance(x.value, (Sym, DimOp)):
                if bool(x.value) != is_and:
                    return CV(not is_and)
                continue
            if isinstance(x, Ref) and x.ty.dtype != "bool":
                x = self.calls.compare(self, "!=", x, CV(0), v)
            out = x if out is None else self.calls.binary(self, "&" if is_and else "|", out, x, node)
        return CV(is_and) if out is None else out

    def expr_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.fail(node, "chained comparisons are not supported", "comparison", "split with &")
        op = CMPOPS.get(type(node.ops[0]))
        if op is None:
            if isinstance(node.ops[0], (ast.Is, ast.IsNot)):
                a, b = self.expr(node.left), self.expr(node.comparators[0])
                if isinstance(a, CV) and isinstance(b, CV):
                    return CV((a.value is b.value) == isinstance(node.ops[0], ast.Is))
                if isinstance(b, CV) and b.value is None and isinstance(a, (Ref, Ptr)):
                    return CV(not isinstance(node.ops[0], ast.Is))  # a given argument is not None
            raise self.fail(node, f"comparison {type(node.ops[0]).__name__} is not supported", "comparison")
        return self.calls.compare(self, op, self.expr(node.left), self.expr(node.comparators[0]), node)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, DimOp)):
            return self.expr(node.body if cond.value else node.orelse)
        if isinstance(cond, CV) and not self.calls.dynamic(self, cond):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a conditional expression on a constexpr",
                                      self.loc(node))
        return self.calls.where(self, cond, self.expr(node.body), self.expr(node.orelse), node)

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Any:
        return CV("")  # messages of static/device asserts

    def inline(self, fn: ast.FunctionDef, call: ast.Call, module: TritonModule | None = None) -> Any:
        """A `@triton.jit` helper, inlined at its call site (its parameters bound to the arguments); its
        body sees its own module's names (`module`, when it is another module's)."""
        if self.inline_depth >= MAX_INLINE_DEPTH:
            raise self.fail(call, "helpers call each other too deeply (recursion?)", "helper")
        params = [a.arg for a in fn.args.args]
        defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults))
        bound: dict[str, Any] = {}
        for name, a in zip(params, call.args):
            bound[name] = self.expr(a)
        for k in call.keywords:
            if k.arg not in params:
                raise self.fail(call, f"helper `{fn.name}` has no parameter `{k.arg}`", "helper")
            bound[k.arg] = self.expr(k.value)
        for name in params:
            if name not in bound:
                if name not in defaults:
                    raise self.fail(call, f"helper `{fn.name}`: missing argument `{name}`", "helper")
                bound[name] = self.expr(defaults[name])
        body = fn.body
        ret = body[-1] if body and isinstance(body[-1], ast.Return) else None
        early = any(isinstance(n, ast.Return) for st in (body[:-1] if ret else body) for n in _same_loop([st]))
        scope = Scope("fn")
        scope.vars.update(bound)
        self.inline_depth += 1
        with self.in_module(module or self.tm, scopes=True):
            self.scopes.append(scope)
            try:
                if early:  # returns inside branches: each path ends in one, which sets the helper's value
                    self.block(single_exit(list(body)))
                    return scope.vars.get(RETURN, CV(None))
                self.block(body[:-1] if ret else body)
                return self.expr(ret.value) if ret is not None and ret.value is not None else CV(None)
            finally:
                self.inline_depth -= 1
                self.scopes.pop()

    # ---- atoms and affine forms
    def track_scalar(self, ref: Ref) -> None:
        if isinstance(ref.ty, ScalarT) and ref.ty.dtype in ("i32", "i64"):
            self.factors[("v", ref.name)] = ref
            self.poly[ref.name] = A.factor(("v", ref.name))

    def poly_of(self, v: Any) -> A.Poly | None:
        if isinstance(v, CV):
            if isinstance(v.value, bool) or not isinstance(v.value, (int, Sym, DimOp)):
                return None
            return A.dim_poly(v.value)
        if isinstance(v, Ref):
            if v.name not in self.poly and _int_scalar(v):
                self.factors[("v", v.name)] = v  # an opaque integer (pid % n, a loaded index): one factor
                self.poly[v.name] = A.factor(("v", v.name))
            return self.poly.get(v.name)
        return None

    def atom_poly(self, a: Atom) -> A.Poly | None:
        if isinstance(a, CDim):
            return A.dim_poly(a.dim)
        if isinstance(a, Lit):
            return A.const(a.value) if type(a.value) is int else None
        return self.poly.get(a.name)

    def poly_atom(self, p: A.Poly, node: ast.AST) -> Atom:
        """An i32 scalar computing `p` (a tile index)."""
        loc = self.loc(node)
        total: Atom | None = None
        for m, c in sorted(p.items(), key=repr):
            term: Atom | None = None if c == 1 and m else Lit(c, ScalarT("i32"))
            for f in m:
                if f[0] == "v":
                    x: Atom = self.factors[f]
                    if isinstance(x.ty, TileT):
                        x = self.b.value(OpKind.SCALAR_OF, (x,), ScalarT(x.ty.dtype), loc, hint="idx")
                    x = self.b.cast(x, "i32", loc)
                elif f[0] == "c":
                    x = CDim(Sym(f[1]))
                elif f[0] == "d":
                    x = CDim(f[1])
                else:
                    raise self.fail(node, "internal: an arange in a tile index", "internal")
                term = x if term is None else self.scalar_op("mul", term, x, loc)
            total = term if total is None else self.scalar_op("add", total, term, loc)
        return total if total is not None else Lit(0, ScalarT("i32"))

    def scalar_value(self, atom: Atom, ty: ScalarT, loc: Loc, hint: str) -> Ref:
        """A scalar variable holding `atom`; an infinite or NaN literal goes through a 0-d constant tile
        (cutile-rs takes `f32::INFINITY` only as an operand of a tile constant)."""
        if isinstance(atom, Lit) and isinstance(atom.value, float) and not math.isfinite(atom.value):
            t = self.b.to_tile(Lit(atom.value, ty), ty.dtype, (), loc)
            return self.b.value(OpKind.SCALAR_OF, (t,), ty, loc, hint=hint)
        return self.b.value(OpKind.SCALAR, (atom,), ty, loc, hint=hint)

    def scalar_op(self, op: str, a: Atom, b: Atom, loc: Loc) -> Ref:
        if isinstance(a, CDim) and isinstance(b, CDim):
            a = self.b.value(OpKind.SCALAR, (a,), ScalarT("i32"), loc, hint="c")
        return self.b.value(OpKind.BINARY, (a, b), ScalarT("i32"), loc, hint="idx", op=op, rounding=None, ftz=None,
                            nan=None)

    def atom(self, v: Any, node: ast.AST, dtype) -> Atom:
        """A scalar operand: a Ref, a literal of `dtype` (or its own type), or a constexpr dimension."""
        if isinstance(v, Ref):
            return v
        if isinstance(v, CV):
            x = v.value
            if isinstance(x, (Sym, DimOp)):
                return CDim(x)
            if isinstance(x, bool):
                return Lit(x, ScalarT("bool"))
            if isinstance(x, int):
                if not -2**63 <= x < 2**64:
                    raise self.fail(node, f"integer constant {x} is out of range", "literal")
                if dtype is not None and self.b.is_float(dtype):
                    return Lit(float(x), ScalarT(dtype))
                return Lit(x, ScalarT(dtype if dtype is not None else ("i32" if -2**31 <= x < 2**31 else "i64")))
            if isinstance(x, float):
                return Lit(x, ScalarT(dtype if dtype is not None and self.b.is_float(dtype) else "f32"))
        raise self.fail(node, f"expected a number, got {describe(v)}", "operand")

    def int_atom(self, v: Any, node: ast.AST) -> Atom:
        if isinstance(v, Ref) and v.name in self.loaded and self.b.is_float(v.ty.dtype):
            raise Retry("index", self.loaded[v.name])  # a loaded count or offset: an integer array
        if isinstance(v, Ref) and isinstance(v.ty, ScalarT) and v.ty.dtype in ("i32", "i64", "i16", "i8"):
            return v if v.ty.dtype == "i32" else self.b.cast(v, "i32", self.loc(node))
        if isinstance(v, Ref) and isinstance(v.ty, TileT) and v.ty.rank == 0:
            s = self.b.value(OpKind.SCALAR_OF, (v,), ScalarT(v.ty.dtype), self.loc(node), hint="n")
            return self.int_atom(s, node)
        if isinstance(v, CV) and (type(v.value) is int or isinstance(v.value, (Sym, DimOp))):
            return self.atom(v, node, "i32")
        raise self.fail(node, f"expected an integer, got {describe(v)}", "integer")

    def compile_time(self, v: Any, node: ast.AST, what: str) -> Any:
        if not isinstance(v, CV):
            raise self.fail(node, f"{what} must be a compile-time constant (tl.constexpr)", "constexpr")
        return v.value


def pinned_value(v: Any) -> Any:
    """A specialization value as the kernel sees it: a dtype constexpr is pinned by its Triton name
    (`"fp16"`, as `str(tl.float16)`), anything else is a constant."""
    return DT(calls.TL_DTYPE_NAMES[v]) if isinstance(v, str) and v in calls.TL_DTYPE_NAMES else CV(v)


RETURN = "return"  # a helper's value, in its scope (a keyword: no source variable has this name)


def single_exit(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """`stmts` with every `return` at the end of its path: what follows an `if` holding a return moves into
    both of its branches (the branch that returns drops it), and what follows a return is dead."""
    for i, st in enumerate(stmts):
        if isinstance(st, ast.Return):
            return stmts[:i + 1]
        if isinstance(st, ast.If) and any(isinstance(n, ast.Return) for n in _same_loop([st])):
            rest = stmts[i + 1:]
            branch = ast.If(st.test, single_exit([*st.body, *rest]), single_exit([*st.orelse, *rest]) or [ast.Pass()])
            return [*stmts[:i], ast.copy_location(branch, st)]
    return stmts


def _returns(stmts: Sequence[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return) and stmts[-1].value is None


def _returns_inside(s: ast.If) -> bool:
    """A `return` somewhere in the branches (not of a nested function)."""
    return any(isinstance(n, ast.Return) for st in [*s.body, *s.orelse] for n in ast.walk(st))


def _is_int(dt) -> bool:
    return isinstance(dt, str) and dt[0] in "iu" and dt[1:].isdigit()


def _same_loop(stmts):
    """Nodes of a loop body, not descending into nested loops."""
    for st in stmts:
        yield st
        if not isinstance(st, (ast.For, ast.While)):
            for child in ast.iter_child_nodes(st):
                if isinstance(child, ast.stmt):
                    yield from _same_loop([child])


def _int_scalar(v: Ref) -> bool:
    return (isinstance(v.ty, ScalarT) or (isinstance(v.ty, TileT) and v.ty.rank == 0)) and \
        v.ty.dtype in ("i32", "i64", "i16", "i8")


def _increment(st: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """(name, increment expression) of `p += e`, `p = p + e` or `p = tl.advance(p, e)`."""
    if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name):
        return st.target.id, st.value
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        name, v = st.targets[0].id, st.value
        if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and isinstance(v.left, ast.Name) \
                and v.left.id == name:
            return name, v.right
        if isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("advance") and len(v.args) == 2 \
                and isinstance(v.args[0], ast.Name) and v.args[0].id == name:
            return name, v.args[1]
    return None, None


def _target_names(st: ast.stmt) -> set[str]:
    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


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


def describe(v: Any) -> str:
    if isinstance(v, Ref):
        return str(v.ty)
    if isinstance(v, CV):
        return f"constant {v.value!r}"
    if isinstance(v, Ptr):
        return f"a pointer into `{v.array.name}`"
    if isinstance(v, BlockPtr):
        return f"a block pointer into `{v.array.array.name}`"
    if isinstance(v, Descriptor):
        return f"a tensor descriptor of `{v.array.array.name}`"
    if isinstance(v, DT):
        return f"dtype {v.dtype}"
    if isinstance(v, tuple):
        return "a tuple"
    return type(v).__name__


__all__ = ["TritonLowerer", "describe"]
