"""A synthetic kernel library of any size, for timing package mode (`eval/package_speed.py`).

    python3 eval/synthetic_library.py OUT_DIR [--kernels 1000]

Writes the package `synlib` under OUT_DIR: twelve kernels per module (Triton, every fifth module cuTile),
each module a varied mix of the constructs real libraries use: helpers and constants imported from sibling
and parent modules and re-exported through `__init__.py` (`from .utils import *`, aliases), a module that
wraps triton.language, `@triton.autotune` / `@triton.heuristics` tables, decorators in function form
(`k = triton.jit(fn)`), constexpr branches, guarded imports (`try: import triton`), host launchers, and a
back end of another vendor (skipped). The kernels are tileport's own small kernels; the text depends only
on the arguments (the same package every run).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

NAME = "synlib"
PER_MODULE = 12  # kernels per module
CUTILE_EVERY = 5  # every fifth module is a cuTile module
MODULES_PER_GROUP = 12  # modules per `ops/<group>/` folder

SHARED = {
    "__init__.py": """
        from .consts import BLOCK, EPS
        from .utils import *
        from .utils import fast_exp as fexp
        """,
    "consts.py": """
        import triton.language as tl

        BLOCK = 128
        EPS = 1e-6
        SCALE = 2.0
        ACC_DTYPE = tl.float32
        """,
    "utils/__init__.py": """
        from .tl_math import *
        from .tl_math import fast_exp
        """,
    "utils/tl_math.py": """
        import triton
        import triton.language as tl

        __all__ = ["twice", "silu", "softplus"]


        @triton.jit
        def fast_exp(x):
            return tl.exp(x)


        @triton.jit
        def twice(x):
            return x * 2


        @triton.jit
        def silu(x):
            return x / (1.0 + tl.exp(-x))


        @triton.jit
        def softplus(x):
            return tl.log(1.0 + tl.exp(x))
        """,
    "runtime/__init__.py": "",
    "runtime/tl_extra.py": """
        import triton.language as tl

        exp2 = tl.exp2
        rsqrt = tl.rsqrt
        """,
    "ops/__init__.py": """
        from .group_0 import *
        """,
    "ops/ct_helpers.py": """
        import cuda.tile as ct

        from ..consts import SCALE

        ACC = ct.float32


        def scaled_load(a, i, n):
            return ct.astype(ct.load(a, index=(i,), shape=(n,)), ACC) * SCALE


        def load_f32(a, i, n):
            return ct.astype(ct.load(a, index=(i,), shape=(n,)), ct.float32)
        """,
    "backends/__init__.py": "",
    "backends/_ascend/__init__.py": "",
    "backends/_ascend/fill.py": """
        import triton
        import triton.language as tl


        @triton.jit
        def npu_fill_kernel(x_ptr):
            tl.store(x_ptr + tl.arange(0, 16), tl.zeros((16,), tl.float32))
        """,
}

TRITON_HEAD = """
try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

from {top}.consts import ACC_DTYPE, BLOCK
from ...runtime import tl_extra as ext
from ... import fexp, twice
from ...utils import silu, softplus
"""

# Triton kernels: `{k}` is the kernel's number in the package, `{b}` a block size.
TRITON_KERNELS = [
    """
@triton.jit
def softmax_{k}(x_ptr, y_ptr, n):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(ACC_DTYPE)
    e = fexp(x - tl.max(x, axis=0)) + ext.exp2(x) * 0.0
    tl.store(y_ptr + offs, twice(e / tl.sum(e, axis=0)), mask=mask)
""",
    """
@triton.jit
def rms_norm_{k}(x_ptr, w_ptr, y_ptr, n_cols, stride_xm, stride_ym, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    in_row = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols, mask=in_row, other=0.0).to(tl.float32)
    inv_rms = ext.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_ym + cols, (x * inv_rms * w).to(y_ptr.dtype.element_ty), mask=in_row)
""",
    """
@triton.autotune(configs=[triton.Config({{"BLOCK_M": 64, "BLOCK_N": 64}}, num_warps=4),
                          triton.Config({{"BLOCK_M": {b}, "BLOCK_N": 64}}, num_warps=8)], key=["M", "N"])
@triton.jit
def add_rows_{k}(a_ptr, b_ptr, c_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * stride_m + cols[None, :]
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, a + b, mask=mask)
""",
    """
@triton.heuristics({{"EVEN": lambda args: args["n"] % args["BLOCK_SIZE"] == 0}})
@triton.jit
def silu_{k}(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN:
        x = tl.load(x_ptr + offs).to(tl.float32)
        tl.store(y_ptr + offs, silu(x).to(y_ptr.dtype.element_ty))
    else:
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, silu(x).to(y_ptr.dtype.element_ty), mask=mask)
""",
    """
@triton.jit
def act_{k}(x_ptr, y_ptr, n, MODE: tl.constexpr):
    offs = tl.program_id(0) * {b} + tl.arange(0, {b})
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if MODE == 1:
        y = tl.maximum(x, 0.0)
    elif MODE == 2:
        y = softplus(x)
    else:
        y = tl.where(x > 0, x, 0.01 * x)
    tl.store(y_ptr + offs, y, mask=mask)
""",
    """
def _scale_{k}(x_ptr, y_ptr, alpha, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * alpha, mask=mask)


scale_{k} = triton.jit(_scale_{k})
""",
    """
@triton.jit
def matmul_{k}(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
        b = tl.load(b_tile, mask=(ks[:, None] < K - k0) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
""",
    """
@triton.jit
def row_sum_{k}(x_ptr, y_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))
""",
    """
@triton.jit
def gelu_tanh_{k}(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + fexp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=mask)
""",
    """
@triton.heuristics({{
    "USE_G": lambda args: args["g"] is not None,
    "USE_INITIAL_STATE": lambda args: args["h0"] is not None,
    "STORE_FINAL_STATE": lambda args: args["ht"] is not None,
}})
@triton.jit
def fused_chunk_{k}(q, k, v, g, h0, ht, o, T, K, V, scale, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                  USE_G: tl.constexpr, USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr):
    i_v, i_k, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_i = tl.arange(0, BT)
    m_s = o_i[:, None] >= o_i[None, :]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        p_h0 = tl.make_block_ptr(h0 + i_bh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
        b_h += tl.load(p_h0, boundary_check=(0, 1)).to(tl.float32)
    for i_t in range(tl.cdiv(T, BT)):
        p_q = tl.make_block_ptr(q + i_bh * T * K, (T, K), (K, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0))
        p_k = tl.make_block_ptr(k + i_bh * T * K, (K, T), (1, K), (i_k * BK, i_t * BT), (BK, BT), (0, 1))
        p_v = tl.make_block_ptr(v + i_bh * T * V, (T, V), (V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
        p_o = tl.make_block_ptr(o + i_bh * T * V, (T, V), (V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
        b_q = (tl.load(p_q, boundary_check=(0, 1)) * scale).to(tl.float32)
        b_k = tl.load(p_k, boundary_check=(0, 1)).to(tl.float32)
        b_v = tl.load(p_v, boundary_check=(0, 1)).to(tl.float32)
        b_o = tl.dot(b_q, b_h)
        b_s = tl.where(m_s, tl.dot(b_q, b_k), 0.0)
        if USE_G:
            b_g = tl.load(g + i_bh * T + i_t * BT + o_i, mask=i_t * BT + o_i < T, other=0.0)
            b_s = b_s * tl.exp(b_g[:, None] - b_g[None, :])
            b_h = b_h * tl.exp(tl.max(b_g, axis=0))
        b_o += tl.dot(b_s, b_v)
{stages}        tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))
        b_h += tl.dot(b_k, b_v)
    if STORE_FINAL_STATE:
        p_ht = tl.make_block_ptr(ht + i_bh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
        tl.store(p_ht, b_h.to(p_ht.dtype.element_ty), boundary_check=(0, 1))
""",
    """
@triton.heuristics({{
    "USE_INITIAL_STATE": lambda args: args["h0"] is not None,
    "STORE_FINAL_STATE": lambda args: args["ht"] is not None,
    "USE_G": lambda args: args["g"] is not None,
}})
@triton.autotune(configs=[triton.Config({{"BV": 32}}, num_warps=4), triton.Config({{"BV": 64}}, num_warps=8)],
                 key=["K", "V", "BT"])
@triton.jit
def chunk_state_{k}(k_ptr, v_ptr, g, h0, ht, h_ptr, T, K, V, BT: tl.constexpr,
                  BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, USE_INITIAL_STATE: tl.constexpr,
                  STORE_FINAL_STATE: tl.constexpr):
    i_k, i_v, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    NT = tl.cdiv(T, BT)
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        p_h0 = tl.make_block_ptr(h0 + i_bh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
        b_h += tl.load(p_h0, boundary_check=(0, 1)).to(tl.float32)
    for i_t in range(NT):
        p_k = tl.make_block_ptr(k_ptr + i_bh * T * K, (K, T), (1, K), (i_k * BK, i_t * BT), (BK, BT), (0, 1))
        p_v = tl.make_block_ptr(v_ptr + i_bh * T * V, (T, V), (V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
        p_h = tl.make_block_ptr(h_ptr + (i_bh * NT + i_t) * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV),
                                (1, 0))
        tl.store(p_h, b_h.to(p_h.dtype.element_ty), boundary_check=(0, 1))
        b_k = tl.load(p_k, boundary_check=(0, 1))
        b_v = tl.load(p_v, boundary_check=(0, 1))
        if USE_G:
            o_t = i_t * BT + tl.arange(0, BT)
            b_g = tl.load(g + i_bh * T + o_t, mask=o_t < T, other=0.0)
            b_h *= tl.exp(tl.max(b_g, axis=0))
            b_v = (b_v * tl.exp(b_g[:, None])).to(b_v.dtype)
        b_h += tl.dot(b_k, b_v)
    if STORE_FINAL_STATE:
        p_ht = tl.make_block_ptr(ht + i_bh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
        tl.store(p_ht, b_h.to(p_ht.dtype.element_ty), boundary_check=(0, 1))
""",
    """
@triton.heuristics({{"HAS_BIAS": lambda args: args["b"] is not None,
                    "HAS_RESIDUAL": lambda args: args["r"] is not None}})
@triton.jit
def layer_norm_fwd_{k}(x_ptr, y_ptr, w_ptr, b, r, mean_ptr, rstd_ptr, stride_x, stride_y, N, eps,
                     IS_RMS_NORM: tl.constexpr, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr,
                     HAS_RESIDUAL: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x += tl.load(r + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if not IS_RMS_NORM:
        mean = tl.sum(x, axis=0) / N
        tl.store(mean_ptr + row, mean)
        xbar = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xbar * xbar, axis=0) / N
    else:
        xbar = tl.where(mask, x, 0.0)
        var = tl.sum(xbar * xbar, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    x_hat = (x - mean) * rstd if not IS_RMS_NORM else x * rstd
    y = x_hat * w
    if HAS_BIAS:
        y += tl.load(b + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, y, mask=mask)
""",
]

# A stage of `fused_chunk`: kernels of several lengths (real ones are 70 lines on the median).
FUSED_STAGE = "        b_o = b_o * {a} + tl.dot(tl.where(m_s, tl.dot(b_q, b_k) * {b}, 0.0), b_v)\n"

# Host code of a Triton module: launches give the kernels' constexpr values (as real libraries do).
TRITON_HOST = """

def launch_{k0}(x, y, w, n, mode):
    rms_norm_{k1}[(n,)](x, w, y, n, x.stride(0), y.stride(0), 1e-6, BLOCK_N=1024)
    silu_{k3}[(triton.cdiv(n, 256),)](x, y, n, BLOCK_SIZE=256)
    act_{k4}[(triton.cdiv(n, {b}),)](x, y, n, MODE=mode)
    scale_{k5}[(triton.cdiv(n, 256),)](x, y, 2.0, n, BLOCK_SIZE=256)
    matmul_{k6}[(1, 1)](x, w, y, n, n, n, n, 1, n, 1, n, 1, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    row_sum_{k7}[(n,)](x, y, n, n, BLOCK_N=512)
    gelu_tanh_{k8}[(triton.cdiv(n, 256),)](x, y, n, BLOCK_SIZE=256)
"""

CUTILE_HEAD = """
try:
    import cuda.tile as ct
except ImportError:
    ct = None

from .. import ct_helpers
from ..ct_helpers import load_f32
from ...consts import BLOCK

ConstInt = ct.Constant[int]
"""

# cuTile kernels, `{k}` the kernel's number in the package.
CUTILE_KERNELS = [
    """
@ct.kernel
def scale_{k}(x, y, TILE: ConstInt):
    t = ct_helpers.scaled_load(x, ct.bid(0), TILE) + BLOCK
    ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, y.dtype))
""",
    """
@ct.kernel
def add_{k}(a, b, c, TILE: ConstInt):
    i = ct.bid(0)
    s = load_f32(a, i, TILE) + load_f32(b, i, TILE)
    ct.store(c, index=(i,), tile=ct.astype(s, c.dtype))
""",
    """
@ct.kernel(occupancy=2)
def rms_norm_{k}(x, w, y, eps, BLOCK_M: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    num_blocks = ct.num_blocks(0)
    n_row_blocks = ct.num_tiles(x, 0, shape=(BLOCK_M, TILE))
    n_cols = x.shape[1]
    wt = ct.astype(ct.load(w, index=(0,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO), ct.float32)
    for rb in range(bid, n_row_blocks, num_blocks):
        t = ct.astype(ct.load(x, index=(rb, 0), shape=(BLOCK_M, TILE), padding_mode=ct.PaddingMode.ZERO),
                      ct.float32)
        inv_rms = ct.rsqrt(ct.sum(t * t, 1, keepdims=True) / n_cols + eps)
        ct.store(y, index=(rb, 0), tile=ct.astype(t * inv_rms * wt, y.dtype))
""",
    """
@ct.kernel
def relu_{k}(x, y, TILE: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,))
    ct.store(y, index=(i,), tile=ct.maximum(t, 0))
""",
    """
@ct.kernel
def matmul_{k}(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for kk in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        ta = ct.load(a, index=(bm, kk), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(kk, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))
""",
]


def triton_module(first: int, count: int) -> str:
    """A Triton module with kernels numbered `first` ... `first + count - 1` (the templates in turn)."""
    parts = [TRITON_HEAD.format(top=NAME)]
    for k in range(first, first + count):
        stages = "".join(FUSED_STAGE.format(a=0.5 + j / 8, b=0.25 / (j + 1)) for j in range(1 + k % 6))
        parts.append(TRITON_KERNELS[k % len(TRITON_KERNELS)].format(k=k, b=(64, 128, 256)[k % 3], stages=stages))
    if count >= len(TRITON_KERNELS) and first % len(TRITON_KERNELS) == 0:
        parts.append(TRITON_HOST.format(b=(64, 128, 256)[(first + 4) % 3],
                                        **{f"k{i}": first + i for i in range(len(TRITON_KERNELS))}))
    return "\n".join(parts)


def cutile_module(first: int, count: int) -> str:
    parts = [CUTILE_HEAD]
    for k in range(first, first + count):
        parts.append(CUTILE_KERNELS[k % len(CUTILE_KERNELS)].format(k=k))
    return "\n".join(parts)


def files(kernels: int = 1000) -> dict[str, str]:
    """Relative path -> source of every module of a package with `kernels` kernels (about)."""
    out = {rel: textwrap.dedent(text).lstrip("\n") for rel, text in SHARED.items()}
    k = m = 0
    groups: set[int] = set()
    while k < kernels:
        group = m // MODULES_PER_GROUP
        groups.add(group)
        count = min(PER_MODULE, kernels - k)
        if m % CUTILE_EVERY == CUTILE_EVERY - 1:
            rel, text = f"ops/group_{group}/ct_ops_{m}.py", cutile_module(k, count)
        else:
            rel, text = f"ops/group_{group}/ops_{m}.py", triton_module(k, count)
        out[rel] = text.lstrip("\n")
        k, m = k + count, m + 1
    for group in groups:
        out[f"ops/group_{group}/__init__.py"] = ""
    return out


def write(parent: Path, kernels: int = 1000) -> Path:
    """The package as the folder `parent/synlib` (created; files already there are replaced)."""
    root = parent / NAME
    for rel, text in files(kernels).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the folder to write the package `synlib` into")
    ap.add_argument("--kernels", type=int, default=1000)
    args = ap.parse_args(argv)
    print(write(args.out, args.kernels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
