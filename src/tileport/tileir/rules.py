"""The severity table: category -> rule -> severity, owner and a one-line action.

The IR diff's severity model: CRITICAL where the port
computes something else or loses a performance property the reference has; WARN for known
harmless-but-visible differences; INFO for noise. Every finding the diff makes names one row
here (docs/tileir.md renders this table; a test checks both stay in sync).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    CRITICAL = "CRITICAL"
    WARN = "WARN"
    INFO = "INFO"


class Status(StrEnum):
    MATCH = "MATCH"
    SEMANTIC_EQUIV = "SEMANTIC_EQUIV"
    DIFFERS = "DIFFERS"
    MISSING = "MISSING"   # in the reference, not in the generated program
    EXTRA = "EXTRA"       # in the generated program, not in the reference


class Owner(StrEnum):
    KERNEL = "kernel"     # the cutile-rs device code (pipeline stage B)
    HOST = "host"         # the launcher / C ABI / JIT specialization (pipeline stage D)


@dataclass(frozen=True)
class Rule:
    category: str
    rule: str
    severity: Severity
    owner: Owner
    action: str


C, W, I = Severity.CRITICAL, Severity.WARN, Severity.INFO
K, H = Owner.KERNEL, Owner.HOST

_TABLE: tuple[Rule, ...] = (
    # memory ops
    Rule("memory_family", "family_changed", C, K,
         "Use the reference's access family: a view load/store (TMA-capable) vs a pointer gather/scatter."),
    Rule("memory_count", "missing", C, K, "Add the load/store the reference performs."),
    Rule("memory_count", "extra", C, K, "Remove the load/store the reference does not perform."),
    Rule("memory_hints", "allow_tma", C, K, "Set allow_tma on this load/store like the reference."),
    Rule("memory_hints", "latency", W, K, "Pass the reference's latency hint to this load/store."),
    Rule("memory_order", "waits_differ", W, K,
         "Thread memory tokens as the reference does: this load/store is ordered after other operations."),
    Rule("memory_hints", "other_hint", W, K, "Align this load/store's optimization hints with the reference."),
    Rule("memory_semantics", "ordering", C, K, "Use the reference's memory ordering and scope."),
    Rule("memory_semantics", "inbounds", C, K, "Match the reference's bounds checking (inbounds)."),
    Rule("memory_semantics", "mask", C, K, "Mask this pointer access like the reference."),
    Rule("memory_semantics", "tensor", C, K, "Access the same tensor parameter as the reference."),
    Rule("memory_semantics", "atomic_mode", C, K, "Use the reference's atomic operation."),
    # views and shapes
    Rule("partition_view", "padding", C, K, "Use the reference's padding value for this partition."),
    Rule("partition_view", "padding_refined", I, K,
         "None: the port pads where the reference leaves out-of-bounds elements undetermined."),
    Rule("partition_view", "dim_map", C, K, "Use the reference's dimension order (dim_map) for this partition."),
    Rule("partition_view", "layout", C, K,
         "Use the reference's view layout (gather/scatter sparse dim, strided-view traversal strides)."),
    Rule("partition_view", "tensor_view", C, H,
         "Specialize the tensor like the reference (static shape/stride pattern, e.g. unit last stride)."),
    Rule("index", "differs", C, K,
         "Address the reference's elements: port its index expression (block ids, loop variables, offsets)."),
    Rule("tile_shape", "shape", C, K, "Use the reference's tile shape."),
    Rule("tile_shape", "unit_dims", I, K, "None: the shapes differ only by size-1 dimensions."),
    Rule("dtype", "elem_type", C, K, "Use the reference's element type here."),
    # compute
    Rule("reduction", "axis", C, K, "Reduce along the reference's axis."),
    Rule("reduction", "identity", C, K, "Use the reference's reduction identity."),
    Rule("reduction", "combiner", C, K, "Use the reference's combiner (op and flags)."),
    Rule("reduction", "operands", C, K, "Reduce the same number and types of operands as the reference."),
    Rule("reduction", "reverse", C, K, "Scan in the reference's direction."),
    Rule("reduction", "missing", C, K, "Add the reduction the reference performs."),
    Rule("reduction", "extra", C, K, "Remove the reduction the reference does not perform."),
    Rule("mma", "operand_type", C, K, "Feed the MMA the reference's operand types."),
    Rule("mma", "accumulator_type", C, K, "Accumulate in the reference's type (e.g. f32)."),
    Rule("mma", "flags", C, K, "Use the reference's MMA flags (fast_acc, signedness)."),
    Rule("mma", "kind", C, K, "Use the reference's MMA kind (mmaf / mmai / scaled)."),
    Rule("mma", "missing", C, K, "Add the MMA the reference performs."),
    Rule("mma", "extra", C, K, "Remove the MMA the reference does not perform."),
    Rule("precision", "narrower", C, K,
         "Compute in the reference's element type: this op works in a narrower type (cast before, not after)."),
    Rule("precision", "other_type", W, K, "Check the op may compute in another element type than the reference."),
    Rule("math", "rounding", C, K, "Use the reference's rounding mode (e.g. rounding<approx>)."),
    Rule("math", "flush_to_zero", C, K, "Set flush_to_zero like the reference."),
    Rule("math", "propagate_nan", C, K, "Set propagate_nan like the reference."),
    Rule("math", "predicate", C, K, "Use the reference's comparison predicate / ordering."),
    Rule("math", "signedness", C, K, "Use the reference's signedness."),
    Rule("math", "overflow", W, K, "Use the reference's integer overflow flags."),
    Rule("math", "special_count", C, K,
         "Use as many special-function ops (exp, exp2, rsqrt, fma, ...) as the reference."),
    Rule("math", "dataflow", C, K,
         "An input of this op is computed differently from the reference; port the reference's expression."),
    Rule("math", "arith_count", C, K, "The arithmetic differs from the reference; port the reference's."),
    Rule("math", "arith_count_small", W, K, "Check the few extra/missing arithmetic ops are a known workaround."),
    Rule("math", "semantic_equiv", I, K, "None: equivalent spelling (see the SEMANTIC_EQUIV table)."),
    Rule("cast", "differs", C, K, "Cast like the reference (types, rounding, signedness)."),
    Rule("cast", "missing", C, K, "Add the reference's cast."),
    Rule("cast", "extra", C, K, "Remove the cast the reference does not have."),
    Rule("cast", "not_needed", I, K, "None: the value already has the cast's type (see the finding upstream)."),
    # control flow
    Rule("loop", "missing", C, K, "Add the loop the reference has."),
    Rule("loop", "extra", C, K, "Remove the loop the reference does not have."),
    Rule("loop", "bounds", C, K, "Use the reference's loop bounds."),
    Rule("loop", "step", C, K, "Use the reference's loop step."),
    Rule("loop", "iter_values", C, K, "Carry the same values through the loop as the reference."),
    Rule("loop", "nesting", C, K, "Nest the loops like the reference."),
    Rule("loop", "placement", C, K, "Keep this op inside/outside the loop like the reference."),
    Rule("loop", "unsigned_cmp", C, K, "Compare the loop bounds with the reference's signedness."),
    # entry
    Rule("entry_hints", "perf_hint", C, K,
         "Set the entry hint (occupancy / num_cta_in_cga / num_worker_warps_per_cta) like the reference."),
    Rule("entry_hints", "other_hint", W, K, "Align the entry optimization hints with the reference."),
    Rule("entry_hints", "semantic_equiv", I, K, "None: same hints under another key (default vs sm_XX)."),
    Rule("memory_hints", "semantic_equiv", I, K, "None: same hints under another key (default vs sm_XX)."),
    Rule("signature", "tensor_count", C, H, "Pass the same tensor parameters as the reference."),
    Rule("signature", "scalar_args", I, H,
         "None for the IR: the calling conventions pass other scalars (the launcher follows the port's ABI)."),
    Rule("signature", "shape_args", I, H,
         "None for the IR: the port passes another set of tensor shapes/strides (static in one program)."),
    Rule("signature", "scalar_type", W, H, "A runtime scalar has another type: check the launcher's ABI."),
    Rule("signature", "name", I, H, "None: entry symbols differ (mangling)."),
    Rule("function", "missing", C, K, "Generate the reference's kernel entry."),
    Rule("function", "extra", W, K, "Check the extra kernel entry is intended."),
    # assumptions
    Rule("assume", "ptr_div_by_lost", C, H,
         "Restore the pointer alignment (16-byte divisibility specialization or max_divisibility hint)."),
    Rule("assume", "ptr_div_by_gained", W, H,
         "The port assumes more alignment than the reference: make sure the launcher guarantees it."),
    Rule("assume", "scalar_div_by", W, H, "Align the scalar divisibility assumptions with the reference."),
    Rule("assume", "bounded", I, H, "None: bounds assumptions (e.g. bounded<0, ?>) differ."),
    Rule("assume", "other", W, K, "Align the assumption (same_elements, ...) with the reference."),
    # values
    Rule("constant", "value", C, K, "Use the reference's constant value."),
    Rule("constant_arg", "const_to_arg", C, K,
         "Make this a compile-time constant (const generic) like the reference's ct.Constant."),
    Rule("constant_arg", "arg_to_const", C, K, "Pass this as a runtime argument like the reference."),
    Rule("argument", "different", C, K, "Use the same kernel argument as the reference."),
    # plumbing
    Rule("address", "differs", I, K, "None: address/index computation differs (covered by the memory findings)."),
    Rule("shape_plumbing", "differs", I, K, "None: reshape/broadcast chains differ."),
    Rule("other_ops", "attributes", C, K, "Use the reference's attributes on this op."),
    Rule("other_ops", "missing", W, K, "Check the op missing from the port is not needed."),
    Rule("other_ops", "extra", W, K, "Check the extra op in the port is needed."),
    Rule("other_ops", "print", I, K, "None: debug printing differs."),
)

RULES: dict[tuple[str, str], Rule] = {(r.category, r.rule): r for r in _TABLE}
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(r.category for r in _TABLE))


def rule(category: str, name: str) -> Rule:
    return RULES[(category, name)]
