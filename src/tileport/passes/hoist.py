"""Move loop-invariant pure operations in front of their loop, as cuTile Python does.

cuTile Python hoists loop invariants (constants, broadcasts, casts of values defined outside the
loop); the ports must compute the same operations in the same places, or per-iteration op counts
differ in the IR diff.
"""

from __future__ import annotations

from tileport.model.ir import Block, For, If, Kernel, Let, Op, Ref, While, walk
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.passes.uses import atoms_of, taken_names

# Operations without memory effects; everything else stays where the source put it.
PURE = {OpKind.FULL, OpKind.SPLAT, OpKind.BROADCAST, OpKind.RESHAPE, OpKind.ASTYPE, OpKind.BINARY,
        OpKind.COMPARE, OpKind.UNARY, OpKind.SELECT, OpKind.ARANGE, OpKind.PERMUTE, OpKind.ARRAY_DIM,
        OpKind.ARRAY_STRIDE, OpKind.SCALAR, OpKind.COPY, OpKind.FMA, OpKind.REDUCE, OpKind.MMA,
        OpKind.NUM_TILES, OpKind.TILE0, OpKind.PTR_BASE, OpKind.PTR_OFFSET, OpKind.PTR_CAST, OpKind.EXTRACT,
        OpKind.SCALAR_OF, OpKind.CAT, OpKind.BITCAST, OpKind.FPOWI, OpKind.SCAN_SUM, OpKind.VIEW_OFFSET,
        OpKind.ASSUME_DIV_BY, OpKind.MAKE_VIEW}


def hoist_invariants(kernel: Kernel, naming: Naming) -> int:
    moved = 0
    taken = taken_names(kernel)

    def visit(block: Block) -> None:
        nonlocal moved
        out = []
        for st in block.stmts:
            if isinstance(st, (For, While)):
                for inner in _loop_blocks(st):
                    visit(inner)
                hoisted = _hoist_from(st, lambda base: naming.fresh(base, taken))
                moved += len(hoisted)
                out.extend(hoisted)
            elif isinstance(st, If):
                visit(st.then)
                visit(st.orelse)
            out.append(st)
        block.stmts[:] = out

    visit(kernel.body)
    return moved


def _loop_blocks(loop: For | While) -> tuple[Block, ...]:
    """The blocks a loop runs every iteration, in order (a while loop's condition, then its body)."""
    return loop.blocks if isinstance(loop, While) else (loop.body,)


def _hoist_from(loop: For | While, fresh) -> list[Let]:
    """Invariant lets of the loop's blocks (top level), in order; removed from them."""
    lets = [st for blk in _loop_blocks(loop) for st in walk(blk) if isinstance(st, Let)]
    updated = {st.name for st in lets if st.update}
    # Every variable the body reassigns, at any depth, changes across iterations.
    variant = {*loop.carried, *updated} | ({loop.index} if isinstance(loop, For) else set())
    hoisted: list[Let] = []
    for blk in _loop_blocks(loop):
        _hoist_block(blk, lets, updated, variant, hoisted, fresh)
    return hoisted


def _hoist_block(block: Block, lets: list[Let], updated: set[str], variant: set[str], hoisted: list[Let],
                 fresh) -> None:
    # A name bound twice in the body (shadowing) stays put: hoisting one binding would reorder them.
    bindings = [st.name for st in lets if not st.update]
    rebound = {name for name in bindings if bindings.count(name) > 1}
    kept = []
    for st in block.stmts:
        if (isinstance(st, Let) and not st.update and st.op.kind in PURE and st.name not in rebound
                and not any(isinstance(a, Ref) and a.name in variant for a in atoms_of(st))):
            if st.name not in updated:
                hoisted.append(st)
                continue
            if st.op.kind != OpKind.COPY:
                # The initial value of a variable the body then updates (an accumulator): compute it
                # once before the loop, and start each iteration from a copy of it.
                temp = fresh(f"{st.name}_init")
                hoisted.append(Let(temp, st.op))
                st = Let(st.name, Op(OpKind.COPY, (Ref(temp, st.op.ty),), st.op.ty, st.op.loc))
        kept.append(st)
        for inner in _defined_names(st):
            variant.add(inner)
    block.stmts[:] = kept


def _defined_names(st) -> set[str]:
    """Names `st` binds or reassigns, nested blocks included."""
    return {s.name for s in walk(Block([st])) if isinstance(s, Let)}
