"""Constructs of the MoE, grouped and fp8 GEMM kernels, at translation level (fast).

- `%` on integer tiles: Python's modulo, as cuTile Python lowers it (remi, then the divisor added where the
  remainder is non-zero and its sign differs from the divisor's);
- float8 (e4m3fn / e5m2) array parameters: tensors of the float8 element types, their dtype codes in the C
  ABI and the launcher's dtype check; the interpreter's float8 rounding.
The ports' IR diffs against cuTile Python are the corpus kernels' (grouped_gemm_kernel, matmul_fp8_kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

from tp_helpers import entry_text, has_line, launcher_text, module_text, run, write_kernels

TILE_MOD = """
    @ct.kernel
    def k(x, y, TILE: ConstInt):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
        ct.store(y, index=(ct.bid(0),), tile=t % 7)
"""

FP8_MMA = """
    @ct.kernel
    def k(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
        acc = ct.zeros((TM, TN), dtype=ct.float32)
        for i in range(ct.num_tiles(a, 1, shape=(TM, TK))):
            ta = ct.load(a, index=(ct.bid(0), i), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(i, ct.bid(1)), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))
"""


def _translated(tmp_path, body: str, configs) -> str:
    path = write_kernels(tmp_path, body)
    report = run(path, configs)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return module_text(report, path)


def test_tile_modulo_is_python_modulo(tmp_path):
    text = _translated(tmp_path, TILE_MOD, {"k": [{"x": "int32", "y": "int32", "TILE": 64}]})
    body = entry_text(text, "k")
    assert "remi(" in body and "cmpi(" in body and "predicate::LessThan" in body and "predicate::NotEqual" in body, body
    assert "xori(" in body and "andi(" in body and "select(" in body, body
    assert "not supported" not in text


def test_float_tile_modulo_is_not_rewritten(tmp_path):
    """The expansion is for integers: a float tile's `%` keeps its own lowering (or its own refusal)."""
    path = write_kernels(tmp_path, TILE_MOD)
    report = run(path, {"k": [{"x": "float32", "y": "float32", "TILE": 64}]})
    text = module_text(report, path) if report.ok else ""
    assert "remi(" not in text


def test_float8_arrays_are_tensors_of_the_float8_types(tmp_path):
    configs = {"k": [{"a": "float8_e4m3fn", "b": "float8_e4m3fn", "c": "bfloat16", "TM": 64, "TN": 64, "TK": 64},
                     {"a": "float8_e5m2", "b": "float8_e5m2", "c": "bfloat16", "TM": 64, "TN": 64, "TK": 64}]}
    text = _translated(tmp_path, FP8_MMA, configs)
    body = entry_text(text, "k")
    assert "a: &Tensor<E, { [-1, -1] }>" in body and "c: &Tensor<bf16," in body, body
    assert "let ta: Tile<E, { [TM, TK] }> = load_view_tko(" in body and has_line(body, "acc = mmaf(ta, tb, acc);")
    launcher = launcher_text(text, "tileport_k")
    assert "common_dtype(&[(\"a\", a), (\"b\", b)], &[dtype::F8E4M3FN, dtype::F8E5M2])?" in launcher, launcher
    assert "(dtype::F8E4M3FN,) => launch!(cutile::core::f8e4m3fn, [\"f8e4m3fn\"])" in launcher
    assert "(dtype::F8E5M2,) => launch!(cutile::core::f8e5m2, [\"f8e5m2\"])" in launcher


def test_a_fixed_float8_array_is_named_with_its_path_on_the_host(tmp_path):
    """The launchers import no float8 type: a non-generic float8 tensor is spelled `cutile::core::f8e4m3fn`."""
    configs = {"k": [{"a": "float8_e4m3fn", "b": "float8_e4m3fn", "c": "bfloat16", "TM": 64, "TN": 64, "TK": 64}]}
    text = _translated(tmp_path, FP8_MMA, configs)
    assert "a: &Tensor<f8e4m3fn, { [-1, -1] }>" in entry_text(text, "k")
    launcher = launcher_text(text, "tileport_k")
    assert "target.tensor::<cutile::core::f8e4m3fn>(a)" in launcher and "require_dtype(\"a\", a, dtype::F8E4M3FN)" \
        in launcher, launcher


def test_float8_dtype_codes_are_one_byte_in_both_abis():
    from tileport.emit.rust import lowering
    from tileport.runtime import abi, tensors
    assert abi.DTYPE_CODES["f8e4m3fn"] == lowering.DTYPE_CODE["f8e4m3fn"] == 10
    assert abi.DTYPE_CODES["f8e5m2"] == lowering.DTYPE_CODE["f8e5m2"] == 11
    assert tensors.ITEMSIZE["f8e4m3fn"] == tensors.ITEMSIZE["f8e5m2"] == 1
    assert tensors.TORCH_DTYPES["torch.float8_e4m3fn"] == "f8e4m3fn"


@pytest.mark.parametrize("rounder,cases", [
    ("round_f8e4m3fn", [(1.0625, 1.0), (1.1875, 1.25), (460.0, 448.0), (470.0, np.nan), (2.0 ** -10, 0.0),
                        (3 * 2.0 ** -10, 2.0 ** -8), (-0.3, -0.3125), (np.inf, np.nan)]),
    ("round_f8e5m2", [(1.2, 1.25), (61440.0, np.inf), (2.0 ** -17, 0.0), (3 * 2.0 ** -17, 2.0 ** -15)]),
])
def test_interpreter_rounds_to_float8_nearest_even(rounder, cases):
    from tileport.tileir.interp import values
    x, want = (np.array(v, dtype=np.float32) for v in zip(*cases))
    got = getattr(values, rounder)(x)
    assert np.array_equal(got, want, equal_nan=True), (got, want)
    assert values.storage(values.ScalarType("f8E4M3FN")) == np.float32


SLICE_AT_SCALED_ROW = """
    @ct.kernel
    def k(a, rows, c, T: ConstInt):
        r = ct.sum(ct.load(rows, index=(0,), shape=(T,)), 0) * 8
        v = a.slice(0, r, r + T)
        ct.store(c, index=(0, 0), tile=ct.load(v, index=(0, 0), shape=(T, T)))
"""


def test_slice_start_times_a_constant_tile_is_as_aligned_as_cutile_knows(tmp_path):
    """A reduction (divisible by 1) times 8: a tile product with a constant tile, 8 rows of 2 bytes, so the view
    is 16-byte aligned whatever the stride (cuTile Python's `assume div_by<16>`), not aligned at launch; its
    extent (r + 16) - r is divisible by gcd(8, 16, 8): cuTile assumes `div_by<8>` after its bound."""
    text = _translated(tmp_path, SLICE_AT_SCALED_ROW, {"k": [{"a": "float16", "rows": "int32", "c": "float16",
                                                                "T": 16}]})
    body = entry_text(text, "k")
    assert "assume_div_by::<_, 16>(a_at)" in body, body
    assert "A_ALIGNED" not in text
    assert "let v_n0_div: i32 = unsafe { assume_div_by::<_, 8>(v_n0) };" in body, body
    assert "assume_div_by::<_, 8>(v_n1)" not in body  # the other extent: the array's, no divisibility known


SLICE_ZERO_PADDED_LOOP = """
    @ct.kernel
    def k(a, c, n, T: ConstInt):
        v = a.slice(0, 0, n)
        acc = ct.zeros((T, T), dtype=ct.float32)
        for i in range(ct.cdiv(n, T)):
            acc = acc + ct.astype(ct.load(v, index=(i, 0), shape=(T, T), padding_mode=ct.PaddingMode.ZERO), ct.float32)
        ct.store(c, index=(0, 0), tile=ct.astype(acc, c.dtype))
"""


def test_idiomatic_zero_padded_view_of_a_slice_borrows_the_slice_once(tmp_path):
    """The idiomatic rendering makes a local view's partition with a method call (which borrows the receiver
    itself) and lends the partition to the load: `&v.partition(..)` there would hand the load a `&&Partition`,
    which cutile's `Load` is not implemented for (a compile error of the crate)."""
    path = write_kernels(tmp_path, SLICE_ZERO_PADDED_LOOP)
    report = run(path, {"k": [{"a": "float32", "c": "float32", "n": "int32", "T": 16}]}, faithful=False)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    text = module_text(report, path)
    assert "let v_tiles = v.partition(shape![T, T]);" in text, text
    assert "load(&v_tiles, [" in text and "&v.partition(" not in text
