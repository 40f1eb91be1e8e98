"""The kernel visitor's statements: assignments, `for`/`while`/`if`, `return`/`break`/`continue`, and the
inlining of helper functions.
"""

from __future__ import annotations

import ast
from typing import Sequence

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.cutile.scan import ScannedModule
from tileport.frontends.cutile.values import BINOPS, CV, Value
from tileport.frontends.liveness import assigned, exposed_read, reads
from tileport.model import types as T
from tileport.model.builder import lit_dtype
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, For, If, Let, Lit, Op, Ref, Return, While, sym_names,
                               walk)
from tileport.model.ops import OpKind
from tileport.model.types import ScalarT, Sym


def _const_number(v) -> bool:
    """A compile-time int, float or bool."""
    return isinstance(v, CV) and isinstance(v.value, (int, float)) and not isinstance(v.value, (Sym, T.DimOp))


# Every helper call is inlined: helpers that call each other twice per level grow exponentially.
MAX_INLINED_CALLS = 4_096


# ---------------------------------------------------------------- the kernel visitor

class _Scope:
    def __init__(self, kind: str, locals_: set[str] | None = None):
        self.kind = kind  # "fn" | "loop" | "if"
        self.vars: dict[str, Value] = {}
        self.locals = locals_ or set()  # outer names this block rebinds without carrying them out
        self.shadows: dict[str, ast.AST] = {}  # carried names holding a value of another type for now


class ControlFlowMixin:
    """`stmt_<Node>` methods of `KernelLowerer` and what they share: blocks, loop-carried values, helpers."""

    # ---- statements
    def block(self, stmts: Sequence[ast.stmt], owner: ast.AST) -> None:
        frame = [stmts, 0, owner]
        self.frames.stack.append(frame)
        try:
            for i, s in enumerate(stmts):
                frame[1] = i
                self.stmt = s
                handler = getattr(self, f"stmt_{type(s).__name__}", None)
                if handler is None:
                    raise self.fail(s, f"`{type(s).__name__}` statements are not supported in kernels",
                                    type(s).__name__)
                handler(s)
        finally:
            self.frames.stack.pop()

    def block_locals(self, stmts: Sequence[ast.stmt], loop: bool) -> set[str]:
        """Outer names `stmts` assigns that do not flow out of the block (see liveness.py)."""
        return {n for n in assigned(stmts)
                if self._owner(n) is not None and not self.frames.live_after(n)
                and not (loop and exposed_read(stmts, n))}

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        self.expr(s.value)

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise self.fail(s, "chained assignment is not supported", "assignment")
        self.assign_target(s.targets[0], self.expr(s.value), s)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is None:
            raise self.fail(s, "a declaration without a value is not supported", "assignment")
        self.assign_target(s.target, self.expr(s.value), s)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        if not isinstance(s.target, ast.Name):
            raise self.fail(s, "augmented assignment to anything but a name is not supported", "assignment")
        cur = self.lookup(s.target.id, s.target)
        self.assign_target(s.target, self.binop(BINOPS.get(type(s.op)), cur, self.expr(s.value), s), s)

    def assign_target(self, target: ast.AST, value: Value, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign(target.id, value, node)
        elif isinstance(target, ast.Tuple):
            value = self.calls.materialize(self, value, node)
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise self.fail(node, "tuple unpacking needs a tuple of the same length", "assignment")
            for t, v in zip(target.elts, value):
                self.assign_target(t, v, node)
        else:
            raise self.fail(node, f"assignment to `{type(target).__name__}` is not supported", "assignment")

    def stmt_Return(self, s: ast.Return) -> None:
        if self.inline_depth:
            raise self.fail(s, "`return` inside a helper must be its last statement", "return")
        if s.value is not None:
            raise self.fail(s, "kernels cannot return a value", "return")
        self.b.emit(Return(self.loc(s)))

    def stmt_Break(self, s: ast.Break) -> None:
        self.b.emit(Break(self.loc(s)))

    def stmt_Continue(self, s: ast.Continue) -> None:
        self.b.emit(Continue(self.loc(s)))

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.fail(s, "`for ... else` is not supported", "for-else")
        if not isinstance(s.target, ast.Name):
            raise self.fail(s.target, "the loop variable must be a single name", "for")
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and self.lookup("range", it) == ("builtin", "range")):
            raise self.fail(it, "only `for ... in range(...)` loops are supported", "for",
                            "iterate over range(start, stop, step)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.fail(it, "range() takes 1 to 3 positional arguments", "for")
        bounds = [self.int_atom(self.expr(a), a, "a range() bound") for a in it.args]
        start, stop, step = (CDim(0), bounds[0], CDim(1)) if len(bounds) == 1 else \
            (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else CDim(1))
        if isinstance(step, CDim) and isinstance(step.dim, int) and step.dim <= 0:
            raise self.fail(it, "range() step must be positive", "for")
        locals_ = self.block_locals(s.body, loop=True)
        self.materialize_carried(s.body, s, locals_)
        self.scopes.append(_Scope("loop", locals_))
        body = self.b.push()
        index = self.b.fresh(s.target.id)
        self.scopes[-1].vars[s.target.id] = Ref(index, ScalarT("i32"))
        self.block(s.body, s)
        self.b.pop()
        self.end_scope()
        self.b.emit(For(index, start, stop, step, body, self.loc(s), self.outer_updates(body)))

    def materialize_carried(self, body: Sequence[ast.stmt], node: ast.AST, locals_: set[str],
                            bools: bool = False) -> None:
        """Compile-time values that a loop body reassigns (and carries) become runtime variables first
        (bools too with `bools`: a `while` test over a flag the body sets)."""
        for name in sorted(assigned(body) - locals_):
            owner = self._owner(name)
            if owner is None:
                continue
            v = self.scopes[owner].vars[name]
            if isinstance(v, CV) and _const_number(v) and (bools or not isinstance(v.value, bool)):
                atom = self.scalar_atom(v, node)
                ty = ScalarT(lit_dtype(v.value)) if isinstance(atom, Lit) else ScalarT("i32")
                ref = self.b.value(OpKind.SCALAR, (atom,), ty, self.loc(node), hint=name)
                self.scopes[owner].vars[name] = ref

    def stmt_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.fail(s, "`while ... else` is not supported", "while-else")
        # A name the test reads is carried even if the body only writes it.
        locals_ = {n for n in self.block_locals(s.body, loop=True) if not reads(s.test, n)}
        self.materialize_carried(s.body, s, locals_, bools=True)
        self.scopes.append(_Scope("loop", locals_))
        cond = self.b.push()
        test = self.while_test(s)
        self.b.pop()
        if test is False:  # `while False:` never runs (cuTile Python folds the constant condition)
            self.scopes.pop()
            return
        body = self.b.push()
        self.block(s.body, s)
        self.b.pop()
        self.end_scope()
        self.b.emit(While(cond, test, body, self.loc(s), self.outer_updates(cond, body)))

    def while_test(self, s: ast.While) -> Atom | None | bool:
        """The loop's scalar condition, evaluated in the current (condition) block; None for a constant
        true condition, False for a constant false one."""
        test = self.expr(s.test)
        if isinstance(test, CV) and any(reads(s.test, n) for n in assigned(s.body)):
            # never folded: the body changes what the test reads (folding would loop forever or never)
            raise self.fail(s.test, "the `while` condition is a compile-time value that the body reassigns",
                            "while", "start the loop variables from runtime values")
        if isinstance(test, CV) and not isinstance(test.value, (Sym, T.DimOp)):
            return None if test.value else False
        if isinstance(test, CV):
            raise NeedsSpecialization(frozenset(sym_names(test.value)), "a `while` on a constant", self.loc(s))
        if not (isinstance(test, Ref) and (isinstance(test.ty, ScalarT) or test.ty.rank == 0)):
            raise self.fail(s.test, "a `while` condition must be a scalar", "while")
        return self.scalar_condition(test, s.test)

    def stmt_If(self, s: ast.If) -> None:
        before = len(self.b.blocks[-1].stmts)
        cond = self.expr(s.test)
        if isinstance(cond, CV) and not isinstance(cond.value, (Sym, T.DimOp)):
            self.block(s.body if cond.value else s.orelse, s)  # folded, as cuTile Python folds it
            return
        if isinstance(cond, CV):
            raise NeedsSpecialization(frozenset(sym_names(cond.value)), "a branch on a constant", self.loc(s))
        if isinstance(cond, self.calls.DTypeCond):
            raise self.fail(s.test, "a branch on an element dtype that differs between configurations", "dtype",
                            "choose the dtype with a conditional expression, or translate one dtype per "
                            "configuration (--config)")
        if not (isinstance(cond, Ref) and (isinstance(cond.ty, ScalarT) or cond.ty.rank == 0)):
            raise self.fail(s.test, "an `if` condition must be a scalar", "if")
        cond = self.scalar_condition(cond, s.test)
        defined = sorted(n for n in assigned(s.body) & assigned(s.orelse)
                         if self._owner(n) is None and self.frames.live_after(n))
        if defined:
            self.if_defining(cond, s, defined)
            return
        branches = []
        for stmts in (s.body, s.orelse):
            self.scopes.append(_Scope("if", self.block_locals(stmts, loop=False)))
            blk = self.b.push()
            self.block(stmts, s)
            self.b.pop()
            self.end_scope()
            branches.append(blk)
        if not any(blk.stmts for blk in branches):
            del self.b.blocks[-1].stmts[before:]  # an `if` that does nothing: cuTile Python drops it, condition too
            return
        self.b.emit(If(cond, branches[0], branches[1], self.loc(s), self.outer_updates(*branches)))

    def if_defining(self, cond: Ref, s: ast.If, names: list[str]) -> None:
        """An `if` on a runtime value whose branches both define a new variable read afterwards: an `if` with
        that variable as its result, as cuTile yields it (`res = a` / `res = b` -> `let res = if c {..; a}
        else {..; b};`)."""
        if len(names) > 1:
            self.if_defining_several(cond, s, names)
            return
        name = names[0]

        def arm(stmts):
            def lower() -> Value:
                self.block(stmts, s)
                if name not in self.scopes[-1].vars:
                    raise self.fail(stmts[0], f"`{name}` is defined in both branches of the `if` but not in "
                                              "this branch's own statements", "if",
                                    f"assign `{name}` before the `if`")
                return self.scopes[-1].vars[name]
            return lower
        ref = self.branch_value(cond, [(s.body[0], arm(s.body)), (s.orelse[0], arm(s.orelse))], s)
        self.assign(name, ref, s)

    def if_defining_several(self, cond: Ref, s: ast.If, names: list[str]) -> None:
        """Both branches define several new variables read after the `if` (cuTile yields each from it;
        cutile-rs yields no tuple from an `if`, only the variables its branches assign): each is declared
        before the `if` as a zero of its type, which no path reads (both branches assign it), and each
        branch assigns it its value as the common type."""
        arms = []
        for stmts in (s.body, s.orelse):
            scope = _Scope("if", self.block_locals(stmts, loop=False))
            self.scopes.append(scope)
            blk = self.b.push()
            bound = self.b.scope_names[-1]
            try:
                self.block(stmts, s)
                missing = [n for n in names if n not in scope.vars]
                if missing:
                    raise self.fail(stmts[0], f"`{missing[0]}` is defined in both branches of the `if` but not "
                                              "in this branch's own statements", "if",
                                    f"assign `{missing[0]}` before the `if`")
                values = [self.calls.materialize(self, scope.vars[n], s) for n in names]
            finally:
                self.b.pop()
                self.scopes.pop()
            arms.append((scope, blk, bound, values))
        types = [self.calls.common_value_type(self, a, b, s) for a, b in zip(arms[0][3], arms[1][3])]
        declared = [self.declare_zero(n, ty, s, arms[0][2] | arms[1][2]) for n, ty in zip(names, types)]
        loc = self.loc(s)
        for scope, blk, bound, values in arms:
            self.scopes.append(scope)
            self.b.resume(blk, bound)
            for ref, value in zip(declared, values):
                atom = self.calls.as_type(self, value, ref.ty, s)
                self.b.emit(Let(ref.name, Op(OpKind.COPY, (atom,), ref.ty, loc), update=True))
            self.b.pop()
            self.scopes.pop()
        self.b.emit(If(cond, arms[0][1], arms[1][1], loc, self.outer_updates(arms[0][1], arms[1][1])))
        for name, ref in zip(names, declared):
            self.scopes[-1].vars[name] = ref

    def declare_zero(self, name: str, ty, s: ast.If, taken: set[str]) -> Ref:
        """`let mut <name> = 0` of type `ty`, named apart from `taken` (names the branches bind: a branch's
        own `name` would take its assignment)."""
        if not isinstance(ty, (ScalarT, T.TileT)):
            raise self.fail(s, f"both branches of this `if` define `{name}`, read after it, as a value that is "
                               "no scalar or tile", "if", f"assign `{name}` before the `if`")
        dtype = ty.dtype
        zero = Lit(False if dtype == "bool" else 0.0 if self.b.is_float(dtype) else 0, ScalarT(dtype))
        loc, outer = self.loc(s), self.b.scope_names[-1]
        hidden = taken - outer
        outer |= hidden
        try:
            rust_name = self.b.fresh(name)
        finally:
            outer -= hidden
        ref = self.b.to_tile(zero, dtype, ty.shape, loc) if isinstance(ty, T.TileT) else \
            self.b.value(OpKind.SCALAR, (zero,), ty, loc, hint=name)
        self._bind_new(rust_name, ref)
        return Ref(rust_name, ty)

    def outer_updates(self, *blocks: Block) -> tuple[str, ...]:
        """Variables of the enclosing blocks that `blocks` (just closed) reassign, sorted."""
        outside = self.b.scope_names_outside()
        return tuple(sorted({st.name for blk in blocks for st in walk(blk)
                             if isinstance(st, Let) and st.update and st.name in outside}))

    # ---- helpers
    def inline(self, fn: ast.FunctionDef, call: ast.Call, module: ScannedModule | None = None) -> Value:
        if self.inline_depth > 16:
            raise self.fail(call, f"helper `{fn.name}` is recursive (or nested too deeply)", "recursion",
                            "kernels and helpers cannot recurse")
        self.inlined += 1
        if self.inlined > MAX_INLINED_CALLS:
            raise self.fail(call, f"helper calls expand to more than {MAX_INLINED_CALLS} inlined bodies", "size",
                            "call helpers fewer times (each call is inlined), or split the kernel")
        params = [a.arg for a in fn.args.args]
        defaults = fn.args.defaults
        bound: dict[str, Value] = {}
        if len(call.args) > len(params):
            raise self.fail(call, f"`{fn.name}` takes {len(params)} arguments", "call")
        for name, a in zip(params, call.args):
            bound[name] = self.expr(a)
        for kw in call.keywords:
            if kw.arg not in params:
                raise self.fail(kw, f"`{fn.name}` has no parameter `{kw.arg}`", "call")
            bound[kw.arg] = self.expr(kw.value)
        for name, d in zip(params[len(params) - len(defaults):], defaults):
            bound.setdefault(name, self.expr(d))
        missing = [p for p in params if p not in bound]
        if missing:
            raise self.fail(call, f"missing argument(s) {', '.join(missing)} for `{fn.name}`", "call")
        body = fn.body
        ret = body[-1] if body and isinstance(body[-1], ast.Return) else None
        if any(isinstance(n, ast.Return) for st in (body[:-1] if ret else body) for n in ast.walk(st)):
            raise self.fail(call, f"helper `{fn.name}` may only return at its end", "return")
        scope = _Scope("fn")
        scope.vars.update(bound)
        self.scopes.append(scope)
        self.inline_depth += 1
        self.inline_calls.append(call)
        saved_sm, saved_path = self.sm, self.path
        if module is not None:  # an imported helper sees its own module's names, and reports its own file
            self.sm, self.path = module, module.path
        try:
            self.block(body[:-1] if ret else body, fn)
            result = self.expr(ret.value) if ret and ret.value is not None else CV(None)
        finally:
            self.sm, self.path = saved_sm, saved_path
            self.inline_depth -= 1
            self.inline_calls.pop()
            self.scopes.pop()
        return result
