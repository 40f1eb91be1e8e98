"""The benchmark's case records on CPU, with the GPU timers replaced: baseline columns, errors against
the f32 reference, input distributions, rates and summary fields (the timers run on the GPU only)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the benchmark record checks need it (CI has none)")

from tileport.gpu import bench  # noqa: E402
from tileport.gpu.timing import Timing, TimingError  # noqa: E402
from tileport.ops.specs import get_spec  # noqa: E402

CEIL = {"copy_gbps": 4000.0, "cublas_bf16_tflops": 700.0, "bf16_datasheet_tflops": 989.0}


@pytest.fixture
def fake_timers(monkeypatch):
    """Kernel time 10 µs and call time 15 µs for every column; each timer runs every function once."""
    def timer(us):
        def run(fns, flush, budget_s=0.3):
            for fn in fns.values():
                fn()
            return {name: Timing(us, us, us, us, 1, 1) for name in fns}
        return run
    monkeypatch.setattr(bench, "gpu_times", timer(10.0))
    monkeypatch.setattr(bench, "call_times", timer(15.0))


def test_case_record_has_both_timers_and_errors_against_the_reference(fake_timers):
    rec = bench.bench_case(get_spec("softmax"), "float16", (64, 1000), None, ["torch"], CEIL, 0.01, device="cpu")
    assert rec["errors"] == {}
    assert rec["times_us"] == {"torch": 10.0} and rec["call_us"] == {"torch": 15.0}
    assert 0 <= rec["err_over_tol"]["torch"] <= 1.0
    assert rec["inputs"] == "randn" and rec["gbps"]["torch"] == pytest.approx(2 * 64 * 1000 * 2 / 10e-6 / 1e9)


def test_a_column_that_fails_is_recorded_with_its_reason(fake_timers):
    rec = bench.bench_case(get_spec("softmax"), "float32", (8, 16), None, ["torch", "cutile-rs"], CEIL, 0.01,
                           device="cpu")
    assert "torch" in rec["times_us"] and "cutile-rs" not in rec["times_us"]
    assert "BackendUnavailable" in rec["errors"]["cutile-rs"]


def test_gemm_inputs_randn_and_rand_are_identical_across_columns():
    spec = get_spec("matmul")
    a1, b1 = bench.case_inputs(spec, "bfloat16", (64, 32, 48), "rand", device="cpu")
    a2, b2 = bench.case_inputs(spec, "bfloat16", (64, 32, 48), "rand", device="cpu")
    assert torch.equal(a1, a2) and torch.equal(b1, b2)
    assert a1.dtype == torch.bfloat16 and float(a1.min()) >= 0 and float(a1.max()) <= 1
    n1, _ = bench.case_inputs(spec, "bfloat16", (64, 32, 48), "randn", device="cpu")
    assert float(n1.min()) < 0
    with pytest.raises(ValueError, match="unknown input distribution"):
        bench.case_inputs(spec, "bfloat16", (64, 32, 48), "normal", device="cpu")


def test_rand_gemm_baseline_matches_the_reference(fake_timers):
    rec = bench.bench_case(get_spec("matmul"), "float32", (64, 32, 48), None, ["torch"], CEIL, 0.01, "rand", "cpu")
    assert rec["inputs"] == "rand" and rec["err_over_tol"]["torch"] <= 1.0
    assert rec["pct_cublas_bf16"]["torch"] == pytest.approx(100 * rec["tflops"]["torch"] / 700.0)


def test_summary_has_kernel_call_and_torch_ratios():
    recs = [{"op": "x", "ratio_rs_over_cutile": 1.1, "call_ratio_rs_over_cutile": 0.9, "ratio_rs_over_best_torch": 0.5},
            {"op": "x", "ratio_rs_over_cutile": 1.0, "call_ratio_rs_over_cutile": 0.9, "ratio_rs_over_best_torch": 2.0}]
    s = bench.summarize(recs)
    assert s["overall_geomean_ratio"] == pytest.approx((1.1 * 1.0) ** 0.5)
    assert s["overall_call_geomean_ratio"] == pytest.approx(0.9)
    assert s["geomean_rs_over_best_torch"] == pytest.approx(1.0)


def test_a_timing_failure_is_recorded_for_every_column_timed_with_it(monkeypatch):
    def fail(fns, flush, budget_s=0.3):
        raise TimingError("expected 20 repetitions with kernels, the profiler saw 19")
    monkeypatch.setattr(bench, "gpu_times", fail)
    rec = bench.bench_case(get_spec("softmax"), "float32", (8, 16), None, ["torch", "cutile-rs"], CEIL, 0.01,
                           device="cpu")
    assert rec["times_us"] == {} and "BackendUnavailable" in rec["errors"]["cutile-rs"]
    assert rec["errors"]["torch"].startswith("timing: TimingError: expected 20 repetitions")


def test_tile_columns_write_one_output_poisoned_before_each_check(fake_timers, monkeypatch):
    """Both tile backends get the same output tensor (its place in memory must not differ between them), and
    it is filled with NaN before each column's check: a column that writes nothing fails instead of passing
    on the other column's result."""
    from tileport.ops import api
    spec = get_spec("softmax")
    seen = []

    def fake_call(spec_, *inputs, out=None, backend=None):
        seen.append((backend, out))
        if backend == "cutile":
            out.copy_(spec.reference(*inputs).to(out.dtype))
        return out
    monkeypatch.setattr(api, "call", fake_call)
    monkeypatch.setattr(bench, "tuned_config", lambda spec_, backend, inputs: {})
    rec = bench.bench_case(spec, "float32", (8, 16), None, ["cutile", "cutile-rs"], CEIL, 0.01, device="cpu")
    assert {b for b, _ in seen} == {"cutile", "cutile-rs"}
    assert len({id(o) for _, o in seen}) == 1
    assert rec["err_over_tol"]["cutile"] <= 1.0
    assert rec["err_over_tol"]["cutile-rs"] == float("inf")


def test_poison_fills_floating_and_integer_outputs():
    f, i = torch.zeros(3), torch.zeros(2, dtype=torch.int32)
    bench.poison((f, i))
    assert torch.isnan(f).all() and (i == torch.iinfo(torch.int32).max).all()


def test_memory_bound_cases_time_a_same_bytes_copy_in_their_rotation(fake_timers, monkeypatch):
    """A memory-bound case times a copy of its bytes beside its columns (kernel time only) and gives each
    column's share of it; a GEMM case does not."""
    rotations = []

    def timer(fns, flush, budget_s=0.3):
        rotations.append(list(fns))
        for fn in fns.values():
            fn()
        return {name: Timing(20.0 if name == "torch" else 10.0, 0, 0, 0, 1, 1) for name in fns}
    monkeypatch.setattr(bench, "gpu_times", timer)
    rec = bench.bench_case(get_spec("softmax"), "float32", (64, 1000), None, ["torch"], CEIL, 0.01, device="cpu")
    assert rotations == [["torch", bench.COPY_REFERENCE]]
    assert rec["copy_us"] == 10.0 and rec["pct_copy_side_by_side"] == {"torch": 50.0}
    assert bench.COPY_REFERENCE not in rec["times_us"]
    rotations.clear()
    rec = bench.bench_case(get_spec("matmul"), "float32", (64, 32, 48), None, ["torch"], CEIL, 0.01, device="cpu")
    assert rotations == [["torch"]] and "copy_us" not in rec and "pct_copy_side_by_side" not in rec


def test_tile_columns_are_timed_in_a_rotation_of_their_own(monkeypatch):
    """With both tile columns, their kernel times (and the parity ratio) come from a rotation of the two alone;
    torch and the copy are timed beside cutile-rs in a second rotation, whose times give the ratios against
    them. Call times stay one rotation of every column."""
    from tileport.ops import api
    spec = get_spec("softmax")
    rotations = []
    us = {"cutile": 10.0, "cutile-rs": 11.0, "torch": 30.0, bench.COPY_REFERENCE: 6.0}

    def timer(fns, flush, budget_s=0.3):
        rotations.append(list(fns))
        for fn in fns.values():
            fn()
        # cutile-rs reads slower beside the baselines than beside cuTile Python
        extra = 1.0 if "torch" in fns else 0.0
        return {n: Timing(us[n] + (extra if n == "cutile-rs" else 0.0), 0, 0, 0, 1, 1) for n in fns}

    def fake_call(spec_, *inputs, out=None, backend=None):
        return out.copy_(spec.reference(*inputs).to(out.dtype))
    monkeypatch.setattr(bench, "gpu_times", timer)
    monkeypatch.setattr(bench, "call_times", lambda fns, flush, budget_s=0.3: {
        n: Timing(20.0, 0, 0, 0, 1, 0) for n in fns})
    monkeypatch.setattr(api, "call", fake_call)
    monkeypatch.setattr(bench, "tuned_config", lambda spec_, backend, inputs: {})
    rec = bench.bench_case(spec, "float32", (64, 1000), None, ["torch", "cutile", "cutile-rs"], CEIL, 0.01,
                           device="cpu")
    assert rotations == [["cutile", "cutile-rs"], ["cutile-rs", "torch", bench.COPY_REFERENCE]]
    assert rec["times_us"] == {"torch": 30.0, "cutile": 10.0, "cutile-rs": 11.0}
    assert rec["ratio_rs_over_cutile"] == pytest.approx(1.1)
    assert rec["baseline_rotation_us"] == {"cutile-rs": 12.0, "torch": 30.0, bench.COPY_REFERENCE: 6.0}
    assert rec["ratio_rs_over_best_torch"] == pytest.approx(12.0 / 30.0)
    assert rec["pct_copy_side_by_side"] == {"cutile-rs": 50.0, "torch": 20.0}


def test_torch_compile_column_reads_its_own_copies_of_the_inputs(monkeypatch):
    """torch.compile's kernels load with evict_last, which outlasts the L2 flush: its column gets copies of the
    tensor inputs (equal values, other memory), so the other columns never read what it left in L2."""
    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: lambda *args: seen.append(args))
    spec = get_spec("softmax")
    inputs = bench.case_inputs(spec, "float32", (8, 16), "randn", device="cpu")
    bench.column_runner(spec, "torch.compile", inputs)()
    (args,) = seen
    assert len(args) == len(inputs)
    for a, x in zip(args, inputs):
        assert a is not x and a.data_ptr() != x.data_ptr() and torch.equal(a, x)
