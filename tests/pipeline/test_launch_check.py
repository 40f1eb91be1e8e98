"""The GPU differential harness up to the launch, on the CPU: planning from launch records, input
values (shapes, strides, ranges), the per-dtype comparison, and whole cases on a numpy fake device
whose "source" and "port" kernels are Python functions (a faithful port passes, a wrong one fails with
the array and element named, a crashing one fails with its message)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tileport.gpu.launch_check import (ArgPlan, LaunchPlan, check_launch, compare_arrays, host_values,
                                       plan_launches, storage_elements, time_launch)
from tileport.launches import parse_spec

PARAMS = [{"name": "x", "kind": "array", "rank": 2}, {"name": "idx", "kind": "array", "rank": 1},
          {"name": "y", "kind": "array", "rank": 1}, {"name": "alpha", "kind": "scalar"},
          {"name": "TILE", "kind": "const"}]


def record(x_strides=(1, 37), idx_range=(3, 9), dtype="float16", **over):
    launch = {"framework": "cutile", "kernel": "k", "file": "k.py", "grid": [5, 1, 1],
              "args": [{"name": "x", "kind": "array", "dtype": dtype, "shape": [37, 300], "strides": list(x_strides)},
                       {"name": "idx", "kind": "array", "dtype": "int32", "shape": [64], "strides": [1],
                        "range": list(idx_range) if idx_range else None},
                       {"name": "y", "kind": "array", "dtype": "float32", "shape": [64], "strides": [1]},
                       {"name": "alpha", "kind": "scalar", "dtype": "float32", "value": 0.5},
                       {"name": "TILE", "kind": "const", "value": 64}], **over}
    return parse_spec({"format": "tileport-launches", "version": 1, "launches": [launch]})[0]


def test_plan_shapes_strides_storage_and_ranges():
    plans, problems = plan_launches("launch:k.k", [record()], PARAMS)
    assert problems == [] and len(plans) == 1
    p = plans[0]
    x, idx = p.args[0], p.args[1]
    assert (x.shape, x.strides, x.storage) == ((37, 300), (1, 37), 1 + 36 + 299 * 37)  # a transposed view
    assert (idx.low, idx.high) == (3, 9)
    assert (p.dtype, p.shape, p.grid) == ("float16", [37, 300], (5, 1, 1))
    assert [a.value for a in p.args[3:]] == [0.5, 64]
    default = plan_launches("k", [record(idx_range=None)], PARAMS)[0][0].args[1]
    assert (default.low, default.high) == (0, 127)


def test_plan_problems():
    _, problems = plan_launches("k", [record(x_strides=(-1, 37))], PARAMS)
    assert any("negative strides" in p for p in problems)
    _, problems = plan_launches("k", [record(x_strides=(1, 2**40))], PARAMS)
    assert any("GiB exceeds" in p for p in problems)
    _, problems = plan_launches("k", [record()], PARAMS[:4])
    assert any("arguments" in p for p in problems)
    assert storage_elements((0, 5), (5, 1)) == 0 and storage_elements((2, 3), (0, 1)) == 3  # broadcast dim


def test_host_values_follow_dtype_and_range():
    rng = np.random.default_rng(0)
    ints = host_values(ArgPlan("i", "array", "int32", (1000,), (1,), 1000, 3, 9), rng)
    assert ints.min() == 3 and ints.max() == 9 and ints.dtype == np.int64
    floats = host_values(ArgPlan("f", "array", "float16", (4000,), (1,), 4000), rng)
    assert floats.dtype == np.float32 and abs(floats.mean()) < 0.1 and 0.9 < floats.std() < 1.1
    bools = host_values(ArgPlan("b", "array", "bool", (100,), (1,), 100), rng)
    assert bools.dtype == bool and 0 < bools.sum() < 100
    same = [host_values(ArgPlan("f", "array", "float32", (8,), (1,), 8), np.random.default_rng(5)) for _ in range(2)]
    assert (same[0] == same[1]).all()


@pytest.mark.parametrize("dtype,got,ok", [
    ("float32", [1.0, 2.0 + 1e-6], True), ("float32", [1.0, 2.01], False),
    ("float16", [1.0, 2.002], True), ("float16", [1.0, 2.05], False),
    ("bfloat16", [1.0, 2.02], True), ("int32", [1, 2], True), ("int32", [1, 3], False),
    ("float32", [1.0, math.nan], False), ("float32", [1.0, math.inf], False),
])
def test_compare_per_dtype(dtype, got, ok):
    ref = np.array([1, 2], dtype=np.float64 if dtype.startswith(("float", "bfloat")) else np.int64)
    res = compare_arrays(np.array(got), ref, dtype)
    assert res[0] is ok, res
    if not ok:
        assert res[3]


def test_compare_nan_at_the_same_place_is_equal():
    a = np.array([math.nan, 1.0, -math.inf])
    assert compare_arrays(a.copy(), a, "float32")[0]


class FakeDevice:
    """numpy arrays; kernels are Python functions of the argument values (in parameter order)."""

    def __init__(self, source, port):
        self.source, self.port, self.timed = source, port, []

    def make(self, arg: ArgPlan, host: np.ndarray):
        base = host.astype(np.float64 if arg.dtype.startswith(("float", "bfloat")) else host.dtype)
        return base, self._view(arg, base)

    def _view(self, arg, base):
        item = base.itemsize
        return np.lib.stride_tricks.as_strided(base, arg.shape, [s * item for s in arg.strides])

    def clone(self, arg, handle):
        base = handle[0].copy()
        return base, self._view(arg, base)

    def value(self, handle):
        return handle[1]

    def to_host(self, arg, handle):
        return np.array(handle[1])

    def run_source(self, plan: LaunchPlan, values):
        self.source(*values)

    def run_port(self, plan, values):
        self.port(*values)

    def sync(self):
        pass

    def time_us(self, fn):
        fn()
        self.timed.append(fn)
        return 10.0 + len(self.timed)

    def name(self):
        return "fake"


def take_scale(x, idx, y, alpha, tile):
    y[:] = x[0][idx] * alpha


def test_faithful_port_passes_and_the_case_names_the_launch():
    plan = plan_launches("launch:k.k", [record()], PARAMS)[0][0]
    rec = check_launch(plan, FakeDevice(take_scale, take_scale))
    assert rec["ok"] and rec["error"] == "" and rec["op"] == "launch:k.k" and rec["backend"] == "cutile-rs"
    assert rec["dtype"] == "float16" and rec["shape"] == [37, 300] and rec["err_over_tol"] == 0.0


def test_wrong_port_fails_naming_array_and_element():
    def off_by_one(x, idx, y, alpha, tile):
        take_scale(x, idx, y, alpha, tile)
        y[7] += 1.0
    plan = plan_launches("k", [record()], PARAMS)[0][0]
    rec = check_launch(plan, FakeDevice(take_scale, off_by_one))
    assert not rec["ok"] and rec["error"].startswith("`y`: max |error|")


def test_port_that_modifies_an_input_fails():
    def clobbers(x, idx, y, alpha, tile):
        take_scale(x, idx, y, alpha, tile)
        idx[0] = 0
    rec = check_launch(plan_launches("k", [record()], PARAMS)[0][0], FakeDevice(take_scale, clobbers))
    assert not rec["ok"] and "`idx`: 1 element(s) differ" in rec["error"]


def test_crashes_are_failures_with_their_message():
    def boom(*a):
        raise ValueError("launcher rejected the grid")
    plan = plan_launches("k", [record()], PARAMS)[0][0]
    rec = check_launch(plan, FakeDevice(take_scale, boom))
    assert not rec["ok"] and rec["error"] == "ValueError: launcher rejected the grid"
    rec = check_launch(plan, FakeDevice(boom, take_scale))
    assert not rec["ok"] and "the source cuTile kernel failed" in rec["error"]


def test_timing_records_both_sides_and_errors():
    plan = plan_launches("k", [record()], PARAMS)[0][0]
    rec = time_launch(plan, FakeDevice(take_scale, take_scale))
    assert rec["times_us"] == {"cutile": 11.0, "cutile-rs": 12.0} and "errors" not in rec

    def boom(*a):
        raise RuntimeError("no")
    rec = time_launch(plan, FakeDevice(take_scale, boom))
    assert list(rec["times_us"]) == ["cutile"] and rec["errors"]["cutile-rs"] == "RuntimeError: no"


# A grouped kernel in the style of MoE grouped GEMMs: program p writes rows tile_row[p] .. + ROWS of `out`
# with the values of group tile_group[p]. Valid tables give each program rows of its own; tables drawn
# at random inside their range make programs overlap, and the result then depends on the block order.
GROUPED_PARAMS = [{"name": "x", "kind": "array", "rank": 2}, {"name": "tile_row", "kind": "array", "rank": 1},
                  {"name": "tile_group", "kind": "array", "rank": 1}, {"name": "out", "kind": "array", "rank": 2}]
ROWS = 4


def grouped_record(values: bool):
    def table(name, vals, hi):
        a = {"name": name, "kind": "array", "dtype": "int32", "shape": [4], "strides": [1], "range": [0, hi]}
        return {**a, "values": vals} if values else a
    launch = {"framework": "triton", "kernel": "k", "file": "k.py", "grid": [4, 1, 1],
              "args": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [3, 8], "strides": [8, 1]},
                       table("tile_row", [0, 4, 8, 12], 12), table("tile_group", [0, 0, 1, 2], 2),
                       {"name": "out", "kind": "array", "dtype": "float32", "shape": [16, 8], "strides": [8, 1]}]}
    return parse_spec({"format": "tileport-launches", "version": 1, "launches": [launch]})[0]


def grouped(order):
    def kernel(x, tile_row, tile_group, out):
        for p in order(range(len(tile_row))):
            out[tile_row[p]:tile_row[p] + ROWS] = x[tile_group[p]] * (p + 1)
    return kernel


def test_recorded_routing_tables_are_replayed_not_drawn():
    plan = plan_launches("k", [grouped_record(values=True)], GROUPED_PARAMS)[0][0]
    rows, groups = plan.args[1], plan.args[2]
    assert host_values(rows, np.random.default_rng(0)).tolist() == [0, 4, 8, 12]
    assert host_values(groups, np.random.default_rng(0)).tolist() == [0, 0, 1, 2]
    # a port whose blocks run in another order agrees with the source on the recorded tables ...
    rec = check_launch(plan, FakeDevice(grouped(list), grouped(lambda r: list(r)[::-1])))
    assert rec["ok"], rec["error"]
    # ... but not on tables drawn at random, where programs write the same rows (a race in the source)
    drawn = plan_launches("k", [grouped_record(values=False)], GROUPED_PARAMS)[0][0]
    assert drawn.args[1].values is None
    rec = check_launch(drawn, FakeDevice(grouped(list), grouped(lambda r: list(r)[::-1])))
    assert not rec["ok"] and "`out`" in rec["error"]


def test_recorded_values_that_do_not_fill_the_array_are_not_replayed():
    rec = grouped_record(values=True)
    rec.args[1].values = [0, 4]
    plan = plan_launches("k", [rec], GROUPED_PARAMS)[0][0]
    assert plan.args[1].values is None and plan.args[2].values == [0, 0, 1, 2]
