"""fused_moe, grouped_gemm and matmul_fp8 specs: host constants against their kernel files (ast, no torch), and
with torch on the CPU (skipped where torch is not installed) the references the GPU check uses against plain
constructions, and the plans' refusals.

The kernels themselves are held to NumPy references by the interpreter (eval/interp/corpus.py), cuTile
Python's IR and the port's.
"""

from __future__ import annotations

import ast

import pytest

from tileport.ops.spec import KERNELS_DIR
from tileport.ops.specs import fused_moe, grouped_gemm, matmul_fp8, moe_experts


def _module_constant(kernel_file: str, name: str):
    tree = ast.parse((KERNELS_DIR / kernel_file).read_text())
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name)


def test_host_constants_are_the_kernels():
    assert grouped_gemm.ROW_ALIGN == _module_constant("grouped_gemm.py", "ROW_ALIGN")
    assert matmul_fp8.SCALE_BLOCK == _module_constant("matmul_fp8.py", "SCALE_BLOCK")
    tm, tn, tk = matmul_fp8.TILES
    assert tk == matmul_fp8.SCALE_BLOCK and matmul_fp8.SCALE_BLOCK % tn == 0  # one b scale per tile and K step


def test_grouped_problems_are_ragged_and_packed_at_aligned_rows():
    probs = grouped_gemm.problem_sizes((4, 300, 200, 100))
    assert probs == [(100, 133, 100), (200, 200, 33), (300, 66, 66), (100, 133, 100)]
    assert grouped_gemm.packed_rows([100, 200, 3]) == [0, 104, 304, 312]
    assert grouped_gemm.problem_sizes((2, 1, 1, 1)) == [(1, 1, 1), (1, 1, 1)]  # never empty


def test_moe_sum_tile_stays_within_its_budget():
    for k in (1, 2, 8, 16):
        for h in (1, 100, 4096):
            block_t, tile_h = fused_moe.sum_tiles(k, h)
            assert block_t >= 1 and tile_h >= 1 and block_t & (block_t - 1) == 0
            assert block_t * k * tile_h <= max(fused_moe.SUM_TILE_ELEMENTS, k * tile_h)


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch", reason="torch is not installed: the GEMM references need it")


def test_moe_reference_is_the_per_token_weighted_sum(torch_mod):
    t = torch_mod
    x, logits, w13, w2, k = fused_moe.make_inputs((5, 16, 8, 4, 2), "float32", "cpu", 0)
    got = fused_moe.reference(x, logits, w13, w2, k)
    weights, ids = t.softmax(logits, dim=1).topk(k, dim=1)
    weights = weights / weights.sum(dim=1, keepdim=True)
    want = t.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(k):
            e = int(ids[i, j])
            gate, up = w13[e, :8] @ x[i], w13[e, 8:] @ x[i]
            want[i] += weights[i, j] * (w2[e] @ (t.nn.functional.silu(gate) * up))
    assert t.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_moe_experts_is_fused_moe_after_the_routing(torch_mod):
    x, w13, w2, weights, ids = moe_experts.make_inputs((9, 16, 8, 8, 2), "float32", "cpu", 0)
    assert ids.dtype == torch_mod.int32 and weights.dtype == torch_mod.float32 and ids.shape == (9, 2)
    assert all(len(set(row)) == 2 for row in ids.tolist())  # k distinct experts per token
    logits = torch_mod.full((9, 8), -10.0)
    logits.scatter_(1, ids.long(), weights.log())  # softmax top-2 of these logits is the routing given
    assert torch_mod.allclose(moe_experts.reference(x, w13, w2, weights, ids),
                              fused_moe.reference(x, logits, w13, w2, 2), rtol=1e-4, atol=1e-4)


def test_grouped_reference_is_each_product_in_its_rows(torch_mod):
    t = torch_mod
    a, b, sizes = grouped_gemm.make_inputs((3, 17, 33, 65), "float32", "cpu", 0)
    c = grouped_gemm.reference(a, b, sizes)
    ra, rb = 0, 0
    for m, n, k in sizes.tolist():
        assert t.allclose(c[ra:ra + m, :n], a[ra:ra + m, :k] @ b[rb:rb + k, :n], rtol=1e-5, atol=1e-5)
        assert not c[ra + m:ra + -(-m // 8) * 8].any() and not c[ra:ra + m, n:].any()
        ra, rb = ra + -(-m // 8) * 8, rb + -(-k // 8) * 8
    assert ra == a.shape[0] == c.shape[0]


def test_fp8_inputs_dequantize_close_to_the_samples(torch_mod):
    t = torch_mod
    a, b, a_scale, b_scale = matmul_fp8.make_inputs((33, 200, 300), "bfloat16", "cpu", 0)
    assert a.dtype == b.dtype == t.float8_e4m3fn and a_scale.shape == (33, 3) and b_scale.shape == (2, 3)
    for q, s, rows in ((a, a_scale, 1), (b, b_scale, 128)):
        d = matmul_fp8.dequantize(q, s, rows)
        assert d.abs().max() <= 448.0 * s.max() and (q.float().abs().amax() > 400)  # scales use e4m3's range
    ref = matmul_fp8.reference(a, b, a_scale, b_scale)
    assert ref.dtype == t.bfloat16 and ref.shape == (33, 200) and ref.float().std() > 0.1


@pytest.mark.parametrize("name,make", [
    ("fused_moe", lambda t: (t.empty((4, 16), dtype=t.float16), t.empty((4, 8), dtype=t.float16),
                             t.empty((8, 20, 16), dtype=t.float16), t.empty((8, 16, 12), dtype=t.float16), 2)),
    ("moe_experts", lambda t: (t.empty((4, 16), dtype=t.float16), t.empty((8, 20, 16), dtype=t.float16),
                               t.empty((8, 16, 10), dtype=t.float16), t.empty((4, 2)), t.empty((4, 2), dtype=t.int64))),
    ("grouped_gemm", lambda t: (t.empty((8, 4), dtype=t.float16), t.empty((8, 4), dtype=t.float16),
                                t.empty((2, 3), dtype=t.int64))),
    ("matmul_fp8", lambda t: (t.empty((4, 256), dtype=t.float8_e4m3fn), t.empty((8, 256), dtype=t.float8_e4m3fn),
                              t.empty((4, 2)), t.empty((1, 1)))),
])
def test_plans_refuse_inconsistent_inputs(torch_mod, name, make):
    spec = {"fused_moe": fused_moe, "moe_experts": moe_experts, "grouped_gemm": grouped_gemm,
            "matmul_fp8": matmul_fp8}[name]
    inputs = tuple(x.to("meta") if isinstance(x, torch_mod.Tensor) else x for x in make(torch_mod))
    with pytest.raises(ValueError, match=name):
        spec.plan(*inputs, spec.allocate(*inputs))
