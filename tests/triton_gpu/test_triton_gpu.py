"""On a GPU with Triton: the Triton corpus against PyTorch (eval/triton_corpus_driver.py), `tileport
record` of its launches, the differential harness end to end with the Triton kernel rebuilt from the
AST on one side and the module's own kernel on the other (equal; a tampered side fails), and, when the
port bundle of scripts/triton-bundle.sh is present, every corpus port against its source Triton kernel.

Results go to $TILEPORT_RESULTS_DIR (default out/triton-gpu): triton-launches.json (recorded spec),
triton-driver.json, and with the bundle gpu-evidence-triton.json + triton-summary.json. Without the
bundle the port test is skipped with the reason, unless $TILEPORT_GPU_REQUIRE names "triton".
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileport.launches import load_spec

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "eval" / "triton_corpus_driver.py"
RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or REPO / "out" / "triton-gpu")
OPS = ["vector_add", "relu", "gelu", "swiglu", "geglu", "silu_and_mul", "softmax", "layer_norm", "rms_norm", "rope",
       "matmul", "matmul_block_ptr", "attention", "flash_decode"]


@pytest.fixture(scope="module")
def recorded() -> Path:
    """`tileport record` of the whole driver (which also checks every case against PyTorch)."""
    pytest.importorskip("triton")
    RESULTS.mkdir(parents=True, exist_ok=True)
    spec = RESULTS / "triton-launches.json"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(spec), "--", sys.executable,
                           str(DRIVER), "--out", str(RESULTS / "triton-driver.json")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return spec


def test_driver_cases_agree_with_pytorch(recorded):
    cases = json.loads((RESULTS / "triton-driver.json").read_text())["cases"]
    bad = [c for c in cases if not c["ok"]]
    assert cases and not bad, bad
    assert {c["case"].split()[0] for c in cases} == set(OPS)


def test_record_captures_every_corpus_kernel(recorded):
    from tileport.ops.triton_kernels import CORPUS
    records = load_spec(recorded)
    assert {r.framework for r in records} == {"triton"}
    assert {r.kernel for r in records} == {k.kernel for k in CORPUS}
    softmax = [r for r in records if r.kernel == "softmax_kernel"]
    assert len(softmax) == 3
    args = {a.name: a for a in softmax[0].args}
    assert args["x_ptr"].kind == "array" and args["BLOCK"].kind == "const" and args["n_cols"].kind == "scalar"
    mm = next(r for r in records if r.kernel == "matmul_kernel")
    assert mm.options == {"num_warps": 8, "num_stages": 3}


def _module_kernel(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"tileport_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _params(record) -> list[dict]:
    return [{"name": a.name, "kind": a.kind, "rank": len(a.shape or []) if a.kind == "array" else None}
            for a in record.args]


@pytest.mark.parametrize("tamper", [False, True], ids=["faithful", "tampered"])
def test_harness_end_to_end_with_triton_on_both_sides(recorded, tamper):
    """Source: the kernel rebuilt from the AST; "port": the module's own JITFunction (the same
    computation, so every launch matches); tampered: one output element made NaN, so the case fails."""
    import torch

    from tileport.gpu.triton_check import TritonDevice, check_triton_launch, plan_triton_launches
    from tileport.gpu.triton_source import source_kernel
    from tileport.ops.triton_kernels import CORPUS

    class BothTriton(TritonDevice):
        def __init__(self, source, port):
            super().__init__(source, None)
            self.port = port

        def run_port(self, plan, values):
            self.port[plan.kernel][plan.grid](*values, **plan.options)
            if tamper:
                out = next(v for a, v in zip(plan.args, values) if a.name in ("y_ptr", "c_ptr", "o_ptr"))
                out.view(-1)[0] = float("nan")

    records = load_spec(recorded)
    results = []
    for k in (k for k in CORPUS if k.kernel in ("vector_add_kernel", "softmax_kernel", "matmul_kernel")):
        recs = [r for r in records if r.kernel == k.kernel]
        plans, problems = plan_triton_launches(f"launch:{k.path.stem}.{k.kernel}", recs, _params(recs[0]))
        assert plans and not problems, problems
        device = BothTriton({k.kernel: source_kernel(k.path, k.kernel)},
                            {k.kernel: _module_kernel(k.path, k.kernel)})
        results += [check_triton_launch(p, device, seed=i) for i, p in enumerate(plans)]
    torch.cuda.synchronize()
    if tamper:
        assert all(not r["ok"] for r in results), results
    else:
        assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]


def _bundle() -> tuple[Path, Path, Path] | None:
    crate = REPO / ".device" / "triton-crate"
    lib = Path(os.environ.get("TILEPORT_TRITON_LIB") or Path(os.environ.get("TILEPORT_DEVICE_EXTRA", "/nonexistent"))
               / "libtriton_port.so")
    spec = REPO / ".device" / "triton-launches.json"
    if (crate / "kernels.json").is_file() and lib.is_file() and spec.is_file():
        return crate, lib, spec
    why = (f"no Triton port bundle ({crate}, {lib}, {spec}): run `bash scripts/triton-bundle.sh bundle SPEC` where "
           "cargo is, and carry .device")
    required = {b.strip() for b in os.environ.get("TILEPORT_GPU_REQUIRE", "").split(",")}
    if "triton" in required:
        pytest.fail(why)
    pytest.skip(why)


def test_every_corpus_port_matches_its_triton_kernel():
    pytest.importorskip("triton")
    crate, lib, spec = _bundle()
    from tileport.gpu.triton_check import SUMMARY_FILE, record_evidence
    from tileport.ops.triton_kernels import CORPUS
    files = [f"{k.path}::{k.kernel}" for k in CORPUS]
    path = record_evidence(files, spec, crate, lib, RESULTS, budget_s=0.1)
    data = json.loads(path.read_text())
    summary = json.loads((RESULTS / SUMMARY_FILE).read_text())
    bad = [f"{r['launch']}: {r['error'][:200]}" for r in data["check"] if not r["ok"]]
    assert data["check"] and not bad and not data["problems"], (bad, data["problems"])
    assert summary["kernels_correct"] == len(CORPUS)
