"""`tileport port` on a Triton source with its launches, the GPU simulated: A analyzes it without a
reference (no `A/reference/`), B builds it and captures the port's own IR and cubins with nothing
diffed (and says so), D/E end BLOCKED(env) pointing at `tileport.gpu.triton_check`; evidence recorded
"on a GPU machine" by `triton_check.record_evidence` (numpy stand-ins for the Triton kernel and the
port, the real planning, comparison and fingerprints) takes the kernel to D ALL_PASS and E DONE graded
against Triton; a wrong port fails D."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

from tileport.gpu import triton_check, triton_source
from tileport.ops.triton_kernels import CORPUS
from tileport.pipeline import Options, resolve_targets
from tileport.pipeline.batch import run_batch

pytestmark = pytest.mark.cargo

VECTOR_ADD = next(k for k in CORPUS if k.kernel == "vector_add_kernel")


def spec(n=4097 * 100):
    arr = {"kind": "array", "dtype": "float32", "shape": [4097, n // 4097], "strides": [n // 4097, 1]}
    return {"format": "tileport-launches", "version": 1, "launches": [
        {"framework": "triton", "kernel": "vector_add_kernel", "file": "/gpu-machine/vector_add.py",
         "grid": [-(-n // 1024)], "options": {"num_warps": 4},
         "args": [{"name": "a_ptr", **arr}, {"name": "b_ptr", **arr}, {"name": "c_ptr", **arr},
                  {"name": "n_elements", "kind": "scalar", "dtype": "int32", "value": n},
                  {"name": "BLOCK", "kind": "const", "value": 1024}]}]}


def add(a, b, c, n, block):  # the Triton kernel's semantics, on whatever arrays it is given
    c.reshape(-1)[:n] = a.reshape(-1)[:n] + b.reshape(-1)[:n]


class FakeGPU:
    """Stands in for TritonDevice: numpy buffers; the port receives the layouts the manifest asks for."""

    port = staticmethod(add)

    def __init__(self, source_kernels, port_library, budget_s=0.2):
        self.source = {}

    def make(self, arg, host):
        base = host.astype(np.float64)
        return base, np.lib.stride_tricks.as_strided(base, arg.shape, [s * 8 for s in arg.strides])

    def clone(self, arg, handle):
        return self.make(arg, handle[0].copy())

    def value(self, handle):
        return handle[1]

    def to_host(self, arg, handle):
        return np.array(handle[1])

    def run_source(self, plan, values):
        add(*values)

    def run_port(self, plan, values):
        values = triton_check.port_arguments(plan, values, lambda v, shape, strides: np.lib.stride_tricks.as_strided(
            v, shape, [s * 8 for s in strides]))
        assert values[0].shape == (plan.args[3].value,)  # the manifest's view: n_elements, stride 1
        type(self).port(*values)

    def sync(self):
        pass

    def time_us(self, fn):
        fn()
        return 10.0

    def name(self):
        return "simulated GPU"


def run(targets, out, **options):
    outcomes, _ = run_batch(targets, Options(out=out, **options), Console(file=io.StringIO(), width=200),
                            progress=False)
    return {o.key: o for o in outcomes}


def route(o) -> list[str]:
    return [r["stage"] + " " + r["verdict"] + (f"/{r['fail_class']}" if r.get("fail_class") else "") for r in o.route]


def read(out, stage):
    return json.loads((out / "vector_add_kernel" / stage / "verdict.json").read_text())


def test_triton_source_is_ported_without_a_reference_and_proven_by_evidence(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_check, "TritonDevice", FakeGPU)
    monkeypatch.setattr(triton_source, "source_kernel", lambda path, kernel: "the Triton kernel")
    sp = tmp_path / "launches.json"
    sp.write_text(json.dumps(spec()))
    out = tmp_path / "out"
    res = run(resolve_targets([str(VECTOR_ADD.path)], launches=sp), out, native_gpu=False)
    o = res["vector_add_kernel"]
    assert route(o) == ["A PASS", "B COMPILED", "D BLOCKED/env", "E BLOCKED/env"], route(o)
    kd = out / "vector_add_kernel"
    analysis = json.loads((kd / "A" / "analysis.json").read_text())
    assert analysis["source_language"] == "triton" and analysis["reference"].startswith("none")
    assert not (kd / "A" / "reference").exists()
    assert [c["constants"] for c in analysis["configurations"]] == [{"BLOCK": 1024}]
    b = read(out, "B")
    assert "no IR diff" in b["reason"] and b["details"]["ir_diff"] == {} and b["details"]["diff_clean"] is None
    assert (kd / "B" / "generated").is_dir() and list((kd / "B" / "cubins").glob("*.cubin"))
    assert "triton_check record" in read(out, "D")["reason"]
    final = json.loads((kd / "final.json").read_text())
    names = [c["check"] for c in final["checks"]]
    assert "A/B: no reference IR, no IR diff (Triton source)" in names
    assert not any("IR diff clean" in n or "reference IR for every variant" in n for n in names)
    assert "no reference IR" in (out / "report.md").read_text()

    # "on the GPU machine": the Triton harness records evidence for the crate B built
    lib = b["details"]["library"]
    files = [f"{VECTOR_ADD.path}::vector_add_kernel"]
    ev = triton_check.record_evidence(files, sp, lib["crate"], lib["library"], tmp_path / "gpu", anchors=False)
    doc = json.loads(ev.read_text())
    assert [r["ok"] for r in doc["check"]] == [True] and not doc["problems"], doc
    res = run(resolve_targets([str(VECTOR_ADD.path)], launches=sp), out, native_gpu=False, resume=True,
              gpu_results=[tmp_path / "gpu"])
    assert route(res["vector_add_kernel"]) == ["A PASS", "B COMPILED", "D ALL_PASS", "E DONE"]
    e = read(out, "E")
    assert e["details"]["reference_backend"] == "triton" and e["details"]["geomean_ratio"] == 1.0
    assert json.loads((kd / "final.json").read_text())["passed"]

    # a wrong port: the evidence says so and D fails (class kernel)
    def wrong(a, b, c, n, block):
        add(a, b, c, n, block)
        c[n - 1] = 0.0  # the ragged last block is lost
    monkeypatch.setattr(FakeGPU, "port", staticmethod(wrong))
    triton_check.record_evidence(files, sp, lib["crate"], lib["library"], tmp_path / "gpu", anchors=False)
    res = run(resolve_targets([str(VECTOR_ADD.path)], launches=sp), out, native_gpu=False, resume=True,
              gpu_results=[tmp_path / "gpu"])
    assert route(res["vector_add_kernel"])[2] == "D FAIL/kernel", route(res["vector_add_kernel"])
    assert "`c_ptr`: max |error|" in read(out, "D")["reason"]
