"""The view contract of Triton pointers: how a block-structured offset splits into view dimensions
(strides, tile index), checked on the polynomial recognizer and on the corpus's flash-decode kernels,
whose contract the launch replays over the recorded tensor (`triton_check.view_layout`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import affine as A
from tileport.frontends.triton import translate_file
from tileport.gpu.triton_check import view_layout
from tileport.model.ir import Let, walk
from tileport.model.types import Sym

CORPUS = Path(__file__).resolve().parents[2] / "src" / "tileport" / "ops" / "triton_kernels"


def v(name):
    return A.factor(("v", name))


def c(name):
    return A.factor(("c", name))


def arange(uid, size, axis_from_end=0):
    return A.factor(("a", uid, size, axis_from_end))


def keys(polys):
    return [A.key(p) for p in polys]


def overlapping(extents, strides) -> bool:
    """Whether two elements of a strided layout share an address (dims of extent 1 never step)."""
    dims = sorted((s, e) for e, s in zip(extents, strides) if e > 1)
    reach = 1
    for s, e in dims:
        if s < reach:
            return True
        reach = s * e
    return False


def test_flattened_nested_rows_are_a_dimension_each():
    # (bh * n_splits + split) * HEAD_DIM + arange(HEAD_DIM): row-major [.., n_splits, HEAD_DIM]
    p = A.add(A.mul(A.add(A.mul(v("bh"), v("n_splits")), v("split")), c("HEAD_DIM")), arange("d", Sym("HEAD_DIM")))
    acc = A.block_access(p, (Sym("HEAD_DIM"),), {"n_splits"}, None)
    assert keys(acc.strides) == ["HEAD_DIM*n_splits", "HEAD_DIM", "1"]
    assert keys(acc.index) == ["bh", "split", "0"]
    assert acc.tile == [1, 1, Sym("HEAD_DIM")]


def test_block_starts_stay_on_their_axis():
    # pid * BLOCK + arange(BLOCK): a flat 1-D view walked in blocks
    acc = A.block_access(A.add(A.mul(v("pid"), c("BLOCK")), arange("x", Sym("BLOCK"))), (Sym("BLOCK"),), set(), None)
    assert keys(acc.strides) == ["1"] and keys(acc.index) == ["pid"]
    # row * stride + it * BLOCK + arange(BLOCK): column blocks of a row (the row stride is no multiple of BLOCK)
    p = A.add(A.add(A.mul(v("row"), v("stride")), A.mul(v("it"), c("BLOCK"))), arange("x", Sym("BLOCK")))
    acc = A.block_access(p, (Sym("BLOCK"),), {"stride"}, None)
    assert keys(acc.strides) == ["stride", "1"] and keys(acc.index) == ["row", "it"]
    # (m * BLOCK_M + arange) * stride_qs + off_h * stride_qh: the row block stays a tile start
    p = A.add(A.mul(A.add(A.mul(v("m"), c("BLOCK_M")), arange("r", Sym("BLOCK_M"))), v("stride_qs")),
              A.mul(v("h"), v("stride_qh")))
    acc = A.block_access(p, (Sym("BLOCK_M"),), {"stride_qs", "stride_qh"}, None)
    assert keys(acc.strides) == ["stride_qh", "stride_qs"] and keys(acc.index) == ["h", "m"]


def _views(kernel: str) -> dict:
    tr = translate_file(str(CORPUS / "flash_decode.py"), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    return next(k for k in tr.module.kernels if k.base_name == kernel).views


def test_flash_decode_partials_view_is_the_tensor_layout():
    # o_part [B, Hq, n_splits, D] contiguous, written at (bh * n_splits + split) * HEAD_DIM + dims: the
    # launch's own layout check refused the contract [n_splits, 1] (rows 16 elements apart, 128 wide)
    arg = SimpleNamespace(shape=[3, 32, 16, 128], strides=[65536, 2048, 128, 1])
    values = {"n_splits": 16, "HEAD_DIM": 128}
    for kernel in ("flash_decode_partial_kernel", "flash_decode_combine_kernel"):
        view = _views(kernel)["o_part_ptr"]
        assert view["strides"] == ["HEAD_DIM*n_splits", "HEAD_DIM", "1"], kernel
        extents, strides = view_layout(view, arg, 3 * 32 * 16 * 128, values)
        assert (extents, strides) == ((96, 16, 128), (2048, 128, 1)), kernel
        assert not overlapping(extents, strides)


def test_overlap_check_can_fail():
    assert overlapping((12288, 128), (16, 1))
    assert not overlapping((96, 16, 128), (2048, 128, 1))


def test_transposed_tile_loads_through_a_memory_order_view():
    # k_t = tl.load(k_rows + k_pos[None, :] * stride_ks + dims[:, None]): a [HEAD_DIM, BLOCK_N] tile of a
    # [.., S, D] tensor. The view keeps the tensor's order (unit stride last, where a TMA load needs it) and
    # the load maps the tile onto it with cuTile's `order`, as `ct.load(k, .., order=(0, 1, 3, 2))`.
    tr = translate_file(str(CORPUS / "attention.py"), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    for k in tr.module.kernels:
        assert k.views["k_ptr"] == {"strides": ["stride_kb", "stride_kh", "stride_ks", "1"],
                                    "extents": [None, None, "seq_len", None]}, k.name
        loads = [s.op for s in walk(k.body) if isinstance(s, Let) and s.op.kind == "load"
                 and s.op.args[0].name == "k_ptr"]
        assert [op.attr("order") for op in loads] == [(0, 1, 3, 2)], k.name
        assert [tuple(op.attr("shape"))[2:] for op in loads] == [(Sym("HEAD_DIM"), Sym("BLOCK_N"))]
    arg = SimpleNamespace(shape=[4, 8, 4096, 128], strides=[4194304, 524288, 128, 1])
    view = tr.module.kernels[0].views["k_ptr"]
    values = {"stride_kb": 4194304, "stride_kh": 524288, "stride_ks": 128, "seq_len": 4096}
    assert view_layout(view, arg, 4 * 8 * 4096 * 128, values) == ((4, 8, 4096, 128), (4194304, 524288, 128, 1))


def test_tiles_in_memory_order_keep_the_identity_map():
    from tileport.frontends.triton.memory import memory_order
    acc = A.block_access(A.add(A.mul(arange("r", Sym("BM"), 1), v("stride")), arange("c", Sym("BN"))),
                         (Sym("BM"), Sym("BN")), {"stride"}, None)
    assert memory_order(acc) is None
    acc = A.block_access(A.add(A.mul(arange("r", Sym("BM"), 0), v("stride")), arange("c", Sym("BN"), 1)),
                         (Sym("BN"), Sym("BM")), {"stride"}, None)
    assert memory_order(acc) == [1, 0]


def test_rows_counted_back_from_the_end_index_one_dimension():
    # (T - 1 - t) * D + arange(BD): row T - 1 - t of a [T, D] buffer; split as slab 1 of stride T * D and
    # row -1 - t, every access would be out of the view's bounds
    p = A.add(A.mul(A.sub(A.sub(v("T"), A.const(1)), v("t")), v("D")), arange("d", Sym("BD")))
    acc = A.block_access(p, (Sym("BD"),), {"T", "D"}, None)
    assert keys(acc.strides) == ["D", "1"] and keys(acc.index) == ["T + -1*t + -1", "0"]
    # a slab of its own stays one where the row index is not negative (batch 1 of [B, T, D], row t)
    p = A.add(A.add(A.mul(v("T"), v("D")), A.mul(v("t"), v("D"))), arange("d", Sym("BD")))
    acc = A.block_access(p, (Sym("BD"),), {"T", "D"}, None)
    assert keys(acc.strides) == ["D*T", "D", "1"] and keys(acc.index) == ["1", "t", "0"]
