"""A launcher hands cutile's launcher its arrays with cuTile Python's divisibility claims (support.rs `Claimed`).

cutile 0.5.0 claims of each length and stride the largest power of two dividing it, up to 16; cuTile Python's
launcher 16 or nothing for a length, 16 bytes or nothing for a stride. At softmax_tma's f32 [8192, 1000]
launch the port claimed 8 and 8 where cuTile Python claims 1 and 4, and compiled other machine code (1.077x
its time on the H200). The launcher now wraps each borrowed tensor in `Claimed`, which reports cuTile
Python's claims through cutile's public kernel-input interface, and keys the resolved launch on the same
claims (tests/runtime/test_launch_divisibility.py runs the launch on the CPU).
"""

from __future__ import annotations

from tp_helpers import launcher_text, module_text, run, write_kernels

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


def test_each_array_goes_to_cutile_with_cuTile_Pythons_claims(tmp_path):
    path = write_kernels(tmp_path, COMBINE)
    report = run(path, COMBINE_CONFIG)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    launcher = " ".join(launcher_text(module_text(report, path), "tileport_combine").split())
    for array, rank in (("o_part", 3), ("lse_part", 2), ("o", 2)):
        statics = ", ".join(f"unit_axis({array}, {i}) == 1" for i in range(rank))  # the lengths the entry fixes
        assert f"let {array}_c = Claimed::new(&{array}_t, {array}, &[{statics}]);" in launcher, launcher
        # the resolved launch's key holds the claims the first launch compiled with
        assert f'("{array}", {array}_c.spec().clone())' in launcher, launcher
    assert "::combine(o_part_c, lse_part_c, o_c, n_splits)" in launcher, launcher
    assert not any(f"{array}_t.spec()" in launcher for array in ("o_part", "lse_part", "o")), launcher
    support = report.files["src/support.rs"]
    assert "unsafe impl<'a, E: cutile::cuda_core::DType + Sync> cutile::tensor::KernelInputStored for Claimed<'a, E>" \
        in support


def test_a_kernel_cuTile_python_does_not_launch_keeps_cutiles_claims():
    """A Triton port (no `launch_unit_axes`): Triton's launcher claims 16 elements of a stride, so the port
    keeps cutile's claims (`compute_spec`) rather than cuTile Python's 16 bytes."""
    import dataclasses
    import tempfile
    from pathlib import Path

    from tileport.emit.rust.names import RUST_NAMING
    from tileport.emit.rust.ffi import KernelGroup, emit_launcher
    from tileport.frontends.cutile import translate_file
    from tp_helpers import kernel_configs
    with tempfile.TemporaryDirectory() as tmp:
        path = write_kernels(Path(tmp), COMBINE)
        (kernel,) = translate_file(str(path), kernel_configs(COMBINE_CONFIG), None, RUST_NAMING).module.kernels
    triton_like = dataclasses.replace(kernel, launch_unit_axes=False)
    for k, claimed in ((kernel, True), (triton_like, False)):
        launcher = " ".join(emit_launcher(KernelGroup("tileport_combine", "combine", "kern", [k])).split())
        assert ("Claimed::new(" in launcher) is claimed, launcher
        assert ('("o_part", o_part_t.spec().clone())' in launcher) is not claimed, launcher
