"""The variants added for the kernels far from the memory roofline (softmax split rows and lean rows,
the one-chunk online row, layer_norm with 8 worker warps, rope over [B * S, H, 2, D/2]): they are in
the searched spaces at the benchmark's large shapes, and their plans launch what the kernels assume.
CPU only, no torch (the stand-ins and the fixture of test_autotune)."""

from __future__ import annotations

import pytest

from tileport.gpu import autotune as gpu_autotune
from tileport.ops import autotune
from tileport.ops.specs import all_specs
from tileport.ops.specs import rope, softmax

from test_autotune import cpu_plans, fake_call  # noqa: F401 - cpu_plans is an autouse fixture

SPECS = all_specs()


def _kernels(op, shape, dtype):
    return {c.get("kernel", c.get("variant")) for c in SPECS[op].tune.candidates(shape, dtype)}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_new_variants_are_searched_at_the_large_shapes(dtype):
    assert "split" in _kernels("softmax_online", (256, 131072), dtype)
    assert "split" in _kernels("softmax_online", (1024, 16384), dtype)
    assert "softmax_online_rev_kernel" in _kernels("softmax_online", (4096, 4096), dtype)  # one chunk
    assert {"softmax_tma_lean_kernel"} <= _kernels("softmax_tma", (1024, 16384), dtype)
    assert {"softmax_tma_lean_kernel", "split"} <= _kernels("softmax", (1024, 16384), dtype)
    assert "layer_norm_fwd_w8_kernel" in _kernels("layer_norm", (16384, 2048), dtype)
    for shape in ((4, 4096, 32, 128), (1, 16384, 8, 128)):
        assert {"rope_rows_kernel", "rope_rows_pair_kernel", "rope_rows_persistent_kernel",
                "rope_rows_notma_kernel", "rope_rows_pair_persistent_kernel"} <= _kernels("rope", shape, dtype)


def test_register_limits_of_the_new_entries():
    """lean holds at most a 16384-wide f16 row (a 16384-wide f32 row would spill); the 8-warp
    layer_norm entry at most (4, 2048); rope_rows at most MAX_HALF_TILE_ELEMS per half-tile."""
    lean = [c for c in softmax.tma_candidates((1024, 16384), "float32") if c["kernel"] == softmax.LEAN]
    assert lean == []
    lean = [c for c in softmax.tma_candidates((4096, 4096), "float16") if c["kernel"] == softmax.LEAN]
    assert lean and max(c["BLOCK_M"] for c in lean) == 4
    w8 = [c for c in SPECS["layer_norm"].tune.candidates((16384, 2048), "float16")
          if c["kernel"] == "layer_norm_fwd_w8_kernel"]
    assert w8 and max(c["BLOCK_M"] for c in w8) == 4
    rows = [c for c in SPECS["rope"].tune.candidates((4, 4096, 32, 128), "float16")
            if c["kernel"] == "rope_rows_kernel"]
    assert rows and max(c["BLOCK_S"] * c["BLOCK_H"] * 64 for c in rows) == rope.MAX_HALF_TILE_ELEMS


@pytest.mark.parametrize("shape,groups,starts", [((256, 131072), 4, [0, 64, 128, 192]),
                                                 ((300, 5000), 2, [0, 160]),
                                                 ((5, 5000), 4, [0])])
def test_split_plan_runs_row_groups_on_aligned_row_slices(shape, groups, starts):
    """Per group a stats then a write launch over the same rows; groups start on multiples of 16
    rows (16-byte aligned slices), cover every row once, and the write pass reads every split."""
    spec = SPECS["softmax_online"]
    (x,), y = fake_call("softmax_online", shape, "float16")
    tile = 2048
    launches = spec.plan(x, y, config={"variant": "split", "TILE": tile, "GROUPS": groups})
    splits = -(-shape[1] // tile)
    assert [launch.kernel for launch in launches] == list(softmax.SPLIT_ENTRIES) * len(starts)
    rows = [launch.args["x"].shape[0] for launch in launches[::2]]
    assert sum(rows) == shape[0] and all(r > 0 for r in rows)
    assert [sum(rows[:i]) for i in range(len(rows))] == starts and all(s % 16 == 0 for s in starts)
    for stats, write in zip(launches[::2], launches[1::2]):
        assert stats.grid == write.grid == (splits, stats.args["x"].shape[0], 1)
        assert stats.args["part_max"].shape == write.args["part_sum"].shape == (stats.grid[1], splits)
        assert write.args["y"].shape == write.args["x"].shape
        assert write.args["SPLITS"] >= splits and write.args["SPLITS"] & (write.args["SPLITS"] - 1) == 0


def test_rope_rows_plan_has_no_size_one_axis():
    """Batch 1 was a size-1 axis of the 5-D view: static in cuTile, dynamic in cutile-rs (the rs/cuTile
    parity outlier of [1, 16384, 8, 128]); the rows entry merges batch and sequence."""
    inputs, outs = fake_call("rope", (1, 16384, 8, 128), "float16")
    (launch,) = SPECS["rope"].plan(*inputs, outs, config={"kernel": "rope_rows_kernel", "BLOCK_S": 1, "BLOCK_H": 8})
    assert launch.args["x"].shape == launch.args["y"].shape == (16384, 8, 2, 64)
    assert 1 not in launch.args["x"].shape and launch.grid == (16384, 1, 1)
    inputs, outs = fake_call("rope", (4, 4096, 32, 128), "float16")
    (launch,) = SPECS["rope"].plan(*inputs, outs, config={"kernel": "rope_rows_kernel", "BLOCK_S": 1, "BLOCK_H": 16})
    assert launch.args["x"].shape == (16384, 32, 2, 64) and launch.grid == (16384, 2, 1)


def _rows_block_s(shape):
    """BLOCK_S of the rows entries' candidates, per entry."""
    out: dict[str, set] = {k: set() for k in rope.ROWS_ENTRIES}
    for c in SPECS["rope"].tune.candidates(shape, "float16"):
        if c["kernel"] in out:
            out[c["kernel"]].add(c["BLOCK_S"])
    return out


@pytest.mark.parametrize("seq,block_ss", [(16384, {1, 2, 4, 8}), (4100, {1, 2, 4}), (4098, {1, 2}),
                                          (4097, {1}), (129, {1}), (33, {1})])
def test_rope_rows_blocks_never_straddle_two_sequences(seq, block_ss):
    """The rows entries take several positions per block only where BLOCK_S divides S (a row block's
    cos / sin rows are one sequence block); the 5-D entries keep their ragged sequence blocks."""
    for batch in (1, 3):
        assert _rows_block_s((batch, seq, 8, 128)) == {k: block_ss for k in rope.ROWS_ENTRIES}
    others = {c["BLOCK_S"] for c in SPECS["rope"].tune.candidates((1, seq, 8, 128), "float16")
              if c["kernel"] == "rope_kernel"}
    assert others == {1, 2, 4, 8}


def test_rope_rows_block_that_straddles_is_refused():
    inputs, outs = fake_call("rope", (2, 33, 8, 128), "float16")
    for kernel in rope.ROWS_ENTRIES:
        with pytest.raises(autotune.TuneCacheError, match="not a candidate"):
            SPECS["rope"].plan(*inputs, outs, config={"kernel": kernel, "BLOCK_S": 2, "BLOCK_H": 8})


def test_rope_shape_class_separates_the_rows_candidates():
    """One shape class, one candidate list: S = 4096 and 4095 pad alike but differ in their rows blocks."""
    space = SPECS["rope"].tune
    assert space.shape_class((1, 4096, 8, 128)) != space.shape_class((1, 4095, 8, 128))
    assert space.shape_class((1, 4000, 8, 128)) == space.shape_class((1, 4008, 8, 128))
    assert space.candidates((1, 4000, 8, 128), "float16") == space.candidates((1, 4008, 8, 128), "float16")


@pytest.mark.parametrize("kernel,grid", [("rope_rows_kernel", (4096, 1, 1)), ("rope_rows_pair_kernel", (4096, 1, 1)),
                                         ("rope_rows_notma_kernel", (4096, 1, 1)),
                                         ("rope_rows_pair_persistent_kernel", (132 * 4, 1, 1)),
                                         ("rope_rows_persistent_kernel", (132 * 4, 1, 1))])
def test_rope_rows_entries_plan_the_merged_rows(kernel, grid):
    """[1, 16384, 8, 128] with 4 positions per block: the [B * S, H, 2, D/2] views, one block per row
    block (the persistent entries: 4 per SM, each looping over row blocks)."""
    inputs, outs = fake_call("rope", (1, 16384, 8, 128), "float16")
    (launch,) = SPECS["rope"].plan(*inputs, outs, config={"kernel": kernel, "BLOCK_S": 4, "BLOCK_H": 8})
    assert launch.kernel == kernel and launch.grid == grid
    assert launch.args["x"].shape == launch.args["y"].shape == (16384, 8, 2, 64)
    assert (launch.args["BLOCK_S"], launch.args["BLOCK_H"], launch.args["HALF_TILE"]) == (4, 8, 64)
    inputs, outs = fake_call("rope", (2, 64, 8, 128), "float16")  # fewer row blocks than the persistent grid
    (launch,) = SPECS["rope"].plan(*inputs, outs, config={"kernel": kernel, "BLOCK_S": 4, "BLOCK_H": 4})
    assert launch.grid == (32, 2, 1) and launch.args["x"].shape == (128, 8, 2, 64)


def _case(pct_rs, pct_cu, eager_pct):
    backends = {b: {"chosen": {"kernel": "k"}, "chosen_pct_copy_bw": pct, "default_pct_copy_bw": 50.0,
                    "failed": 0} for b, pct in (("cutile", pct_cu), ("cutile-rs", pct_rs))}
    case = {"op": "softmax_online", "dtype": "float16", "shape": [256, 131072], "backends": backends,
            "ratio_rs_over_cutile_same_config": 1.01}
    if eager_pct is not None:
        case["torch_eager"] = {"us": 1.0, "pct_copy_bw": eager_pct}
        case["target_pct_copy_bw"] = max(gpu_autotune.TARGET_PCT, eager_pct)
    return case


def test_summary_states_target_torch_eager_and_parity():
    rows = gpu_autotune.summarize([_case(86.0, 84.0, 60.0), _case(88.0, 88.0, 90.0), _case(70.0, 70.0, None)])
    by = [(r["backend"], r["meets_target"], r["target_pct_copy_bw"]) for r in rows["per_case"]]
    assert by == [("cutile", False, 85.0), ("cutile-rs", True, 85.0),
                  ("cutile", False, 90.0), ("cutile-rs", False, 90.0),
                  ("cutile", None, None), ("cutile-rs", None, None)]
    assert all(r["ratio_rs_over_cutile_same_config"] == 1.01 for r in rows["per_case"])


def test_a_failing_torch_baseline_is_reported_not_fatal():
    class Broken:
        spec, shape, dtype = SPECS["softmax_online"], (256, 131072), "float16"

        def torch_eager(self):
            raise RuntimeError("no torch here")
    case: dict = {}
    gpu_autotune._torch_eager(case, Broken(), None, 0.01, 4000.0)
    assert "no torch here" in case["torch_eager"]["error"] and "target_pct_copy_bw" not in case
