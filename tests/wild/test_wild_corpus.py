"""The wild corpus, translate step: kernels of pinned PyPI packages must keep translating unattended.

Downloads the pinned wheels into a temporary directory (pip's cache too: nothing under ~/.cache),
finds every `@ct.kernel` with `ast`, translates each without configuration, and fails if the rate
drops below the committed table (bench/results/wild.json, written by `bash eval/wild.sh`). Skips,
with the reason, when PyPI cannot be reached.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import wild

TABLE = Path(__file__).resolve().parents[2] / "bench" / "results" / "wild.json"


@pytest.fixture(scope="module")
def wild_rows(tmp_path_factory):
    work = tmp_path_factory.mktemp("wild")
    try:
        roots = wild.fetch_all(work, cache=work / "pip-cache")
    except wild.WildError as e:
        pytest.skip(f"wild corpus not downloadable here: {e}")
    sites = wild.discover(roots)
    return wild.translate_step(sites, {p: r for p, _, r in roots}), roots


def test_wild_translate_rate_does_not_drop(wild_rows):
    rows, _ = wild_rows
    committed = json.loads(TABLE.read_text())
    s = wild.summarize(rows, ported=False)
    assert s["kernels"] == committed["summary"]["kernels"], "the pinned packages changed their kernels"
    failed = [f"{r.kernel}: {wild.first_diagnostic(r)}" for r in rows if not r.translate_ok]
    assert s["translate_rate"] >= committed["summary"]["translate_rate"], "\n".join(failed)


def test_every_wild_failure_is_a_located_diagnostic(wild_rows):
    rows, _ = wild_rows
    for r in rows:
        if not r.translate_ok:
            d = r.translate_diagnostic
            assert d and d["construct"] and d["file"] and d["line"], (r.kernel, d)
            assert d["construct"] != "internal", (r.kernel, d)


def test_kernel_discovery_finds_factory_and_wrapped_kernels(tmp_path):
    (tmp_path / "m.py").write_text(
        "import cuda.tile as ct\n"
        "from cuda.tile import kernel as K\n"
        "@ct.kernel\ndef top(x):\n    pass\n"
        "def factory(n):\n    @ct.kernel(occupancy=n)\n    def inner(x):\n        pass\n    return inner\n"
        "def plain(x):\n    pass\n"
        "wrapped = ct.kernel(plain)\n"
        "@K\ndef by_name(x):\n    pass\n"
        "def not_a_kernel(x):\n    pass\n")
    sites = wild.find_kernels(tmp_path / "m.py", "pkg", tmp_path)
    assert [(s.kernel, s.factory) for s in sites] == [("top", None), ("inner", "factory"), ("plain", None),
                                                       ("by_name", None)]


def test_extract_refuses_members_outside_the_directory(tmp_path):
    import zipfile
    whl = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("../../escape.py", "x = 1\n")
    with pytest.raises(wild.WildError, match="escapes"):
        wild.extract(whl, tmp_path / "out")
    assert not (tmp_path.parent / "escape.py").exists()


def test_committed_table_matches_its_summary():
    table = json.loads(TABLE.read_text())
    rows = table["kernels"]
    assert table["summary"]["kernels"] == len(rows)
    assert table["summary"]["translate_ok"] == sum(r["translate_ok"] for r in rows)
    if "ir_diff_clean" in table["summary"]:
        assert table["summary"]["ir_diff_clean"] == sum(r["port"].get("critical") == 0 for r in rows)


def test_failure_causes_are_grouped_without_kernel_specifics():
    rows = [
        {"translate_ok": False, "translate_diagnostic": {"construct": "ct.load"}},
        {"translate_ok": True, "port": {"stage": "A", "reason": "cuTile Python cannot compile configuration "
                                        "k[float32](T=64): f.py: failed to evaluate: name 'torch' is not defined"}},
        {"translate_ok": True, "port": {"stage": "A", "reason": "cuTile Python cannot compile configuration "
                                        "j[float16](N=2): g.py: failed to evaluate: name 'torch' is not defined"}},
        {"translate_ok": True, "port": {"stage": "E", "critical": 0}},
        {"translate_ok": True, "port": {"stage": "D", "critical": 3, "reason": "no launches of `k` to test",
                                        "first_critical": "rope.py:31:14 [index/differs] load_view_tko: index 1"}},
    ]
    assert wild.failure_causes(rows) == [
        ("port stops at A: cuTile Python cannot compile configuration … name 'torch' is not defined", 2),
        ("IR diff CRITICAL: [index/differs] load_view_tko", 1), ("translate [ct.load]", 1)]


def test_table_labels_synthesized_values_and_empty_packages():
    probe = wild.SYNTHESIZED_COLUMN
    rows = [wild.Row("p", "a.py", "k1", 1, None, True, port={"stage": "D", "critical": 0, "specialization": probe,
                                                               "verdicts": {"D1": "FAIL_FIXABLE"}}),
            wild.Row("p", "a.py", "k2", 9, None, True, port={"stage": "D", "critical": 0, "specialization": "launches",
                                                               "verdicts": {"D1": "FAIL_FIXABLE"}}),
            wild.Row("p", "b.py", "k3", 1, None, True, port={"stage": "B", "critical": 2, "specialization": probe,
                                                               "verdicts": {"B1": "FAIL_FIXABLE"}, "reason": "x"})]
    table = wild.build_table(rows, [("p", "1", None), ("cutile-stencil", "0.3.0", None)], ported=True)
    assert table["summary"]["ir_diff_clean"] == 2 and table["summary"]["ir_diff_clean_synthesized"] == 1
    md = wild.render_markdown(table)
    assert "| p | a.py | `k1` | ok | probe (synthesized) | D (FAIL_FIXABLE) | 0 |" in md
    assert "of these, 1 on SYNTHESIZED probe values" in md
    assert "`cutile-stencil==0.3.0` has no kernel to port: a stencil compiler" in md


def test_read_port_locates_the_first_critical_finding(tmp_path):
    from tileport.pipeline.probe import SYNTHESIZED
    (tmp_path / "summary.json").write_text(json.dumps({"kernels": [{"kernel": "k", "key": "k", "terminal": "STOPPED",
                                                                    "route": [{"stage": "B", "attempt": 1,
                                                                               "verdict": "FAIL_FIXABLE",
                                                                               "reason": "layout gate"}]}]}))
    for stage, details in (("A", {"config_source": SYNTHESIZED}), ("B", {"counts": {"CRITICAL": 2}, "ir_diff": {}})):
        (tmp_path / "k" / stage).mkdir(parents=True)
        (tmp_path / "k" / stage / "verdict.json").write_text(json.dumps({"verdict": "x", "details": details}))
    (tmp_path / "k" / "B" / "findings.json").write_text(json.dumps([
        {"severity": "INFO", "category": "signature", "rule": "name", "message": "m", "ref_source": None},
        {"severity": "CRITICAL", "category": "tile_shape", "rule": "shape", "message": "tile 1x64 in ref, 1 in gen",
         "ref_source": "layernorm.py:54:8"}]))
    port = wild.read_port(tmp_path, "k", "")
    assert port["critical"] == 2 and port["specialization"] == wild.SYNTHESIZED_COLUMN and not wild.clean_diff(port)
    assert port["first_critical"] == "layernorm.py:54:8 [tile_shape/shape] tile 1x64 in ref, 1 in gen"


RANK_MISMATCH = '''import cuda.tile as ct

@ct.kernel
def bad(X, Y, T: ct.Constant[int]):
    t = ct.load(X, index=(0, 0, 0, 0), shape=(T, T))
    ct.store(Y, index=(0, 0), tile=t)

@ct.kernel
def fine(X, Y, T: ct.Constant[int]):
    t = ct.load(X, index=(0, 0), shape=(T, T))
    ct.store(Y, index=(0, 0), tile=t)
'''


def test_translate_failure_checked_against_cutile_own_compiler(tmp_path):
    """A construct cuTile Python rejects too is labelled invalid source with cuTile's own message (and
    stays in the denominator of the all-kernels rate); one it accepts is tileport's failure."""
    pytest.importorskip("cuda.tile", reason="cuTile Python is not installed: the check cannot run")
    (tmp_path / "pkg").mkdir()
    f = tmp_path / "pkg" / "k.py"
    f.write_text(RANK_MISMATCH)
    check = wild.cutile_check(f, "bad", 5)
    assert check["verdict"] == wild.INVALID_SOURCE and check["line"] == 5, check
    assert "shape" in check["error"] and "4" in check["error"], check
    assert wild.cutile_check(f, "bad", 9)["verdict"] == wild.CUTILE_REJECTS_ELSEWHERE
    assert wild.cutile_check(f, "fine", 10)["verdict"] == wild.CUTILE_ACCEPTS
    rows = wild.translate_step(wild.find_kernels(f, "pkg", tmp_path), {"pkg": tmp_path})
    bad = next(r for r in rows if r.kernel == "bad")
    assert not bad.translate_ok and bad.cutile_check["verdict"] == wild.INVALID_SOURCE
    assert "cuTile Python's own error (line 5)" in wild.first_diagnostic(bad)


def test_rate_lines_state_all_kernels_and_kernels_cutile_accepts():
    rows = [wild.Row("p", "a.py", "k1", 1, None, True),
            wild.Row("p", "a.py", "k2", 9, None, False, {"construct": "ct.load", "file": "a.py", "line": 12},
                     cutile_check={"verdict": wild.INVALID_SOURCE, "error": "Expected shape length to be 4, got 2",
                                   "line": 12}),
            wild.Row("p", "a.py", "k3", 20, None, False, {"construct": "ct.cat", "file": "a.py", "line": 22},
                     cutile_check={"verdict": wild.CUTILE_ACCEPTS, "error": ""})]
    table = wild.build_table(rows, [("p", "1", None)], ported=False)
    s = table["summary"]
    assert (s["translate_ok"], s["kernels"], s["invalid_source"]) == (1, 3, 1)
    assert s["translate_rate"] == round(1 / 3, 4) and s["translate_rate_cutile_accepts"] == 0.5
    md = wild.render_markdown(table)
    assert "**1/3** (33.3 %) of all kernels; **1/2** (50.0 %) of the kernels cuTile Python accepts" in md
    assert "| `k2` | FAIL: invalid source (cuTile rejects it too) |" in md
    assert "cuTile Python's own error (line 12): Expected shape length to be 4, got 2" in md
    assert "| `k3` | FAIL |" in md


def test_generated_kernels_have_their_own_section_and_rates():
    """cutile-stencil's generated kernels (opt-in) are reported apart: the main rates count the downloaded
    sources only (as the CI translate check does), the section states its own."""
    rows = [wild.Row("p", "a.py", "k1", 1, None, True)]
    table = wild.build_table(rows, [("p", "1", None), ("cutile-stencil", "0.3.0", None)], ported=False)
    gen_rows = [wild.Row(wild.GENERATED, "heat_1d_tb.py", "heat_1d_kernel", 18, None, False,
                         {"construct": "array.slice", "file": "heat_1d_tb.py", "line": 33, "col": 12,
                          "message": "array attribute `.slice` is not supported"},
                         cutile_check={"verdict": wild.CUTILE_ACCEPTS, "error": ""})]
    gen = wild.build_table(gen_rows, [(wild.GENERATED, "0.3.0", None)], ported=False)
    table["generated"] = {"version": "0.3.0", "how": "its compile path", "outcome": [],
                          "summary": gen["summary"], "kernels": gen["kernels"]}
    md = wild.render_markdown(table)
    assert "**1/1** (100.0 %) of all kernels" in md
    section = md[md.index("## Kernels generated by `cutile-stencil==0.3.0`"):]
    assert "**0/1** (0.0 %) of all kernels" in section and "1 × translate [array.slice]" in section
    assert "heat_1d_tb.py:33:12 [array.slice]" in section and wild.CUTILE_ACCEPTS in section
    combined = md[md.index("## All wild kernels"):]
    assert "translate (no config, no edits): **1/2** (50.0 %)" in combined


def test_cutile_check_asks_nothing_of_a_file_without_that_cutile_kernel(tmp_path):
    f = tmp_path / "t.py"
    f.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    assert wild.cutile_check(f, "k", 4) == {}
