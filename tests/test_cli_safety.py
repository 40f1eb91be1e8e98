"""The CLI on hostile or mistaken input: nothing outside the output directory is written or deleted,
only files tileport generated are replaced, names become valid Rust, and every bad input is a
one-line diagnostic (exit 2), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app
from tileport.corpus import REPO

KERNEL = """import cuda.tile as ct

@ct.kernel
def {name}(x, y):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(y, index=(ct.bid(0),), tile=t)
"""
NEEDS_CONSTANT = """import cuda.tile as ct

@ct.kernel
def k(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t)
"""


def cli(*args, **kw):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, **kw)


def kernel_file(path: Path, name: str = "k") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KERNEL.format(name=name))
    return path


def victim(tmp_path: Path) -> Path:
    d = tmp_path / "victim"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    return d


def assert_usage_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for w in words:
        assert w in result.output, result.output


# ------------------------------------------------------------------ never outside --out

@pytest.mark.parametrize("spec", ["../victim", "ABS"])
def test_port_kernel_name_never_deletes_outside_out(tmp_path, spec):
    v = victim(tmp_path)
    broken = tmp_path / "broken.py"
    broken.write_text("def broken(:\n")
    kernel = str(v) if spec == "ABS" else spec
    r = cli("port", f"{broken}::{kernel}", "--out", tmp_path / "out")
    assert_usage_error(r, "identifier")
    assert (v / "precious.txt").read_text() == "keep me"


def test_engine_refuses_a_target_folder_outside_out(tmp_path):
    import io

    from rich.console import Console

    from tileport.pipeline import Options, Target
    from tileport.pipeline.artifacts import UnsafePathError
    from tileport.pipeline.batch import run_batch
    v = victim(tmp_path)
    t = Target("../victim", "k", kernel_file(tmp_path / "k.py"), {}, [], "default")
    with pytest.raises(UnsafePathError):
        run_batch([t], Options(out=tmp_path / "out", cache_dir=tmp_path / "cache"), Console(file=io.StringIO()))
    assert (v / "precious.txt").read_text() == "keep me"


def test_translate_refuses_a_foreign_directory_unless_forced(tmp_path):
    src = kernel_file(tmp_path / "k.py")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.rs").write_text("fn main() {}\n")
    (project / "Cargo.toml").write_text("[package]\nname = \"mine\"\n")
    r = cli("translate", src, "-o", project)
    assert_usage_error(r, "--force")
    assert (project / "src" / "main.rs").read_text() == "fn main() {}\n"
    assert (project / "Cargo.toml").read_text().startswith("[package]\nname = \"mine\"")
    r = cli("translate", src, "-o", project, "--force")
    assert r.exit_code == 0, r.output
    assert (project / "src" / "main.rs").read_text() == "fn main() {}\n"  # not ours: kept
    assert (project / "src" / "k.rs").is_file()


def test_translate_dot_inside_a_project_keeps_its_src(tmp_path, monkeypatch):
    src = kernel_file(tmp_path / "k.py")
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "src" / "app.py").write_text("print('mine')\n")
    monkeypatch.chdir(tmp_path / "proj")
    assert_usage_error(cli("translate", src, "-o", "."), "not empty")
    assert (tmp_path / "proj" / "src" / "app.py").read_text() == "print('mine')\n"


def test_retranslation_replaces_only_the_files_tileport_wrote(tmp_path):
    out = tmp_path / "crate"
    assert cli("translate", kernel_file(tmp_path / "a" / "first.py"), "-o", out).exit_code == 0
    (out / "src" / "extra.rs").write_text("// mine\n")
    (out / "notes.md").write_text("mine\n")
    assert cli("translate", kernel_file(tmp_path / "b" / "second.py"), "-o", out).exit_code == 0
    assert not (out / "src" / "first.rs").exists()  # the previous translation's module: replaced
    assert (out / "src" / "second.rs").is_file()
    assert (out / "src" / "extra.rs").read_text() == "// mine\n" and (out / "notes.md").read_text() == "mine\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".tileport-")]  # no temporary directory left


def test_symlinked_src_is_refused(tmp_path):
    elsewhere = victim(tmp_path)
    out = tmp_path / "crate"
    out.mkdir()
    (out / "src").symlink_to(elsewhere)
    r = cli("translate", kernel_file(tmp_path / "k.py"), "-o", out, "--force")
    assert_usage_error(r, "symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious.txt"]


def test_file_names_become_distinct_safe_modules(tmp_path):
    files = [kernel_file(tmp_path / "support.py", "support_kernel"), kernel_file(tmp_path / "lib.py", "lib_kernel"),
             kernel_file(tmp_path / "a" / "k.py", "twin"), kernel_file(tmp_path / "b" / "k.py", "twin"),
             kernel_file(tmp_path / "type.py", "Self"), kernel_file(tmp_path / "tiles.py", "tiles_kernel")]
    out = tmp_path / "crate"
    r = cli("translate", *files, "-o", out)
    assert r.exit_code == 0, r.output
    runtime = (REPO / "rust" / "src" / "support.rs").read_text()  # as formatted in the committed crate
    assert (out / "src" / "support.rs").read_text() == runtime  # the runtime module, intact
    lib = (out / "src" / "lib.rs").read_text()
    assert "pub mod support;" in lib and "pub mod support_;" in lib and "pub mod lib_;" in lib
    assert "pub mod tiles;" in lib and "pub mod tiles_;" in lib  # the crate's device helpers, the file's module
    manifest = json.loads((out / "kernels.json").read_text())
    modules = sorted(e["module"] for e in manifest["entries"])
    assert modules == ["k", "k_1", "lib_", "support_", "tiles_", "type_"]
    symbols = [e["symbol"] for e in manifest["entries"]]
    assert len(set(symbols)) == len(symbols)
    assert sorted(p.name for p in (out / "src").iterdir()) == sorted(
        ["lib.rs", "support.rs", "tiles.rs", "k.rs", "k_1.rs", "lib_.rs", "support_.rs", "tiles_.rs", "type_.rs"])


def test_module_names_are_rust_identifiers():
    from tileport.emit.rust.names import module_name
    taken: set[str] = set()
    names = [module_name(s, taken) for s in ["support", "lib", "k", "k", "Self", "type", "my-kernels", "é", "2d"]]
    assert names == ["support_", "lib_", "k", "k_1", "Self_", "type_", "my_kernels", "module", "k_2d"]


@pytest.mark.parametrize("crate", ['x"\n[build]\nrustc = "evil"', "9lives", "fn", "a b", "std", ""])
def test_invalid_crate_names_are_refused(tmp_path, crate):
    out = tmp_path / "crate"
    assert_usage_error(cli("translate", kernel_file(tmp_path / "k.py"), "-o", out, "--crate", crate),
                       "invalid crate name")
    assert not out.exists()


def test_hyphenated_crate_name_is_accepted(tmp_path):
    out = tmp_path / "crate"
    assert cli("translate", kernel_file(tmp_path / "k.py"), "-o", out, "--crate", "my-kernels").exit_code == 0
    assert 'name = "my-kernels"' in (out / "Cargo.toml").read_text()


@pytest.mark.parametrize("command", [["build", "--crate", "rust"], ["verify", "--out", "OUT"],
                                     ["port", "--op", "relu", "--out", "OUT"]])
def test_unknown_profile_is_refused(tmp_path, command):
    args = [str(tmp_path) if a == "OUT" else a for a in command]
    assert_usage_error(cli(*args, "--profile", "../../x"), "../../x")


def test_cargo_build_refuses_an_unknown_profile():
    from tileport.runtime.library import cargo_build
    with pytest.raises(ValueError, match="unknown cargo profile"):
        cargo_build(REPO / "rust", "../../x")


# ------------------------------------------------------------------ diagnostics, not tracebacks

def test_out_naming_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    src = kernel_file(tmp_path / "k.py")
    assert_usage_error(cli("port", src, "--out", afile), "is a file")
    assert_usage_error(cli("translate", src, "-o", afile), "is a file")
    assert_usage_error(cli("verify", "--out", afile), "is a file")
    assert afile.read_text() == "x"


@pytest.mark.parametrize("content", [None, "", "{not json", "\xff\xfe", "[1, 2]", '{"records": [5], "environment": {}}',
                                     '{"records": [{"op": "x"}], "environment": {}, "ceilings": {}}'])
def test_report_on_bad_results(tmp_path, content):
    path = tmp_path / "bench.json"
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    assert_usage_error(cli("report", path), str(path))


@pytest.mark.parametrize("config", ['{"k": [5]}', '{"k": {"configs": [{"x": [1]}]}}', '{"k": {"ranks": {"x": "two"}}}',
                                    "\xff", "[]"])
def test_malformed_config(tmp_path, config):
    cfg = tmp_path / "cfg.json"
    cfg.write_bytes(config.encode("latin-1"))
    src = kernel_file(tmp_path / "k.py")
    assert_usage_error(cli("port", src, "--config", cfg, "--out", tmp_path / "out"), "--config")


def test_irdiff_reports_to_bad_paths_and_bad_target(tmp_path):
    bc = next((REPO / "tests" / "tileir" / "data").rglob("*.tileirbc"))
    assert_usage_error(cli("irdiff", bc, bc, "--json", tmp_path / "no" / "such" / "dir.json"), "No such file")
    assert_usage_error(cli("irdiff", bc, bc, "--md", tmp_path), "Is a directory")
    assert_usage_error(cli("irdiff", bc, bc, "--target", "sm_9999"), "sm_9999")


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_jobs_must_be_positive(tmp_path, jobs):
    src = kernel_file(tmp_path / "k.py")
    assert_usage_error(cli("port", src, "-j", jobs, "--out", tmp_path / "out"))
    assert_usage_error(cli("verify", "-j", jobs, "--out", tmp_path / "out"))
    assert_usage_error(cli("gpu-check", "-j", jobs, "--out", tmp_path / "out"))


def test_verify_kernel_typo_fails_before_any_work(tmp_path):
    assert_usage_error(cli("verify", "--kernel", "vector_add_kernal", "--out", tmp_path), "vector_add_kernal",
                       "vector_add_kernel")


def test_verify_has_no_corpus_switch_that_does_nothing(tmp_path):
    assert_usage_error(cli("verify", "--no-corpus", "--out", tmp_path), "--no-corpus")


def test_help_shows_no_type_for_flags():
    for command in (["--help"], ["port", "--help"], ["verify", "--help"], ["translate", "--help"]):
        r = cli(*command)
        assert r.exit_code == 0 and "<bool>" not in r.output, r.output
    assert "--help " in cli("port", "--help").output


def test_doctor_prints_full_paths_off_a_terminal(monkeypatch):
    from tileport import doctor
    from tileport.toolchain import Component
    long_path = "/opt/" + "/".join(f"very-long-directory-name-{i}" for i in range(6)) + "/bin/tileiras"
    monkeypatch.setattr(doctor, "check_all", lambda: [Component("tileiras", True, "13.4.92", long_path)])
    r = cli("doctor", terminal_width=80)
    assert r.exit_code == 0 and long_path in r.output, r.output


def test_a_traceback_never_reaches_the_user_from_a_subprocess(tmp_path):
    """The installed entry point, as a user runs it: a file given as --out."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "translate", str(kernel_file(tmp_path / "k.py")),
                           "-o", str(afile)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr


# ------------------------------------------------------------------ what a user reads

def test_port_prints_each_stage_reason(tmp_path):
    src = tmp_path / "k.py"
    # no launch, no --config, and no synthesized probe value of TILE compiles: A stops and says why
    src.write_text(NEEDS_CONSTANT.replace("    t = ct.load", "    ct.static_assert(TILE == 7)\n    t = ct.load"))
    r = cli("port", src, "--out", tmp_path / "out", terminal_width=80)
    assert r.exit_code == 1
    assert "A FAIL_FIXABLE: " in r.output and "synthesized probe" in r.output and "--config" in r.output
    assert "│ A FAIL_FIXABLE │" in r.output  # the summary table is not folded at 80 columns off a terminal


def test_devices_and_pipes_are_not_read(tmp_path):
    """/dev/zero never ends and a FIFO blocks: both are refused before any read."""
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    src = kernel_file(tmp_path / "k.py")
    for bad in ("/dev/zero", fifo):
        assert_usage_error(cli("translate", bad, "-o", tmp_path / "crate"), "not a file")
        assert_usage_error(cli("report", bad), "not a file")
        assert_usage_error(cli("port", src, "--config", bad, "--out", tmp_path / "out"), "not a file")
        assert_usage_error(cli("port", bad, "--out", tmp_path / "out"))


def test_long_builds_report_progress_off_a_terminal(tmp_path, monkeypatch):
    from tileport.runtime import library
    fake = tmp_path / "bin" / "cargo"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nsleep 1.2\necho 'error: planted failure' >&2\nexit 101\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(library, "PROGRESS_EVERY_S", 0.25)
    crate = tmp_path / "crate"
    crate.mkdir()
    (crate / "Cargo.toml").write_text("[package]\n")
    r = cli("build", "--crate", crate)
    assert r.exit_code == 1 and "planted failure" in r.output
    assert r.output.count("still building") >= 2, r.output


@pytest.mark.cargo
def test_port_of_a_file_named_like_the_runtime_module(tmp_path):
    """`support.py` is the module `support_` in the pipeline's crates too (it replaced the runtime module)."""
    src = kernel_file(tmp_path / "support.py", "support_kernel")
    r = cli("port", src, "--until", "B", "--out", tmp_path / "out", terminal_width=200)
    run = json.loads((tmp_path / "out" / "support_kernel" / "run.json").read_text())
    assert [(s["stage"], s["verdict"]) for s in run["route"]] == [("A", "PASS"), ("B", "COMPILED")], r.output
    translation = json.loads((tmp_path / "out" / "support_kernel" / "B" / "translation.json").read_text())
    assert translation["module"] == "support_"
