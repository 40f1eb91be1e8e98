"""The alignment of an `Array.slice` view whose offset multiplies a non-last stride (cutile-stencil's kernels).

cuTile Python compiles one kernel per launch specialization, and its launcher specializes a stride that is a
multiple of 16 bytes (`stride_divisible_by`): a view `u.slice(axis=0, start=1, ...)` of an f64 array is then
16-byte aligned, where the capture signature (no stride divisibility) gives 8. A port that fixed the captured
8 (`assume_div_by::<_, 8>`) hid from tileiras the stride divisibility cutile-rs's JIT knows, and lost the
16-byte vector loads of those views (laplacian_2d_9pt: 5 of cuTile's 7 LDG.E.128, 1.31x its time on an H200).
The port now takes such an alignment as an entry const generic: the capture's value in the manifest (the IR
diff and the CPU proof see cuTile's capture IR), the launcher's computed from the launch's strides.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from tileport import toolchain
from tp_helpers import entry_text, launcher_text, module_text, run, write_kernels

STENCIL = """
    @ct.kernel
    def k(u, out, TX: ConstInt, TY: ConstInt, HX: ConstInt, HY: ConstInt):
        nx = u.shape[0] - 2 * HX
        ny = u.shape[1] - 2 * HY
        up = u.slice(axis=0, start=HX - 1, stop=HX - 1 + nx).slice(axis=1, start=HY, stop=HY + ny)
        mid = u.slice(axis=0, start=HX, stop=HX + nx).slice(axis=1, start=HY, stop=HY + ny)
        left = u.slice(axis=0, start=HX, stop=HX + nx).slice(axis=1, start=HY - 1, stop=HY - 1 + ny)
        o = out.slice(axis=0, start=HX, stop=HX + nx).slice(axis=1, start=HY, stop=HY + ny)
        bx, by = ct.bid(0), ct.bid(1)
        t = ct.load(up, index=(bx, by), shape=(TX, TY)) + ct.load(mid, index=(bx, by), shape=(TX, TY)) \\
            + ct.load(left, index=(bx, by), shape=(TX, TY))
        ct.store(o, index=(bx, by), tile=t)
"""
CONFIG = {"k": [{"u": "float64", "out": "float64", "TX": 1, "TY": 256, "HX": 2, "HY": 16}]}


def _translated(tmp_path, configs=CONFIG):
    path = write_kernels(tmp_path, STENCIL)
    report = run(path, configs)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return module_text(report, path), report


def test_an_alignment_the_strides_can_raise_is_a_generic_of_the_entry(tmp_path):
    text, _ = _translated(tmp_path)
    body = entry_text(text, "k_hy16_hx2")
    # row HX - 1 = 1: 1 x stride x 8 bytes is 8-byte aligned as captured, 16 when the stride is 16-byte divisible
    assert "const U_SLICE_ALIGNED: i32, const U_LEN0: i32" in body.splitlines()[0], body.splitlines()[0]
    assert "unsafe { assume_div_by::<_, U_SLICE_ALIGNED>(u_slice_at) }" in body, body
    # row 2 (2 x stride x 8 bytes) is 16-byte aligned whatever the stride; column 15 is 8 whatever it is
    assert "unsafe { assume_div_by::<_, 16>(u_slice_1_at) }" in body, body
    assert "unsafe { assume_div_by::<_, 8>(u_slice_2_at) }" in body, body
    assert "unsafe { assume_div_by::<_, 16>(out_slice_at) }" in body, body
    assert body.splitlines()[0].count("ALIGNED") == 1


def test_the_manifest_gives_the_capture_value_and_the_launcher_the_launch_value(tmp_path):
    text, report = _translated(tmp_path)
    (entry,) = json.loads(report.files["kernels.json"])["entries"]
    (variant,) = entry["variants"]
    lengths = ["U_LEN0", "U_LEN1", "OUT_LEN0", "OUT_LEN1"]  # the arrays' (tests/translator/test_unit_axis.py)
    assert variant["generics"] == ["TX", "TY", "U_SLICE_ALIGNED", *lengths], variant["generics"]
    # what the capture IR export uses
    assert variant["derived"] == {"U_SLICE_ALIGNED": "8"} | dict.fromkeys(lengths, "-1"), variant["derived"]
    launcher = " ".join(launcher_text(text, "tileport_k").split())
    # the row stride is 16-byte divisible: the row offset drops out; else 1 x 8 bytes; the column offset 16 x 8
    assert ("let u_slice_aligned: i32 = { let size = std::mem::size_of::<f64>() as i64; "
            "[if u.strides[0] * size % 16 == 0 { 0 } else { 1 * size }, 16 * size].into_iter()"
            ".fold(16i64, |d, t| if t == 0 { d } else { d.min(t & -t) }) as i32 };") in launcher, launcher
    generics = ("vec![tx.to_string(), ty.to_string(), u_slice_aligned.to_string(), unit_axis(u, 0).to_string(), "
                "unit_axis(u, 1).to_string(), unit_axis(out, 0).to_string(), unit_axis(out, 1).to_string()]")
    assert f"Specialization {{ generics: {generics}," in launcher and f".generics({generics})" in launcher


def test_last_axis_slices_and_even_rows_stay_constant(tmp_path):
    """A view whose offset is along the last axis (stride 1), or 16-byte aligned whatever the stride, is the
    same for every launch: a constant, no generic."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(u, out, TX: ConstInt, TY: ConstInt):
            a = u.slice(axis=1, start=1, stop=u.shape[1])
            b = u.slice(axis=0, start=2, stop=u.shape[0])
            t = ct.load(a, index=(ct.bid(0), ct.bid(1)), shape=(TX, TY)) \\
                + ct.load(b, index=(ct.bid(0), ct.bid(1)), shape=(TX, TY))
            ct.store(out, index=(ct.bid(0), ct.bid(1)), tile=t)
    """)
    report = run(path, {"k": [{"u": "float64", "out": "float64", "TX": 1, "TY": 256}]})
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    body = entry_text(module_text(report, path), "k")
    assert "ALIGNED" not in body, body
    assert "assume_div_by::<_, 8>(u_at)" in body and "assume_div_by::<_, 16>(u_at_1)" in body, body
    assert set(json.loads(report.files["kernels.json"])["entries"][0]["variants"][0]["derived"]) == {
        "U_LEN0", "U_LEN1", "OUT_LEN0", "OUT_LEN1"}  # the arrays' lengths only


@pytest.mark.parametrize("steps, size, captured, launched", [
    (((0, 1, False), (1, 16, True)), 8, 8, 16),   # f64 row 1, column 16
    (((0, 2, False), (1, 16, True)), 8, 16, 16),  # f64 row 2: aligned whatever the stride
    (((0, 1, False), (1, 15, True)), 8, 8, 8),    # f64 column 15: the last axis' offset decides
    (((0, 3, False),), 4, 4, 16),                 # f32 row 3
    (((0, 1, False), (1, 2, True)), 4, 4, 8),     # f32 row 1, column 2
    (((0, 0, False), (1, 1, False), (2, 8, True)), 2, 2, 16),  # f16 3-D: plane 0, row 1, column 8
])
def test_view_alignment(steps, size, captured, launched):
    from tileport.frontends.cutile.calls import view_alignment
    assert view_alignment(steps, size, strides_aligned=False) == captured
    assert view_alignment(steps, size, strides_aligned=True) == launched


VIEWS = ((1, 16), (2, 16), (3, 16), (1, 15), (2, 2), (3, 1))  # (row, column) starts
KERNEL = "\n".join([
    "import cuda.tile as ct", "", "ConstInt = ct.Constant[int]", "", "",
    "@ct.kernel", "def k(u, out, TY: ConstInt):", "    n = u.shape[0] - 4", "    m = u.shape[1] - 32",
    *(f"    v{i} = u.slice(axis=0, start={r}, stop={r} + n).slice(axis=1, start={c}, stop={c} + m)"
      for i, (r, c) in enumerate(VIEWS)),
    "    t = " + " + ".join(f"ct.load(v{i}, index=(ct.bid(0), 0), shape=(1, TY))" for i in range(len(VIEWS))),
    "    ct.store(out, index=(ct.bid(0), 0), tile=t)", ""])


def _reference_view_alignments(tmp_path, dtype: str, strides_divisible: bool) -> list[int]:
    """The `assume div_by` cuTile Python puts on the views' pointers, compiled for a signature whose row
    stride is (or is not) known 16-byte divisible, as its launcher specializes one."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

    from tileport.capture.export import BYTECODE_VERSION, load_kernel_module
    path = tmp_path / "ref_kernel.py"
    path.write_text(KERNEL)
    kernel = load_kernel_module(path).k
    dt = getattr(ct, dtype)
    stride_div = 16 // (dt.bitwidth // 8) if strides_divisible else 1
    array = ArrayConstraint(dt, 2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                            may_alias_internally=False, stride_constant=(None, 1), base_addr_divisible_by=16,
                            stride_divisible_by=(stride_div, 1))
    signature = KernelSignature([array, array, 256], CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    export_kernel(kernel, [signature], buf, output_format="tileir_bytecode", bytecode_version=BYTECODE_VERSION)
    bc = tmp_path / f"{dtype}_{strides_divisible}.tileirbc"
    bc.write_bytes(buf.getvalue())
    text = subprocess.run([str(toolchain.tileirdisasm()), str(bc)], capture_output=True, text=True, check=True,
                          env=toolchain.env()).stdout
    found = [int(d) for d, operand in re.findall(r"assume div_by<(\d+)>, %(\w+) : tile<ptr<", text)
             if not operand.startswith("arg")]
    assert found, text  # a disassembly without the views' assumptions proves nothing
    return found


@pytest.mark.parametrize("dtype, size", [("float64", 8), ("float32", 4), ("float16", 2)])
def test_view_alignment_is_cuTile_pythons_with_and_without_stride_divisibility(tmp_path, dtype, size):
    if toolchain.tileirdisasm() is None:
        pytest.skip("tileirdisasm not found (bash scripts/setup.sh)")
    pytest.importorskip("cuda.tile")
    from tileport.frontends.cutile.calls import view_alignment
    for aligned in (False, True):
        model = [view_alignment(((0, r, False), (1, c, True)), size, strides_aligned=aligned) for r, c in VIEWS]
        reference = _reference_view_alignments(tmp_path, dtype, aligned)
        # cuTile assumes nothing (no op) where the alignment is 1; the model says 1 there
        assert reference == [d for d in model if d > 1], (aligned, reference, model)


@pytest.mark.cargo
def test_the_capture_ir_of_the_port_is_still_cuTile_pythons(tmp_path):
    """Built and exported with the manifest's capture values: the IR diff against cuTile Python's capture has no
    CRITICAL finding and the sm_90 machine code equals the reference's but for parameter offsets."""
    import shutil

    from tileport.ops.spec import Capture
    from tileport.runtime.library import KernelLibrary, build
    from tileport.capture.verify import verify_capture
    if shutil.which("cargo") is None or toolchain.tileiras() is None or toolchain.tileirdisasm() is None:
        pytest.skip("cargo, tileiras or tileirdisasm not found (bash scripts/setup.sh)")
    path = write_kernels(tmp_path, STENCIL)
    crate = tmp_path / "crate"
    half = {**CONFIG["k"][0], "u": "float16", "out": "float16"}  # an entry per dtype: its own generic values
    report = run(path, {"k": [CONFIG["k"][0], half]}, out_dir=crate, crate="tileport_slice_alignment")
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    shutil.copy(Path(__file__).resolve().parents[2] / "rust" / "Cargo.lock", crate / "Cargo.lock")
    lib = KernelLibrary(build(crate, "dev"), crate / "kernels.json")
    constants = {k: v for k, v in CONFIG["k"][0].items() if k not in ("u", "out")}
    for dtype in ("float64", "float16"):
        capture = Capture("k", {"u": (dtype, 2), "out": (dtype, 2)}, {}, constants)
        r = verify_capture(lib, path, capture, None, archs=("sm_90",))
        assert not r.error and r.critical == 0, (dtype, r.error, r.findings)
        assert r.sass["sm_90"].get("same_except_parameter_offsets"), (dtype, r.sass)
