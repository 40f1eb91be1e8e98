"""The Triton kernel visitor's statements: assignments, `for`/`while`/`if` (loop-carried values, pointer
increments, branch joins), `return`/`break`/`continue`, and the inlining of `@triton.jit` helpers.
"""

from __future__ import annotations

import ast
from typing import Any, Sequence

from tileport.diagnostics import NeedsSpecialization
from tileport.frontends.liveness import assigned, exposed_read
from tileport.frontends.triton import affine as A
from tileport.frontends.triton.expressions import BINOPS
from tileport.frontends.triton.scan import TritonModule, dotted
from tileport.frontends.triton.values import CV, BlockPtr, Builtin, Chosen, Gone, Method, Ptr
from tileport.model.builder import lit_dtype
from tileport.model.ir import (Atom, Block, Break, CDim, Continue, For, If, Let, Lit, Op, Ref, Return, While, sym_names,
                               walk)
from tileport.model.ops import OpKind
from tileport.model.types import ArrayT, DimOp, ScalarT, Sym, TileT

MAX_INLINE_DEPTH = 16


class Scope:
    def __init__(self, kind: str):
        self.kind = kind
        self.vars: dict[str, Any] = {}


class ControlFlowMixin:
    """`stmt_<Node>` methods of `TritonLowerer` and what they share: blocks, loops, branches, helpers."""

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
        back = _negative_step(step)
        first = start
        if back is not None:  # Rust ranges step forwards: the loop counts iterations, its variable steps back
            start, stop, step = CDim(0), self.backward_trips(first, stop, back, s), CDim(1)
        incs = self.pointer_increments(s)
        nested = self.nested_increments(s, incs)
        self.materialize_carried(s)
        fresh = self.fresh_pointers(s)
        self.scopes.append(Scope("loop"))
        self.b.push()
        index = self.b.fresh(s.target.id if back is None else f"{s.target.id}_iter")
        self.forget(index)
        ref = Ref(index, ScalarT("i32"))
        self.scopes[-1].vars.update({name: Gone(name) for name in fresh})
        self.track_scalar(ref)
        iteration = self.loop_iteration(ref, start, step, s)
        self.scopes[-1].vars[s.target.id] = ref if back is None else self.stepped_back(first, back, ref, s)
        for name, (p0, inc, st) in incs.items():
            self.scopes[-1].vars[name] = self.memory.advanced(self, p0, inc, iteration, s)
            # after the increment statement, the rest of the body sees the next iteration's pointer
            self.skip[id(st)] = (lambda name=name, p0=p0, inc=inc, st=st: self.scopes[-1].vars.__setitem__(
                name, self.memory.advanced(self, p0, inc, A.add(iteration, A.const(1)), st)))
        for name, (p0, inc) in nested.items():
            self.scopes[-1].vars[name] = self.memory.advanced(self, p0, inc, iteration, s)
        self.block(s.body)
        body = self.b.pop()
        self.scopes.pop()
        for name in [*incs, *nested, *fresh]:
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
        if isinstance(step, (CDim, Lit)) and getattr(step, "dim", getattr(step, "value", None)) == 0:
            raise self.fail(it, "range() step must not be zero", "for")
        return start, stop, step, None

    def backward_trips(self, start: Atom, stop: Atom, k: int, node: ast.AST) -> Ref:
        """The iterations of `range(start, stop, -k)`: `(start - stop + k - 1) // k` (none where negative)."""
        span = self.int_binary("sub", start, stop, node, "span")
        return self.int_binary("floordiv", self.int_binary("add", span, Lit(k - 1, ScalarT("i32")), node, "span"),
                               Lit(k, ScalarT("i32")), node, "trips")

    def stepped_back(self, start: Atom, k: int, i: Ref, node: ast.For) -> Ref:
        """The variable of `range(start, stop, -k)` in iteration `i`: `start - k * i`."""
        out = self.int_binary("sub", start, self.int_binary("mul", Lit(k, ScalarT("i32")), i, node, "back"), node,
                              node.target.id)
        start_p = self.atom_poly(start)
        self.track_scalar(out)
        if start_p is not None:
            self.poly[out.name] = A.sub(start_p, A.mul(A.const(k), A.factor(("v", i.name))))
        return out

    def int_binary(self, op: str, a: Atom, b: Atom, node: ast.AST, hint: str) -> Ref:
        return self.b.value(OpKind.BINARY, (a, b), ScalarT("i32"), self.loc(node), hint=hint, op=op, rounding=None,
                            ftz=None, nan=None)

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
        for st in self.top_statements(s.body):
            name, inc_node = _increment(st)
            if name is None or name in out:
                continue
            owner = self.owner(name)
            cur = self.scopes[owner].vars.get(name) if owner is not None else None
            if not isinstance(cur, (Ptr, BlockPtr)):
                continue
            if any(sc.kind == "loop" for sc in self.scopes[owner + 1:]):
                # an enclosing loop carries the pointer on from one of its iterations to the next, but has
                # not modelled where each of its iterations starts (nested_increments)
                raise self.fail(st, f"pointer `{name}` advances in a nested loop and the enclosing loop carries "
                                "it on, in a way that cannot be modelled", "pointer",
                                "advance it only at the top of nested range loops (no break/continue, bounds and "
                                "step that the enclosing loops do not change), or recompute it from the indices")
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

    def nested_increments(self, s: ast.For, incs: dict) -> dict[str, tuple[Any, Any]]:
        """Pointers that range loops nested in the body advance and the body never resets (`for i: for j:
        p += step`): each iteration of `s` starts where the previous one left the pointer, so `s` models
        them as advancing by the nested loops' trip counts times the step per iteration. (initial pointer,
        that advance) per name, computed before the loop."""
        varying = assigned(s.body) | _loop_targets(s)
        out = {}
        for name in sorted(assigned(s.body) - incs.keys()):
            owner = self.owner(name)
            p0 = self.scopes[owner].vars.get(name) if owner is not None else None
            if not isinstance(p0, (Ptr, BlockPtr)) or not exposed_read(s.body, name):
                continue
            chain = self.increment_chain(s.body, name)
            if chain is None:
                continue  # moved in another way: a diagnostic where it moves
            loops, st, inc_node = chain
            if any(isinstance(n, ast.Name) and n.id in varying
                   for head in [*(lp.iter for lp in loops), inc_node] for n in ast.walk(head)):
                continue  # the advance changes from one iteration of `s` to the next: diagnosed at the increment
            amount = self.expr(inc_node)
            for lp in loops:
                amount = self.scaled(amount, self.trip_count(lp.iter), st)
            out[name] = (p0, amount)
        return out

    def increment_chain(self, stmts: list[ast.stmt], name: str):
        """(the range loops from the outermost in, the increment statement, its amount) when the only
        assignment of `name` in `stmts` is `name += amount` at the top of nested loops that neither
        `break` nor `continue`; None otherwise."""
        holders = [st for st in self.top_statements(stmts) if name in assigned([st])]
        if len(holders) != 1 or not isinstance(holders[0], ast.For):
            return None
        loop = holders[0]
        if any(isinstance(n, (ast.Break, ast.Continue)) for n in _same_loop(loop.body)):
            return None
        inner = [st for st in self.top_statements(loop.body) if name in assigned([st])]
        target, inc_node = _increment(inner[0]) if len(inner) == 1 else (None, None)
        if target == name:
            return [loop], inner[0], inc_node
        deeper = self.increment_chain(loop.body, name)
        return None if deeper is None else ([loop, *deeper[0]], deeper[1], deeper[2])

    def trip_count(self, it: ast.expr) -> Any:
        """How many times a range loop runs: max(cdiv(stop - start, step), 0)."""
        _start, _stop, _step, static = self.loop_bounds(it)
        if static is not None:
            return CV(len(static))
        v = [self.expr(a) for a in it.args]
        start, stop, step = (CV(0), v[0], CV(1)) if len(v) == 1 else (v[0], v[1], v[2] if len(v) == 3 else CV(1))
        span = stop if _is(start, 0) else self.calls.binary(self, "-", stop, start, it)
        count = span if _is(step, 1) else self.calls.binary(self, "cdiv", span, step, it)
        return self.calls.binary(self, "max", count, CV(0), it)

    def scaled(self, amount: Any, count: Any, node: ast.AST) -> Any:
        """A pointer increment (an offset, or a block pointer's offsets) times `count`."""
        if isinstance(amount, tuple):
            return tuple(self.calls.binary(self, "*", d, count, node) for d in amount)
        return self.calls.binary(self, "*", amount, count, node)

    def top_statements(self, stmts: list[ast.stmt]):
        """The statements at the top level of a block, through `if FLAG:` / `if not FLAG:` on compile-time
        values (folded: `if USE_G: p_g += H` advances `p_g` at the top of the loop body)."""
        for st in stmts:
            test = st.test.operand if isinstance(st, ast.If) and isinstance(st.test, ast.UnaryOp) \
                and isinstance(st.test.op, ast.Not) else getattr(st, "test", None)
            if isinstance(st, ast.If) and isinstance(test, ast.Name):
                v = self.expr(test)  # a name: nothing is computed
                if isinstance(v, CV) and not isinstance(v.value, (Sym, DimOp)):
                    taken = bool(v.value) != (test is not st.test)
                    yield from self.top_statements(st.body if taken else st.orelse)
                    continue
            yield st

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
            both = all(isinstance(v, (Ptr, Chosen)) for v in values)  # a pointer after the `if`
            if not any(isinstance(v, (Ptr, Chosen)) for v in values) or owner is None and not tests_constexpr \
                    and not both:
                continue
            if owner is None:
                arrays = {v.array.name: v.array for v in values if isinstance(v, Ptr)}
                if len(arrays) != 1 or not all(isinstance(v, Ptr) or v is None for v in values):
                    if both:  # read after the `if`: a located diagnostic
                        self.scopes[-1].vars[name] = Chosen(name, node.lineno)
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


def _same_loop(stmts):
    """Nodes of a loop body, not descending into nested loops."""
    for st in stmts:
        yield st
        if not isinstance(st, (ast.For, ast.While)):
            for child in ast.iter_child_nodes(st):
                if isinstance(child, ast.stmt):
                    yield from _same_loop([child])


def _is(v: Any, n: int) -> bool:
    return isinstance(v, CV) and type(v.value) is int and v.value == n


def _loop_targets(s: ast.For) -> set[str]:
    """The names the loop and the loops nested in it count with."""
    return {n.id for lp in ast.walk(s) if isinstance(lp, ast.For)
            for n in ast.walk(lp.target) if isinstance(n, ast.Name)}


def _increment(st: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """(name, increment expression) of `p += e`, `p = p + e` or `p = tl.advance(p, e)`; `p -= e` and
    `p = p - e` (a pointer walked backwards) increment by `-e`."""
    if isinstance(st, ast.AugAssign) and isinstance(st.op, (ast.Add, ast.Sub)) and isinstance(st.target, ast.Name):
        return st.target.id, _signed(st.value, st.op)
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        name, v = st.targets[0].id, st.value
        if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub)) and isinstance(v.left, ast.Name) \
                and v.left.id == name:
            return name, _signed(v.right, v.op)
        if isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("advance") and len(v.args) == 2 \
                and isinstance(v.args[0], ast.Name) and v.args[0].id == name:
            return name, v.args[1]
    return None, None


def _negative_step(step: Atom) -> int | None:
    """k of a constant step -k < 0, else None."""
    value = step.dim if isinstance(step, CDim) else step.value if isinstance(step, Lit) else None
    return -value if type(value) is int and value < 0 else None


def _signed(e: ast.expr, op: ast.operator) -> ast.expr:
    """The step `e` of an increment by `op`: `-e` for a subtraction, located at `e`."""
    return e if isinstance(op, ast.Add) else ast.copy_location(ast.UnaryOp(ast.USub(), e), e)


def _target_names(st: ast.stmt) -> set[str]:
    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
