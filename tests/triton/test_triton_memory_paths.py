"""Memory paths of Triton ports (`frontends/triton/memory_paths.py`): pointer and block-pointer accesses of a
kernel without `tl.dot` skip TMA (Triton's plain global loads/stores), tensor descriptors keep it; atomics whose
order no thread of the launch can observe are relaxed, the others keep Triton's acq_rel."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import Do, Let, walk
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"
ROW = """
@triton.jit
def row_scale_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, x / tl.sum(x, axis=0), mask=mask)
"""
BLOCK_PTR = """
@triton.jit
def bp_copy_kernel(x_ptr, y_ptr, M, N, s, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    xb = tl.make_block_ptr(x_ptr, (M, N), (s, 1), (pid * BM, 0), (BM, BN), (1, 0))
    yb = tl.make_block_ptr(y_ptr, (M, N), (s, 1), (pid * BM, 0), (BM, BN), (1, 0))
    tl.store(yb, tl.load(xb, boundary_check=(0, 1)) * 2.0, boundary_check=(0, 1))
"""
# a backward norm's shape: a weight row loaded once, rows loaded and stored in a loop (tileiras pipelines them)
ROW_LOOP = """
@triton.jit
def row_loop_kernel(y_ptr, x_ptr, w_ptr, stride, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    for row in range(tl.program_id(0) * ROWS, min((tl.program_id(0) + 1) * ROWS, n_rows)):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + cols, x * w, mask=mask)
"""
DESCRIPTOR = """
@triton.jit
def desc_copy_kernel(x_ptr, y_ptr, M, N, s, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    xd = tl.make_tensor_descriptor(x_ptr, [M, N], [s, 1], [BM, BN])
    yd = tl.make_tensor_descriptor(y_ptr, [M, N], [s, 1], [BM, BN])
    yd.store([pid * BM, 0], xd.load([pid * BM, 0]) * 2.0)
"""
MATMUL = """
@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
"""
# embedding backward's shape: gathered rows added into a table, nothing of it read back
SCATTER_ADD = """
@triton.jit
def scatter_add_kernel(src_ptr, idx_ptr, dst_ptr, n, D: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    mask = rows < n
    idx = tl.load(idx_ptr + rows, mask=mask, other=0)
    cols = tl.arange(0, D)
    vals = tl.load(src_ptr + rows[:, None] * D + cols[None, :], mask=mask[:, None], other=0.0)
    tl.atomic_add(dst_ptr + idx[:, None] * D + cols[None, :], vals, mask=mask[:, None]{sem})
"""
# a counter whose old values are used: the order is observable
TICKET = """
@triton.jit
def ticket_kernel(count_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_add(count_ptr + offs, 1)
    tl.store(out_ptr + offs, old)
"""
# an array added into and loaded in one launch: another thread may read what one added
READ_BACK = """
@triton.jit
def read_back_kernel(acc_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(acc_ptr + offs, 1.0)
    tl.store(out_ptr + offs, tl.load(acc_ptr + offs))
"""
CONFIG = {"src_ptr": "f32", "dst_ptr": "f32", "idx_ptr": "i64", "count_ptr": "i32", "out_ptr": "f32",
          "acc_ptr": "f32"}


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "paths.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path


def memory_ops(tmp_path: Path, body: str) -> list:
    tr = translate_file(str(write(tmp_path, body)), naming=RUST_NAMING)
    assert tr.diagnostics == [], [str(d) for d in tr.diagnostics]
    (k,) = tr.module.kernels
    return [s.op for s in walk(k.body) if isinstance(s, (Let, Do))
            and s.op.kind in ("load", "store", "gather", "scatter", "atomic_rmw", "atomic_cas")]


def tma(tmp_path: Path, body: str) -> set:
    return {op.attr("allow_tma") for op in memory_ops(tmp_path, body) if op.kind in ("load", "store")}


def orders(tmp_path: Path, body: str) -> list:
    return [op.attr("memory_order") for op in memory_ops(tmp_path, body) if op.kind.startswith("atomic")]


def rust(tmp_path: Path, body: str) -> str:
    report = translate([str(write(tmp_path, body))], None, crate="tileport_paths_tests", faithful=True)
    assert all(r.ok for r in report.results), [str(r.diagnostic) for r in report.results]
    return report.files["src/paths.rs"]


def test_pointer_and_block_pointer_accesses_skip_tma(tmp_path):
    assert tma(tmp_path, ROW) == {False}
    assert tma(tmp_path, BLOCK_PTR) == {False}
    text = rust(tmp_path, ROW)
    assert text.count("tma::Disabled") == 2 and "tma::Enabled" not in text


def test_accesses_in_loops_keep_tma(tmp_path):
    ops = [op for op in memory_ops(tmp_path, ROW_LOOP) if op.kind in ("load", "store")]
    assert [op.attr("allow_tma") for op in ops] == [False, None, None]  # w once; x and y in the row loop


def test_descriptors_and_matrix_multiplies_keep_tma(tmp_path):
    assert tma(tmp_path, DESCRIPTOR) == {True}
    assert None in tma(tmp_path, MATMUL) and False not in tma(tmp_path, MATMUL)
    assert "tma::Disabled" not in rust(tmp_path, DESCRIPTOR)


def test_unobserved_atomics_are_relaxed(tmp_path):
    assert orders(tmp_path, SCATTER_ADD.format(sem="")) == ["relaxed"]
    assert orders(tmp_path, SCATTER_ADD.format(sem=", sem='acq_rel'")) == ["relaxed"]
    assert "ordering::Relaxed" in rust(tmp_path, SCATTER_ADD.format(sem=""))


def test_observable_atomics_keep_their_order(tmp_path):
    assert orders(tmp_path, TICKET) == ["acq_rel"]
    assert orders(tmp_path, READ_BACK) == ["acq_rel"]
    assert orders(tmp_path, SCATTER_ADD.format(sem=", sem='release'").replace(
        "mask=mask[:, None], sem", "mask=mask[:, None], scope='sys', sem")) == ["release"]


# a causal mask: a bounds check and a condition on the indices (Liger's multi-token attention mask)
CAUSAL = """
@triton.jit
def causal_kernel(s_ptr, o_ptr, stride_m, L, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_bounds = (rows[:, None] < L) & (cols[None, :] < L)
    keep = in_bounds & ~(cols[None, :] > rows[:, None])
    offs = rows[:, None] * stride_m + cols[None, :]
    x = tl.load(s_ptr + offs, mask=keep, other=-1e9)
    tl.store(o_ptr + offs, x, mask=in_bounds)
    tl.store(o_ptr + offs, x, mask=keep)
"""


def test_a_load_under_bounds_and_more_is_a_view_load_and_a_select(tmp_path):
    """Its bounds part bounds the view (in-bounds elements may be read); `other` (no padding mode) is selected
    where the whole mask is false. A store under such a mask writes through a scatter (it must not write)."""
    kinds = [op.kind for op in memory_ops(tmp_path, CAUSAL)]
    assert kinds[0] == "load"
    text = rust(tmp_path, CAUSAL)
    assert "select(keep, s_ptr_tile" in text and "load_ptr_tko" not in text
    assert "store_ptr_tko" in text  # the store under `keep`
