"""CPU checks of the reference corpus (src/tileport/ops/kernels + specs).

CI has cuda-tile and the tileiras wheels but neither torch nor a GPU:
1. kernel files follow the corpus rules (parsed with `ast`, never imported here);
2. specs are consistent with their kernel files (kernels exist, captures cover every parameter and
   every (kernel, dtype) pair, occupancy constants match the decorators);
3. every capture exports Tile IR bytecode 13.4 (`reference_bytecode`), compiles to an sm_90 cubin
   with tileiras, and its `tileirdisasm` text has the op families the kernel is meant to produce;
4. with torch installed (not in CI: those tests skip with the reason), the plans, inputs and
   references are checked on the `meta` / CPU devices.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from sampling import first_of_each, sweep

from tileport import toolchain
from tileport.cache import DiskCache, default_root
from tileport.capture import compile_cubin
from tileport.ops.capture_ref import reference_bytecode
from tileport.ops.spec import KERNELS_DIR, Capture, Launch
from tileport.ops.specs import SPEC_MODULES, all_specs

SPECS = all_specs()
KERNEL_FILES = sorted(p.name for p in KERNELS_DIR.glob("*.py") if p.name != "__init__.py")
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


# ---------------------------------------------------------------------------------------------
# Kernel files, read with ast


def _is_ct_kernel(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(target, ast.Attribute) and target.attr == "kernel"
            and isinstance(target.value, ast.Name) and target.value.id == "ct")


def _kernel_defs(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return {n.name: n for n in tree.body
            if isinstance(n, ast.FunctionDef) and any(_is_ct_kernel(d) for d in n.decorator_list)}


def kernel_params(kernel_file: str, kernel: str) -> list[str]:
    fn = _kernel_defs(KERNELS_DIR / kernel_file)[kernel]
    return [a.arg for a in fn.args.args]


def kernel_hint(kernel_file: str, kernel: str, name: str):
    fn = _kernel_defs(KERNELS_DIR / kernel_file)[kernel]
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and _is_ct_kernel(dec):
            for kw in dec.keywords:
                if kw.arg == name:
                    return ast.literal_eval(kw.value)
    return None


def _numeric_constant(node: ast.expr) -> bool:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _constant_alias(node: ast.expr) -> bool:  # ConstInt = ct.Constant[int]
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "Constant" and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "ct")


def test_corpus_has_at_least_15_kernels():
    kernels = {(s.kernel_file, k) for s in SPECS.values() for k in s.kernels}
    defined = {(f, k) for f in KERNEL_FILES for k in _kernel_defs(KERNELS_DIR / f)}
    assert kernels <= defined
    assert len(defined) >= 15, sorted(defined)
    assert defined <= kernels, f"kernels no spec launches: {sorted(defined - kernels)}"
    required = {"vector_add", "relu", "gelu", "silu_and_mul", "swiglu", "geglu", "softmax",
                "softmax_tma", "softmax_gather", "softmax_online", "rms_norm", "layer_norm", "rope",
                "matmul", "bmm", "matmul_splitk"}
    assert required <= set(SPECS)


@pytest.mark.parametrize("kernel_file", KERNEL_FILES)
def test_kernel_file_follows_corpus_rules(kernel_file):
    """import cuda.tile as ct; numeric constants; ct.Constant aliases; functions. Nothing else."""
    tree = ast.parse((KERNELS_DIR / kernel_file).read_text())
    n_kernels = 0
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # module docstring
        if isinstance(node, ast.Import):
            assert [(a.name, a.asname) for a in node.names] == [("cuda.tile", "ct")], (
                f"{kernel_file}:{node.lineno}: only `import cuda.tile as ct` is allowed")
        elif isinstance(node, ast.Assign):
            assert len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            assert _numeric_constant(node.value) or _constant_alias(node.value), (
                f"{kernel_file}:{node.lineno}: module-level values must be numbers or ct.Constant aliases")
        elif isinstance(node, ast.FunctionDef):
            decs = node.decorator_list
            assert not decs or (len(decs) == 1 and _is_ct_kernel(decs[0])), (
                f"{kernel_file}:{node.lineno}: helpers are plain functions, kernels @ct.kernel")
            n_kernels += bool(decs)
        else:
            pytest.fail(f"{kernel_file}:{node.lineno}: unexpected top-level {type(node).__name__}")
    assert n_kernels >= 1


# ---------------------------------------------------------------------------------------------
# Specs vs kernel files


@pytest.mark.parametrize("name", sorted(SPECS))
def test_spec_captures_cover_kernels_dtypes_and_parameters(name):
    spec = SPECS[name]
    assert spec.kernel_path.is_file()
    assert set(spec.dtypes) <= set(FLOAT_DTYPES)
    assert set(spec.tolerances) >= set(spec.dtypes)
    assert spec.shapes and spec.bench_shapes and spec.bytes is not None and spec.flops is not None
    assert spec.kind in ("memory", "compute")
    covered = defaultdict(set)
    for cap in spec.captures:
        assert cap.kernel in spec.kernels, f"capture of {cap.kernel}, not a kernel of {name}"
        params = kernel_params(spec.kernel_file, cap.kernel)
        given = list(cap.arrays) + list(cap.scalars) + list(cap.constants)
        assert sorted(given) == sorted(params), f"{cap.label}: {given} vs parameters {params}"
        for dt, _ in cap.arrays.values():
            covered[cap.kernel].add(dt)
    for kernel in spec.kernels:
        missing = set(spec.dtypes) - covered[kernel]
        if not covered[kernel] & set(FLOAT_DTYPES):  # a kernel of integer arrays only: one capture for every dtype
            missing = set() if covered[kernel] else missing
        assert not missing, f"{name}: {kernel} has no capture for {sorted(missing)}"


def test_spec_modules_define_spec_and_load_without_torch():
    for mod_name in SPEC_MODULES:
        mod = importlib.import_module(f"tileport.ops.specs.{mod_name}")
        assert mod.SPEC.name == mod_name
    assert len(SPECS) == len(SPEC_MODULES)


def test_occupancy_constants_match_kernel_decorators():
    checked = 0
    for mod_name in SPEC_MODULES:
        mod = importlib.import_module(f"tileport.ops.specs.{mod_name}")
        for kernel, occ in getattr(mod, "OCCUPANCY", {}).items():
            assert kernel_hint(mod.SPEC.kernel_file, kernel, "occupancy") == occ, (mod_name, kernel)
            checked += 1
    assert checked >= 6
    from tileport.ops.specs import matmul

    for kernel in ("matmul_kernel", "bmm_kernel"):
        assert kernel_hint(f"{kernel[:-7]}.py", kernel, "num_ctas") == matmul.NUM_CTAS


# ---------------------------------------------------------------------------------------------
# Tile IR: export, sm_90 cubin, disassembly


def _unique_captures():
    seen, out = set(), []
    for name, spec in SPECS.items():
        for cap in spec.captures:
            key = (spec.kernel_file, cap.kernel, tuple(sorted(cap.arrays.items())),
                   tuple(sorted(cap.scalars.items())), tuple(sorted(cap.constants.items())))
            if key not in seen:
                seen.add(key)
                out.append(pytest.param(spec, cap, id=f"{spec.kernel_file[:-3]}:{cap.label}"))
    return out


CAPTURES = _unique_captures()
# The tileiras sweep runs for the first capture of each kernel; every capture with --slow.
CAPTURE_SAMPLE = sweep(CAPTURES, first_of_each(lambda p: (p.values[0].kernel_file, p.values[1].kernel)))
_BYTECODE: dict[tuple, bytes] = {}


def _bytecode(spec, cap: Capture) -> bytes:
    key = (spec.kernel_file, cap.label)
    if key not in _BYTECODE:
        _BYTECODE[key] = reference_bytecode(spec, cap)
    return _BYTECODE[key]


@pytest.mark.parametrize("spec,cap", CAPTURES)
def test_reference_bytecode_exports(spec, cap):
    bc = _bytecode(spec, cap)
    assert bc[:8] == b"\x7fTileIR\x00"
    assert (bc[8], bc[9]) == (13, 4), "bytecode version 13.4"
    assert cap.kernel.encode() in bc  # the entry symbol starts with the kernel name


def test_reference_bytecode_by_path_is_deterministic():
    spec = SPECS["vector_add"]
    cap = spec.captures[0]
    assert reference_bytecode(spec.kernel_path, cap) == reference_bytecode("vector_add.py", cap)


def _need(tool: str):
    path = getattr(toolchain, tool)()
    if path is None:
        pytest.skip(f"{tool} not found (pip install nvidia-cuda-tileiras==13.4.92 and its nvcc/nvvm)")
    return path


@pytest.mark.parametrize("spec,cap", CAPTURE_SAMPLE)
def test_bytecode_compiles_to_sm90_cubin(spec, cap, tmp_path):
    """Through the capture cache the test session shares (conftest: $TILEPORT_CACHE_DIR), so the later
    proofs of the same bytes (`port`'s stage B, `verify`) take this cubin instead of compiling it again."""
    _need("tileiras")
    out = tmp_path / "k.cubin"
    r = compile_cubin(_bytecode(spec, cap), "sm_90", out, sass=False, cache=DiskCache(default_root()))
    assert r.ok, f"tileiras: {r.error}"
    assert out.read_bytes()[:4] == b"\x7fELF"


# Op families each kernel must show in `tileirdisasm` output: (regex, min count, max count or None).
LOAD_VIEW, STORE_VIEW = r"= load_view_tko ", r"= store_view_tko "
EXP_APPROX = r"= exp %\S+ rounding<approx>"
DIV_APPROX_FTZ = r"= divf .*rounding<approx> flush_to_zero"
FOR = r"(^\s*|= )for %"
SUM = r"reduce .*identities=\[0\.000000e\+00 : f32\]"
MAX = r"reduce .*identities=\[0xFF800000 : f32\]"
NO_POINTER = [(r"load_ptr_tko", 0, 0), (r"store_ptr_tko", 0, 0)]
ELEMENTWISE_F32 = [(EXP_APPROX, 1, 1), (DIV_APPROX_FTZ, 1, 1)]
SOFTMAX_TMA = [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1),
               (MAX, 1, 1), (SUM, 1, 1), (EXP_APPROX, 1, 1), (DIV_APPROX_FTZ, 1, 1), (FOR, 1, 1),
               (r"get_num_tile_blocks", 1, None)] + NO_POINTER
MMA = [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (r"padding_value = zero", 2, None),
       (r"= mmaf ", 1, 1)] + NO_POINTER
PERSISTENT_MMA = MMA + [(FOR, 2, 2), (r"get_num_tile_blocks", 1, None), (r"num_cta_in_cga = 2", 1, 1),
                        (r"num_worker_warps_per_cta = 8", 1, 1), (r"occupancy = 1", 1, 1)]
# Attention: q k^T and p v as two 16-bit MMAs, k loaded transposed through the view's dim_map,
# online softmax in exp2 (flush to zero) in one key loop, scalar lengths gathered by pointer.
EXP2_FTZ = r"= exp2 %\S+ flush_to_zero"
MMA_16BIT = r"= mmaf %\S+, %\S+, %\S+ : tile<\d+x\d+x(f16|bf16)>"
ATTENTION = [(LOAD_VIEW, 3, 3), (r"= mmaf %\S+, %\S+, %\S+ : tile<\d+x\d+x(f16|bf16)>", 2, 2),
             (r"dim_map=\[0, 1, 3, 2\]", 1, None), (FOR, 1, 1), (EXP2_FTZ, 2, None), (MAX, 1, 1),
             (SUM, 1, 1), (DIV_APPROX_FTZ, 1, 1), (r"= log2 ", 1, 1), (r"load_ptr_tko", 1, 2),
             (r"store_ptr_tko", 0, 0)]
# Dropout: Philox4x32-10 in one 10-round loop (two 32 x 32 -> 64 products as unsigned-extended u64 multiplies,
# two xor pairs per round), the top 24 bits compared with the threshold, one select of the scaled value.
DROPOUT = [(LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1), (FOR, 1, 1), (r"= exti %\S+ unsigned", 2, 2),
           (r"= muli %\S+, %\S+ : tile<\d+xi64>", 2, None), (r"= xori ", 4, 4), (r"= shri .* unsigned", 4, None),
           (r"= cmpi greater_than_or_equal", 1, 1), (r"= select ", 1, 1)] + NO_POINTER
EXPECT = {
    # MoE routing: K masked argmax steps in one loop (a max, then the min of the ids at it), weights renormalized;
    # the align: counts by atomic adds and the fill (a grid-stride loop); two passes over the chunk counts (sums,
    # exclusive cumulative sums); slots ranked by a TILE x TILE comparison, gathered / scattered by pointer
    "moe_topk_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 2, 2), (FOR, 1, 1), (MAX, 1, 2), (SUM, 1, 1),
                        (r"reduce .*identities=\[2147483647 : i32\]", 1, 1), (r"= exp ", 1, 1)] + NO_POINTER,
    "moe_align_count_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 2, 2), (r"= atomic_rmw_tko .*, add, ", 1, 1),
                               (FOR, 1, 1), (r"= scan ", 0, 0)] + NO_POINTER,
    "moe_align_offsets_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 3, 3), (FOR, 2, 2), (r"= scan ", 2, 2),
                                 (r"reduce .*identities=\[0 : i32\]", 3, 3), (r"atomic_rmw", 0, 0)] + NO_POINTER,
    "moe_align_scatter_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (r"load_ptr_tko", 1, 1),
                                 (r"store_ptr_tko", 2, 2), (FOR, 2, 2), (r"reduce .*dim=1 identities=\[0 : i32\] : tile<\d+x\d+xi32>", 3, 3),
                                 (r"= scan ", 0, 0), (r"atomic_rmw", 0, 0)],
    # expert GEMMs over the sorted slots: the block's expert gathered (a scalar), the work under one runtime if;
    # gate / up: token rows gathered, two weight tiles loaded transposed (dim_map), two MMAs into f32, SiLU in
    # f32; down: one MMA, the routing weights gathered, the rows scattered to their slots; combine: one f32 sum
    "moe_gate_up_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (r"load_ptr_tko", 2, 2), (r"store_ptr_tko", 0, 0),
                           (FOR, 1, 1), (r"^\s*if ", 1, 1), (MMA_16BIT, 2, 2), (r"dim_map=\[0, 1, 3, 2\]", 1, None),
                           (EXP_APPROX, 1, 1), (DIV_APPROX_FTZ, 1, 1)],
    "moe_down_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 0, 0), (r"load_ptr_tko", 2, 2), (r"store_ptr_tko", 1, 1),
                        (FOR, 1, 1), (r"^\s*if ", 1, 1), (MMA_16BIT, 1, 1), (r"dim_map=\[0, 2, 1\]", 1, None)],
    "moe_sum_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1), (SUM, 1, 1), (FOR, 0, 0)] + NO_POINTER,
    # grouped GEMM: the size table gathered once (three columns), row offsets and tile ends by cumulative sums,
    # a grid-stride loop over every problem's tiles; per tile three `Array.slice` views whose pointers are
    # 16-byte aligned (rows at multiples of 8), one MMA in the K loop
    "grouped_gemm_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (r"load_ptr_tko", 3, 3), (r"store_ptr_tko", 0, 0),
                            (FOR, 2, 2), (MMA_16BIT, 1, 1), (r"= scan ", 3, 3),
                            (r"= assume div_by<16>, %\d+ : tile<ptr<(f16|bf16)>>", 3, 3),
                            (r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)],
    # cross-entropy: one online log-sum-exp pass over the chunks of each row block in a grid-stride loop, the
    # label's logit gathered by pointer (forward); exp(x - lse) minus the one-hot of the label (backward)
    "cross_entropy_fwd_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 2, 2), (STORE_VIEW, 2, 2),
                                 (r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 0, 0), (FOR, 2, 2), (EXP_APPROX, 2, 2),
                                 (r"= log ", 1, 1), (MAX, 1, 1), (SUM, 1, 1), (r"= cmpi not_equal", 1, 1),
                                 (r"occupancy = 4", 1, 1)],
    "cross_entropy_bwd_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 4, 4), (STORE_VIEW, 1, 1),
                                 (FOR, 2, 2), (EXP_APPROX, 1, 1), (r"= cmpi equal", 1, 1),
                                 (r"= cmpi not_equal", 1, 1), (r"occupancy = 4", 1, 1)] + NO_POINTER,
    # norm backwards: the row sums of dx and the block's weight-gradient sums over its rows (axis 0) in one
    # grid-stride loop, one store of each f32 partial row after it; the reduction sums the partial rows
    "rms_norm_bwd_kernel": [(r"padding_value = zero", 3, None), (LOAD_VIEW, 3, 3), (STORE_VIEW, 2, 2),
                            (SUM, 3, 3), (r"= rsqrt ", 1, 1), (FOR, 1, 1), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "layer_norm_bwd_kernel": [(r"padding_value = zero", 5, None), (LOAD_VIEW, 5, 5), (STORE_VIEW, 3, 3),
                              (SUM, 4, 4), (FOR, 1, 1), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "norm_bwd_reduce_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1), (SUM, 1, 1), (FOR, 1, 1)] + NO_POINTER,
    # linear cross-entropy: logits tiles by MMA over H with the weight loaded transposed (the view's dim_map);
    # forward: an online log-sum-exp over the vocabulary chunks; backward: the dlogits tile, then two MMA loops
    # (dw: the accumulator loaded only where ACCUMULATE)
    "linear_ce_fwd_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 2, 2), (r"= mmaf ", 1, 1), (r"dim_map=\[1, 0\]", 1, None),
                             (FOR, 2, 2), (EXP_APPROX, 2, 2), (r"= log ", 1, 1), (MAX, 1, 1), (SUM, 2, 2),
                             (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "linear_ce_dlogits_kernel": [(LOAD_VIEW, 5, 5), (STORE_VIEW, 1, 1), (r"= mmaf ", 1, 1),
                                 (r"dim_map=\[1, 0\]", 1, None), (FOR, 1, 1), (EXP_APPROX, 1, 1),
                                 (r"= cmpi equal", 1, 1), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "linear_ce_dh_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (r"= mmaf ", 1, 1), (FOR, 1, 1),
                            (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "linear_ce_dw_kernel": [(LOAD_VIEW, 2, 3), (STORE_VIEW, 2, 2), (r"= mmaf ", 1, 1), (r"dim_map=\[1, 0\]", 1, None),
                            (FOR, 1, 1), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    # gated delta rule: the block's f32 state slice loaded and stored once around the token loop, two column
    # sums (k^T S, q^T S) and one exp (the decay) per token
    "gated_delta_rule_kernel": [(LOAD_VIEW, 6, 6), (STORE_VIEW, 2, 2), (FOR, 1, 1), (SUM, 2, 2),
                                (r"= exp ", 1, 1)] + NO_POINTER,
    # chunked: per chunk the cumulative decay (a scan), (I + L)^-1 by squarings in a loop, the chunk's MMAs
    "gated_delta_chunk_kernel": [(LOAD_VIEW, 6, 6), (STORE_VIEW, 2, 2), (FOR, 2, 2), (r"= scan ", 1, 1),
                                 (r"= mmaf ", 10, 10), (r"= permute ", 1, None),
                                 (r"num_worker_warps_per_cta = 8", 1, 1)] + NO_POINTER,
    "dropout_fwd_kernel": DROPOUT,
    "dropout_bwd_kernel": DROPOUT,
    "vector_add_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (r"= addf ", 1, 1)] + NO_POINTER,
    "relu_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1), (r"= maxf ", 1, 1)] + NO_POINTER,
    "gelu_tanh_kernel": [(LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1)] + ELEMENTWISE_F32 + NO_POINTER,
    "swiglu_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1)] + ELEMENTWISE_F32 + NO_POINTER,
    "geglu_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1)] + ELEMENTWISE_F32 + NO_POINTER,
    "silu_and_mul_kernel": [(LOAD_VIEW, 1, 1), (r"partition_view<tile=\(2x\d+\)", 1, None),
                            (r"= extract ", 2, 2), (STORE_VIEW, 1, 1)] + ELEMENTWISE_F32 + NO_POINTER,
    "softmax_tma_kernel": SOFTMAX_TMA + [(r"occupancy = 4", 1, 1)],
    "softmax_tma_wide_kernel": SOFTMAX_TMA + [(r"occupancy = 2", 1, 1)],
    # the next row block loaded before this one's math: two load sites, min() of the look-ahead index
    "softmax_tma_prefetch_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1),
                                    (MAX, 1, 1), (SUM, 1, 1), (EXP_APPROX, 1, 1), (DIV_APPROX_FTZ, 1, 1),
                                    (FOR, 1, 1), (r"= mini ", 1, None), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    # the row kept in the input dtype: the exponential twice, a log instead of the division
    "softmax_tma_lean_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 1, 1), (STORE_VIEW, 1, 1),
                                (r"reduce .*identities=\[0x(FF800000 : f32|FC00 : f16|FF80 : bf16)\]", 1, 1),
                                (SUM, 1, 1), (EXP_APPROX, 2, 2), (r"= log ", 1, 1),
                                (FOR, 1, 1), (r"occupancy = 2", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)]
                               + NO_POINTER,
    # split rows: f32 partials out of one column tile per block, combined by the write pass
    "softmax_split_stats_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 1, 1), (STORE_VIEW, 2, 2),
                                   (MAX, 1, 1), (SUM, 1, 1), (EXP_APPROX, 1, 1), (FOR, 0, 0),
                                   (r"occupancy = 4", 1, 1)] + NO_POINTER,
    "softmax_split_write_kernel": [(r"padding_value = neg_inf", 2, None), (r"padding_value = zero", 1, None),
                                   (LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (MAX, 1, 1), (SUM, 1, 1),
                                   (EXP_APPROX, 2, 2), (DIV_APPROX_FTZ, 1, 1), (FOR, 0, 0),
                                   (r"occupancy = 4", 1, 1)] + NO_POINTER,
    "softmax_gather_kernel": [(r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 1, 1), (LOAD_VIEW, 0, 0),
                              (STORE_VIEW, 0, 0), (r"= iota ", 1, None), (r"cmpi less_than", 1, None),
                              (MAX, 1, 1), (SUM, 1, 1), (EXP_APPROX, 1, 1), (DIV_APPROX_FTZ, 1, 1),
                              (FOR, 1, 1), (r"occupancy = 4", 1, 1)],
    "softmax_online_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 3, 3),
                              (STORE_VIEW, 1, 1), (FOR, 3, 3), (r"get_index_space_shape", 1, None),
                              (MAX, 2, 2), (SUM, 2, 2), (EXP_APPROX, 4, 4), (DIV_APPROX_FTZ, 1, 1),
                              (r"= maxf ", 3, None), (r"occupancy = 4", 1, 1)] + NO_POINTER,
    # pass 1 with its last chunk peeled off the loop (a second update), the last chunk written from
    # registers (a second store site), the others re-read
    "softmax_online_rev_kernel": [(r"padding_value = neg_inf", 1, None), (LOAD_VIEW, 3, 3),
                                  (STORE_VIEW, 2, 2), (FOR, 3, 3), (r"get_index_space_shape", 1, None),
                                  (MAX, 2, 2), (SUM, 2, 2), (EXP_APPROX, 6, 6), (DIV_APPROX_FTZ, 1, 1),
                                  (r"= maxf ", 3, None), (r"= subi ", 2, None),
                                  (r"occupancy = 4", 1, 1)] + NO_POINTER,
    "rms_norm_kernel": [(r"padding_value = zero", 2, None), (LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1),
                        (SUM, 1, 1), (r"= rsqrt ", 1, 1), (FOR, 1, 1),
                        (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "layer_norm_fwd_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 3, 3), (SUM, 2, 2),
                              (r"= rsqrt ", 1, 1), (r"= select ", 1, None), (FOR, 1, 1),
                              (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "layer_norm_fwd_occ4_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 3, 3), (SUM, 2, 2),
                                   (r"= rsqrt ", 1, 1), (r"= select ", 1, None), (FOR, 1, 1),
                                   (r"occupancy = 4", 1, 1)] + NO_POINTER,
    "layer_norm_fwd_prefetch_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 3, 3), (SUM, 2, 2),
                                       (r"= rsqrt ", 1, 1), (r"= select ", 1, None), (FOR, 1, 1),
                                       (r"= mini ", 1, None), (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "rope_persistent_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 2, 2), (FOR, 1, 1),
                               (r"partition_view<tile=\(1x\d+x\d+x1x\d+\), padding_value = zero", 2, None)]
                              + NO_POINTER,
    "layer_norm_fwd_w8_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 3, 3), (SUM, 2, 2),
                                 (r"= rsqrt ", 1, 1), (r"= select ", 1, None), (FOR, 1, 1),
                                 (r"occupancy = 2", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)] + NO_POINTER,
    # [B * S, H, 2, D/2]: 4-D tiles, the table row block as the row block modulo the sequence blocks
    "rope_rows_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 2, 2), (FOR, 0, 0), (r"= remi ", 1, None),
                         (r"partition_view<tile=\(\d+x\d+x1x\d+\), padding_value = zero", 2, None)]
                        + NO_POINTER,
    # ... with both halves as one (BLOCK_S, BLOCK_H, 2, HALF_TILE) load, split by extract, joined by cat
    "rope_rows_pair_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (FOR, 0, 0), (r"= remi ", 1, None),
                              (r"= extract ", 2, 2), (r"= cat ", 1, 1),
                              (r"partition_view<tile=\(\d+x\d+x2x\d+\), padding_value = zero", 1, None)]
                             + NO_POINTER,
    # ... in a grid-stride loop compiled for 4 blocks per SM, its x / y accesses hinted at the highest latency
    "rope_rows_pair_persistent_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (FOR, 1, 1), (r"= extract ", 2, 2),
                                         (r"= cat ", 1, 1), (r"occupancy = 4", 1, 1), (r"latency = 10", 2, 2)]
                                        + NO_POINTER,
    # ... with x and y accessed without TMA (the four x / y accesses carry the hint, the tables do not)
    "rope_rows_notma_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 2, 2), (FOR, 0, 0), (r"= remi ", 1, None),
                               (r"optimization_hints = <default = \{allow_tma = false\}>", 4, 4),
                               (r"partition_view<tile=\(\d+x\d+x1x\d+\), padding_value = zero", 2, None)]
                              + NO_POINTER,
    # ... in a grid-stride loop over row blocks (the table row block inside the loop)
    "rope_rows_persistent_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 2, 2), (FOR, 1, 1), (r"= remi ", 1, None),
                                    (r"partition_view<tile=\(\d+x\d+x1x\d+\), padding_value = zero", 2, None)]
                                   + NO_POINTER,
    "rope_kernel": [(LOAD_VIEW, 4, 4), (STORE_VIEW, 2, 2),
                    (r"partition_view<tile=\(1x\d+x\d+x1x\d+\), padding_value = zero", 2, None)]
                   + NO_POINTER,
    # fp8 w8a8: one e4m3 MMA per K step into a fresh f32 accumulator (b read transposed), scaled by the row's a
    # scale (a view load) times the block's b scale (gathered) into the f32 sum; one conversion, to bf16
    "matmul_fp8_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 0, 0),
                          (FOR, 2, 2), (r"= mmaf %\S+, %\S+, %\S+ : tile<\d+x\d+xf8E4M3FN>, tile<\d+x\d+xf8E4M3FN>, "
                                        r"tile<\d+x\d+xf32>", 1, 1),
                          (r"dim_map=\[1, 0\]", 1, None),
                          (r"= ftof %\S+\s*: tile<\d+x\d+xf32> -> tile<\d+x\d+xbf16>", 1, 1),
                          (r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)],
    "matmul_kernel": PERSISTENT_MMA,
    "bmm_kernel": PERSISTENT_MMA,
    "matmul_splitk_kernel": MMA + [(FOR, 1, 1), (r"num_cta_in_cga = 1", 1, 1), (r"occupancy = 1", 1, 1),
                                   (r"= mini ", 1, None)],
    "splitk_reduce_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 1, 1), (FOR, 1, 1),
                             (r"= addf ", 1, 1)] + NO_POINTER,
    "fmha_fwd_kernel": ATTENTION + [(r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1),
                                    (r"latency = 2", 2, None), (STORE_VIEW, 2, 2)],
    "flash_decode_partial_kernel": ATTENTION + [(r"occupancy = 2", 1, 1), (r"latency = 4", 2, None),
                                                (STORE_VIEW, 2, 2)],
    # the latent tile loaded twice (key transposed through the view's dim_map, value), no permute
    "mla_decode_partial_kernel": [(LOAD_VIEW, 5, 5), (STORE_VIEW, 2, 2), (MMA_16BIT, 3, 3),
                                  (r"dim_map=\[0, 2, 1\]", 1, None), (r"= permute ", 0, 0),
                                  (FOR, 1, 1), (EXP2_FTZ, 2, None), (MAX, 1, 1),
                                  (SUM, 1, 1), (DIV_APPROX_FTZ, 1, 1), (r"load_ptr_tko", 1, 1),
                                  (r"store_ptr_tko", 0, 0), (r"occupancy = 1", 1, 1)],
    "mla_prefill_kernel": [(LOAD_VIEW, 5, 5), (STORE_VIEW, 2, 2), (MMA_16BIT, 3, 3),
                           (r"dim_map=\[0, 2, 1\]", 1, None), (FOR, 1, 1), (EXP2_FTZ, 2, None),
                           (MAX, 1, 1), (SUM, 1, 1), (DIV_APPROX_FTZ, 1, 1), (r"= log2 ", 1, 1),
                           (r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 0, 0),
                           (r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)],
    # attention backward: p recomputed with one exp2 per tile, no max / division; q, do (dk / dv)
    # and k, v (dq) loaded transposed through the view's dim_map
    "fmha_bwd_preprocess_kernel": [(LOAD_VIEW, 3, 3), (STORE_VIEW, 1, 1), (SUM, 1, 1),
                                   (r"occupancy = 2", 1, 1)] + NO_POINTER,
    "fmha_bwd_dkdv_kernel": [(LOAD_VIEW, 8, 8), (STORE_VIEW, 2, 2), (MMA_16BIT, 4, 4),
                             (r"dim_map=\[0, 1, 3, 2\]", 1, None), (FOR, 2, 2), (EXP2_FTZ, 1, 1),
                             (r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 0, 0),
                             (r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)],
    "fmha_bwd_dq_kernel": [(LOAD_VIEW, 7, 7), (STORE_VIEW, 1, 1), (MMA_16BIT, 3, 3),
                           (r"dim_map=\[0, 1, 3, 2\]", 1, None), (FOR, 1, 1), (EXP2_FTZ, 1, 1),
                           (r"load_ptr_tko", 1, 1), (r"store_ptr_tko", 0, 0),
                           (r"occupancy = 1", 1, 1), (r"num_worker_warps_per_cta = 8", 1, 1)],
    "flash_decode_combine_kernel": [(LOAD_VIEW, 2, 2), (STORE_VIEW, 2, 2), (FOR, 1, 1),
                                    (EXP2_FTZ, 2, 2), (DIV_APPROX_FTZ, 1, 1),
                                    (r"occupancy = 4", 1, 1)] + NO_POINTER,
}
F32_MATH = {"gelu_tanh_kernel", "swiglu_kernel", "geglu_kernel", "silu_and_mul_kernel",
            "softmax_tma_kernel", "softmax_tma_wide_kernel", "softmax_gather_kernel",
            "softmax_online_kernel", "rms_norm_kernel", "layer_norm_fwd_kernel", "rope_kernel",
            "softmax_tma_prefetch_kernel", "softmax_online_rev_kernel", "layer_norm_fwd_occ4_kernel",
            "layer_norm_fwd_prefetch_kernel", "rope_persistent_kernel", "softmax_tma_lean_kernel",
            "softmax_split_stats_kernel", "softmax_split_write_kernel", "layer_norm_fwd_w8_kernel",
            "rope_rows_kernel", "rope_rows_pair_kernel", "rope_rows_persistent_kernel", "rope_rows_notma_kernel",
            "rope_rows_pair_persistent_kernel", "dropout_fwd_kernel", "dropout_bwd_kernel",
            "cross_entropy_fwd_kernel", "cross_entropy_bwd_kernel", "moe_topk_kernel", "rms_norm_bwd_kernel",
            "layer_norm_bwd_kernel", "gated_delta_rule_kernel",
            "gated_delta_chunk_kernel", "moe_sum_kernel"}
MMA_KERNELS = {"matmul_kernel", "bmm_kernel", "matmul_splitk_kernel"}


def test_every_kernel_has_ir_expectations():
    kernels = {k for s in SPECS.values() for k in s.kernels}
    assert kernels == set(EXPECT)


@pytest.mark.parametrize("spec,cap", CAPTURES)
def test_disassembly_has_expected_op_families(spec, cap, tmp_path):
    disasm = _need("tileirdisasm")
    src = tmp_path / "k.tileirbc"
    src.write_bytes(_bytecode(spec, cap))
    proc = subprocess.run([str(disasm), str(src)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    assert text.count("entry @") == 1 and f"entry @{cap.kernel}_" in text
    problems = []
    for pattern, lo, hi in EXPECT[cap.kernel]:
        n = len(re.findall(pattern, text, flags=re.M))
        if n < lo or (hi is not None and n > hi):
            problems.append(f"{pattern!r}: {n} (expected {lo}..{'' if hi is None else hi})")
    io_dtype = next((dt for name, (dt, _) in cap.arrays.items()
                     if name in ("x", "a", "c", "y", "q", "o", "q_nope", "dy", "logits")), None)
    short = SHORT.get(io_dtype)
    if cap.kernel in F32_MATH and io_dtype != "float32":
        if not re.search(rf"= ftof %\S+\s*: tile<[0-9x]+x{short}> -> tile<[0-9x]+xf32>", text):
            problems.append(f"no {short} -> f32 conversion (math must be f32)")
    if cap.kernel in MMA_KERNELS:
        tm, tn = cap.constants["TILE_M"], cap.constants["TILE_N"]
        operand = "tf32" if io_dtype == "float32" else short
        mma = rf"= mmaf %\S+, %\S+, %\S+ : tile<{tm}x\d+x{operand}>, tile<\d+x{tn}x{operand}>, tile<{tm}x{tn}xf32>"
        if not re.search(mma, text):
            problems.append(f"no mmaf with {operand} operands and a {tm}x{tn} f32 accumulator")
        tf32_casts = len(re.findall(r"= ftof .*xtf32>", text))
        if tf32_casts != (2 if io_dtype == "float32" else 0):
            problems.append(f"{tf32_casts} casts to tf32")
    assert not problems, f"{cap.label}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------------------------
# Plan execution helpers (no GPU needed)


def test_positional_args_follow_kernel_parameter_order():
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from tileport.capture.export import kernel_parameters
    from tileport.ops.backends_cutile import PlanError, positional_args
    from tileport.ops.capture_ref import reference_kernel

    spec = SPECS["layer_norm"]
    order = kernel_parameters(reference_kernel(spec, "layer_norm_fwd_kernel"))
    params = kernel_params(spec.kernel_file, "layer_norm_fwd_kernel")
    args = {p: f"<{p}>" for p in reversed(params)}
    assert positional_args(order, Launch("layer_norm_fwd_kernel", (1, 1, 1), args)) == tuple(
        f"<{p}>" for p in params)
    with pytest.raises(PlanError, match="missing arguments \\['eps'\\]"):
        positional_args(order, Launch("layer_norm_fwd_kernel", (1, 1, 1),
                                       {p: 0 for p in params if p != "eps"}))
    with pytest.raises(PlanError, match="unknown arguments \\['bogus'\\]"):
        positional_args(order, Launch("layer_norm_fwd_kernel", (1, 1, 1),
                                       dict(args, bogus=1)))


def test_cutile_backend_caches_each_kernel_with_its_parameter_order():
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from tileport.ops.backends_cutile import _kernel
    from tileport.ops.capture_ref import reference_kernel

    spec = SPECS["layer_norm"]
    kernel, params = _kernel(spec.kernel_path, "layer_norm_fwd_kernel")
    assert kernel is reference_kernel(spec, "layer_norm_fwd_kernel")
    assert params == tuple(kernel_params(spec.kernel_file, "layer_norm_fwd_kernel"))
    assert _kernel(spec.kernel_path, "layer_norm_fwd_kernel") is _kernel(spec.kernel_path, "layer_norm_fwd_kernel")


# ---------------------------------------------------------------------------------------------
# With torch (not in CI): plans on the meta device, references on the CPU


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip(
        "torch", reason="torch is not installed: plan/reference checks need torch (CI has none)")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _check_launch(torch, spec, launch: Launch, dt: str):
    assert launch.kernel in spec.kernels
    params = kernel_params(spec.kernel_file, launch.kernel)
    assert sorted(launch.args) == sorted(params), (launch.kernel, sorted(launch.args), params)
    grid = launch.grid
    assert len(grid) == 3 and all(isinstance(g, int) and g >= 1 for g in grid), grid
    assert grid[0] < 2 ** 31 and grid[1] < 65536 and grid[2] < 65536, grid
    caps = [c for c in spec.captures if c.kernel == launch.kernel]
    sig = {}
    for p, v in launch.args.items():
        if isinstance(v, torch.Tensor):
            assert v.stride(-1) == 1, f"{launch.kernel}.{p}: last stride {v.stride(-1)}"
            sig[p] = (str(v.dtype).removeprefix("torch."), v.dim())
        elif isinstance(v, bool) or isinstance(v, (int, float)):
            continue
        else:
            pytest.fail(f"{launch.kernel}.{p}: unsupported argument type {type(v).__name__}")
    assert any(all(c.arrays.get(p) == s for p, s in sig.items()) for c in caps), (
        f"{launch.kernel}: array signature {sig} matches no capture")
    for c in caps:  # runtime scalars and constants are where the captures say
        assert set(c.scalars) | set(c.constants) == set(params) - set(sig)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_plans_on_meta_device(torch_mod, name):
    torch = torch_mod
    spec = SPECS[name]
    plan_constants = defaultdict(list)
    for dt in spec.dtypes:
        for shape in list(spec.shapes) + list(spec.bench_shapes):
            inputs = spec.make_inputs(shape, dt, "meta", 0)
            outs = spec.allocate(*inputs)
            for o in _as_tuple(outs):
                assert o.device.type == "meta"
            # the default plan, and the plan of every configuration the autotuner may pick
            configs = [{}] + [{"config": c} for c in (spec.tune.candidates(tuple(shape), dt) if spec.tune else [])]
            for config in configs:
                launches = spec.plan(*inputs, outs, **config)
                assert launches
                for launch in launches:
                    _check_launch(torch, spec, launch, dt)
                    consts = {k: v for k, v in launch.args.items() if not isinstance(v, torch.Tensor)}
                    plan_constants[launch.kernel].append(consts)
    for cap in spec.captures:  # captures use constants that plans really produce
        assert any(all(c.get(k) == v for k, v in cap.constants.items())
                   for c in plan_constants[cap.kernel]), f"{cap.label}: no plan uses these constants"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_inputs_reference_and_outputs_on_cpu(torch_mod, name):
    torch = torch_mod
    spec = SPECS[name]
    small = [s for s in spec.shapes if torch.Size(s).numel() <= 300_000][:3]
    assert small, f"{name} has no small correctness shape"
    for dt in spec.dtypes:
        for shape in small:
            inputs = spec.make_inputs(shape, dt, "cpu", 0)
            again = spec.make_inputs(shape, dt, "cpu", 0)
            for a, b in zip(inputs, again):
                if isinstance(a, torch.Tensor):
                    assert torch.equal(a, b), "make_inputs must be deterministic for a seed"
                    # -inf is allowed: the logsumexp of an empty (padded) attention row (fmha_bwd's lse input)
                    assert (torch.isfinite(a.float()) | torch.isneginf(a.float())).all()
            tensors = [t for t in inputs if isinstance(t, torch.Tensor) and t.numel() > 16]
            for t in tensors:  # not constant inputs (relative to their magnitude: fp8 scales are ~1e-3)
                v = t.float()[torch.isfinite(t.float())]
                assert v.std() > 0.01 * v.abs().mean()
            refs = _as_tuple(spec.reference(*inputs))
            outs = _as_tuple(spec.allocate(*inputs))
            assert len(refs) == len(outs)
            for r, o in zip(refs, outs):
                assert r.shape == o.shape and r.dtype == o.dtype, (r.shape, o.shape, r.dtype, o.dtype)
                # -inf is allowed: the logsumexp of an empty (padded) attention row
                assert (torch.isfinite(r.float()) | torch.isneginf(r.float())).all()
            launches = spec.plan(*inputs, spec.allocate(*inputs))
            ptrs = {a.data_ptr() for launch in launches for a in launch.args.values()
                    if isinstance(a, torch.Tensor)}
            for t in inputs:  # the plan passes views of the inputs, never copies
                if isinstance(t, torch.Tensor):
                    assert t.data_ptr() in ptrs


def test_softmax_inputs_are_not_trivially_uniform(torch_mod):
    torch = torch_mod
    spec = SPECS["softmax"]
    (x,) = spec.make_inputs((64, 1000), "float32", "cpu", 0)
    p = spec.reference(x)
    assert (p.max(dim=-1).values > 20.0 / 1000).all()
