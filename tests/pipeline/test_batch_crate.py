"""The run's batch crate leaves out a file whose module cargo rejects and is built again without it,
so the other files' kernels still share one library. cargo is replaced by a stand-in that rejects one
module (a translator bug that makes Rust fail to compile cannot be planted in a real translation)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

from tileport.pipeline import builds

DATA = Path(__file__).resolve().parents[1] / "triton" / "data" / "basic.py"


def _target(path: Path, kernel: str) -> SimpleNamespace:
    return SimpleNamespace(path=path, kernel=kernel, configs={}, library=False)


def _cargo_rejecting(module: str, builds_seen: list):
    def cargo_build(crate_dir: Path, profile: str):
        modules = {e["module"] for e in json.loads((crate_dir / "kernels.json").read_text())["entries"]}
        builds_seen.append(sorted(modules))
        if module in modules:
            log = ("warning: unused variable `t`\n   --> src/ok.rs:1:1\n"
                   f"error[E0425]: cannot find value `x_f32` in this scope\n   --> src/{module}.rs:162:58\n")
            return None, log, "cargo build failed: error[E0425]: cannot find value `x_f32` in this scope"
        so = crate_dir / "lib.so"
        so.write_bytes(b"\x7fELF")
        return so, "", ""
    return cargo_build


def test_the_batch_leaves_out_the_file_cargo_rejects(tmp_path, monkeypatch):
    for name in ("good.py", "bad.py"):
        shutil.copy(DATA, tmp_path / name)
    targets = [_target(tmp_path / "good.py", "add_kernel"), _target(tmp_path / "good.py", "row_softmax_kernel"),
               _target(tmp_path / "bad.py", "gather_kernel")]
    seen: list = []
    monkeypatch.setattr(builds, "cargo_build", _cargo_rejecting("bad", seen))
    batch = builds.BuildManager(tmp_path / "cache", "dev", targets).batch_for(targets[0])
    assert seen == [["bad", "good"], ["good"]]
    assert batch.ok and batch.kernels == {"add_kernel", "row_softmax_kernel"}  # the targeted ones only
    assert list(batch.left_out) == [str(tmp_path / "bad.py")] and "x_f32" in batch.left_out[str(tmp_path / "bad.py")]
    assert batch.describe()["left_out"] == {str(tmp_path / "bad.py"): batch.left_out[str(tmp_path / "bad.py")]}


def test_a_batch_whose_every_file_is_rejected_stays_failed(tmp_path, monkeypatch):
    shutil.copy(DATA, tmp_path / "bad.py")
    targets = [_target(tmp_path / "bad.py", "add_kernel")]
    seen: list = []
    monkeypatch.setattr(builds, "cargo_build", _cargo_rejecting("bad", seen))
    batch = builds.BuildManager(tmp_path / "cache", "dev", targets).batch_for(targets[0])
    assert seen == [["bad"]] and not batch.ok and "x_f32" in batch.error and batch.left_out == {}


def test_the_batch_crate_takes_the_runs_rendering(tmp_path, monkeypatch):
    """`port --faithful` builds its batch crate in the faithful rendering, a default run in the idiomatic one."""
    shutil.copy(DATA, tmp_path / "good.py")
    targets = [_target(tmp_path / "good.py", "add_kernel")]
    entries = []

    def cargo_build(crate_dir: Path, profile: str):
        entries.append("pub unsafe fn add_kernel" in (crate_dir / "src" / "good.rs").read_text())
        return _cargo_rejecting("none", [])(crate_dir, profile)
    monkeypatch.setattr(builds, "cargo_build", cargo_build)
    for faithful in (False, True):
        batch = builds.BuildManager(tmp_path / f"cache{faithful}", "dev", targets, faithful).batch_for(targets[0])
        assert batch.ok, batch.error
    assert entries == [False, True]


def test_rejected_sources_reads_error_locations_only(tmp_path):
    crate = tmp_path / "crate"
    crate.mkdir()
    (crate / "kernels.json").write_text(json.dumps({"entries": [
        {"module": "a", "source": "x/a.py"}, {"module": "b", "source": "x/b.py"}]}))
    log = ("warning: unused\n   --> src/a.rs:1:1\nerror[E0308]: mismatched types\n  --> src/b.rs:9:2\n"
           "error: could not compile `c` (lib) due to 1 previous error\n")
    assert builds.rejected_sources(builds.CrateBuild(crate, "c", "h", log=log, error="cargo build failed")) == {"x/b.py"}
    assert builds.rejected_sources(builds.CrateBuild(crate, "c", "h", log="error: linker `cc` not found\n",
                                                     error="cargo build failed")) == set()


def test_host_check_reads_the_launcher_of_the_kernel_and_the_symbol_of_the_library(tmp_path):
    """A kernel whose name another file of the batch also defines is exported as tileport_<module>_<kernel>
    by the batch library, while B's kernel.rs (translated alone) declares tileport_<kernel>: D's host check
    looks for each where it is (regression: every such port of the wild corpus failed D as `host`)."""
    from tileport.pipeline.stage_d import host_checks
    crate = tmp_path / "crate"
    crate.mkdir()
    (crate / "kernels.json").write_text(json.dumps({"entries": [
        {"kernel": "heat", "module": "heat_tb", "symbol": "tileport_heat_tb_heat", "params": [{"name": "u"}]}]}))
    ctx = SimpleNamespace(kernel="heat", target=SimpleNamespace(module="heat_tb"))
    ffi = '#[unsafe(no_mangle)]\npub unsafe extern "C" fn tileport_heat(u: *const TensorDesc) {}'
    translation = {"manifest_entry": [{"symbol": "tileport_heat", "params": [{"name": "u"}]}]}
    checks = {c["check"]: c for c in host_checks(ctx, ffi, {"crate": str(crate)}, {"params": [
        {"name": "u", "kind": "array"}]}, translation)}
    assert checks["ffi.rs declares the C symbol"]["ok"], checks
    assert checks["manifest parameters = kernel parameters (in order)"]["ok"]
    assert not checks["library built"]["ok"]  # no library in this build record: the check says so
    bad = host_checks(ctx, ffi.replace("tileport_heat(", "tileport_other("), {"crate": str(crate)},
                      {"params": [{"name": "u", "kind": "array"}]}, translation)
    assert not bad[0]["ok"]
