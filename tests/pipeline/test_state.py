"""Run state on disk: atomic writes, one run at a time per --out, and --resume after a run killed
mid-write."""

from __future__ import annotations

import json

import pytest
from conftest import route
from typer.testing import CliRunner

from tileport.cli import app
from tileport.pipeline import resolve_targets
from tileport.pipeline.verdicts import Stage

KERNEL = """import cuda.tile as ct

@ct.kernel
def k(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t)
"""


def kernel_with_config(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"k": [{"x": "float16", "y": "float16", "TILE": 256}]}))
    return src, cfg


def test_write_json_is_atomic(tmp_path, monkeypatch):
    from tileport import atomic
    from tileport.pipeline.artifacts import write_json
    path = write_json(tmp_path / "run.json", {"old": True})

    def killed(*_):
        raise KeyboardInterrupt  # the process dies between writing and renaming
    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_json(path, {"new": "x" * 100_000})
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


def test_a_second_run_into_the_same_out_is_refused(tmp_path, pipeline):
    from tileport.pipeline.outdir import OutLockedError, out_lock
    src, cfg = kernel_with_config(tmp_path)
    out = tmp_path / "out"
    with out_lock(out):
        with pytest.raises(OutLockedError, match="another `tileport port`"):
            pipeline(resolve_targets([str(src)], config=cfg), out, until=Stage.A)
        r = CliRunner().invoke(app, ["port", str(src), "--config", str(cfg), "--until", "A", "--out", str(out)])
        assert r.exit_code == 2 and "another `tileport port`" in r.output and "Traceback" not in r.output
    assert not (out / "k").exists()  # the refused runs wrote nothing
    res, _ = pipeline(resolve_targets([str(src)], config=cfg), out, until=Stage.A)  # lock released
    assert route(res["k"]) == ["A PASS"]


@pytest.mark.parametrize("cut", ["A/analysis.json", "A/verdict.json", "run.json", "final.json", "summary.json"])
def test_resume_after_a_half_written_file(tmp_path, pipeline, cut):
    src, cfg = kernel_with_config(tmp_path)
    out = tmp_path / "out"
    targets = lambda: resolve_targets([str(src)], config=cfg)  # noqa: E731
    pipeline(targets(), out, until=Stage.A)
    path = out / cut if cut == "summary.json" else out / "k" / cut
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # what a kill mid-write left behind
    res, _ = pipeline(targets(), out, until=Stage.A, resume=True)
    assert res["k"].terminal != "ERROR" and route(res["k"]) == ["A PASS"], res["k"].why
    json.loads((out / "k" / "A" / "analysis.json").read_text())


@pytest.mark.cargo
@pytest.mark.parametrize("cut", ["B/translation.json"])
def test_resume_after_a_half_written_stage_b_artifact(tmp_path, pipeline, cut):
    out = tmp_path / "out"
    targets = lambda: resolve_targets(["src/tileport/ops/kernels/vector_add.py"])  # noqa: E731
    pipeline(targets(), out, until=Stage.B, cache_dir=tmp_path / "cache")
    path = out / "vector_add_kernel" / cut
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    res, _ = pipeline(targets(), out, until=Stage.B, resume=True, cache_dir=tmp_path / "cache")
    o = res["vector_add_kernel"]
    assert o.terminal != "ERROR" and route(o) == ["A PASS", "B COMPILED"], o.why
    assert [r["reused"] for r in o.route] == [True, False]  # B re-ran, A did not
    json.loads(path.read_text())
