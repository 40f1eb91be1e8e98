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
    assert "cannot read Tile IR" in " ".join(capsys.readouterr().out.split())


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


def test_irdiff_manifest_that_does_not_describe_b_exits_1(tmp_path, capsys):
    ref = _write(tmp_path / "ref.tileirbc", tir_export.case("vec_add"))
    assert irdiff(ref, ref, manifest=tmp_path / "missing.json") == 1
    assert "not a readable crate manifest" in " ".join(capsys.readouterr().out.split())
    manifest = tmp_path / "kernels.json"
    manifest.write_text(json.dumps({"entries": [{"kernel": "k", "params": [], "variants": [
        {"entry": "other", "stride_args": []}]}]}))
    assert irdiff(ref, ref, manifest=tmp_path) == 1
    assert "no variant whose entry is" in " ".join(capsys.readouterr().out.split())
    assert irdiff(ref, ref, manifest=manifest, kernel="nope") == 1
    assert "no kernel `nope`" in " ".join(capsys.readouterr().out.split())


def test_cutile_python_roles_follow_the_parameter_layout():
    from tileport.tileir import read_module
    from tileport.tileir.roles import cutile_python_roles
    f = read_module(tir_export.case("vec_add")).entries[0]  # a, b, c: 1-D arrays, TILE constant
    params = [{"kind": "array", "rank": 1}] * 3 + [{"kind": "const"}]
    roles = cutile_python_roles(params, f)
    assert roles == {1: ("shape", 0, 0), 2: ("stride", 0, 0), 4: ("shape", 1, 0), 5: ("stride", 1, 0),
                     7: ("shape", 2, 0), 8: ("stride", 2, 0)}
    assert cutile_python_roles(params[:2], f) == {}  # the layout does not match: nothing declared


def test_an_owned_output_takes_its_partition_shape_and_strides_after_its_own():
    """An array the idiomatic rendering passes as `&mut Tensor` (the variant's "owned") is followed by its
    partition's shape and strides: the parameters after it keep their roles (without the rule the layout
    does not match and nothing is declared, so a shape the kernel reads in arithmetic loses its role); the
    partition's own parameters are declared for the interpreter, which binds them."""
    from types import SimpleNamespace

    from tileport.tileir import read_module
    from tileport.tileir.roles import manifest_generated_roles
    f = read_module(tir_export.case("vec_add")).entries[0]  # a, b, c: 1-D arrays, TILE constant
    owned_c = SimpleNamespace(args=[*f.args, f.args[1], f.args[2]])  # c's partition shape and stride last
    entry = {"params": [{"name": n, "kind": "array", "rank": 1} for n in "abc"] + [{"name": "T", "kind": "const"}]}
    variant = {"entry": "k", "stride_args": [], "owned": ["c"]}
    roles = manifest_generated_roles(entry, variant, owned_c)
    assert roles == {1: ("shape", 0, 0), 2: ("stride", 0, 0), 4: ("shape", 1, 0), 5: ("stride", 1, 0),
                     7: ("shape", 2, 0), 8: ("stride", 2, 0), 9: ("partition_shape", 2, 0),
                     10: ("partition_stride", 2, 0)}
    assert manifest_generated_roles(entry, variant | {"owned": []}, owned_c) == {}
