"""`python3 -m eval.wild_triton_gpu bundle` end to end on the CPU (marker cargo: it builds the port
crate): a synthetic record run of two kernels, placed in a package folder laid out as Liger's
(liger_kernel/ops/), is selected, ported to stage B, built and packed; the bundle is what the GPU step
reads. The kernels are our own (tests/triton/data/basic.py), not Liger's."""

from __future__ import annotations

import json
import lzma
import shutil
import tarfile
from pathlib import Path

import pytest

from eval import wild_triton_gpu as flow
from tileport.launches import LaunchArg, LaunchRecord, load_spec, write_spec

DATA = Path(__file__).resolve().parents[1] / "triton" / "data" / "basic.py"
GPU_FILE = "/tmp/tileport-out/liger/site/liger_kernel/ops/basic.py"  # as the GPU machine records it


def _add(dtype: str, n: int) -> LaunchRecord:
    arrays = [LaunchArg(name, "array", dtype, [n], [1]) for name in ("x_ptr", "y_ptr", "out_ptr")]
    return LaunchRecord("triton", "add_kernel", GPU_FILE, (n // 1024, 1, 1),
                        arrays + [LaunchArg("n_elements", "scalar", "int32", value=n),
                                  LaunchArg("BLOCK_SIZE", "const", value=1024)], options={"num_warps": 4})


def _softmax(dtype: str) -> LaunchRecord:
    return LaunchRecord("triton", "row_softmax_kernel", GPU_FILE, (64, 1, 1), [
        LaunchArg("out_ptr", "array", dtype, [64, 1000], [1000, 1]),
        LaunchArg("in_ptr", "array", dtype, [64, 1000], [1000, 1]),
        LaunchArg("in_row_stride", "scalar", "int32", value=1000),
        LaunchArg("out_row_stride", "scalar", "int32", value=1000),
        LaunchArg("n_cols", "scalar", "int32", value=1000), LaunchArg("BLOCK_SIZE", "const", value=1024)],
        options={"num_warps": 4})


@pytest.mark.cargo
def test_bundle_ports_the_selected_launches_and_packs_them(tmp_path):
    root = tmp_path / "src" / "liger_kernel"
    (root / "liger_kernel" / "ops").mkdir(parents=True)
    shutil.copy(DATA, root / "liger_kernel" / "ops" / "basic.py")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / f"liger_kernel-{flow.VERSION}-py3-none-any.whl").write_bytes(b"wheel")
    run = tmp_path / "record-run"
    write_spec(run / flow.SPEC, [_add("float32", 4096), _add("float32", 8192), _add("bfloat16", 4096),
                                 _softmax("float32")])
    (run / flow.RESULT).write_text(json.dumps({"record": {"cases": {"basic": {"ok": True}}}}))
    dest = tmp_path / "device"
    flow.copy_wheel(wheels, dest)  # what `prepare` left for the record run
    rc = flow.bundle(run, work=tmp_path / "work", dest=dest, profile="dev", wheel_dir=wheels, jobs=1, root=root)
    manifest = json.loads((dest / "bundle.json").read_text())
    rows = {k["kernel"]: k for k in manifest["kernels"]}
    assert rows["add_kernel"]["built"] and rows["row_softmax_kernel"]["built"], manifest
    assert rows["add_kernel"]["recorded"] == 3 and rows["add_kernel"]["dtypes"] == ["float32", "bfloat16"]
    assert [x["why"] for x in manifest["left_out"]] == [
        "another launch of this kernel in float32 is bundled (one specialization per kernel and dtype)"]
    assert manifest["driver_cases"] == {"basic": {"ok": True}}
    assert [(r.kernel, r.args[0].dtype) for r in load_spec(dest / "launches.json")] == [
        ("add_kernel", "float32"), ("add_kernel", "bfloat16"), ("row_softmax_kernel", "float32")]
    with tarfile.open(dest / flow.CRATE) as tar:
        names = tar.getnames()
        entries = {e["kernel"] for e in json.load(tar.extractfile("crate/kernels.json"))["entries"]}
    assert {"add_kernel", "row_softmax_kernel"} <= entries and "crate/Cargo.toml" in names
    assert "crate/src/basic.rs" in names
    assert lzma.decompress((dest / f"{flow.LIB_NAME}.xz").read_bytes())[:4] == b"\x7fELF"
    with tarfile.open(dest / flow.SOURCES) as tar:
        assert tar.getnames() == ["liger_kernel/ops/basic.py"]
    assert not list(dest.glob("*.whl"))  # the check run needs no wheel
    assert manifest["library_xz_bytes"] == (dest / f"{flow.LIB_NAME}.xz").stat().st_size
    assert rc == (0 if manifest["library_xz_bytes"] <= flow.LIB_BUDGET else 3)
