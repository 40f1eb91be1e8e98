"""Package mode: `tileport translate|port DIR|WHEEL|SDIST|PIP-SPEC` on a small package the tests write
(tests/packages/synthetic_package.py). Translate-only except the port test, which stops after stage A (no cargo).
No test touches the network: the pip requirement is served from a local folder with the index off."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app
from tileport.translate import lower

import synthetic_package as synthetic

KERNELS = {"softmax_kernel": ("tilelib.ops.softmax", "tilelib/ops/softmax.py", "triton"),
           "scale_kernel": ("tilelib.ops.scale", "tilelib/ops/scale.py", "cutile")}


def cli(*args):
    return CliRunner().invoke(app, [*map(str, args)], catch_exceptions=False)


@pytest.fixture
def markers(tmp_path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


def tree(root: Path, skip: Path) -> dict[str, int]:
    """Every file under `root` but those under `skip`, with its size (what a run wrote elsewhere shows)."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")
            if p.is_file() and skip not in p.parents}


def check_library(out: Path, markers: Path) -> dict:
    """Every kernel found and translated, the vendor files skipped with a note, nothing run."""
    doc = json.loads((out / "library.json").read_text())
    rows = {r["kernel"]: r for r in doc["rows"]}
    assert sorted(rows) == sorted(KERNELS), doc["rows"]
    for kernel, (module, file, frontend) in KERNELS.items():
        r = rows[kernel]
        assert (r["module"], r["file"], r["frontend"], r["translated"]) == (module, file, frontend, True), r
        assert r["diagnostic"] is None and r["entries"] >= 1 and r["line"] == 14
        assert any("module-level `try`: read the `try` body" in n for n in r["notes"]), r["notes"]
        assert (r["terminal"], r["ir_critical"], r["gpu_correct"], r["parity"]) == (None, None, None, None) \
            or doc["crate"] is None
    assert doc["totals"]["found"] == 2 and doc["totals"]["translated"] == 2 and doc["totals"]["rate"] == 1.0
    assert set(doc["per_module"]) == {"tilelib.ops.softmax", "tilelib.ops.scale"}
    skipped = {s["file"]: s["why"] for s in doc["skipped"]}
    assert set(skipped) == {"tilelib/backends/_ascend/softmax.py", "tilelib/fused_ops.py"}, skipped
    assert "Ascend NPU" in skipped["tilelib/backends/_ascend/softmax.py"]
    assert "`_ascend`" in skipped["tilelib/backends/_ascend/softmax.py"]
    assert "imports `torch_npu`" in skipped["tilelib/fused_ops.py"]
    assert doc["problems"] == []
    html = (out / "library.html").read_text()
    assert "<script>" in html and "sortBy" in html and "softmax_kernel" in html and "torch_npu" in html
    assert sorted(p.name for p in markers.iterdir()) == []
    return doc


def check_crate(crate: Path) -> None:
    """One Rust module per source module, named by its path in the package; helpers of other modules inlined
    (the crate's own modules besides: `support`, and `tiles`, the idiomatic rendering's device helpers)."""
    assert sorted(p.name for p in (crate / "src").glob("*.rs")) == ["lib.rs", "ops_scale.rs", "ops_softmax.rs",
                                                                    "support.rs", "tiles.rs"]
    lib = (crate / "src" / "lib.rs").read_text()
    assert "pub mod ops_scale;" in lib and "pub mod ops_softmax;" in lib
    softmax = (crate / "src" / "ops_softmax.rs").read_text()
    assert "pub mod ops_softmax {" in softmax and "Translated from `tilelib/ops/softmax.py:14`" in softmax
    assert "exp_approx(" in softmax and "exp2(" in softmax  # fexp (a re-export) and ext.exp2 (tl_extra)
    assert "shape![128]" in softmax  # BLOCK, an absolute import of tilelib.consts
    assert "let x: Tile<f32, { [128] }> = load_no_tma_f32(" in softmax  # ACC_DTYPE, an alias of another module
    scale = (crate / "src" / "ops_scale.rs").read_text()
    assert "2.0f32" in scale and "128.0f32" in scale  # SCALE inside the sibling's helper, BLOCK in the kernel
    assert "let x_tile_f32: Tile<f32, { [TILE] }> = load_f32(&x_tiles, [bid]);" in scale  # the helper module's ACC
    manifest = json.loads((crate / "kernels.json").read_text())
    assert {(e["kernel"], e["module"], e["source"]) for e in manifest["entries"]} == {
        ("softmax_kernel", "ops_softmax", "tilelib/ops/softmax.py"), ("scale_kernel", "ops_scale", "tilelib/ops/scale.py")}


def test_translate_a_package_folder(tmp_path, markers):
    root = synthetic.write_package(tmp_path / "src", markers)
    before = tree(tmp_path, tmp_path / "out")
    r = cli("translate", root, "-o", tmp_path / "out", "-j", "2")
    assert r.exit_code == 0, r.output
    assert "2/2 kernels" in r.output and "skipped" in r.output
    doc = check_library(tmp_path / "out", markers)
    assert doc["kind"] == "folder" and doc["crate"] == str(tmp_path / "out" / "crate")
    assert doc["rust_modules"] == {"tilelib.ops.scale": "ops_scale", "tilelib.ops.softmax": "ops_softmax"}
    check_crate(tmp_path / "out" / "crate")
    assert tree(tmp_path, tmp_path / "out") == before  # nothing written outside OUT


def test_translate_a_package_faithfully(tmp_path, markers):
    """`--faithful` reaches package mode: the crate is the one-operation-per-line rendering (no `tiles`
    module, every entry `pub unsafe fn`, the approximate exp spelled with its rounding mode)."""
    root = synthetic.write_package(tmp_path / "src", markers)
    r = cli("translate", root, "-o", tmp_path / "out", "--faithful")
    assert r.exit_code == 0, r.output
    crate = tmp_path / "out" / "crate"
    assert sorted(p.name for p in (crate / "src").glob("*.rs")) == ["lib.rs", "ops_scale.rs", "ops_softmax.rs",
                                                                    "support.rs"]
    softmax = (crate / "src" / "ops_softmax.rs").read_text()
    assert "exp_with_rounding(" in softmax and "pub unsafe fn softmax_kernel" in softmax


def test_one_file_in_place_names_the_package_mode(tmp_path, markers):
    """Without the package's other modules, a kernel that imports from them fails with a located
    diagnostic that says how to give them (the reason package mode exists)."""
    root = synthetic.write_package(tmp_path / "src", markers)
    _, [result] = lower(str(root / "ops" / "softmax.py"))
    d = result.diagnostic
    assert d.construct == "import" and "`tilelib.consts`" in d.message and (d.loc.line, d.loc.col) == (15, 31)
    assert "tileport translate PACKAGE_DIR" in d.hint
    _, [result] = lower(str(root / "ops" / "scale.py"))  # relative imports are read in place
    assert result.ok, result.diagnostic
    assert sorted(p.name for p in markers.iterdir()) == []


def test_translate_a_wheel(tmp_path, markers):
    wheel = synthetic.write_wheel(tmp_path, markers)
    r = cli("translate", wheel, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output
    doc = check_library(tmp_path / "out", markers)
    assert doc["kind"] == "wheel" and doc["root"] == str(tmp_path / "out" / "source" / wheel.name[:-4])
    check_crate(tmp_path / "out" / "crate")


def test_translate_a_pip_requirement_offline(tmp_path, markers, monkeypatch):
    """`name==version` through `pip download` (the index off, the wheel in a local folder): downloaded and
    unpacked under OUT, pip's cache and home untouched."""
    links = tmp_path / "links"
    links.mkdir()
    synthetic.write_wheel(links, markers)
    home = tmp_path / "home"
    home.mkdir()
    own = Path.home()  # rustfmt (through rustup) still finds its toolchain
    for key, value in {"RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(own / ".rustup")),
                       "CARGO_HOME": os.environ.get("CARGO_HOME", str(own / ".cargo")),
                       "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "HOME": str(home),
                       "XDG_CACHE_HOME": str(home / ".cache"), "PIP_CONFIG_FILE": os.devnull}.items():
        monkeypatch.setenv(key, value)
    before = tree(tmp_path, tmp_path / "out")
    r = cli("translate", f"{synthetic.NAME}=={synthetic.VERSION}", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output
    doc = check_library(tmp_path / "out", markers)
    assert doc["kind"] == "pip"
    assert [p.name for p in (tmp_path / "out" / "download").iterdir()] == [
        f"{synthetic.NAME}-{synthetic.VERSION}-py3-none-any.whl"]
    assert tree(tmp_path, tmp_path / "out") == before and not any(home.iterdir())


def test_a_requirement_without_a_wheel_is_a_diagnostic(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    r = cli("translate", "tilelib==9.9", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "no wheel of tilelib==9.9" in r.output and "PIP_NO_INDEX" in r.output
    r = cli("translate", "no_such_folder", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "no such file" in r.output  # a bare word is a path, never a download


def test_a_package_without_kernels_and_an_output_inside_it(tmp_path, markers):
    """No kernel: exit 1, saying so. An OUT inside the package is not read as part of it on the next run."""
    root = synthetic.write_package(tmp_path, markers)
    (root / "ops" / "softmax.py").unlink()
    (root / "ops" / "scale.py").unlink()
    r = cli("translate", root, "-o", root / "out")
    assert r.exit_code == 1 and "no @triton.jit or @ct.kernel kernel found" in r.output, r.output
    (root / "out" / "stray.py").write_text((root / "backends" / "_ascend" / "softmax.py").read_text()
                                           .replace("npu_softmax_kernel", "stray_kernel"))
    r = cli("translate", root, "-o", root / "out")
    assert "no @triton.jit or @ct.kernel kernel found" in r.output, r.output


def test_port_a_package_runs_nothing(tmp_path, markers):
    """`port` on a package: the pipeline over its kernels with the package's modules readable (the cuTile
    kernel's reference IR is captured with its sibling's helper), the report fed with the stages that ran."""
    root = synthetic.write_package(tmp_path / "src", markers)
    r = cli("port", root, "--out", tmp_path / "out", "--until", "A", "--no-gpu")
    assert "2 kernels found" in r.output, r.output
    doc = check_library(tmp_path / "out", markers)
    rows = {x["kernel"]: x for x in doc["rows"]}
    assert rows["scale_kernel"]["terminal"] == "PAUSED"  # stopped after A (--until), which passed
    verdict = json.loads((tmp_path / "out" / "ops_scale.scale_kernel" / "A" / "verdict.json").read_text())
    assert verdict["verdict"] == "PASS", verdict["reason"]
    assert rows["softmax_kernel"]["terminal"] is not None
    assert (tmp_path / "out" / "report.html").is_file()
