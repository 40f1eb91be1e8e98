"""Set-up: the real libclang (not libclang-cpp) and that it loads, Rust missing, a PEP 668 system
Python (a project virtual environment), and tests that keep out of ~/.cache. Fake directories and
fake executables stand in for the machine states."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tileport import toolchain
from tileport.corpus import REPO

SETUP = REPO / "scripts" / "setup.sh"
REAL_LIBCLANG = toolchain.libclang()
CLANG_CPP = sorted(Path("/usr/lib").glob("llvm-*/lib/libclang-cpp.so*")) + sorted(
    Path("/usr/lib").glob("*-linux-gnu/libclang-cpp.so*"))


def setup_fn(call: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run one function of scripts/setup.sh (sourced: its main does not run)."""
    return subprocess.run(["bash", "-c", f"source {SETUP}; {call}"], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60)


@pytest.fixture
def fake_llvm(tmp_path, monkeypatch):
    """An LLVM library folder the toolchain searches instead of the system's."""
    lib = tmp_path / "llvm-17" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    monkeypatch.setenv("TILEPORT_LIBCLANG_DIRS", str(tmp_path / "llvm-*" / "lib"))
    toolchain.libclang.cache_clear()
    yield lib
    toolchain.libclang.cache_clear()


def test_libclang_cpp_is_not_libclang(fake_llvm, monkeypatch):
    if not CLANG_CPP:
        pytest.skip("no libclang-cpp.so on this machine to plant")
    (fake_llvm / "libclang-cpp.so.17").symlink_to(CLANG_CPP[0])  # loads, but is not the C API
    monkeypatch.setenv("LIBCLANG_PATH", str(fake_llvm))
    assert toolchain.libclang() is None and toolchain.libclang_candidates() == []
    clang = next(c for c in toolchain.check_all() if c.name == "libclang (bindgen)")
    assert not clang.ok and "libclang-dev" in clang.fix
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    assert setup_fn("has_libclang", env).returncode == 1  # setup.sh installs libclang-dev


def test_a_libclang_that_does_not_load_is_reported(fake_llvm):
    (fake_llvm / "libclang.so.1").write_bytes(b"not a shared library")
    assert toolchain.libclang() is None
    clang = next(c for c in toolchain.check_all() if c.name == "libclang (bindgen)")
    assert not clang.ok and "does not load" in clang.fix and "libclang.so.1" in clang.fix


def test_the_real_libclang_is_found_and_loads(fake_llvm):
    if REAL_LIBCLANG is None:
        pytest.skip("no libclang on this machine (bash scripts/setup.sh installs it)")
    (fake_llvm / "libclang-cpp.so.17").write_bytes(b"")
    (fake_llvm / "libclang.so.1").symlink_to(REAL_LIBCLANG)
    assert toolchain.libclang() == fake_llvm / "libclang.so.1"
    assert toolchain.env({})["LIBCLANG_PATH"] == str(fake_llvm)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    assert setup_fn("has_libclang", env).returncode == 0


FAKE_PYTHON = """#!/bin/sh
# -c CODE: the PEP 668 check answers EXTERNALLY_MANAGED (0: yes); -m venv DIR: a venv with this script
case "$1" in
  -c) exit {managed} ;;
  -m) [ "$2" = venv ] && mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0 ;;
esac
exit 1
"""


def fake_python(tmp_path: Path, managed: bool) -> Path:
    py = tmp_path / "bin" / "python3"
    py.parent.mkdir(parents=True, exist_ok=True)
    py.write_text(FAKE_PYTHON.format(managed=0 if managed else 1))
    py.chmod(0o755)
    return py


def test_externally_managed_python_gets_a_project_venv(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "TILEPORT_PYTHON": str(fake_python(tmp_path, managed=True))}
    r = setup_fn("choose_python", env, cwd=project)
    assert r.returncode == 0 and r.stdout.strip() == ".venv/bin/python", r.stderr
    assert "PEP 668" in r.stderr and (project / ".venv" / "bin" / "python").is_file()
    r = setup_fn("choose_python", env, cwd=project)  # later runs use it
    assert r.stdout.strip() == ".venv/bin/python" and "PEP 668" not in r.stderr


def test_a_python_that_accepts_pip_is_used_as_is(tmp_path):
    py = fake_python(tmp_path, managed=False)
    r = setup_fn("choose_python", {**os.environ, "TILEPORT_PYTHON": str(py)}, cwd=tmp_path)
    assert r.stdout.strip() == str(py) and not (tmp_path / ".venv").exists()


def test_pep668_check_on_this_python():
    """The check itself, run by the real interpreter: a virtual environment or a Python without the
    marker (this machine) is not externally managed."""
    import sys
    import sysconfig
    marker = Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED"
    expected = 0 if (sys.prefix == sys.base_prefix and marker.is_file()) else 1
    assert setup_fn(f"externally_managed {sys.executable}", dict(os.environ)).returncode == expected


def test_missing_rust_says_what_to_do(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text("#!/bin/sh\nexit 6\n")  # sh.rustup.rs unreachable
    (bin_dir / "curl").chmod(0o755)
    for tool in ("mktemp", "rm"):
        (bin_dir / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip())
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    r = subprocess.run(["/bin/bash", "-c", f"source {SETUP}; ensure_rust"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "rustup" in r.stderr and "cargo" in r.stderr, r.stderr


def test_tests_keep_out_of_the_home_cache():
    from cutile_cache._env import get_cache_dir_from_env

    from tileport.pipeline import Options
    from tileport.runtime.library import cargo_target_dir
    home_cache = Path.home() / ".cache"
    cuda_tile_cache = get_cache_dir_from_env()  # None: its disk cache is off
    for path in (Options(out=Path("x")).cache(), cargo_target_dir(), Path(os.environ["XDG_CACHE_HOME"]),
                 *([Path(cuda_tile_cache)] if cuda_tile_cache else [])):
        assert home_cache not in path.resolve().parents, path


def test_docs_and_scripts_speak_of_the_project_alone():
    texts = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "scripts").glob("*.sh"),
             *(REPO / "eval").glob("*.md"), *(REPO / "eval").glob("*.sh")]
    for path in texts:
        text = path.read_text()
        for phrase in ("../shared", "device tool", "the session", "session's"):
            assert phrase not in text, f"{path.name}: {phrase}"
    assert "bash scripts/device-prep.sh" in (REPO / "scripts" / "device-bundle.sh").read_text()
    assert (REPO / "scripts" / "device-prep.sh").is_file()
