"""Probe specializations: values synthesized from a kernel's text when no launch and no --config exist,
labelled SYNTHESIZED, tried against cuTile Python (CPU), and fed to both the reference and the translator."""

from __future__ import annotations

import json

import pytest

from tileport.frontends.cutile import KernelConfig, classify_params, scan_module
from tileport.pipeline import probe
from tileport.pipeline.targets import file_targets

KERNELS = '''\
import cuda.tile as ct
ConstInt = ct.Constant[int]


@ct.kernel
def rows(x, ids, y, N: ConstInt, TILE: ConstInt, scale: ct.Constant[float], flag: ct.Constant[bool]):
    bid = ct.bid(0)
    r = ct.load(ids, index=(bid,), shape=(TILE,))
    t = ct.gather(x, (r, ct.arange(TILE, dtype=ct.int32)))
    if flag:
        t = t * scale
    ct.store(y, index=(bid, 0), tile=t + N)


@ct.kernel
def covered(x, y, N: ConstInt, TILE: ConstInt):
    ct.static_assert(N == TILE)
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t)


@ct.kernel
def impossible(x, TILE: ConstInt):
    ct.static_assert(TILE == 7)
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(x, index=(ct.bid(0),), tile=t)


@ct.kernel
def plain(x, y):
    ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(16,)))
'''


@pytest.fixture()
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def _plan(path, kernel):
    sm = scan_module(str(path))
    fn = sm.kernels[kernel]
    return sm, fn, classify_params(sm, fn, KernelConfig())


def test_plan_derives_values_from_use(kernel_file):
    sm, fn, params = _plan(kernel_file, "rows")
    p = probe.plan(sm, fn, params)
    assert p.tiles == ["TILE"] and p.sizes == ["N"] and p.int_arrays == ["ids"]
    first = p.probes[0].alternatives[0]
    assert first.arrays == {"x": ("float32", 2), "ids": ("int64", 1), "y": ("float32", 2)}
    assert first.constants == {"N": 256, "TILE": 64, "scale": 0.5, "flag": False}
    labels = [pr.label for pr in p.probes]
    assert labels == ["float32, flag=False", "float32, flag=True", "float16, flag=False", "float16, flag=True"]
    tiles = [alt.constants["TILE"] for alt in p.probes[0].alternatives]
    assert tiles[0] == 64 and set(tiles) == {64, 32, 16}  # smaller tiles are the alternatives
    assert all(alt.constants["N"] % alt.constants["TILE"] == 0 for alt in p.probes[0].alternatives)


def test_select_tries_alternatives_until_cutile_compiles(kernel_file):
    sm, fn, params = _plan(kernel_file, "covered")
    chosen = probe.select(kernel_file, sm, fn, params)
    assert chosen.diagnostic is None
    assert [c.constants for c in chosen.captures] == [{"N": 64, "TILE": 64}] * 2  # N == TILE, f32 and f16
    assert any("rejects the first probe" in n for n in chosen.notes)


def test_no_compiling_probe_is_a_located_diagnostic(kernel_file):
    sm, fn, params = _plan(kernel_file, "impossible")
    chosen = probe.select(kernel_file, sm, fn, params)
    assert chosen.captures == []
    d = chosen.diagnostic
    assert d.construct == "probe specialization" and d.loc.line == fn.lineno and "impossible" in d.message


def test_target_carries_the_probe_for_the_translator_and_the_reference(kernel_file):
    targets = {t.kernel: t for t in file_targets(kernel_file)}
    t = targets["covered"]
    assert t.config_source == probe.SYNTHESIZED
    assert [c.constants for c in t.captures] == [{"N": 64, "TILE": 64}] * 2
    assert t.configs["covered"].configs == ({"x": "f32", "y": "f32", "N": 64, "TILE": 64},
                                            {"x": "f16", "y": "f16", "N": 64, "TILE": 64})
    assert targets["impossible"].config_source == probe.SYNTHESIZED and targets["impossible"].captures == []
    assert targets["plain"].config_source == "default"  # no constants: no probe needed


def test_a_config_or_a_launch_wins_over_the_probe(kernel_file, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"covered": [{"x": "float32", "y": "float32", "N": 128, "TILE": 128}]}))
    t = next(t for t in file_targets(kernel_file, config_file=cfg) if t.kernel == "covered")
    assert t.config_source.startswith("config:")


def test_stage_a_labels_the_probe_and_fails_located(kernel_file, tmp_path):
    import subprocess
    import sys
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "tileport.cli", "port", f"{kernel_file}::impossible", "--no-gpu",
                    "--out", str(out)], capture_output=True, text=True, timeout=300)
    verdict = json.loads((out / "impossible" / "A" / "verdict.json").read_text())
    assert verdict["verdict"] == "FAIL_FIXABLE" and "synthesized probe" in verdict["reason"]
    assert verdict["details"]["config_source"] == probe.SYNTHESIZED
    d = verdict["diagnostics"][0]
    assert d["construct"] == "probe specialization" and d["line"] == _plan(kernel_file, "impossible")[1].lineno


def test_report_says_the_ir_diff_ran_on_synthesized_values(tmp_path):
    from tileport.pipeline.report import kernel_facts
    kdir = tmp_path / "k"
    for stage, verdict, details in (("A", "PASS", {"config_source": probe.SYNTHESIZED}),
                                    ("B", "COMPILED", {"counts": {"CRITICAL": 0, "WARN": 0, "INFO": 0},
                                                       "ir_diff": {"c": {}}, "critical_pending": [],
                                                       "critical_structural": []})):
        (kdir / stage).mkdir(parents=True)
        (kdir / stage / "verdict.json").write_text(json.dumps(
            {"kernel": "k", "stage": stage, "attempt": 1, "verdict": verdict, "reason": "", "details": details}))
    assert kernel_facts(kdir)["ir_text"] == "clean: 0 CRITICAL, 0 WARN, 1 configs on SYNTHESIZED probe values"
