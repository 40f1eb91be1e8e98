"""Batches through the CLI: `tileport port` over library ops and the whole reference corpus (CPU mode:
every kernel COMPILED with a clean IR diff, D/E BLOCKED(env)), the summary, the HTML/markdown report."""

from __future__ import annotations

import json
import sys
import time

import pytest
from typer.testing import CliRunner

from tileport.cli import app
from tileport.corpus import REPO

# The H200 results of an earlier commit (stale for this tree): they must never grade a kernel. Later
# committed runs are left out, since results of the current code would grade (fresh) on purpose.
STALE = [a for f in sorted((REPO / "bench" / "results").glob("2026-11-29-h200-*.json"))
         for a in ("--gpu-results", f)]


def port(*args):
    return CliRunner().invoke(app, ["port", *map(str, args)], catch_exceptions=False)


def test_usage_errors_exit_2(tmp_path):
    assert port("--out", tmp_path).exit_code == 2
    assert port("--op", "no_such_op", "--out", tmp_path).exit_code == 2
    assert port(tmp_path / "missing.py", "--out", tmp_path).exit_code == 2
    assert port("src/tileport/ops/kernels/relu.py::nope", "--out", tmp_path).exit_code == 2
    assert port("--op", "relu", "--until", "Z", "--out", tmp_path).exit_code == 2


@pytest.mark.cargo
def test_op_batch_with_imported_h200_results(tmp_path):
    r = port("--op", "matmul_splitk", "-j", "2", "--out", tmp_path, *STALE)
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [k["key"] for k in summary["kernels"]] == ["matmul_splitk_kernel", "splitk_reduce_kernel"]
    assert summary["counts"] == {"BLOCKED_ENV": 2, "best_attainable": 2, "total": 2}
    assert summary["gpu"]["available"] is False and summary["evidence"]["files"]
    html = (tmp_path / "report.html").read_text()
    md = (tmp_path / "report.md").read_text()
    assert "matmul_splitk_kernel" in html and "stale" in html and "<table>" in html
    assert "Stale benchmark evidence" in md and "commit 09815c6726" in md
    assert "matmul_splitk_kernel/B/kernel.rs" in html  # links to artifacts
    e = json.loads((tmp_path / "matmul_splitk_kernel" / "E" / "verdict.json").read_text())
    assert e["verdict"] == "BLOCKED" and e["fail_class"] == "env"
    assert e["details"]["evidence"]["stale_grade"]["geomean_ratio"] > 0  # what the stale run said, not a verdict


def test_report_says_when_the_chart_is_absent(tmp_path, monkeypatch):
    from tileport.pipeline.report import parity_chart
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path, note = parity_chart(tmp_path, [("k", {"ratio": 1.0, "fresh": False})])
    assert path is None and "matplotlib is not installed" in note
    assert parity_chart(tmp_path, [("k", None)])[0] is None


# Ported in every test run: element-wise, gather and TMA reductions, norms, RoPE, GEMM, attention; the whole
# corpus with --slow.
CORPUS_SAMPLE = ("vector_add.py", "softmax.py::softmax_tma_kernel", "rms_norm.py", "rope.py::rope_kernel",
                 "matmul.py::matmul_kernel", "attention.py::flash_decode_combine_kernel")


@pytest.mark.cargo
@pytest.mark.timeout(1800)
def test_reference_corpus_in_cpu_mode(request, tmp_path):
    """`tileport port` over corpus kernels with `-j 2` (`--corpus src/tileport/ops/kernels` with --slow):
    COMPILED + clean IR diff, D/E BLOCKED(env)."""
    kernels = REPO / "src" / "tileport" / "ops" / "kernels"
    whole = request.config.getoption("--slow")
    targets = ["--corpus", kernels] if whole else [kernels / t for t in CORPUS_SAMPLE]
    t0 = time.perf_counter()
    r = port(*targets, "-j", "2", "--out", tmp_path, *STALE)
    seconds = time.perf_counter() - t0
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["kernels"]) >= (17 if whole else len(CORPUS_SAMPLE))
    for k in summary["kernels"]:
        steps = [(x["stage"], x["verdict"], x["fail_class"]) for x in k["route"]]
        assert steps == [("A", "PASS", None), ("B", "COMPILED", None), ("D", "BLOCKED", "env"),
                         ("E", "BLOCKED", "env")], (k["key"], steps)
        b = json.loads((tmp_path / k["key"] / "B" / "verdict.json").read_text())
        assert b["details"]["diff_clean"], (k["key"], b["details"]["counts"])
        assert k["ok"] and k["terminal"] == "BLOCKED_ENV"
    print(f"\ncorpus, CPU mode: {len(summary['kernels'])} kernels in {seconds:.0f} s")
