"""How a Triton port's memory operations reach memory: the path of its loads/stores and the order of its atomics.

Both rules give the port the machine code Triton's own compiler emits for the same source (SASS for sm_90, both
compiled on the CPU; docs/triton-performance.md has the numbers):

| source | Triton emits | the port, without the rule | rule |
|---|---|---|---|
| `tl.load`/`tl.store` through pointers or a block pointer, outside loops, in a kernel without `tl.dot` | `LDG.E.128`/`STG.E.128` into registers | TMA (`UTMALDG`/`UTMASTG`) through shared memory, a producer warp and mbarrier waits | `allow_tma = false` |
| `tl.atomic_*` whose ordering no thread can observe | one fence per vector atomic (`ATOMG.E.ADD.F32x4`, `BF16x8`) | a fence per element (`MEMBAR.ALL.GPU` + `CCTL.IVALL` + `ERRBAR`), f16/bf16 through a CAS loop | `memory_order = relaxed` (`REDG`, packed f16/bf16) |

Loads/stores: Triton compiles pointer accesses (and block pointers) to plain global loads and stores; only
tensor descriptors use TMA. tileiras, left to choose, stages a partition-view tile through TMA. That pays where
the tile feeds the tensor cores from shared memory (kernels with `tl.dot` keep tileiras' choice) and where a
loop lets tileiras fetch the next tile while the block computes on this one (Liger's backward norms, which loop
over rows, run at or below Triton's time with TMA: loop accesses keep it). An access a tile block makes once
only pays the shared-memory round trip, the producer warp's setup and the barrier wait: a norm, softmax or
activation row per block ran 1.17-1.22x Triton's time. Tensor-descriptor accesses keep TMA, as Triton's do.

Atomics: Triton's default `sem` is acq_rel; the order it adds to the atomic itself (which stays atomic when
relaxed) is observable only by a thread that reads what another thread of the launch wrote. A kernel that
uses no atomic's result and reads (loads, gathers) no array it writes (stores, scatters, atomics) has no such
thread, so each atomic whose scope is the device or the block is relaxed: the end of the launch orders
everything for every later reader. Arrays are taken as distinct (no launch passes one buffer as two parameters
that it both writes and reads) and no other kernel reads them while this one runs; a `sys`-scoped atomic, which
says another agent may watch, keeps its order.
"""

from __future__ import annotations

import dataclasses

from tileport.frontends.triton.occupancy import has_mma
from tileport.model.ir import Block, Do, For, If, Kernel, Let, Op, Ref, While, walk
from tileport.model.ops import OpKind

ATOMICS = (OpKind.ATOMIC_RMW, OpKind.ATOMIC_CAS)
READS = (OpKind.LOAD, OpKind.GATHER)
WRITES = (OpKind.STORE, OpKind.SCATTER, *ATOMICS)
RELAXABLE_SCOPES = ("device", "block")


def _with(op: Op, **attrs) -> Op:
    kept = tuple((k, attrs.pop(k, v)) for k, v in op.attrs)
    return dataclasses.replace(op, attrs=kept + tuple(attrs.items()))


def _ops(kernel: Kernel):
    """(statement, op) of every operation in the kernel."""
    for s in walk(kernel.body):
        if isinstance(s, (Let, Do)):
            yield s, s.op


def _array(op: Op) -> str:
    return op.attr("array") or op.args[0].name


def _used_names(kernel: Kernel) -> set[str]:
    """Every variable an operation or a control statement reads."""
    used: set[str] = set()
    for s in walk(kernel.body):
        atoms: tuple = ()
        if isinstance(s, (Let, Do)):
            atoms = s.op.args
        elif isinstance(s, For):
            atoms = (s.start, s.stop, s.step)
        elif isinstance(s, While):
            atoms = (s.test,)
        elif isinstance(s, If):
            atoms = (s.cond,)
        used |= {a.name for a in atoms if isinstance(a, Ref)}
    return used


def _outside_loops(block: Block):
    """Every statement of a block that no loop repeats (branches are entered, loop bodies are not)."""
    for s in block.stmts:
        yield s
        if isinstance(s, If):
            yield from _outside_loops(s.then)
            yield from _outside_loops(s.orelse)


def register_accesses(kernel: Kernel) -> None:
    """Pointer and block-pointer loads/stores outside loops, in a kernel without a matrix multiply: no TMA."""
    if has_mma(kernel):
        return
    for s in _outside_loops(kernel.body):
        if isinstance(s, (Let, Do)) and s.op.kind in (OpKind.LOAD, OpKind.STORE) and s.op.attr("allow_tma") is None:
            s.op = _with(s.op, allow_tma=False)


def atomics_unobserved(kernel: Kernel) -> bool:
    """No thread of a launch can read what another wrote: no atomic's result is used and no written array is read."""
    ops = list(_ops(kernel))
    used = _used_names(kernel)
    if any(isinstance(s, Let) and s.name in used for s, op in ops if op.kind in ATOMICS):
        return False
    written = {_array(op) for _, op in ops if op.kind in WRITES}
    return not any(_array(op) in written for _, op in ops if op.kind in READS)


def relax_atomics(kernel: Kernel) -> None:
    """Atomics whose order no thread can observe: relaxed (see module doc)."""
    atomics = [(s, op) for s, op in _ops(kernel) if op.kind in ATOMICS]
    if not atomics or not atomics_unobserved(kernel):
        return
    relaxed = 0
    for s, op in atomics:
        if op.attr("memory_scope") in RELAXABLE_SCOPES and op.attr("memory_order") != "relaxed":
            s.op = _with(op, memory_order="relaxed")
            relaxed += 1
    if relaxed:
        kernel.notes.append(f"{relaxed} atomic(s) relaxed: no atomic result is used and no array the kernel writes "
                            "is read by it, so no thread of the launch can observe their order")


def apply(kernels: list[Kernel]) -> None:
    for k in kernels:
        register_accesses(k)
        relax_atomics(k)


__all__ = ["apply", "register_accesses", "relax_atomics", "atomics_unobserved"]
