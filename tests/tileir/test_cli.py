"""`tileport irdiff A B` (the function the CLI mounts) and its exit codes."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

import tir_export
from tileport.tileir.cli import irdiff, irdiff_command


def _write(path, data):
    path.write_bytes(data)
    return path


def test_irdiff_exit_codes_and_outputs(tmp_path, capsys):
    ref = _write(tmp_path / "ref.tileirbc", tir_export.case("matmul"))
    same = _write(tmp_path / "same.bc", tir_export.case("matmul", "13.3"))
    notes = _write(tmp_path / "notes.bc", tir_export.case("matmul_latency4"))
    other = _write(tmp_path / "other.tileirbc", tir_export.case("vec_add"))
    json_out, md_out = tmp_path / "r.json", tmp_path / "r.md"
    assert irdiff(ref, same, json_out=json_out, md_out=md_out) == 0
    assert json.loads(json_out.read_text())["verdict"] == "PASS"
    assert md_out.read_text().startswith("# Tile IR diff: PASS")
    assert irdiff(ref, notes, json_out=json_out) == 2
    report = json.loads(json_out.read_text())
    assert report["verdict"] == "PASS_WITH_NOTES"
    assert {(f["category"], f["rule"], f["severity"]) for f in report["findings"]} >= {
        ("memory_hints", "latency", "WARN")}
    assert irdiff(ref, other) == 1
    out = capsys.readouterr().out
    assert "PASS_WITH_NOTES" in out and "FAIL" in out
    assert irdiff(ref, _write(tmp_path / "bad.bc", b"\x00" * 16)) == 1
    assert irdiff(ref, tmp_path / "missing.bc") == 1
    assert "cannot read Tile IR" in capsys.readouterr().out


def test_mounted_command(tmp_path):
    app = typer.Typer()
    app.command("irdiff")(irdiff_command)
    app.command("other")(lambda: None)  # a second command keeps `irdiff` a subcommand
    ref = _write(tmp_path / "ref.tileirbc", tir_export.case("matmul"))
    old = _write(tmp_path / "old.tileirbc", tir_export.case("matmul", "13.2", "sm_90"))
    notes = _write(tmp_path / "notes.tileirbc", tir_export.case("matmul_latency4"))
    other = _write(tmp_path / "other.tileirbc", tir_export.case("vec_add"))
    runner = CliRunner()
    result = runner.invoke(app, ["irdiff", str(ref), str(old), "--target", "sm_90",
                                 "--json", str(tmp_path / "r.json"), "--md", str(tmp_path / "r.md")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["target"] == "sm_90"
    assert (tmp_path / "r.md").exists()
    assert runner.invoke(app, ["irdiff", str(ref), str(notes)]).exit_code == 2
    assert runner.invoke(app, ["irdiff", str(ref), str(other)]).exit_code == 1
