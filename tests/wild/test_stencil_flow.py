"""cutile-stencil's generated kernels in the wild GPU flow, on the CPU: the files and their manifest travel
in the bundle, the driver is told where they are, and kernels of the same name in several generated files
(heat_2d_kernel in heat_2d_tb.py, heat_2d_flat.py, heat_2d_bricked.py) keep apart through bundle, GPU
check, rows and grade."""

from __future__ import annotations

import json
import subprocess
import types
from pathlib import Path

import pytest

from eval import wild_gpu
from tileport.capture import CaptureError
from tileport.gpu import launch_check
from tileport.launches import LaunchArg, LaunchRecord, write_spec
from tileport.pipeline.target import Target
from tileport.pipeline.targets import dedupe_keys
from eval.wild import GENERATED, STENCIL_MANIFEST

MODES = ("tb", "flat", "bricked")
KERNEL = "heat_2d_kernel"
SOURCE = f"import cuda.tile as ct\n\n@ct.kernel\ndef {KERNEL}(u, output):\n    pass\n"


def _generated(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for mode in MODES:
        (folder / f"heat_2d_{mode}.py").write_text(SOURCE)
    (folder / STENCIL_MANIFEST).write_text(json.dumps({"files": [{"file": f"heat_2d_{m}.py", "ok": True}
                                                                 for m in MODES]}))
    return folder


def _spec(path: Path, folder: Path) -> Path:
    arr = LaunchArg("u", "array", "float64", [258, 288], [288, 1])
    write_spec(path, [LaunchRecord("cutile", KERNEL, str(folder / f"heat_2d_{m}.py"), (256, 1, 1),
                                   [arr, LaunchArg("output", "array", "float64", [258, 288], [288, 1])]) for m in MODES])
    return path


def test_the_driver_is_told_where_the_bundled_files_are(tmp_path, monkeypatch):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    (drivers / "stencil_driver.py").write_text("")
    monkeypatch.setattr(wild_gpu, "DRIVERS", drivers)
    envs = []
    monkeypatch.setattr(wild_gpu, "run_tool",
                        lambda cmd, *_, **kw: envs.append(kw["env"]) or subprocess.CompletedProcess(cmd, 0, "", ""))
    (tmp_path / "out").mkdir()
    wild_gpu.record_drivers(tmp_path / "out", tmp_path / "site", tmp_path / "bundle")
    assert envs[0][wild_gpu.STENCIL_DIR_ENV] == str(tmp_path / "bundle" / "stencil-gen")


def test_generated_files_travel_with_their_manifest(tmp_path):
    gen = _generated(tmp_path / "work" / "stencil-gen")
    (gen / "__pycache__").mkdir()
    copied = wild_gpu.copy_stencil_gen(gen, tmp_path / "bundle")
    assert copied == [f"heat_2d_{m}.py" for m in sorted(MODES)] + [STENCIL_MANIFEST]
    assert sorted(p.name for p in (tmp_path / "bundle" / "stencil-gen").iterdir()) == sorted(copied)
    assert wild_gpu.copy_stencil_gen(tmp_path / "not-generated", tmp_path / "bundle2") == []


def test_port_key_is_the_pipelines_directory_rule(tmp_path):
    files = [tmp_path / f"heat_2d_{m}.py" for m in MODES] + [tmp_path / "gelu.py"]
    kernels = [KERNEL] * 3 + ["gelu_kernel"]
    targets = [f"{f}::{k}" for f, k in zip(files, kernels)]
    pipeline = dedupe_keys([Target("", k, f, {}, [], "default") for f, k in zip(files, kernels)])
    assert [wild_gpu.port_key(t, targets) for t in targets] == [t.key for t in pipeline]
    assert wild_gpu.port_key(targets[0], targets) == f"heat_2d_tb.{KERNEL}"


def test_spec_files_map_to_the_generated_copies(tmp_path, monkeypatch):
    work = tmp_path / "work"
    gen = _generated(work / "stencil-gen")
    monkeypatch.setattr("eval.wild.fetch_all", lambda w: [])
    roots = wild_gpu.local_roots(work)
    assert roots == {GENERATED: gen}
    targets = wild_gpu.kernel_files(_spec(tmp_path / "s.json", Path("/gpu/.device/wild/stencil-gen")), roots)
    assert targets == [f"{gen / f'heat_2d_{m}.py'}::{KERNEL}" for m in MODES]


def test_rows_keep_same_named_kernels_of_different_files_apart(tmp_path):
    """Regression: a problem of heat_2d_tb.py's kernel was shown on every file's heat_2d_kernel."""
    spec = _spec(tmp_path / "s.json", Path("/gpu/stencil-gen"))
    ev = tmp_path / "e.json"
    ev.write_text(json.dumps({"check": [{"op": f"launch:heat_2d_flat.{KERNEL}", "kernel": KERNEL, "launch": "a",
                                         "ok": True}],
                              "problems": {f"launch:heat_2d_tb.{KERNEL}": ["no launches"]}}))
    rows = {r["file"]: r for r in wild_gpu.kernel_rows(spec, ev)}
    assert rows["heat_2d_tb.py"]["problems"] == ["no launches"]
    assert rows["heat_2d_flat.py"]["problems"] == [] and rows["heat_2d_flat.py"]["correct"] is True
    assert rows["heat_2d_bricked.py"]["problems"] == [] and rows["heat_2d_bricked.py"]["checked"] == 0


def _fake_port(out_root: Path, crate: Path, so: Path, calls: list):
    """The tool runs of bundle/grade: `tileport port` writes B verdicts and a summary under the pipeline's
    directory names; the xz of the library writes its output."""
    def run(cmd, *_, **kw):
        calls.append(cmd)
        if isinstance(cmd, str):  # xz -c SO > DEST
            Path(cmd.rsplit("> ", 1)[1]).write_bytes(b"xz")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        out = Path(cmd[cmd.index("--out") + 1])
        targets = [a for a in cmd if "::" in a]
        summary = []
        for t in targets:
            key = dedupe_keys([Target("", x.rsplit("::", 1)[1], Path(x.rsplit("::", 1)[0]), {}, [], "default")
                               for x in targets])[targets.index(t)].key
            (out / key / "B").mkdir(parents=True, exist_ok=True)
            (out / key / "B" / "verdict.json").write_text(json.dumps(
                {"details": {"library": {"crate": str(crate), "library": str(so)}}}))
            summary.append({"key": key, "kernel": t.rsplit("::", 1)[1],
                            "route": [{"stage": "D", "verdict": "PASS" if "flat" in key else "FAIL"}]})
        (out / "summary.json").write_text(json.dumps({"kernels": summary}))
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return run


def test_bundle_builds_every_generated_kernel_and_carries_the_files(tmp_path, monkeypatch):
    """Regression: bundle looked for B's verdict under the kernel's name only, so kernels whose name several
    files share (every generated stencil kernel) were left out of the bundled library."""
    work, dest, results = tmp_path / "work", tmp_path / "device" / "wild", tmp_path / "results"
    gen = _generated(work / "stencil-gen")
    results.mkdir()
    _spec(results / "wild-launches.json", Path("/gpu/.device/wild/stencil-gen"))
    crate, so = tmp_path / "crate", tmp_path / "libport.so"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text("")
    (crate / "kernels.json").write_text("{}")
    so.write_bytes(b"so")
    monkeypatch.setattr("eval.wild.fetch_all", lambda w: [])
    calls = []
    monkeypatch.setattr(wild_gpu, "run_tool", _fake_port(work / "gpu-bundle", crate, so, calls))
    assert wild_gpu.bundle(results, work=work, dest=dest) == 0
    port = calls[0]
    assert port[port.index("--launches") + 1] == str(results / "wild-launches.json")
    assert sorted(p.name for p in (dest / "stencil-gen").iterdir()) == sorted(
        [f"heat_2d_{m}.py" for m in MODES] + [STENCIL_MANIFEST])
    assert (dest / "stencil-gen" / "heat_2d_tb.py").read_text() == (gen / "heat_2d_tb.py").read_text()
    assert (dest / "libwild_port.so.xz").is_file() and (dest / "launches.json").is_file()


def test_grade_gives_each_file_its_own_verdicts(tmp_path, monkeypatch):
    """Regression: grade keyed the port's verdicts by kernel name, so the three heat_2d_kernel rows showed
    one file's verdicts."""
    work, results, table = tmp_path / "work", tmp_path / "results", tmp_path / "table"
    _generated(work / "stencil-gen")
    results.mkdir()
    spec = _spec(results / "wild-launches.json", Path("/gpu/.device/wild/stencil-gen"))
    (results / "wild-gpu.json").write_text(json.dumps({"kernels": wild_gpu.kernel_rows(spec, None)}))
    monkeypatch.setattr("eval.wild.fetch_all", lambda w: [])
    monkeypatch.setattr(wild_gpu, "run_tool", _fake_port(work / "gpu-grade", tmp_path, tmp_path, []))
    assert wild_gpu.grade(results, work=work, table=table) == 0
    rows = {r["file"]: r["port_verdicts"] for r in json.loads((table / "wild-gpu.json").read_text())["kernels"]}
    assert rows == {"heat_2d_tb.py": {"D": "FAIL"}, "heat_2d_flat.py": {"D": "PASS"},
                    "heat_2d_bricked.py": {"D": "FAIL"}}


def test_gpu_check_runs_each_files_own_port():
    """Regression: the port was looked up by kernel name, so every file's heat_2d_kernel ran the port of the
    last module of that name in the crate (the library keeps one entry per name)."""
    asked = []

    class Library:
        def entry(self, kernel, module):
            asked.append((kernel, module))
            return lambda *values, grid, stream: None

    device = object.__new__(launch_check.TorchDevice)
    device.library = Library()
    device.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda: types.SimpleNamespace(cuda_stream=0)))
    for m in MODES:
        key = launch_check.evidence_key(f"/gpu/stencil-gen/heat_2d_{m}.py", KERNEL)
        device.run_port(launch_check.LaunchPlan(key, KERNEL, (1, 1, 1), [], "a", "float64"), [])
    assert asked == [(KERNEL, f"heat_2d_{m}") for m in MODES]
    assert launch_check.module_of("stage-d-key", KERNEL) is None


def test_library_finds_a_kernel_by_module(tmp_path, monkeypatch):
    from tileport.runtime import library

    class Dll:  # the cdylib's service symbols; no kernel symbol (not called here)
        def __init__(self, path):
            self.tileport_last_error = lambda: None
            self.tileport_abi_version = lambda: library.ABI_VERSION
    monkeypatch.setattr(library.ctypes, "CDLL", Dll)
    monkeypatch.setenv("TILEPORT_JIT_CACHE", "0")
    manifest = tmp_path / "kernels.json"
    manifest.write_text(json.dumps({"abi_version": library.ABI_VERSION, "entries": [
        {"module": f"heat_2d_{m}", "kernel": KERNEL, "symbol": f"tileport_heat_2d_{m}_{KERNEL}", "params": []}
        for m in MODES] + [{"module": "solo", "kernel": "solo_kernel", "symbol": "tileport_solo_kernel",
                            "params": []}]}))
    lib = library.KernelLibrary(tmp_path / "lib.so", manifest)
    assert [lib.entry(KERNEL, f"heat_2d_{m}").symbol for m in MODES] == [f"tileport_heat_2d_{m}_{KERNEL}"
                                                                        for m in MODES]
    assert lib.entry("solo_kernel", "solo_").symbol == "tileport_solo_kernel"  # a name one module has
    with pytest.raises(KeyError, match="module `gelu`"):  # a name several modules have: never a guess
        lib.entry(KERNEL, "gelu")


KERNEL_FILE = '''import cuda.tile as ct

@ct.kernel
def {name}(x, y, T: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(T,)) * 2.0)
'''


def _crate_of_same_named_kernels(tmp_path):
    from tileport.translate import translate
    paths = []
    for stem, name in (("heat_tb", "shared_kernel"), ("heat_flat", "shared_kernel"), ("solo", "solo_kernel")):
        paths.append(tmp_path / f"{stem}.py")
        paths[-1].write_text(KERNEL_FILE.format(name=name))
    files = translate([str(p) for p in paths], None).files
    return files["src/lib.rs"], json.loads(files["kernels.json"])


def test_ir_export_names_same_named_entries_by_module(tmp_path):
    """Regression: the crate's `entry_info` matched entries by name alone, so the IR export of every module's
    `shared_kernel` compiled the first module's (and stage B's capture took the first manifest entry of
    that name: with other pinned constants, no variant matched and B failed to compile)."""
    from tileport.capture.ir import _entry, ir_entry_name
    from tileport.ops.spec import Capture
    lib_rs, manifest = _crate_of_same_named_kernels(tmp_path)
    keys = [line.split('"')[1] for line in lib_rs.splitlines() if "=> EntryInfo" in line]
    lib = types.SimpleNamespace(manifest=manifest)
    cap = Capture("shared_kernel", {"x": ("float32", 1), "y": ("float32", 1)}, {}, {"T": 128})
    named = []
    for module in ("heat_tb", "heat_flat"):
        entry = _entry(lib, cap, module)
        assert entry["module"] == module
        named += [ir_entry_name(manifest, entry, v["entry"]) for v in entry["variants"]]
    solo = next(e for e in manifest["entries"] if e["kernel"] == "solo_kernel")
    named += [ir_entry_name(manifest, solo, v["entry"]) for v in solo["variants"]]
    assert sorted(named) == sorted(keys)  # what the capture asks for is what the crate knows
    assert "heat_tb::shared_kernel" in keys and "heat_flat::shared_kernel" in keys and "solo_kernel" in keys
    with pytest.raises(CaptureError, match="in module `nowhere`"):
        _entry(lib, cap, "nowhere")
