"""Layout checks before a launch (tileport.runtime.tensors.check_arrays), on the CPU, without a library.

The launchers check what a descriptor says about itself (null, rank, dtype, extents, overlapping
elements of one output). What spans several arrays or depends on what the port was verified for is
checked in Python before the call: 16-byte aligned bases, non-negative strides, outputs that share
memory with another array, unit strides where the kernel computes addresses itself. Each must be a
typed exception (a device fault would take the CUDA context down with it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_arrays import FakeArray, f32, fake_address
from tileport.runtime.abi import AliasingError, LayoutError, MisalignedError, TileportError
from tileport.runtime.tensors import _check_in_storage, check_arrays, describe, unit_stride_dims

REPO = Path(__file__).resolve().parents[2]
MANIFEST = {e["kernel"]: e for e in json.loads((REPO / "rust" / "kernels.json").read_text())["entries"]}
N = 1024


def check(kernel: str, **arrays_and_constants):
    spec = MANIFEST[kernel]
    arrays = {k: describe(v, k) for k, v in arrays_and_constants.items() if isinstance(v, FakeArray)}
    check_arrays(spec, arrays_and_constants, arrays)


# ---------------------------------------------------------------- alignment


@pytest.mark.parametrize("offset", [4, 8, 2])
def test_misaligned_base_is_refused(offset):
    a = f32(N, ptr=fake_address() + offset)
    with pytest.raises(MisalignedError, match=r"vector_add_kernel: tensor `a` starts at 0x[0-9a-f]+, which is "
                                              r"not a multiple of 16 bytes") as info:
        check("vector_add_kernel", a=a, b=f32(N), c=f32(N), TILE=256)
    assert isinstance(info.value, LayoutError) and isinstance(info.value, ValueError)
    assert info.value.code == -9 and isinstance(info.value, TileportError)


def test_aligned_and_null_bases_pass():
    check("vector_add_kernel", a=f32(N), b=f32(N, ptr=fake_address() + 16), c=f32(N), TILE=256)
    check("vector_add_kernel", a=f32(N, ptr=0), b=f32(N), c=f32(N), TILE=256)  # null: the launcher's


# ---------------------------------------------------------------- aliasing


def test_output_aliasing_an_input_is_refused():
    a = f32(N)
    with pytest.raises(AliasingError, match="vector_add_kernel: output `c` shares memory with input `a`"):
        check("vector_add_kernel", a=a, b=f32(N), c=f32(N, ptr=a.ptr), TILE=256)


def test_output_overlapping_part_of_an_input_is_refused():
    x = f32(64, 128)
    inside = f32(32, 128, ptr=x.ptr + 16 * 128 * 4)  # rows 16..47 of x
    with pytest.raises(AliasingError, match="output `y` shares memory with input `x`"):
        check("softmax_tma_kernel", x=x, y=inside)


def test_two_outputs_sharing_memory_are_refused():
    x, w, b, y = f32(8, 64), f32(64), f32(64), f32(8, 64)
    mean = f32(8)
    with pytest.raises(AliasingError, match="output `mean` shares memory with output `rstd`"):
        check("layer_norm_fwd_kernel", x=x, w=w, b=b, y=y, mean=mean, rstd=f32(8, ptr=mean.ptr))


def test_adjacent_and_input_only_sharing_pass():
    """Back-to-back buffers do not alias; inputs may share memory with each other (both are read)."""
    a = f32(N)
    check("vector_add_kernel", a=a, b=f32(N, ptr=a.ptr), c=f32(N, ptr=a.ptr + N * 4), TILE=256)


def test_empty_arrays_never_alias():
    a = f32(0)
    check("vector_add_kernel", a=a, b=f32(0), c=f32(0, ptr=a.ptr), TILE=256)


def test_interleaved_output_is_refused_conservatively():
    """Even and odd elements do not share bytes, but their ranges do: refused (the port assumes no
    aliasing at all, as the capture did)."""
    base = fake_address()
    with pytest.raises(AliasingError):
        check("vector_add_kernel", a=f32(N, ptr=base, strides=(8,)), b=f32(N),
              c=f32(N, ptr=base + 16, strides=(8,)), TILE=256)


# ---------------------------------------------------------------- strides


def test_negative_stride_is_refused():
    with pytest.raises(LayoutError, match=r"tensor `a` has a negative stride \[-1\]"):
        check("vector_add_kernel", a=f32(N, strides=(-4,)), b=f32(N), c=f32(N), TILE=256)


def test_non_contiguous_row_for_a_kernel_that_computes_addresses():
    """softmax_gather gets the row strides as arguments and assumes unit stride along a row."""
    assert unit_stride_dims(MANIFEST["softmax_gather_kernel"], {}) == {"x": {1}, "y": {1}}
    with pytest.raises(LayoutError, match=r"softmax_gather_kernel: tensor `x` has stride 2 in dimension 1; "
                                          r"the kernel addresses it as contiguous"):
        check("softmax_gather_kernel", x=f32(64, 128, strides=(256 * 4, 8)), y=f32(64, 128), TILE=128)
    # any row stride, a unit column stride, and a single column (its stride is never used) pass
    check("softmax_gather_kernel", x=f32(64, 128, strides=(512 * 4, 4)), y=f32(64, 128), TILE=128)
    check("softmax_gather_kernel", x=f32(64, 1, strides=(4, 64)), y=f32(64, 1), TILE=1)


def test_view_kernels_accept_strided_arrays():
    """Kernels that address through tensor views (no stride arguments) take any non-negative strides."""
    assert unit_stride_dims(MANIFEST["softmax_tma_kernel"], {}) == {}
    check("softmax_tma_kernel", x=f32(64, 128, strides=(4, 64 * 4)), y=f32(64, 128))


def test_unit_stride_dims_follow_the_selected_variant():
    spec = {"kernel": "k", "params": [{"name": "x", "kind": "array", "rank": 3, "written": False}],
            "variants": [{"pinned": {"MODE": 1}, "stride_args": [["x", 0], ["x", 1]]},
                         {"pinned": {"MODE": 2}, "stride_args": []}]}
    assert unit_stride_dims(spec, {"MODE": 1}) == {"x": {2}}
    assert unit_stride_dims(spec, {"MODE": 2}) == {}
    assert unit_stride_dims(spec, {"MODE": 3}) == {}  # no entry: the launcher reports it


# ---------------------------------------------------------------- torch tensors outside their storage


class _Storage:
    def __init__(self, nbytes):
        self._n = nbytes

    def nbytes(self):
        return self._n


class _TorchLike:
    """What _check_in_storage reads of a torch tensor (torch is not needed for this test)."""

    def __init__(self, shape, strides, offset, storage_bytes):
        self.shape, self._strides, self._offset, self._storage = shape, strides, offset, _Storage(storage_bytes)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def stride(self):
        return self._strides

    def storage_offset(self):
        return self._offset

    def untyped_storage(self):
        return self._storage


def test_tensor_outside_its_storage_is_refused():
    _check_in_storage(_TorchLike((10, 10), (10, 1), 0, 400), "f32", "x")       # exactly fits
    _check_in_storage(_TorchLike((0, 10), (10, 1), 500, 0), "f32", "x")        # empty: nothing addressed
    with pytest.raises(LayoutError, match=r"tensor `x` addresses elements 50..149 outside its storage of 100"):
        _check_in_storage(_TorchLike((10, 10), (10, 1), 50, 400), "f32", "x")  # storage shrunk under a view
