"""The attention ops' PyTorch baselines (ops/baselines.py) compute what their specs compute.

CPU: every attention op, both dtypes, the spec's shapes that are cheap on a CPU, within the op's
tolerance of its f32 reference; the baselines run without the references; a baseline that drops
a part of the op (dlse, the window, the sinks) fails the same check; torch.compile traces each
with one graph break (the lengths). GPU (marked `gpu`): the same checks on CUDA, where the
baselines run SDPA's flash kernels and `bmm(out_dtype=f32)`, eager and compiled with inductor, and
the flash forward returns what `F.scaled_dot_product_attention` returns. The GPU results go to
$TILEPORT_RESULTS_DIR (default out/baselines-gpu)/baselines-attention.json.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the baseline checks need it (CI has none)")

from tileport.gpu.check import compare  # noqa: E402
from tileport.ops import baselines as B  # noqa: E402
from tileport.ops.specs import _attention as A  # noqa: E402
from tileport.ops.specs import all_specs  # noqa: E402

SPECS = all_specs()
ATTENTION = sorted(B.ATTENTION_HOST_LENGTHS)
# On the CPU, the spec's shapes of at most this many positions per sequence (f16 matmuls are slow on
# a CPU): single positions, ragged batches, GQA / MQA, causal or not, windows shorter than a tile.
MAX_CPU_POSITIONS = 300


def _positions(name, shape):
    return shape[2] if name.startswith("mla") else shape[3]


CPU_CASES = [(name, dt, tuple(shape)) for name in ATTENTION for dt in SPECS[name].dtypes
             for shape in SPECS[name].shapes if _positions(name, shape) <= MAX_CPU_POSITIONS]


def _ids(cases):
    return [f"{n}-{d}-{'x'.join(map(str, s))}" for n, d, s in cases]


def _check(name, dtype, inputs, got=None):
    """(ok, err / tol, message) of the baseline's outputs (or `got`) against the spec's reference."""
    spec = SPECS[name]
    tol = spec.tolerances[dtype]
    got = B.BASELINES[name](*inputs) if got is None else got
    ok, _, ratio, msg = compare(got, spec.reference(*inputs), tol.rtol, tol.atol)
    return ok, ratio, msg


def test_every_attention_op_has_a_baseline_of_its_own():
    assert ATTENTION == sorted(n for n in SPECS if n.startswith(("fmha", "flash_decode", "mla")))
    for name in ATTENTION:
        assert B.baseline(SPECS[name]) is B.BASELINES[name] is not SPECS[name].reference


def test_the_cpu_cases_cover_every_op_dtype_and_a_ragged_shape():
    covered = {(n, d) for n, d, _ in CPU_CASES}
    assert covered == {(n, d) for n in ATTENTION for d in SPECS[n].dtypes}
    assert {n for n, _, s in CPU_CASES if s[0] > 1} == set(ATTENTION)  # B > 1: ragged lengths


@pytest.mark.parametrize("name,dtype,shape", CPU_CASES, ids=_ids(CPU_CASES))
def test_attention_baseline_matches_the_reference(name, dtype, shape):
    ok, ratio, msg = _check(name, dtype, SPECS[name].make_inputs(shape, dtype, "cpu", 0))
    assert ok, f"{name} {dtype} {shape}: {msg} (err/tol {ratio:.2f})"


def test_baselines_do_not_run_the_references(monkeypatch):
    """Not the f32 reference in disguise: with every reference helper broken, the baselines still run
    and still match the (unbroken) references computed beforehand."""
    cases = {}
    for name in ATTENTION:
        shape = SPECS[name].shapes[1]
        inputs = SPECS[name].make_inputs(shape, "bfloat16", "cpu", 0)
        cases[name] = (inputs, SPECS[name].reference(*inputs))

    def broken(*a, **kw):
        raise AssertionError("a baseline called a reference")

    for helper in ("attention_reference", "decode_reference", "masked_scores", "from_pages"):
        monkeypatch.setattr(A, helper, broken)
    for name, (inputs, ref) in cases.items():
        got = B.BASELINES[name](*inputs)
        tol = SPECS[name].tolerances["bfloat16"]
        assert compare(got, ref, tol.rtol, tol.atol)[0], name
        assert got[0].dtype == torch.bfloat16, name


def test_the_check_fails_a_baseline_that_drops_part_of_the_op(monkeypatch):
    """The comparison sees each variant's ingredient: without the dlse fold, the window or the sinks
    the baselines fail the op's tolerance (so the passing checks above say something)."""
    bwd = SPECS["fmha_bwd"].make_inputs((2, 4, 2, 77, 64, 1), "float16", "cpu", 0)
    sinks = SPECS["fmha_fwd_sinks"].make_inputs((2, 4, 2, 300, 64, 35), "float16", "cpu", 0)
    assert _check("fmha_bwd", "float16", bwd)[0] and _check("fmha_fwd_sinks", "float16", sinks)[0]
    no_window = B.fmha_fwd_sinks(*sinks[:5], 0)
    no_sinks = B._eager_prefill(*sinks[:4], window=sinks[5])
    assert not _check("fmha_fwd_sinks", "float16", sinks, no_window)[0]
    assert not _check("fmha_fwd_sinks", "float16", sinks, no_sinks)[0]
    monkeypatch.setattr(B, "_fold_dlse", lambda o, do, dlse: o)
    assert not _check("fmha_bwd", "float16", bwd)[0]


def test_fold_dlse_moves_the_row_sum_by_dlse():
    g = torch.Generator().manual_seed(0)
    o, do = torch.randn(3, 5, 64, generator=g), torch.randn(3, 5, 64, generator=g)
    dlse = torch.randn(3, 5, generator=g)
    do[0, 0] = 0.0  # a row without output gradient keeps its row sum (dlse cannot enter there)
    folded = B._fold_dlse(o, do, dlse)
    want = (do * o).sum(-1) - torch.where(do.abs().sum(-1) > 0, dlse, 0.0)
    torch.testing.assert_close((do * folded).sum(-1), want, rtol=1e-5, atol=1e-5)


def test_compile_traces_each_attention_baseline_with_one_graph_break():
    """bench's torch.compile column: the lengths read on the host break the graph once; the rest is
    one graph (counted with a recording backend; inductor runs on the GPU machine)."""
    failures = {}
    for name in ATTENTION:
        spec = SPECS[name]
        inputs = spec.make_inputs(spec.shapes[1], "bfloat16", "cpu", 0)
        graphs = []

        def record(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        torch._dynamo.reset()
        got = torch.compile(B.BASELINES[name], backend=record, dynamic=False)(*inputs)
        want = B.BASELINES[name](*inputs)
        if len(graphs) != 2 or not all(torch.equal(g, w) for g, w in zip(got, want)):
            failures[name] = f"{len(graphs)} graphs, equal: {all(torch.equal(g, w) for g, w in zip(got, want))}"
    torch._dynamo.reset()
    assert not failures, failures


# ---- GPU ----------------------------------------------------------------------------------------

RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or Path(__file__).resolve().parents[2] / "out" / "baselines-gpu")
# On the GPU: every op, both dtypes, every test shape of the spec, eager; compiled with inductor: each
# op once (bf16, its third shape: ragged), as a compilation takes seconds.
GPU_CASES = [(name, dt, tuple(shape)) for name in ATTENTION for dt in SPECS[name].dtypes
             for shape in SPECS[name].shapes]
COMPILED_CASES = [(name, "bfloat16", tuple(SPECS[name].shapes[2])) for name in ATTENTION]
_GPU_RECORDS: list[dict] = []


def _write_gpu_records():
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS / "baselines-attention.json.tmp"
    tmp.write_text(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                               "records": _GPU_RECORDS}, indent=1))
    os.replace(tmp, RESULTS / "baselines-attention.json")


def _gpu_case(name, dtype, shape, compiled):
    """Checks one case on CUDA, records it (also when it raises) and fails with the message."""
    inputs = SPECS[name].make_inputs(shape, dtype, "cuda", 0)
    rec = {"op": name, "dtype": dtype, "shape": list(shape), "column": "torch.compile" if compiled else "torch"}
    msg = ""
    try:
        t0 = time.perf_counter()
        fn = B.BASELINES[name]
        if compiled:
            torch._dynamo.reset()
            fn = torch.compile(fn, fullgraph=False, dynamic=False)  # as bench compiles the attention baselines
        rec["ok"], rec["err_over_tol"], msg = _check(name, dtype, inputs, fn(*inputs))
        rec["seconds"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - recorded, then failed below
        rec["error"] = f"{type(e).__name__}: {e}"[:1000]
    _GPU_RECORDS.append(rec)
    _write_gpu_records()
    assert "error" not in rec, rec["error"]
    assert rec["ok"], f"{rec['column']}: {msg} (err/tol {rec['err_over_tol']:.2f})"


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype,shape", GPU_CASES, ids=_ids(GPU_CASES))
def test_attention_baseline_matches_the_reference_on_cuda(name, dtype, shape):
    _gpu_case(name, dtype, shape, compiled=False)


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype,shape", COMPILED_CASES, ids=_ids(COMPILED_CASES))
def test_compiled_attention_baseline_matches_the_reference_on_cuda(name, dtype, shape):
    _gpu_case(name, dtype, shape, compiled=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", A.ATTN_DTYPES)
@pytest.mark.parametrize("kind", ["prefill", "causal prefill", "decode"])
def test_the_flash_forward_is_what_sdpa_runs(dtype, kind):
    """The fmha_fwd / flash_decode baselines call the kernel SDPA picks directly (for its lse): cuDNN's
    or flash's, and the same output as SDPA, bit for bit."""
    from torch.nn.attention import SDPBackend
    q, k, v, _ = A.prefill_inputs((1, 32, 8, 1024, 128), dtype, "cuda", 0)
    if kind == "decode":
        q = q[:, :, -1:]
    causal = kind == "causal prefill"
    choice = torch._fused_sdp_choice(q, k, v, is_causal=causal, enable_gqa=True)
    o, _ = B._sdpa_kernel(q, k, v, causal)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    _GPU_RECORDS.append({"sdpa_backend": SDPBackend(choice).name, "dtype": dtype, "kind": kind,
                         "baseline_equals_sdpa": bool(torch.equal(o, sdpa))})
    _write_gpu_records()
    assert choice in (SDPBackend.CUDNN_ATTENTION.value, SDPBackend.FLASH_ATTENTION.value), SDPBackend(choice).name
    assert torch.equal(o, sdpa)


# ---- bench's use of the baselines ----------------------------------------------------------------


def test_bench_compiles_the_attention_baselines_with_their_graph_break(monkeypatch):
    """bench's torch column runs the baseline; its torch.compile column compiles the same function,
    fullgraph for every op but the attention ones (which break once, at their lengths)."""
    from tileport.gpu import bench
    seen = {}

    def fake_compile(fn, **kw):
        seen[fn] = kw
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    for name in ("fmha_fwd", "mla_decode", "softmax"):
        spec = SPECS[name]
        inputs = spec.make_inputs(spec.shapes[1], spec.dtypes[-1], "cpu", 0)
        for column in ("torch", "torch.compile"):
            tol = spec.tolerances[spec.dtypes[-1]]
            assert compare(bench.column_runner(spec, column, inputs)(), spec.reference(*inputs), tol.rtol, tol.atol)[0]
        assert seen[B.BASELINES[name]]["fullgraph"] is (name not in B.ATTENTION_HOST_LENGTHS)


def test_bench_rand_inputs_keep_lengths_and_block_tables():
    from tileport.gpu import bench
    spec = SPECS["flash_decode_paged"]
    shape = (2, 8, 2, 77, 64)
    normal = bench.case_inputs(spec, "bfloat16", shape, "randn", device="cpu")
    uniform = bench.case_inputs(spec, "bfloat16", shape, "rand", device="cpu")
    assert torch.equal(uniform[3], normal[3]) and torch.equal(uniform[4], normal[4])  # block table, kv_lens
    assert uniform[0].min() >= 0 and not torch.equal(uniform[0], normal[0])
    assert _check("flash_decode_paged", "bfloat16", uniform)[0]
