"""The engine on real stages: resumability, validator rejection and repair, an unsupported kernel,
a compile failure, D/E blocked by the environment."""

from __future__ import annotations

import json
import shutil
import sys
import types

import pytest
from conftest import DATA, route, verdict

from tileport.pipeline import resolve_targets
from tileport.pipeline import stage_a
from tileport.pipeline.verdicts import Stage

VECTOR_ADD = "src/tileport/ops/kernels/vector_add.py"


@pytest.mark.cargo
def test_cpu_run_compiles_with_clean_diff_and_blocks_on_env(tmp_path, pipeline):
    res, session = pipeline(resolve_targets([VECTOR_ADD]), tmp_path)
    o = res["vector_add_kernel"]
    assert route(o) == ["A PASS", "B COMPILED", "D BLOCKED/env", "E BLOCKED/env"]
    assert o.terminal == "BLOCKED_ENV" and o.ok and o.route[-1]["close_out"]
    b = verdict(tmp_path, "vector_add_kernel", "B")
    assert b["details"]["diff_clean"] and b["details"]["counts"]["CRITICAL"] == 0
    assert all(all(v["cubins"].values()) for v in b["details"]["variants"])
    d = verdict(tmp_path, "vector_add_kernel", "D")
    assert d["details"]["host_checks_ok"] and "GPU" in d["reason"]
    final = json.loads((tmp_path / "vector_add_kernel" / "final.json").read_text())
    assert [m.split(":")[0] for m in final["missing"]] == ["D", "E"] and final["best_attainable"]
    assert (tmp_path / "report.html").is_file() and (tmp_path / "summary.json").is_file()


@pytest.mark.cargo
def test_resume_skips_stages_whose_inputs_did_not_change(tmp_path, pipeline):
    targets = lambda: resolve_targets([VECTOR_ADD])  # noqa: E731
    pipeline(targets(), tmp_path)
    res, _ = pipeline(targets(), tmp_path, resume=True)
    assert [r["reused"] for r in res["vector_add_kernel"].route] == [True] * 4
    # new GPU evidence: A and B are kept, D and E run again
    ev = tmp_path / "ev.json"
    ev.write_text(json.dumps([{"op": "vector_add", "backend": "cutile-rs", "dtype": "float32", "shape": [3],
                               "ok": True, "error": ""}]))
    res, _ = pipeline(targets(), tmp_path, resume=True, gpu_results=[ev])
    assert [r["reused"] for r in res["vector_add_kernel"].route] == [True, True, False, False]
    assert "no commit" in verdict(tmp_path, "vector_add_kernel", "D")["reason"]
    # a stage whose artifacts were damaged is run again, not trusted
    shutil.rmtree(tmp_path / "vector_add_kernel" / "B" / "generated")
    res, _ = pipeline(targets(), tmp_path, resume=True, gpu_results=[ev])
    assert [r["reused"] for r in res["vector_add_kernel"].route] == [True, False, True, True]
    # without --resume everything runs
    res, _ = pipeline(targets(), tmp_path)
    assert not any(r["reused"] for r in res["vector_add_kernel"].route)


def test_validator_rejection_after_one_repair(tmp_path, pipeline, monkeypatch):
    real = stage_a.run
    calls = []

    def damaged(ctx):
        v = real(ctx)
        calls.append(1)
        (ctx.dir / "analysis.json").unlink()  # the stage's own artifact is gone: its validator must say so
        return v
    monkeypatch.setattr(stage_a, "run", damaged)
    res, _ = pipeline(resolve_targets([VECTOR_ADD]), tmp_path)
    o = res["vector_add_kernel"]
    assert len(calls) == 2  # the run and its one same-stage repair
    assert route(o) == ["A FAIL_FIXABLE"] and o.terminal == "STOPPED" and not o.ok
    a = verdict(tmp_path, "vector_add_kernel", "A")
    assert a["validator"]["ok"] is False and a["validator"]["repaired"] is True
    assert any("analysis.json" in e for e in a["validator"]["errors"])
    assert a["details"]["rejected_verdict"] == "PASS"


def test_validator_repair_that_succeeds(tmp_path, pipeline, monkeypatch):
    real = stage_a.run
    calls = []

    def flaky(ctx):
        v = real(ctx)
        calls.append(1)
        if len(calls) == 1:
            (ctx.dir / "analysis.json").write_text("{}")
        return v
    monkeypatch.setattr(stage_a, "run", flaky)
    res, _ = pipeline(resolve_targets([VECTOR_ADD]), tmp_path, until=Stage.A)
    a = verdict(tmp_path, "vector_add_kernel", "A")
    assert a["verdict"] == "PASS" and a["validator"]["repaired"] and a["validator"]["ok"]
    assert res["vector_add_kernel"].terminal == "PAUSED"


def test_unsupported_kernel_ends_at_b_with_its_diagnostic(tmp_path, pipeline):
    res, _ = pipeline(resolve_targets([str(DATA / "unsupported.py")]), tmp_path)
    o = res["add_three_kernel"]
    assert route(o) == ["A PASS", "B BLOCKED"] and o.terminal == "STOPPED" and not o.ok
    b = verdict(tmp_path, "add_three_kernel", "B")
    diag = b["diagnostics"][0]
    assert diag["file"].endswith("unsupported.py") and (diag["line"], diag["col"]) == (14, 9)
    assert "ct.cumsum" in diag["message"] and "unsupported.py:14:9" in b["reason"]
    final = json.loads((tmp_path / "add_three_kernel" / "final.json").read_text())
    assert any(m.startswith("B: device kernel COMPILED") for m in final["missing"])


def test_a_needs_constant_values_for_kernels_outside_the_library(tmp_path, pipeline):
    src = tmp_path / "k.py"
    src.write_text("import cuda.tile as ct\n\n@ct.kernel\ndef k(x, y, TILE: ct.Constant[int]):\n"
                   "    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))\n    ct.store(y, index=(ct.bid(0),), tile=t)\n")
    # no launch and no --config: A runs on values synthesized from the kernel's text, and says so
    res, _ = pipeline(resolve_targets([str(src)]), tmp_path / "out", until=Stage.A)
    assert route(res["k"]) == ["A PASS"] and "synthesized" in json.dumps(verdict(tmp_path / "out", "k", "A")).lower()
    # ... unless no synthesized value compiles: then A stops and asks for the values
    odd = tmp_path / "odd" / "k.py"
    odd.parent.mkdir()
    odd.write_text(src.read_text().replace("    t = ct.load", "    ct.static_assert(TILE == 7)\n    t = ct.load"))
    res, _ = pipeline(resolve_targets([str(odd)]), tmp_path / "out1")
    assert route(res["k"]) == ["A FAIL_FIXABLE"] and "--config" in verdict(tmp_path / "out1", "k", "A")["reason"]
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"k": [{"x": "float16", "y": "float16", "TILE": 256}]}))
    res, _ = pipeline(resolve_targets([str(src)], config=cfg), tmp_path / "out2", until=Stage.A)
    a = json.loads((tmp_path / "out2" / "k" / "A" / "analysis.json").read_text())
    assert [c["constants"] for c in a["configurations"]] == [{"TILE": 256}]


@pytest.mark.cargo
def test_compile_failure_is_fail_compile(tmp_path, pipeline, plant):
    res, _ = pipeline(resolve_targets(["src/tileport/ops/kernels/relu.py"]), tmp_path,
                      planted=plant("relu_kernel", "compile"))
    assert route(res["relu_kernel"]) == ["A PASS", "B FAIL_COMPILE"] and res["relu_kernel"].terminal == "STOPPED"
    b = verdict(tmp_path, "relu_kernel", "B")
    assert "cargo build failed" in b["reason"] and b["validator"]["ok"]
    assert "mismatched types" in (tmp_path / "relu_kernel" / "B" / "build.log").read_text()


@pytest.mark.cargo
def test_with_a_gpu_d_and_e_record_evidence_and_the_run_reaches_done(tmp_path, pipeline, monkeypatch):
    """The native GPU path, with the GPU harness simulated: D and E run `evidence.record` (the real one,
    so the fingerprints are computed as on the H200) whose check/bench calls are replaced by fakes."""
    import tileport.gpu.bench as gbench
    import tileport.gpu.check as gcheck
    from tileport.pipeline.context import Session

    calls = []

    def fake_check(ops, jobs, out_dir):
        calls.append(("check", tuple(ops)))
        return [{"op": op, "backend": be, "dtype": "float32", "shape": [5], "ok": True, "error": ""}
                for op in ops for be in ("cutile", "cutile-rs")]

    def fake_bench_case(spec, dtype, shape, flush, columns, ceil, budget_s):
        if not calls or calls[-1] != ("bench", (spec.name,)):
            calls.append(("bench", (spec.name,)))
        return {"op": spec.name, "dtype": dtype, "shape": list(shape), "errors": {},
                "times_us": {"torch": 12.0, "cutile": 10.0, "cutile-rs": 10.2}}
    monkeypatch.setattr(gcheck, "run_parallel", fake_check)
    monkeypatch.setattr(gbench, "bench_case", fake_bench_case)
    monkeypatch.setattr(gbench, "make_flush", lambda device: (lambda: None))
    monkeypatch.setattr(gbench, "environment", lambda: {"gpu": "simulated"})
    monkeypatch.setattr(gbench, "ceilings", lambda flush: {"copy_gbps": 1.0})
    # the benchmark switches TF32 off around its cases: a stand-in torch holds the flag
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(backends=types.SimpleNamespace(
        cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)))))
    monkeypatch.setattr(Session, "gpu", lambda self: (True, ""))
    res, _ = pipeline(resolve_targets([VECTOR_ADD]), tmp_path)
    o = res["vector_add_kernel"]
    b = verdict(tmp_path, "vector_add_kernel", "B")
    if not b["details"]["library"]["shared_repo_crate"]:
        pytest.skip("rust/ differs from the translator's output here: the GPU harness would not run this build")
    assert route(o) == ["A PASS", "B COMPILED", "D ALL_PASS", "E DONE"] and o.terminal == "DONE"
    assert calls == [("check", ("vector_add",)), ("bench", ("vector_add",))]
    e = verdict(tmp_path, "vector_add_kernel", "E")
    assert e["details"]["reference_backend"] == "cutile" and abs(e["details"]["geomean_ratio"] - 1.02) < 1e-9
    final = json.loads((tmp_path / "vector_add_kernel" / "final.json").read_text())
    assert final["passed"] and final["best_attainable"] and not final["missing"]


def test_missing_toolchain_blocks_a_with_class_env(tmp_path, pipeline, monkeypatch):
    from tileport.pipeline.context import Session
    from tileport.toolchain import Component
    monkeypatch.setattr(Session, "toolchain", lambda self: {
        "cuTile Python (cuda-tile)": Component("cuTile Python (cuda-tile)", False, fix="pip install cuda-tile")})
    res, _ = pipeline(resolve_targets([VECTOR_ADD]), tmp_path)
    o = res["vector_add_kernel"]
    assert route(o) == ["A BLOCKED/env"] and o.terminal == "BLOCKED_ENV" and not o.ok
    assert "pip install cuda-tile" in verdict(tmp_path, "vector_add_kernel", "A")["reason"]
