"""`tileport doctor`: green with the installed toolchain; precise fixes when parts are missing."""

from __future__ import annotations

from typer.testing import CliRunner

from tileport import toolchain
from tileport.cli import app


def test_doctor_is_green_here():
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "toolchain complete" in result.output


def test_doctor_names_the_fix_for_missing_libclang_and_headers(monkeypatch):
    monkeypatch.setattr(toolchain, "libclang", lambda: None)
    real_root = toolchain.cu13_root()
    # Headers missing: point the header checks at an empty directory.
    monkeypatch.setattr(toolchain, "cuda_header_version", lambda root: 0)
    comps = {c.name: c for c in toolchain.check_all()}
    clang = comps["libclang (bindgen)"]
    assert not clang.ok and "apt-get install -y libclang-dev" in clang.fix
    cuda_h = comps["CUDA headers: cuda.h >= 13.2"]
    assert not cuda_h.ok and "nvidia-cuda-runtime" in cuda_h.fix
    result = CliRunner().invoke(app, ["doctor"], terminal_width=200)
    assert result.exit_code == 1
    assert "libclang-dev" in result.output and "bash scripts/setup.sh" in result.output
    assert real_root is not None


def test_env_puts_the_matching_ptxas_first_and_drops_cuda_home():
    env = toolchain.env({"PATH": "/usr/bin", "CUDA_HOME": "/usr/local/cuda"})
    assert "CUDA_HOME" not in env
    assert env["PATH"].split(":")[0] == str(toolchain.cu13_root() / "bin")
    assert env["CUDA_TOOLKIT_PATH"] == str(toolchain.cu13_root())
