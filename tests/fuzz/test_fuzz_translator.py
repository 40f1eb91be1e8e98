"""Bounded fuzz run of the translator (CI): a few hundred generated inputs, no traceback, internal error,
unlocated diagnostic, hang or write outside the output folder. The long run is eval/fuzz_translator.py."""

from __future__ import annotations

import shutil

import pytest
from fuzz_generator import generate
from fuzz_harness import fuzz, fuzz_configs


def test_generator_is_deterministic_and_covers_every_kind():
    items = [generate(7, i) for i in range(200)]
    assert [i.data for i in items] == [generate(7, i).data for i in range(200)]
    assert {i.kind for i in items} == {"valid", "semantic", "mutated", "nested", "constants", "encoding",
                                      "garbage"}


def test_valid_inputs_translate(tmp_path):
    """The generator's well-formed kernels are accepted (else the fuzzer would only probe error paths)."""
    from tileport.translate import translate
    valid = [g for g in (generate(3, i) for i in range(60)) if g.kind == "valid"]
    assert valid
    for n, item in enumerate(valid):
        path = tmp_path / f"valid_{n}.py"
        path.write_bytes(item.data)
        results = translate([str(path)], None).results
        assert results and all(r.ok for r in results), [str(r.diagnostic) for r in results]


def test_bounded_fuzz_run(tmp_path):
    cli_every = 40 if shutil.which("rustfmt") else 0
    figures = fuzz(300, seed=20261201, workdir=tmp_path, timeout=10.0, write_every=15 if cli_every else 0,
                   cli_every=cli_every)
    assert figures.inputs == 300 and figures.in_process_runs >= 300
    assert figures.clean, [p.__dict__ for p in figures.problems[:5]]


def test_bounded_config_fuzz_run(tmp_path):
    """The corpus kernels under randomly broken configurations: diagnostics, never internal errors."""
    figures = fuzz_configs(150, seed=20261201, workdir=tmp_path, write_every=0)
    assert figures.kernels_translated and figures.kernel_diagnostics  # both outcomes are exercised
    assert figures.clean, [p.__dict__ for p in figures.problems[:5]]


def test_harness_detects_problems(tmp_path, monkeypatch):
    """The checks can fail: a translator that raises, hangs or writes beside its output is caught."""
    import time

    import tileport.translate as tr
    from fuzz_harness import run_in_process, Figures

    path = tmp_path / "k.py"
    path.write_bytes(generate(3, 0).data)
    monkeypatch.setattr(tr, "translate", lambda *a, **k: (_ for _ in ()).throw(KeyError("boom")))
    assert run_in_process(path, None, 5, Figures(0))[0] == "traceback"
    monkeypatch.setattr(tr, "translate", lambda *a, **k: time.sleep(3))
    assert run_in_process(path, None, 0.2, Figures(0))[0] == "hang"


def test_harness_detects_outside_writes(tmp_path, monkeypatch):
    import tileport.translate as tr

    def stray(paths, out_dir, *a, **k):
        (tmp_path / "sandbox" / "stray.txt").write_text("x")
        return real(paths, out_dir, *a, **k)
    real = tr.translate
    monkeypatch.setattr(tr, "translate", stray)
    figures = fuzz(1, seed=1, workdir=tmp_path, write_every=0, cli_every=0)
    assert figures.counts["outside_write"] == 1
