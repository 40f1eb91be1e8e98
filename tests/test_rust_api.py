"""The Rust API over the generated kernels (rust-api/, crate `tileport-ops`): it names every operator of the library
(or says why not), and it builds, passes its CPU tests (shape errors, the Tile IR of every plan; the GPU tests are
`#[ignore]`d here), documents without warnings and is rustfmt-clean. One cargo build serves the three cargo steps."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tileport import toolchain
from tileport.ops.specs import SPEC_MODULES
from tileport.runtime.library import cargo_target_dir

REPO = Path(__file__).resolve().parents[1]
API = REPO / "rust-api"

# The library's operators (ops/specs) by the API function that runs them; the softmax variants are the operator's
# choices (`plan::softmax` takes the one the Python operator takes by default).
IN_API = {"vector_add": "vector_add", "relu": "relu", "gelu": "gelu", "silu_and_mul": "silu_and_mul",
          "swiglu": "swiglu", "geglu": "geglu", "softmax": "softmax", "softmax_tma": "softmax",
          "softmax_gather": "softmax", "softmax_online": "softmax", "rms_norm": "rms_norm",
          "layer_norm": "layer_norm", "rope": "rope", "matmul": "matmul", "bmm": "bmm", "fmha_fwd": "fmha"}
# Operators the API leaves out, each with the reason docs/rust-api.md gives.
NOT_IN_API = {"matmul_splitk", "fmha_fwd_sinks", "fmha_fwd_softcap", "fmha_bwd", "flash_decode", "flash_decode_paged",
              "flash_decode_sinks", "flash_decode_softcap", "mla_decode", "mla_prefill"}


def api_functions() -> set[str]:
    """The operators lib.rs re-exports (`pub use ops::{...}`), types left out."""
    m = re.search(r"pub use ops::\{(.*?)\};", (API / "src" / "lib.rs").read_text(), re.S)
    assert m, "rust-api/src/lib.rs re-exports no operators"
    return {name.strip() for name in m.group(1).split(",") if name.strip() and name.strip()[0].islower()}


def test_every_library_operator_has_an_api_function_or_a_stated_reason():
    specs = set(SPEC_MODULES)
    assert set(IN_API) | NOT_IN_API == specs, "operators neither in the API nor left out by name"
    assert not set(IN_API) & NOT_IN_API
    assert set(IN_API.values()) | {"fmha_varlen"} == api_functions()
    doc = (REPO / "docs" / "rust-api.md").read_text()
    missing = [op for op in NOT_IN_API if f"`{op}`" not in doc]
    assert not missing, f"docs/rust-api.md does not say why these are left out: {missing}"


def cargo(*args: str, timeout: float = 3600, **env: str) -> subprocess.CompletedProcess:
    full = toolchain.env() | {"CARGO_TARGET_DIR": str(cargo_target_dir())} | env
    return subprocess.run(["cargo", *args, "--manifest-path", str(API / "Cargo.toml")], env=full,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.cargo
def test_api_crate_passes_its_cpu_tests_and_documents_without_warnings():
    if shutil.which("cargo") is None:
        pytest.fail("cargo is not installed (bash scripts/setup.sh installs it)")
    fmt = cargo("fmt", "--check", timeout=120)
    assert fmt.returncode == 0, f"rust-api is not rustfmt-clean:\n{fmt.stdout}{fmt.stderr}"

    test = cargo("test")
    log = test.stdout + test.stderr
    assert test.returncode == 0, log[-6000:]
    # the CPU tests ran, the GPU tests were ignored (they need a GPU), every doc example compiled
    assert re.search(r"test elementwise_ops_compile \.\.\. ok", log), log[-4000:]
    assert re.search(r"test attention_matches_the_reference \.\.\. ignored", log), log[-4000:]
    assert re.search(r"ops::fmha \(line \d+\) - compile \.\.\. ok", log), log[-4000:]
    assert not re.search(r"test result: FAILED", log)

    doc = cargo("doc", "--no-deps", RUSTDOCFLAGS="-Dwarnings")
    assert doc.returncode == 0, (doc.stdout + doc.stderr)[-6000:]
    assert "warning: `tileport-ops`" not in doc.stderr
    assert (cargo_target_dir() / "doc" / "tileport_ops" / "fn.softmax.html").is_file()


def _h200_rustapi(tmp_path: Path, bundled: bool) -> tuple[subprocess.CompletedProcess, Path]:
    """`scripts/h200.sh rustapi` with nvidia-smi and the two bundled binaries replaced by stand-ins (modes dropped,
    as .device/enter.sh's xz unpacking leaves them)."""
    bin_dir, extra, out = tmp_path / "bin", tmp_path / "extra", tmp_path / "OUT"
    for d in (bin_dir, extra, out):
        d.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 580.00, 143771 MiB'\n")
    smi.chmod(0o755)
    if bundled:
        (extra / "transformer_block").write_text('#!/bin/sh\necho "example $*"; echo \'{"verdict": "PASS"}\'\n')
        (extra / "tileport_ops_gpu_tests").write_text('#!/bin/sh\necho "tests $*"; echo "test result: ok."\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out),
           "TILEPORT_DEVICE_EXTRA": str(extra), "TILEPORT_WORK": str(tmp_path / "work"), "RUSTAPI_ARGS": "2 256"}
    proc = subprocess.run(["bash", "scripts/h200.sh", "rustapi"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    return proc, out


def test_h200_rustapi_step_runs_the_bundled_example_and_tests(tmp_path):
    proc, out = _h200_rustapi(tmp_path, bundled=True)
    log = (out / "rustapi.log").read_text()
    assert "example 2 256" in log and '"verdict": "PASS"' in log and "rustapi rc=0" in log, proc.stdout + log
    assert "tests --ignored --test-threads 1" in log and "rustapi tests rc=0" in log, log


def test_h200_rustapi_step_says_when_the_example_was_not_bundled(tmp_path):
    proc, out = _h200_rustapi(tmp_path, bundled=False)
    assert "rustapi: no " in (out / "rustapi.log").read_text(), proc.stdout + proc.stderr
    assert "rustapi rc=" not in proc.stdout
