"""An array axis of length 1 at launch takes the static length 1 in the entry's tensor type (flash_decode's split axis).

cuTile Python's launcher compiles a length-1 axis as the constant 1 (one kernel per such launch). cutile-rs 0.5.0
specializes a launch on divisibility and unit strides only, so a port with every length dynamic kept what that
constant folds: flash_decode's combine kernel at a one-split launch compiled to 1448 instructions / 80 registers
where cuTile Python's has 432 / 22 (sm_90). Each array axis of a cuTile kernel's entry now has a const generic
length (`{ [O_PART_LEN0, ..] }`): the launcher passes 1 where the launch's length is 1, else -1; the manifest
gives -1 (the capture signature: the IR diff and the CPU proof see cuTile's capture IR).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tileport import toolchain
from tp_helpers import entry_text, launcher_text, module_text, run, write_kernels

COMBINE = """
    @ct.kernel
    def combine(o_part, lse_part, o, n_splits: int, D: ConstInt):
        m = ct.full((1, 1), -float("inf"), dtype=ct.float32)
        acc = ct.zeros((1, D), dtype=ct.float32)
        for s in range(n_splits):
            lse = ct.reshape(ct.load(lse_part, index=(ct.bid(0), s), shape=(1, 1)), (1, 1))
            part = ct.reshape(ct.load(o_part, index=(ct.bid(0), s, 0), shape=(1, 1, D)), (1, D))
            m = ct.maximum(m, lse)
            acc = acc + part * ct.exp2(lse - m)
        ct.store(o, index=(ct.bid(0), 0), tile=acc)
"""
COMBINE_CONFIG = {"combine": [{"o_part": "float32", "lse_part": "float32", "o": "float32", "D": 64}]}

READS = """
    @ct.kernel
    def reads(x, out, T: ConstInt):
        n = x.shape[2] + x.shape[0]
        t = ct.reshape(ct.load(x, index=(0, 0, ct.bid(0)), shape=(1, 1, T)), (1, T)) * n
        ct.store(out, index=(ct.bid(0), 0), tile=t)
"""
READS_CONFIG = {"reads": [{"x": "float32", "out": "float32", "T": 128}]}


def _translated(tmp_path, body=COMBINE, configs=COMBINE_CONFIG, **kw):
    path = write_kernels(tmp_path, body)
    report = run(path, configs, **kw)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return path, report


def test_every_array_axis_of_the_entry_has_a_generic_length(tmp_path):
    path, report = _translated(tmp_path)
    head = entry_text(module_text(report, path), "combine").split(") {")[0]
    generics = ["D", "O_PART_LEN0", "O_PART_LEN1", "O_PART_LEN2", "LSE_PART_LEN0", "LSE_PART_LEN1", "O_LEN0", "O_LEN1"]
    assert f"<{', '.join(f'const {g}: i32' for g in generics)}>" in head, head
    assert "o_part: &Tensor<f32, { [O_PART_LEN0, O_PART_LEN1, O_PART_LEN2] }>" in head, head
    assert "lse_part: &Tensor<f32, { [LSE_PART_LEN0, LSE_PART_LEN1] }>" in head, head
    assert "o: &Tensor<f32, { [O_LEN0, O_LEN1] }>" in head, head
    assert "-1" not in head, head


def test_the_manifest_gives_the_capture_value_dynamic_and_each_generics_axis(tmp_path):
    _path, report = _translated(tmp_path)
    (variant,) = json.loads(report.files["kernels.json"])["entries"][0]["variants"]
    unit = ["O_PART_LEN0", "O_PART_LEN1", "O_PART_LEN2", "LSE_PART_LEN0", "LSE_PART_LEN1", "O_LEN0", "O_LEN1"]
    assert variant["generics"] == ["D", *unit], variant["generics"]
    assert variant["derived"] == {g: "-1" for g in unit}, variant["derived"]  # what the capture IR export uses
    assert variant["unit_axes"]["O_PART_LEN2"] == ["o_part", 2] and variant["unit_axes"]["O_LEN0"] == ["o", 0]


def test_the_launcher_chooses_each_length_from_the_launch(tmp_path):
    path, report = _translated(tmp_path)
    launcher = " ".join(launcher_text(module_text(report, path), "tileport_combine").split())
    chosen = ", ".join(f"unit_axis({a}, {i}).to_string()" for a, n in (("o_part", 3), ("lse_part", 2), ("o", 2))
                       for i in range(n))
    generics = f"vec![d.to_string(), {chosen}]"
    # the compiled kernel (cutile's cache and the resolved launch's key) is the one the launch's lengths select
    assert f"Specialization {{ generics: {generics}," in launcher and f".generics({generics})" in launcher, launcher
    support = report.files["src/support.rs"]
    assert "pub fn unit_axis(d: &TensorDesc, axis: usize) -> i32 {" in support


def test_a_length_read_is_one_where_static_else_indexes_past_the_static_axes(tmp_path):
    """`shape()` lists the dynamic lengths only: axis 2 is entry 2, 1 or 0 as axes 0 and 1 are static."""
    path, report = _translated(tmp_path, READS, READS_CONFIG)
    body = " ".join(entry_text(module_text(report, path), "reads").split())
    axis2 = ("if X_LEN2 == 1 { 1i32 } else { if X_LEN0 == 1 { if X_LEN1 == 1 { x.shape()[0] } else { x.shape()[1] } } "
             "else { if X_LEN1 == 1 { x.shape()[1] } else { x.shape()[2] } } }")
    assert f"let x_dim2: i32 = {axis2};" in body, body
    assert "let x_dim0: i32 = if X_LEN0 == 1 { 1i32 } else { x.shape()[0] };" in body, body


CHUNKS = """
    @ct.kernel
    def chunks(x, y, rows, T: ConstInt):
        n = ct.num_tiles(x, 1, shape=(1, T))
        m = ct.gather(rows, y.shape[0] - 1)
        acc = ct.load(x, index=(ct.bid(0), 0), shape=(1, T))
        for c in range(1, n):
            acc = acc + ct.load(x, index=(ct.bid(0), c), shape=(1, T))
        for j in range(m):
            acc = acc * 2.0
        ct.store(y, index=(ct.bid(0), 0), tile=acc)
"""
CHUNKS_CONFIG = {"chunks": [{"x": "float32", "y": "float32", "rows": "int32", "T": 128}]}


def test_an_array_whose_length_bounds_a_loop_keeps_dynamic_lengths(tmp_path):
    """Regression (H200: softmax_online and matmul_splitk at [1, 1] did not compile): cutile 0.5.0 states
    `assume_bounds [1, n - 1]` for `for c in 1..n` once it knows n, and with x's second axis static 1, n folds
    to 1 and the assumption [1, 0] is invalid. x bounds a loop through num_tiles: its axes stay dynamic. y's length
    reaches the other loop's bound only through a gather's index (the gathered value is memory, never folded),
    so y keeps its generics."""
    path, report = _translated(tmp_path, CHUNKS, CHUNKS_CONFIG)
    head = entry_text(module_text(report, path), "chunks").split(") {")[0]
    assert "x: &Tensor<f32, { [-1, -1] }>" in head, head
    assert "y: &Tensor<f32, { [Y_LEN0, Y_LEN1] }>" in head, head


def test_a_generic_name_taken_by_a_constant_is_not_reused(tmp_path):
    path, report = _translated(tmp_path, """
        @ct.kernel
        def k(x, X_LEN0: ConstInt):
            ct.store(x, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(X_LEN0,)))
    """, {"k": [{"x": "float32", "X_LEN0": 64}]})
    head = entry_text(module_text(report, path), "k").split(") {")[0]
    assert "<const X_LEN0: i32, const X_LEN0_1: i32>(x: &Tensor<f32, { [X_LEN0_1] }>" in head, head


def test_only_kernels_whose_launcher_specializes_length_one_get_them():
    """The cuTile frontend marks its kernels (`launch_unit_axes`); a Triton port's arrays keep dynamic lengths."""
    from tileport.emit.rust.names import RUST_NAMING
    from tileport.emit.rust.kernel import KernelEmitter, unit_axis_generics
    from tileport.frontends.cutile import translate_file
    from tp_helpers import kernel_configs
    with tempfile.TemporaryDirectory() as tmp:
        path = write_kernels(Path(tmp), COMBINE)
        (kernel,) = translate_file(str(path), kernel_configs(COMBINE_CONFIG), None, RUST_NAMING).module.kernels
    assert kernel.launch_unit_axes and len(unit_axis_generics(kernel)) == 7
    triton_like = dataclasses.replace(kernel, launch_unit_axes=False)
    assert unit_axis_generics(triton_like) == {}
    assert "LEN" not in KernelEmitter(triton_like).emit()


def test_the_capture_value_minus_one_evaluates():
    from tileport.capture.ir import _eval_dim
    assert _eval_dim("-1", {}) == -1 and _eval_dim("(BLOCK // 2)", {"BLOCK": 64}) == 32


RUST_RULE_TESTS = """

#[cfg(test)]
mod unit_axis_tests {
    use super::*;

    fn lengths(shape: &[i64]) -> Vec<i32> {
        let mut d: TensorDesc = unsafe { std::mem::zeroed() };
        d.ndim = shape.len() as i32;
        d.shape[..shape.len()].copy_from_slice(shape);
        (0..shape.len()).map(|axis| unit_axis(&d, axis)).collect()
    }

    #[test]
    fn a_length_one_axis_is_static_and_the_others_dynamic() {
        assert_eq!(lengths(&[64, 64, 1, 64]), vec![-1, -1, 1, -1]); // one split: the shifted claim is 1 for D
        assert_eq!(lengths(&[64, 64, 4, 64]), vec![-1, -1, -1, -1]); // four splits
        assert_eq!(lengths(&[1, 1]), vec![1, 1]);
        assert_eq!(lengths(&[7, 1]), vec![-1, 1]); // trailing: no dynamic axis after it
    }

    #[test]
    fn no_static_axis_where_cutile_would_claim_a_divisibility_that_does_not_hold() {
        // axis 0 static: cutile gives axis 1 (16) the divisibility of axis 0's length 1 (holds) and
        // axis 2 (7) that of axis 1's 16 (does not hold)
        assert_eq!(lengths(&[1, 16, 7]), vec![-1, -1, -1]);
        assert_eq!(lengths(&[1, 7, 16]), vec![1, -1, -1]); // 7 claimed divisible by 1, 16 by 7's 1
        assert_eq!(lengths(&[4, 1, 8, 2]), vec![-1, -1, -1, -1]); // 2 would be claimed divisible by 8
        assert_eq!(lengths(&[4, 1, 2, 8]), vec![-1, 1, -1, -1]); // 2 by 1, 8 by 2
    }
}
"""


@pytest.mark.cargo
def test_the_port_at_a_one_split_launch_compiles_to_cuTile_pythons_machine_code(tmp_path):
    """Built: the capture IR (every length dynamic) is still cuTile's (0 CRITICAL, same SASS); with the split
    axis static the port's sm_90 machine code equals cuTile Python's with that axis a `shape_constant` 1; a
    length read of a static axis' neighbour reads the right kernel parameter; `unit_axis` (cargo test) makes an
    axis static only where cutile's divisibility claims hold."""
    if shutil.which("cargo") is None or toolchain.tileiras() is None or toolchain.tileirdisasm() is None:
        pytest.skip("cargo, tileiras or tileirdisasm not found (bash scripts/setup.sh)")
    pytest.importorskip("cuda.tile")
    from tileport.capture import compile_cubin
    from tileport.ops.spec import Capture
    from tileport.runtime.library import KernelLibrary, build, cargo_target_dir
    from tileport.capture.verify import verify_capture
    crate = tmp_path / "crate"
    path = write_kernels(tmp_path, COMBINE + READS)
    report = run(path, COMBINE_CONFIG | READS_CONFIG, out_dir=crate, crate="tileport_unit_axis")
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    shutil.copy(Path(__file__).resolve().parents[2] / "rust" / "Cargo.lock", crate / "Cargo.lock")
    lib = KernelLibrary(build(crate, "dev"), crate / "kernels.json")

    combine = Capture("combine", {"o_part": ("float32", 3), "lse_part": ("float32", 2), "o": ("float32", 2)},
                      {"n_splits": "int32"}, {"D": 64})
    r = verify_capture(lib, path, combine, None, archs=("sm_90",))
    assert not r.error and r.critical == 0 and r.sass["sm_90"]["same"], (r.error, r.findings, r.sass)

    unit = {"o_part": (None, 1, None), "lse_part": (None, 1)}  # [B, 1, D], [B, 1]: one split
    ref = compile_cubin(_reference(path, "combine", {"o_part": 3, "lse_part": 2, "o": 2}, unit,
                                   [_int32(), 64]), "sm_90")
    generics = ["64", "-1", "1", "-1", "-1", "1", "-1", "-1"]
    port = compile_cubin(lib.ir("combine", generics, "sm_90")[1], "sm_90")
    assert ref.sass is not None and port.sass is not None and ref.sass.instructions, (ref.error, port.error)
    dynamic = compile_cubin(lib.ir("combine", ["64"] + ["-1"] * 7, "sm_90")[1], "sm_90")
    assert len(dynamic.sass.instructions) > len(port.sass.instructions)  # the static axis folds something
    assert (port.sass.registers, len(port.sass.instructions)) == (ref.sass.registers, len(ref.sass.instructions))

    # x [1, 1, n]: `x.shape[2]` is the kernel's parameter of axis 2's length, `x.shape[0]` the constant 1
    text = lib.ir("reads", ["128", "1", "1", "-1", "-1", "-1"], "sm_90")[0]
    entry = next(line for line in text.splitlines() if "entry @" in line)
    assert "%1: tile<i32>, %2: tile<i32>, %3: tile<i32>" in entry, entry  # x: pointer, 3 lengths, 3 strides
    assert "assume bounded<0, ?>, %3 : tile<i32>" in text, text  # the dynamic length: axis 2's parameter
    assert ", %1 : tile<i32>" not in text and ", %2 : tile<i32>" not in text, text  # axes 0, 1: the constant 1

    shutil.copytree(crate, tmp_path / "rule", ignore=shutil.ignore_patterns("target"))
    rule = tmp_path / "rule"
    (rule / "src" / "support.rs").write_text((rule / "src" / "support.rs").read_text() + RUST_RULE_TESTS)
    env = toolchain.env() | {"CARGO_TARGET_DIR": str(cargo_target_dir())}
    cargo = subprocess.run(["cargo", "test", "--manifest-path", str(rule / "Cargo.toml"), "--lib", "unit_axis_tests"],
                           capture_output=True, text=True, env=env)
    assert cargo.returncode == 0 and "test result: ok. 2 passed" in cargo.stdout, cargo.stdout + cargo.stderr


def _int32():
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint
    return ScalarConstraint(ct.int32)


def _reference(path: Path, name: str, ranks: dict, unit: dict, rest: list) -> bytes:
    """cuTile Python's bytecode for the capture signature plus `shape_constant` 1 on the `unit` axes (what its
    launcher passes for a launch with those lengths 1)."""
    import io

    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel
    from tileport.capture.export import BYTECODE_VERSION, load_kernel_module
    kernel = getattr(load_kernel_module(path), name)
    arrays = [ArrayConstraint(ct.float32, n, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                              may_alias_internally=False, stride_constant=(None,) * (n - 1) + (1,),
                              base_addr_divisible_by=16, shape_constant=unit.get(a, (None,) * n))
              for a, n in ranks.items()]
    buf = io.BytesIO()
    export_kernel(kernel, [KernelSignature(arrays + rest, CallingConvention.cutile_python_v2())], buf,
                  output_format="tileir_bytecode", bytecode_version=BYTECODE_VERSION)
    return buf.getvalue()
