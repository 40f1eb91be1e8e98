"""eval/wild_drivers/stencil_driver.py without a GPU: what it launches (the manifest the stencil
generation writes, the benchmark's domains and shapes), the cupy stand-in it loads generated files with,
the bricked wrapper's view handed to the flat launcher with its strides, and a missing setup reported as a
failing case. The generated files here are this test's own stand-ins (same host-code shape: a cupy import,
`_temporal_buffers`, `launch_<name>`, `launch_<name>_bricked`); `torch` is a numpy-backed fake."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "eval" / "wild_drivers" / "stencil_driver.py"

GENERATED = '''
import cupy as cp

LAUNCHES = []

def _temporal_buffers(ref, count):
    return [cp.zeros_like(ref) for _ in range(count)] if ref.device.id == 0 else []

def launch_demo(u_in, u_out, stream=None):
    if stream is None:
        stream = cp.cuda.get_current_stream()
    bufs = [u_in] + _temporal_buffers(u_in, 2) + [u_out]
    for step in range(3):
        LAUNCHES.append((stream, type(bufs[step]).__module__, tuple(bufs[step].shape), bufs[step].stride()))
        bufs[step + 1][...] = 2 * bufs[step]
'''
BRICKED = '''
def pad(a, brick):
    padded = cp.zeros(tuple(-(-n // brick) * brick for n in a.shape), dtype=a.dtype)
    padded[tuple(slice(0, n) for n in a.shape)] = a
    return padded

def launch_demo_bricked(u_in, u_out, brick_size=8):
    u_flat = pad(u_in, brick_size)[tuple(slice(0, n) for n in u_in.shape)]
    out_flat = cp.zeros_like(u_flat)
    launch_demo(u_flat, out_flat)
    u_out[:] = out_flat
'''


class FakeTensor(np.ndarray):
    """A "device" tensor: numpy underneath, torch's type module and methods."""
    __module__ = "torch"

    def stride(self):
        return tuple(s // self.itemsize for s in self.strides)

    def copy_(self, src):
        self[...] = src
        return self

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.float64 = np.float64
    torch.cuda = types.SimpleNamespace(current_stream=lambda: "torch-stream", synchronize=lambda: None)
    torch.zeros_like = lambda a: np.zeros_like(np.asarray(a)).view(FakeTensor)
    torch.rand = lambda shape, dtype, device: np.random.default_rng(1).random(shape).view(FakeTensor)
    torch.from_numpy = lambda a: a

    def empty_strided(shape, strides, dtype, device):
        size = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        base = np.full(size, np.nan, dtype=dtype)
        return np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in strides]).view(FakeTensor)
    torch.empty_strided = empty_strided
    return torch


@pytest.fixture
def driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    monkeypatch.syspath_prepend(str(DRIVER.parent))
    spec = importlib.util.spec_from_file_location("stencil_driver_under_test", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(tmp_path: Path, entries: list[dict] | None = None) -> Path:
    folder = tmp_path / "stencil-gen"
    folder.mkdir()
    (folder / "demo_tb.py").write_text(GENERATED)
    (folder / "demo_bricked.py").write_text(GENERATED + BRICKED)
    entries = entries if entries is not None else [
        {"file": f"demo_{mode}.py", "ok": True, "name": "demo", "ndim": 2, "halo_widths": [1, 2],
         "benchmark_domains": [[256, 256], [16, 16], [64, 64]]} for mode in ("tb", "bricked")] + [
        {"file": "broken.py", "ok": False, "error": "ValueError: no"}]
    (folder / "stencils.json").write_text(json.dumps({"files": entries}))
    return folder


def test_manifest_domains_and_shapes(driver, tmp_path):
    entries = driver.load_manifest(_folder(tmp_path))
    assert [e["file"] for e in entries] == ["demo_tb.py", "demo_bricked.py"]  # a file the package failed to compile is not listed
    assert driver.domains(entries[0]) == [(16, 16), (256, 256)]  # the smallest and the largest
    assert driver.domains(entries[0], "all") == [(256, 256), (16, 16), (64, 64)]
    assert driver.domains(entries[0], "largest") == [(256, 256)]
    with pytest.raises(driver.StencilSetupError, match="one of ends, all, largest"):
        driver.domains(entries[0], "some")
    assert driver.full_shape((16, 16), [1, 2]) == (18, 20)  # the benchmark's domain + halo on each side
    with pytest.raises(driver.StencilSetupError, match="rank"):
        driver.full_shape((16,), [1, 2])


def test_missing_files_are_a_failing_case_saying_what_to_run(driver, tmp_path, capsys):
    cases = driver.cases(tmp_path / "nowhere", "ends")
    assert list(cases) == ["setup"]
    with pytest.raises(driver.StencilSetupError, match="wild_gpu prepare"):
        cases["setup"]()
    folder = _folder(tmp_path, [{"file": "gone.py", "ok": True, "name": "gone"}])
    with pytest.raises(driver.StencilSetupError, match="not there: gone.py"):
        driver.load_manifest(folder)
    assert driver.run_cases("cutile_stencil", driver.cases(tmp_path / "nowhere", "ends")) == 1


def test_generated_file_loads_with_the_cupy_stand_in_only_while_importing(driver, tmp_path):
    module = driver.load_generated(_folder(tmp_path) / "demo_tb.py")
    assert "cupy" not in sys.modules  # the stand-in is bound in the generated module only
    assert isinstance(module.cp, driver.CupyStandIn)
    assert module._temporal_buffers is driver._temporal_buffers  # cupy's device.id: torch tensors have none
    with pytest.raises(AttributeError, match="stand-in has no `asnumpy`"):
        module.cp.asnumpy
    host = np.ones((2, 3))
    assert type(module.cp.zeros_like(host)) is np.ndarray
    assert type(module.cp.zeros_like(host.view(FakeTensor))) is FakeTensor


def test_every_case_launches_its_file_on_each_domain(driver, tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    loaded = {}
    load = driver.load_generated
    monkeypatch.setattr(driver, "load_generated", lambda path: loaded.setdefault(path.stem, load(path)))
    cases = driver.cases(folder, "ends")
    assert list(cases) == ["demo_tb", "demo_bricked"]
    for case in cases.values():
        case()
    # 3 temporal steps per domain, every buffer a device tensor of the full shape, the launcher's own stream
    launches = loaded["demo_tb"].LAUNCHES
    assert [(s, m, shape) for s, m, shape, _ in launches] == (
        [("torch-stream", "torch", (18, 20))] * 3 + [("torch-stream", "torch", (258, 260))] * 3)
    assert {st for *_, st in launches} == {(20, 1), (260, 1)}
    # the bricked file: its wrapper's view of the padded array (brick 8) on the GPU, then dense scratch buffers
    bricked = loaded["demo_bricked"].LAUNCHES
    assert [(shape, st) for _s, _m, shape, st in bricked] == [((18, 20), (24, 1)), ((18, 20), (20, 1)),
                                                            ((18, 20), (20, 1)), ((258, 260), (264, 1)),
                                                            ((258, 260), (260, 1)), ((258, 260), (260, 1))]


def test_bricked_wrapper_hands_its_strided_view_to_the_gpu(driver, tmp_path):
    module = driver.load_generated(_folder(tmp_path) / "demo_bricked.py")
    entry = {"file": "demo_bricked.py", "name": "demo"}
    u = np.random.default_rng(0).random((10, 13))
    out = driver.run_bricked(module, entry, u)
    first = module.LAUNCHES[0]
    assert first[1] == "torch" and first[2] == (10, 13)
    assert first[3] == (16, 1)  # rows of the brick-padded array (13 -> 16), as the wrapper passes them
    assert np.array_equal(out, 8 * u)  # 3 steps of the fake launcher, copied back into the wrapper's output
    assert module.launch_demo.__name__ == "launch_demo" and module.launch_demo.__module__ == module.__name__


def test_element_strides_of_a_padded_view(driver):
    view = np.zeros((288, 288))[:258, :258]
    assert driver.element_strides(view) == (288, 1)
    assert driver.to_device(view).stride() == (288, 1)
