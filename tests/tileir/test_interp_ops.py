"""The Tile IR interpreter on small cuTile Python kernels exported on the CPU.

Each kernel exercises a part of the supported subset (gather/scatter with masks and padding,
padding modes of view loads, loops with break/continue, scans, integer semantics, casts, shape ops,
bf16/f16 rounding, mma); the expected outputs are computed here with NumPy, independently of the
interpreter. Errors (unsupported op, out-of-bounds access, wrong arguments) are typed and located.
"""

from __future__ import annotations

import struct

import cuda.tile as ct
import numpy as np
import pytest

import tir_export
from tileport.tileir import read_module
from tileport.tileir.interp import (ArgumentError, Array, MemoryFault, Scalar, UnsupportedOp,
                                    run_kernel)
from tileport.tileir.interp.values import round_bf16
from tileport.tileir.model import clone_module, walk
from tileport.tileir.roles import manifest_generated_roles

ConstInt = ct.Constant[int]


@ct.kernel
def k_gather(x, idx, y, n, TILE: ConstInt):
    offs = ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)
    inside = offs < n
    src = ct.gather(idx, offs, mask=inside, padding_value=0)
    v = ct.gather(x, src, mask=inside, padding_value=-1.0)
    ct.scatter(y, offs, v * 2.0 + 1.0, mask=inside)


@ct.kernel
def k_gather_unchecked(x, idx, y, TILE: ConstInt):
    offs = ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)
    v = ct.gather(x, ct.gather(idx, offs), check_bounds=False)
    ct.scatter(y, offs, v)


@ct.kernel
def k_leading_stride(s, x, y, TILE: ConstInt):
    # a port's entry shape: a launcher-filled stride first, then the arrays (x only lends its stride)
    offs = ct.arange(TILE, dtype=ct.int32)
    ct.scatter(y, offs, offs * s)


@ct.kernel
def k_padding(x, y, TILE: ConstInt):
    zero = ct.load(x, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(0, 0), tile=ct.reshape(zero, (1, TILE)))
    neg_inf = ct.load(x, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(y, index=(1, 0), tile=ct.reshape(neg_inf, (1, TILE)))
    pos_inf = ct.load(x, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.POS_INF)
    ct.store(y, index=(2, 0), tile=ct.reshape(pos_inf, (1, TILE)))
    nan = ct.load(x, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.NAN)
    ct.store(y, index=(3, 0), tile=ct.reshape(nan, (1, TILE)))
    neg_zero = ct.load(x, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.NEG_ZERO)
    ct.store(y, index=(4, 0), tile=ct.reshape(neg_zero, (1, TILE)))


@ct.kernel
def k_control(y, n):
    acc = 0
    i = 0
    while True:
        i += 1
        if i > n:
            break
        if i % 3 == 0:
            continue
        acc += i
    ct.store(y, index=(0,), tile=ct.full((1,), acc, dtype=ct.int32))


@ct.kernel
def k_scan_shapes(x, y, z, TILE: ConstInt):
    t = ct.load(x, index=(0, 0), shape=(2, TILE))
    ct.store(y, index=(0, 0), tile=ct.cumsum(t, axis=1))
    swapped = ct.cat((ct.extract(t, index=(1, 0), shape=(1, TILE)),
                      ct.extract(t, index=(0, 0), shape=(1, TILE))), axis=0)
    ct.store(z, index=(0, 0), tile=ct.permute(swapped, (1, 0)))


@ct.kernel
def k_integers(a, out, TILE: ConstInt):
    t = ct.load(a, index=(0,), shape=(TILE,))
    ct.store(out, index=(0, 0), tile=ct.reshape(t // 3, (1, TILE)))
    ct.store(out, index=(1, 0), tile=ct.reshape(t % 5, (1, TILE)))
    ct.store(out, index=(2, 0), tile=ct.reshape(t >> 2, (1, TILE)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.minimum(t, 7), (1, TILE)))
    wrapped = ct.astype(ct.astype(t, ct.int8), ct.int32)
    ct.store(out, index=(4, 0), tile=ct.reshape(wrapped, (1, TILE)))
    truncated = ct.astype(ct.astype(t, ct.float32) * 0.75, ct.int32)
    ct.store(out, index=(5, 0), tile=ct.reshape(truncated, (1, TILE)))


@ct.kernel
def k_add(a, b, c, TILE: ConstInt):
    ta = ct.load(a, index=(0,), shape=(TILE,))
    ct.store(c, index=(0,), tile=ta + ct.load(b, index=(0,), shape=(TILE,)))


@ct.kernel
def k_mma(a, b, c, T: ConstInt):
    acc = ct.mma(ct.load(a, index=(0, 0), shape=(T, T)), ct.load(b, index=(0, 0), shape=(T, T)),
                 ct.full((T, T), 1.0, dtype=ct.float32))
    ct.store(c, index=(0, 0), tile=acc)


@ct.kernel
def k_atomic_where(x, idx, hist, y, flag, TILE: ConstInt):
    t = ct.load(x, index=(0,), shape=(TILE,))
    ct.atomic_add(hist, ct.load(idx, index=(0,), shape=(TILE,)), ct.full((TILE,), 1, dtype=ct.int32))
    if flag > 0:
        r = ct.where(t > 0.5, t, -t)
    else:
        r = ct.where(t != t, t, 2.0 * t)
    ct.store(y, index=(0,), tile=r)


@ct.kernel
def k_math(x, lock, out, TILE: ConstInt):
    t = ct.load(x, index=(0, 0), shape=(4, TILE))
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.astype(ct.argmax(t, axis=1), ct.float32), (1, 4)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.min(t, axis=1), (1, 4)))
    ct.store(out, index=(2, 0), tile=ct.reshape(ct.prod(ct.abs(t) + 1.0, axis=1), (1, 4)))
    root = ct.sqrt(ct.abs(ct.extract(t, index=(0, 0), shape=(1, 4))))
    ct.store(out, index=(3, 0), tile=ct.exp2(ct.floor(root)))
    bits = ct.bitcast(ct.extract(t, index=(1, 0), shape=(1, 4)), ct.int32)
    ct.store(out, index=(4, 0), tile=ct.astype(bits & 1, ct.float32))
    old = ct.atomic_cas(lock, ct.arange(4, dtype=ct.int32), ct.full((4,), 0, dtype=ct.int32),
                        ct.full((4,), 5, dtype=ct.int32))
    ct.store(out, index=(5, 0), tile=ct.reshape(ct.astype(old, ct.float32), (1, 4)))


@ct.kernel
def k_order(x, y, TM: ConstInt, TN: ConstInt):
    ct.store(y, index=(0, 0), tile=ct.load(x, index=(1, 0), shape=(TM, TN), order="F"))


def _module(kernel, params):
    return read_module(tir_export.export(kernel, params))


def test_gather_scatter_with_masks_and_padding():
    n, tile = 150, 64
    rng = np.random.default_rng(1)
    x = rng.standard_normal(40).astype(np.float32)
    idx = rng.integers(0, 40, 200).astype(np.int32)
    y = np.full(200, 7.0, np.float32)
    m = _module(k_gather, [("float32", 1), ("int32", 1), ("float32", 1), ("scalar", "int32"), tile])
    out = run_kernel(m, [("x", Array(x, "f32")), ("idx", Array(idx, "i32")), ("y", Array(y, "f32")),
                         ("n", Scalar(n, "i32"))], (4, 1, 1))
    expected = y.copy()
    expected[:n] = x[idx[:n]] * 2 + 1
    np.testing.assert_array_equal(out["y"], expected)


def test_unmasked_access_outside_every_array_is_a_located_memory_fault():
    m = _module(k_gather_unchecked, [("float32", 1), ("int32", 1), ("float32", 1), 16])
    idx = np.arange(16, dtype=np.int32)
    idx[5] = 1_000_000
    with pytest.raises(MemoryFault) as err:
        run_kernel(m, [("x", Array(np.zeros(16, np.float32), "f32")), ("idx", Array(idx, "i32")),
                       ("y", Array(np.zeros(16, np.float32), "f32"))], (1, 1, 1))
    assert err.value.op_name == "load_ptr_tko"
    assert "test_interp_ops.py:" in str(err.value)  # the kernel's source line


def test_padding_modes_of_view_loads():
    m = _module(k_padding, [("float32", 1), ("float32", 2), 8])
    x = np.arange(1, 6, dtype=np.float32)
    out = run_kernel(m, [("x", Array(x, "f32")), ("y", Array(np.zeros((5, 8), np.float32), "f32"))],
                     (1, 1, 1))["y"]
    np.testing.assert_array_equal(out[:, :5], np.tile(x, (5, 1)))
    assert (out[0, 5:] == 0).all() and not np.signbit(out[0, 5:]).any()
    assert (out[1, 5:] == -np.inf).all() and (out[2, 5:] == np.inf).all()
    assert np.isnan(out[3, 5:]).all()
    assert (out[4, 5:] == 0).all() and np.signbit(out[4, 5:]).all()


@pytest.mark.parametrize("n", [0, 1, 10, 31])
def test_loop_with_break_and_continue_inside_ifs(n):
    m = _module(k_control, [("int32", 1), ("scalar", "int32")])
    out = run_kernel(m, [("y", Array(np.zeros(1, np.int32), "i32")), ("n", Scalar(n, "i32"))], (1,))
    assert out["y"][0] == sum(i for i in range(1, n + 1) if i % 3)


def test_scan_extract_cat_permute():
    m = _module(k_scan_shapes, [("float32", 2), ("float32", 2), ("float32", 2), 8])
    x = np.arange(16, dtype=np.float32).reshape(2, 8) - 5
    out = run_kernel(m, [("x", Array(x, "f32")), ("y", Array(np.zeros((2, 8), np.float32), "f32")),
                         ("z", Array(np.zeros((8, 2), np.float32), "f32"))], (1,))
    np.testing.assert_array_equal(out["y"], np.cumsum(x, axis=1))
    np.testing.assert_array_equal(out["z"], x[::-1].T)


def test_integer_division_remainder_shift_and_casts():
    m = _module(k_integers, [("int32", 1), ("int32", 2), 8])
    a = np.array([-7, -6, -1, 0, 1, 5, 300, -300], np.int32)
    out = run_kernel(m, [("a", Array(a, "i32")), ("out", Array(np.zeros((6, 8), np.int32), "i32"))],
                     (1,))["out"]
    np.testing.assert_array_equal(out[0], a // 3)                       # Python floor division
    np.testing.assert_array_equal(out[1], a % 5)                        # Python modulo
    np.testing.assert_array_equal(out[2], a >> 2)                       # arithmetic shift
    np.testing.assert_array_equal(out[3], np.minimum(a, 7))
    np.testing.assert_array_equal(out[4], a.astype(np.int8).astype(np.int32))  # wraps
    np.testing.assert_array_equal(out[5], np.trunc(a * 0.75).astype(np.int32))


def _bf16_reference(values: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to bf16, one value at a time with struct (independent of the interpreter)."""
    out = []
    for v in values.astype(np.float32):
        bits = struct.unpack("<I", struct.pack("<f", float(v)))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        out.append(struct.unpack("<f", struct.pack("<I", bits))[0])
    return np.array(out, np.float32)


def test_bf16_rounding_is_nearest_even():
    ties = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.14159, 1e-3, 65504.0], np.float32)
    np.testing.assert_array_equal(round_bf16(ties), _bf16_reference(ties))
    assert round_bf16(np.array([1 + 2 ** -8], np.float32))[0] == 1.0        # tie to even
    assert round_bf16(np.array([1 + 3 * 2 ** -8], np.float32))[0] == 1 + 2 ** -6


@pytest.mark.parametrize("dtype,elem", [("bfloat16", "bf16"), ("float16", "f16")])
def test_narrow_float_add_is_rounded_once(dtype, elem):
    rng = np.random.default_rng(2)
    m = _module(k_add, [(dtype, 1)] * 3 + [256])
    if elem == "bf16":
        a, b = (_bf16_reference(rng.standard_normal(256)) for _ in range(2))
        expected = _bf16_reference(a.astype(np.float64) + b)
    else:
        a, b = (rng.standard_normal(256).astype(np.float16) for _ in range(2))
        expected = (a.astype(np.float64) + b).astype(np.float16)
    out = run_kernel(m, [("a", Array(a, elem)), ("b", Array(b, elem)),
                         ("c", Array(np.zeros(256, a.dtype), elem))], (1,))["c"]
    np.testing.assert_array_equal(out, expected)


def test_ftof_toward_zero_to_f16():
    m = clone_module(_module(k_cast, [("float32", 1), ("float16", 1), 8]))
    cast = next(op for op in walk(m.entries[0]) if op.name == "ftof")
    cast.attributes["rounding_mode"] = "zero"
    x = np.array([1 + 2 ** -11 + 2 ** -13, -(1 + 2 ** -11 + 2 ** -13), 70000.0, -np.inf, 0.1, -0.1,
                  np.nan, 2.0], np.float32)
    out = run_kernel(m, [("x", Array(x, "f32")), ("y", Array(np.zeros(8, np.float16), "f16"))], (1,))["y"]
    expected = [1.0, -1.0, 65504.0, -np.inf, 0.0999755859375, -0.0999755859375, np.nan, 2.0]
    np.testing.assert_array_equal(out, np.array(expected, np.float16))


@ct.kernel
def k_cast(x, y, TILE: ConstInt):
    ct.store(y, index=(0,), tile=ct.astype(ct.load(x, index=(0,), shape=(TILE,)), ct.float16))


def test_mma_accumulates_in_f32():
    m = _module(k_mma, [("float16", 2), ("float16", 2), ("float32", 2), 16])
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    out = run_kernel(m, [("a", Array(a, "f16")), ("b", Array(b, "f16")),
                         ("c", Array(np.zeros((16, 16), np.float32), "f32"))], (1,))["c"]
    np.testing.assert_allclose(out, a.astype(np.float64) @ b + 1, rtol=1e-6, atol=1e-5)


def test_unsupported_op_is_a_typed_located_error():
    m = clone_module(_module(k_add, [("float32", 1)] * 3 + [16]))
    add = next(op for op in walk(m.entries[0]) if op.name == "addf")
    add.name = "frobnicate"
    args = [(n, Array(np.zeros(16, np.float32), "f32")) for n in "abc"]
    with pytest.raises(UnsupportedOp) as err:
        run_kernel(m, args, (1,))
    assert err.value.op_name == "frobnicate" and "frobnicate" in str(err.value)
    assert "test_interp_ops.py:" in str(err.value)


def test_wrong_argument_count_is_an_argument_error():
    m = _module(k_add, [("float32", 1)] * 3 + [16])
    with pytest.raises(ArgumentError, match="takes 9 parameters"):
        run_kernel(m, [("a", Array(np.zeros(16, np.float32), "f32"))], (1,))


def test_leading_launcher_arguments_take_their_values_from_their_roles():
    m = _module(k_leading_stride, [("scalar", "int32"), ("int32", 2), ("int32", 1), 8])
    args = [("x", Array(np.zeros((3, 5), np.int32), "i32")), ("y", Array(np.zeros(8, np.int32), "i32"))]
    # the port's roles (what the IR diff gets too): its leading stride, then cuTile Python's layout
    entry = {"params": [{"name": "x", "kind": "array", "rank": 2}, {"name": "y", "kind": "array", "rank": 1},
                        {"name": "TILE", "kind": "const"}]}
    roles = manifest_generated_roles(entry, {"stride_args": [["x", 0]]}, m.entries[0])
    assert roles == {0: ("stride", 0, 0), 2: ("shape", 0, 0), 3: ("shape", 0, 1), 4: ("stride", 0, 0),
                     5: ("stride", 0, 1), 7: ("shape", 1, 0), 8: ("stride", 1, 0)}
    np.testing.assert_array_equal(run_kernel(m, args, (1,), roles)["y"], np.arange(8) * 5)
    with pytest.raises(ArgumentError, match="takes 9 parameters"):
        run_kernel(m, args, (1,))  # no role for the leading argument
    with pytest.raises(ArgumentError, match="unknown extra argument role"):
        run_kernel(m, args, (1,), {0: ("shape", 0, 0)})


@pytest.mark.parametrize("rounding,quotients", [("zero", [-3, -3, 2, -2, -1]),
                                                ("negative_inf", [-4, -4, 2, -3, -1]),
                                                ("positive_inf", [-3, -3, 3, -2, -1])])
def test_divi_rounding_and_division_by_zero(rounding, quotients):
    from tileport.tileir.interp.optable import OPS
    from tileport.tileir.model import Op
    from tileport.tileir.types import ScalarType, TileType
    op = Op("divi", attributes={"rounding": rounding, "signedness": "signed"})
    op.add_result(TileType((5,), ScalarType("i32")))
    a, b = np.array([-7, 7, 5, -5, 4], np.int32), np.array([2, -2, 2, 2, 0], np.int32)
    (q,) = OPS["divi"](None, op, [a, b])
    assert q.tolist() == quotients  # the last lane divides by zero: all bits set


@pytest.mark.parametrize("flag", [0, 1])
def test_atomics_with_repeated_indices_float_compare_and_if_values(flag):
    m = _module(k_atomic_where, [("float32", 1), ("int32", 1), ("int32", 1), ("float32", 1),
                                 ("scalar", "int32"), 8])
    x = np.array([0.1, 0.7, np.nan, -2.0, 0.5, 3.0, -0.0, 1.0], np.float32)
    idx = np.array([0, 1, 1, 3, 1, 0, 2, 3], np.int32)
    out = run_kernel(m, [("x", Array(x, "f32")), ("idx", Array(idx, "i32")),
                         ("hist", Array(np.zeros(4, np.int32), "i32")),
                         ("y", Array(np.zeros(8, np.float32), "f32")), ("flag", Scalar(flag, "i32"))],
                     (1,))
    assert out["hist"].tolist() == [2, 3, 1, 2]
    expected = np.where(x > 0.5, x, -x) if flag else np.where(x != x, x, 2 * x)
    np.testing.assert_array_equal(out["y"], expected)  # NaN > 0.5 is false; NaN != NaN is true


def test_a_runaway_loop_stops_at_the_op_budget():
    from tileport.tileir.interp import InterpError
    m = _module(k_control, [("int32", 1), ("scalar", "int32")])
    args = [("y", Array(np.zeros(1, np.int32), "i32")), ("n", Scalar(2 ** 31 - 1, "i32"))]
    with pytest.raises(InterpError, match="op budget"):
        run_kernel(m, args, (1,), max_ops=20_000)


def test_argmax_min_prod_sqrt_exp2_bitcast_and_compare_and_swap():
    m = _module(k_math, [("float32", 2), ("int32", 1), ("float32", 2), 4])
    x = np.array([[1.5, -3.0, 2.25, 2.25], [0.1, 9.0, -1.0, 4.0], [-2.0, -2.0, -5.0, -0.5],
                  [7.0, 1.0, 7.5, 0.0]], np.float32)
    lock = np.array([0, 3, 0, 1], np.int32)
    out = run_kernel(m, [("x", Array(x, "f32")), ("lock", Array(lock, "i32")),
                         ("out", Array(np.zeros((6, 4), np.float32), "f32"))], (1,))
    assert out["lock"].tolist() == [5, 3, 5, 1]                 # swapped where it held 0
    o = out["out"]
    assert o[0].tolist() == np.argmax(x, axis=1).tolist()       # first of equal maxima
    assert o[1].tolist() == x.min(axis=1).tolist()
    np.testing.assert_allclose(o[2], np.prod(np.abs(x) + 1, axis=1), rtol=1e-6)
    assert o[3].tolist() == np.exp2(np.floor(np.sqrt(np.abs(x[0])))).tolist()
    assert o[4].tolist() == (x[1].view(np.int32) & 1).astype(np.float32).tolist()
    assert o[5].tolist() == lock.astype(np.float32).tolist()    # the values before the swap


def test_partition_view_dim_map():
    """order="F": tile dimension i walks array dimension dim_map[i] (ct.load's documented formula)."""
    m = _module(k_order, [("float32", 2), ("float32", 2), 2, 4])
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    out = run_kernel(m, [("x", Array(x, "f32")), ("y", Array(np.zeros((2, 4), np.float32), "f32"))],
                     (1,))["y"]
    np.testing.assert_array_equal(out, x[0:4, 2:4].T)  # t[y, x] = array[0 * 4 + x, 1 * 2 + y]
