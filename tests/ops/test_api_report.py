"""The benchmark report (no torch, no GPU): built from the committed H200 results, with and without an
investigations file, and the committed report is what `tileport report` makes of those results."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tileport import report
from tileport.gpu.bench import summarize

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "2026-11-29-h200-bench.json"


@pytest.fixture()
def results(tmp_path) -> Path:
    dst = tmp_path / "bench.json"
    shutil.copy(RESULTS, dst)
    return dst


def test_summary_flags_ops_by_worst_case_and_by_geomean():
    summ = summarize(json.loads(RESULTS.read_text())["records"])
    assert set(summ["ops_geomean_over_1_02"]) <= set(summ["ops_over_1_02"])
    for op, s in summ["per_op"].items():
        assert (op in summ["ops_over_1_02"]) == (s["max_ratio"] > report.PARITY_BAR)
        assert s["geomean_ratio"] <= s["max_ratio"]


def test_geomean_skips_missing_non_positive_and_non_finite_values():
    from tileport.gpu.bench import geomean

    assert geomean([2.0, 8.0, None, 0.0, -1.0, float("inf"), float("nan")]) == pytest.approx(4.0)
    assert geomean([float("inf"), float("nan"), 0.0]) is None
    assert geomean([]) is None


def test_report_sections_without_investigations(results, tmp_path):
    paths = report.write_bench_report(results, tmp_path / "out")
    assert {"bench.md", "bench.html"} <= {p.name for p in paths}
    md = (tmp_path / "out" / "bench.md").read_text()
    for heading in ("## Parity per op", "## Memory-bound ops at their largest benchmark size",
                    "## GEMMs at their largest benchmark size", "## Host launch overhead", "## Every case",
                    "## Investigations"):
        assert heading in md
    assert "**Overall geomean t(cutile-rs)/t(cuTile Python): 1.010**" in md
    # memory-bound ops: % of copy bandwidth at the largest size, per dtype
    assert "| relu | 16384x16384 | 4240 / 4252 / 4247 | 99.5 / 99.8 / 99.7 |" in md
    # GEMMs: % of cuBLAS bf16 and of the datasheet peak
    assert "| matmul | bfloat16 | 8192x8192x8192 | 720 | 104.8 | 72.8 |" in md
    # host launch overhead of both runs that measured it
    assert "| run1 | 11.9 | 227.3 | 169.4 | 110.3 | 69.2 | 0.63 |" in md
    # every op above 1.02 is listed, and says that its investigation is missing
    summ = summarize(json.loads(results.read_text())["records"])
    for op in summ["ops_over_1_02"]:
        assert f"### {op}\n" in md
    assert md.count("**No investigation recorded.**") == len(summ["ops_over_1_02"])
    assert "`bench.investigations.json`" in md


def test_report_renders_investigations(results, tmp_path):
    inv = {
        "softmax": {"status": "open", "cases": ["float16 8192x1000"],
                    "cause": "The port loads rows with a gather where the reference uses a view load. Second.",
                    "evidence": ["IR diff: load_view_tko vs load_ptr_tko", "ncu: 2x sectors per request"],
                    "fix": "Emit a view load for unit-stride rows."},
        "rope": {"status": "explained", "cause": "Run-to-run noise.", "evidence": "p10-p90 spread 12 %",
                 "fix": "None needed."},
    }
    results.with_name("bench.investigations.json").write_text(json.dumps(inv))
    report.write_bench_report(results, tmp_path / "out")
    md = (tmp_path / "out" / "bench.md").read_text()
    assert "| softmax | 1.115 | 1.595 | 9 | geomean | open: The port loads rows with a gather where the reference" in md
    assert "**Cause.** The port loads rows with a gather" in md
    assert "- IR diff: load_view_tko vs load_ptr_tko\n- ncu: 2x sectors per request" in md
    assert "**Fix.** Emit a view load for unit-stride rows." in md
    assert "- p10-p90 spread 12 %" in md
    assert md.count("**No investigation recorded.**") == len(summarize(json.loads(results.read_text())["records"])
                                                              ["ops_over_1_02"]) - 2
    page = (tmp_path / "out" / "bench.html").read_text()
    assert "<strong>Cause.</strong> The port loads rows" in page


@pytest.mark.parametrize("bad,why", [
    ({"softmax": {"cause": "x", "evidence": ["y"]}}, "'fix' is a required property"),
    ({"softmax": {"cause": "x", "evidence": [], "fix": "z"}}, "softmax/evidence"),
    ({"softmax": {"cause": "x", "evidence": "y", "fix": "z", "status": "done"}}, "softmax/status"),
    ({"softmax": {"cause": "x", "evidence": "y", "fix": "z", "notes": "?"}}, "Additional properties"),
])
def test_invalid_investigations_are_refused_with_the_reason(results, tmp_path, bad, why):
    results.with_name("bench.investigations.json").write_text(json.dumps(bad))
    with pytest.raises(report.ReportError, match="invalid investigations file") as e:
        report.write_bench_report(results, tmp_path / "out")
    assert why in str(e.value)


def test_skeleton_lists_every_op_above_the_bar(results):
    assert report.main([str(results), "--skeleton"]) == 0
    skel = json.loads(results.with_name("bench.investigations.json").read_text())
    summ = summarize(json.loads(results.read_text())["records"])
    assert sorted(skel) == summ["ops_over_1_02"]
    assert any("8192x1000" in c for c in skel["softmax"]["cases"])
    assert report.main([str(results), "--skeleton"]) == 1  # never overwrites
    report.load_investigations(results.with_name("bench.investigations.json"))  # valid as written


class _Balance(HTMLParser):
    VOID = {"meta", "img", "br"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_html_is_well_formed_and_has_the_charts(results, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: no charts")
    paths = report.write_bench_report(results, tmp_path / "out")
    assert {p.name for p in paths} >= {"bench.png", "bench-ops.png", "bench.md", "bench.html"}
    page = (tmp_path / "out" / "bench.html").read_text()
    parser = _Balance()
    parser.feed(page)
    assert not parser.errors and parser.stack == []
    assert "<img src='bench-ops.png'" in page and "<img src='bench.png'" in page
    assert page.count("<table>") == 5


def test_committed_report_is_regenerated_from_the_committed_results(tmp_path):
    """bench/results/<stem>.md is exactly what `tileport report` writes for the committed JSON."""
    report.write_bench_report(RESULTS, tmp_path)
    committed = RESULTS.with_suffix(".md").read_text()
    assert (tmp_path / RESULTS.with_suffix(".md").name).read_text() == committed, (
        "bench/results is stale: run tileport report bench/results/2026-11-29-h200-bench.json -o bench/results")


def test_memory_table_gives_the_share_of_a_copy_timed_beside_the_kernel(results, tmp_path):
    """A record with a same-bytes copy in its rotation (bench `copy_us`) shows cutile-rs's share of it; a
    record without one shows '-'."""
    data = json.loads(results.read_text())
    relu = [r for r in data["records"] if r["op"] == "relu"]
    largest = max(r["shape"][0] * r["shape"][1] for r in relu)
    for r in relu:
        if r["shape"][0] * r["shape"][1] == largest and r["dtype"] == "float16":
            r["pct_copy_side_by_side"] = {"cutile-rs": 97.25, "cutile": 97.0}
    results.write_text(json.dumps(data))
    report.write_bench_report(results, tmp_path / "out")
    md = (tmp_path / "out" / "bench.md").read_text()
    assert "% of a same-bytes copy beside it, cutile-rs" in md
    assert "| yes | - / 97.2 / - |" in md
