"""CPU checks of the attention ops (kernels/attention.py, specs/_attention.py and its specs).

The kernels' numerics are checked by the interpreter corpus (tests/tileir/test_interp_corpus.py
runs every attention capture against a float64 NumPy attention); here: the translator handles the
constructs the kernels use, the specs' plans and shapes fit their captures (so every test and
benchmark shape can run on the generated port), and, where torch is installed, the torch
references agree with the NumPy one.
"""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest

from tileport.corpus import kernel_configs
from tileport.frontends.cutile import KernelConfig
from tileport.ops.spec import KERNELS_DIR
from tileport.ops.specs import _attention as A
from tileport.ops.specs import all_specs
from tileport.translate import translate

ALL = {n: s for n, s in all_specs().items() if s.kernel_file == "attention.py"}
PREFILL = sorted(n for n, s in ALL.items() if "fmha_fwd_kernel" in s.kernels)
DECODE = sorted(n for n, s in ALL.items() if "flash_decode_partial_kernel" in s.kernels)
SPECS = {n: ALL[n] for n in PREFILL + DECODE}  # shapes (B, Hq, Hkv, S, D, ...)


def test_attention_ops_are_registered():
    assert PREFILL == ["fmha_fwd", "fmha_fwd_sinks", "fmha_fwd_softcap"]
    assert DECODE == ["flash_decode", "flash_decode_paged", "flash_decode_sinks",
                      "flash_decode_softcap"]
    assert set(ALL) == set(SPECS) | {"mla_decode", "mla_prefill"}


# ---- translator -------------------------------------------------------------------------------


def test_symbolic_constant_in_0d_tile_arithmetic_translates(tmp_path):
    """Regression: `ct.cdiv(length, BLOCK)` with `length` a gathered 0-d tile and BLOCK a
    ct.Constant failed with "expected a number, got CV(value=Sym(name='BLOCK'))"."""
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent("""\
        import cuda.tile as ct

        ConstInt = ct.Constant[int]


        @ct.kernel
        def lens_kernel(lens, y, BLOCK: ConstInt):
            n = ct.gather(lens, ct.bid(0))
            tiles = ct.cdiv(n, BLOCK)
            ct.store(y, index=(ct.bid(0),), tile=ct.reshape(tiles + BLOCK, (1,)))
    """))
    config = KernelConfig(({"lens": "int32", "y": "int32", "BLOCK": 64},), {"lens": 1, "y": 1})
    report = translate([str(path)], None, {str(path): {"lens_kernel": config}})
    assert [str(r.diagnostic) for r in report.results if not r.ok] == []
    module = report.files["src/k.rs"]
    assert "BLOCK" in module


LENGTH_LOOP = """\
import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def length_loop_kernel(lens, x, y, BLOCK: ConstInt):
    n = ct.gather(lens, ct.bid(0))
    acc = ct.full((1, BLOCK), -float("inf"), dtype=ct.float32)
    for j in range(ct.cdiv(n, BLOCK)):
        t = ct.load(x, index=(0, j), shape=(1, BLOCK), padding_mode=ct.PaddingMode.ZERO)
        cols = ct.reshape(j * BLOCK + ct.arange(BLOCK, dtype=ct.int32), (1, BLOCK))
        acc = ct.maximum(acc, ct.where(cols < n, t, -float("inf")))
    ct.store(y, index=(0, ct.bid(0)), tile=acc)
"""


def _translate_length_loop(tmp_path) -> str:
    path = tmp_path / "k.py"
    path.write_text(LENGTH_LOOP)
    config = KernelConfig(({"lens": "int32", "x": "float32", "y": "float32", "BLOCK": 64},),
                          {"lens": 1, "x": 2, "y": 2})
    report = translate([str(path)], None, {str(path): {"length_loop_kernel": config}})
    assert [str(r.diagnostic) for r in report.results if not r.ok] == []
    return report.files["src/k.rs"]


def test_0d_tile_loop_bound_becomes_a_scalar(tmp_path):
    """Regression: a loop bound computed from a gathered length was emitted as a Tile_0 and
    `for j in 0i32..n` did not compile (expected `i32`, found `Tile_0<i32>`)."""
    module = _translate_length_loop(tmp_path)
    assert "tile_to_scalar(" in module
    assert re.search(r"for j in 0i32\.\.\w+_s \{", module), module


def test_infinite_fill_is_a_constant_not_a_broadcast(tmp_path):
    """Regression: `where(.., -inf)` emitted `f32::NEG_INFINITY.broadcast(..)`, which the cutile
    compiler rejects at IR generation (associated consts in expression position)."""
    module = _translate_length_loop(tmp_path)
    assert "NEG_INFINITY.broadcast" not in module
    assert "constant(f32::NEG_INFINITY, shape![1, BLOCK])" in module


def test_single_element_gather_states_its_alignment(tmp_path):
    """Regression: cuTile Python assumes div_by<element bytes> on the pointer of a one-element
    gather; the port lacked it (IR diff CRITICAL assume/ptr_div_by_lost)."""
    module = _translate_length_loop(tmp_path)
    assert re.search(r"load_element::<i32, 4>\(\s*\w+_ptrs,", module), module  # ALIGN: 4 bytes, the i32
    assert "= assume_div_by::<_, ALIGN>(ptr);" in module, module


def test_every_attention_variant_translates():
    configs = kernel_configs(ALL)[str(KERNELS_DIR / "attention.py")]
    report = translate([str(KERNELS_DIR / "attention.py")], None,
                       {str(KERNELS_DIR / "attention.py"): configs})
    assert [str(r.diagnostic) for r in report.results if not r.ok] == []
    entries = {r.kernel: len(r.entries) for r in report.results}
    variants = {k: len({tuple((n, v) for n, v in sorted(c.constants.items()) if isinstance(v, bool))
                        for s in ALL.values() for c in s.captures if c.kernel == k})
                for k in entries}
    assert entries == variants  # one specialized entry per Constant[bool] combination


# ---- specs -------------------------------------------------------------------------------------


def test_ragged_lengths_are_ragged_and_positive():
    assert A.seq_lens_of(1, 1) == [1]
    lens = A.seq_lens_of(3, 200)
    assert lens[0] == 200 and len(set(lens)) == 3 and min(lens) >= 1
    assert all(n % 64 for n in A.seq_lens_of(4, 4096)[1:])  # not multiples of a key tile
    assert min(A.seq_lens_of(8, 9)) >= 1


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_shape_runs_on_a_captured_specialization(name):
    """Head dims and query groups of every test and benchmark shape are ones the port has."""
    spec = SPECS[name]
    dims = {c.constants["HEAD_DIM"] for c in spec.captures if "BLOCK_N" in c.constants}
    for shape in list(spec.shapes) + list(spec.bench_shapes):
        _batch, hq, hkv, _s, d = shape[:5]
        assert d in dims, (shape, dims)
        assert hq % hkv == 0
        if name in DECODE:
            assert hq // hkv <= A.GROUP_TILE
    assert any(A.seq_lens_of(s[0], s[3])[-1] % 64 for s in spec.shapes if s[0] > 1)


@pytest.mark.parametrize("batch,hkv,max_len", [(1, 1, 1), (1, 8, 16384), (64, 8, 4096),
                                               (3, 2, 4099), (200, 8, 100)])
def test_decode_splits_cover_the_cache_without_empty_splits(batch, hkv, max_len):
    splits, per_split = A.decode_splits(batch, hkv, max_len, 132)
    tiles = math.ceil(max_len / A.DECODE_BLOCK_N)
    assert splits >= 1 and (splits - 1) * per_split < tiles <= splits * per_split
    assert batch * hkv * splits <= max(batch * hkv, A.DECODE_BLOCKS_PER_SM * 132 + batch * hkv)


@pytest.mark.parametrize("batch,hkv,max_len", [(16, 8, 8192), (4, 8, 32768), (64, 8, 4096)])
def test_decode_splits_do_not_leave_a_partial_wave(batch, hkv, max_len):
    """Regression: 16 x 8192 took 3 splits, 384 blocks = 1.45 waves of 264 (74 % of copy bw)."""
    splits, _ = A.decode_splits(batch, hkv, max_len, 132)
    blocks, slots = batch * hkv * splits, A.DECODE_BLOCKS_PER_SM * 132
    assert blocks % slots == 0 or blocks % slots >= 0.9 * slots or blocks <= slots, (splits, blocks)


def test_prefill_flops_count_visible_pairs():
    # 1 sequence of 4: full 16 pairs, causal 10, window 2: 1 + 2 + 2 + 2 = 7
    assert A.prefill_flops((1, 1, 1, 4, 64)) == 4 * 64 * 16
    assert A.prefill_flops((1, 1, 1, 4, 64), causal=True) == 4 * 64 * 10
    assert A.prefill_flops((1, 1, 1, 4, 64), causal=True, window=2) == 4 * 64 * 7


def test_tuning_space_starts_at_the_planned_configuration():
    bm, bn = A.PREFILL_TILES[128]
    assert A.TUNE_SPACE["fmha_fwd_kernel"]["BLOCK_M"][0] == bm
    assert A.TUNE_SPACE["fmha_fwd_kernel"]["BLOCK_N"][0] == bn
    assert A.TUNE_SPACE["flash_decode_partial_kernel"]["BLOCK_N"][0] == A.DECODE_BLOCK_N


# ---- torch references against the NumPy one (torch is absent in CI) ----------------------------


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch", reason="torch is not installed: reference checks need it")


def _numpy(*ts):
    return [t.double().numpy() for t in ts]


@pytest.mark.parametrize("name,shape", [("fmha_fwd", (2, 4, 2, 77, 64, 1)),
                                        ("fmha_fwd", (3, 4, 1, 50, 64, 0)),
                                        ("fmha_fwd_sinks", (2, 4, 2, 77, 64, 35)),
                                        ("fmha_fwd_softcap", (2, 4, 2, 77, 128))])
def test_prefill_reference_matches_numpy(torch_mod, name, shape):
    from eval.interp.corpus import _attention_reference

    spec = SPECS[name]
    inputs = spec.make_inputs(shape, "float16", "cpu", 0)
    o, lse = spec.reference(*inputs)
    q, k, v = _numpy(*inputs[:3])
    lens = [(n, n) for n in inputs[3].tolist()]
    kw = {"causal": True} if name != "fmha_fwd" else {"causal": bool(shape[5])}
    if name == "fmha_fwd_sinks":
        kw.update(window=shape[5], sinks=inputs[4].double().numpy())
    if name == "fmha_fwd_softcap":
        kw.update(softcap=inputs[4])
    o_ref, lse_ref = _attention_reference(q, k, v, lens, **kw)
    np.testing.assert_allclose(o.double().numpy(), o_ref, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(lse.double().numpy(), lse_ref, rtol=1e-5, atol=1e-5)


DECODE_SHAPES = {"flash_decode": (3, 8, 2, 130, 64), "flash_decode_paged": (3, 8, 2, 130, 64),
                 "flash_decode_sinks": (3, 8, 2, 130, 64, 35),
                 "flash_decode_softcap": (3, 8, 2, 130, 128)}


@pytest.mark.parametrize("name", DECODE)
def test_decode_reference_matches_numpy(torch_mod, name):
    from eval.interp.corpus import _attention_reference

    spec = SPECS[name]
    shape = DECODE_SHAPES[name]
    inputs = spec.make_inputs(shape, "float16", "cpu", 0)
    o, lse = spec.reference(*inputs)
    q, k, v = inputs[:3]
    lens = inputs[4] if name == "flash_decode_paged" else inputs[3]
    if name == "flash_decode_paged":
        k, v = A.from_pages(k, inputs[3]), A.from_pages(v, inputs[3])
    kw = {}
    if name == "flash_decode_sinks":
        kw.update(window=shape[5], sinks=inputs[4].double().numpy())
    if name == "flash_decode_softcap":
        kw.update(softcap=inputs[4])
    qn, kn, vn = _numpy(q, k, v)
    o_ref, lse_ref = _attention_reference(qn[:, :, None], kn, vn, [(1, int(n)) for n in lens],
                                          causal=True, **kw)
    np.testing.assert_allclose(o.double().numpy(), o_ref[:, :, 0], rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(lse.double().numpy(), lse_ref[:, :, 0], rtol=1e-5, atol=1e-5)


def test_pages_round_trip(torch_mod):
    cache = torch_mod.randn(2, 3, 130, 8)
    order = torch_mod.randperm(2 * 3).to(torch_mod.int32)
    pool = A.to_pages(cache, order)
    back = A.from_pages(pool, order.reshape(2, 3))
    assert torch_mod.equal(back[:, :, :130], cache)


def test_gpu_compare_checks_tensors_with_infinite_entries(torch_mod):
    """Regression: an lse with -inf rows (padding) made the error NaN and the check vacuous."""
    from tileport.gpu.check import compare

    ref = torch_mod.tensor([float("-inf"), 1.0, 2.0])
    assert compare(ref.clone(), ref, 1e-3, 1e-3)[0]
    assert not compare(torch_mod.tensor([float("-inf"), 1.0, 2.5]), ref, 1e-3, 1e-3)[0]
    assert not compare(torch_mod.tensor([0.0, 1.0, 2.0]), ref, 1e-3, 1e-3)[0]


def test_ir_diff_of_the_sliding_window_kernel_is_fast():
    """Regression: the differ sorted assumption keys by `str`, whose Op repr recursed through the
    whole block; on the sliding-window prefill kernel one diff ran for more than ten minutes."""
    import subprocess
    import sys

    code = textwrap.dedent("""
        import time
        from tileport.ops.capture_ref import reference_bytecode
        from tileport.ops.specs import get_spec
        from tileport.tileir import diff, read_module
        spec = get_spec("fmha_fwd_sinks")
        cap = next(c for c in spec.captures if c.constants["SLIDING"])
        module = read_module(reference_bytecode(spec, cap))
        t0 = time.perf_counter()
        report = diff(module, read_module(reference_bytecode(spec, cap)))
        print(report.verdict, round(time.perf_counter() - t0, 1))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdict, seconds = proc.stdout.split()
    assert verdict == "PASS" and float(seconds) < 20


# ---- MLA prefill --------------------------------------------------------------------------------


def test_mla_prefill_shapes_are_ragged_and_cut_tiles():
    from tileport.ops.specs import mla_prefill

    spec = ALL["mla_prefill"]
    assert any(A.seq_lens_of(b, s)[-1] % mla_prefill.BLOCK_N for b, _h, s in spec.shapes if b > 1)
    assert any(s % mla_prefill.BLOCK_M for _b, _h, s in spec.shapes)
    assert spec.flops((1, 1, 2)) == 2 * (2 * 512 + 64) * 3  # 3 causal pairs of one head


def test_mla_prefill_reference_matches_numpy(torch_mod):
    from tileport.ops.specs.mla_decode import SM_SCALE

    spec = ALL["mla_prefill"]
    qn, qp, ckv, kpe, lens = spec.make_inputs((2, 3, 40), "float16", "cpu", 0)
    o, lse = spec.reference(qn, qp, ckv, kpe, lens)
    qn, qp, ckv, kpe = _numpy(qn, qp, ckv, kpe)
    for b, n in enumerate(lens.tolist()):
        s = (qn[b, :, :n] @ ckv[b, :n].T + qp[b, :, :n] @ kpe[b, :n].T) * SM_SCALE
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
        m = s.max(-1, keepdims=True)
        e = np.exp(s - m)
        np.testing.assert_allclose(o[b, :, :n].double().numpy(), e @ ckv[b, :n] / e.sum(-1, keepdims=True),
                                   rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(lse[b, :, :n].double().numpy(), (m + np.log(e.sum(-1, keepdims=True)))[..., 0],
                                   rtol=1e-5, atol=1e-5)
        assert not o[b, :, n:].any() and bool((lse[b, :, n:] == float("-inf")).all())
