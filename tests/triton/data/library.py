"""Small Triton kernels written for the frontend's tests: constructs libraries use (kernels defined by calling
triton.jit, constexprs with no values, helpers that return early, ...). Built by test_build.py."""

import triton
import triton.language as tl


def _scaled_norm(x_ptr, y_ptr, n, eps: tl.constexpr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if MODE == 2:
        x = x * MODE
    elif not MODE:
        x = -x
    y = x / (tl.abs(x) + eps)
    tl.store(y_ptr + offs, y, mask=offs < n)


scaled_norm_kernel = triton.jit(_scaled_norm)


@triton.jit
def _activation(x, n, LINEAR: tl.constexpr):
    if LINEAR:
        return x
    if n > 4:
        return x * 2.0
    y = x + 1.0
    return y * y


@triton.jit
def padded_rows_kernel(x_ptr, y_ptr, n, K: tl.constexpr, K_POW2: tl.constexpr, LINEAR: tl.constexpr):
    IS_POW2: tl.constexpr = K == K_POW2
    offs = tl.program_id(0) * K + tl.arange(0, K_POW2)
    if IS_POW2:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=tl.arange(0, K_POW2) < K, other=0.0)
    tl.store(y_ptr + offs, _activation(x, n, LINEAR), mask=tl.arange(0, K_POW2) < K)


@triton.jit
def second_state_kernel(x_ptr, y_ptr, T, K: tl.constexpr, BK: tl.constexpr):
    offs = tl.arange(0, BK)
    if K > 64:
        b_h2 = tl.zeros([BK], dtype=tl.float32)
    for t in range(T):
        if K > 64:
            b_h2 += tl.load(x_ptr + t * BK + offs)
    if K > 64:
        tl.store(y_ptr + offs, b_h2)


@triton.jit
def unpack_nibbles_kernel(w_ptr, y_ptr, n, BLOCK: tl.constexpr, BITS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    w = tl.load(w_ptr + offs, mask=offs < n, other=0)
    lo = (w >> 4) & 0xF
    hi = (w.to(tl.uint32) >> 28).to(tl.int32)
    keep = tl.full([BLOCK], 1, tl.int1)
    y = tl.where(keep, lo + (hi << 2) + w ** 3 + 2 ** BITS, w)
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def sign_bits_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    y = (bits & 0x7FFFFFFF).to(tl.float32, bitcast=True) * tl.math.rsqrt(2.0) + tl.sqrt(2.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def mixed_dot_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    acc16 = tl.zeros([BM, BN], dtype=tl.float16)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        acc16 += tl.dot(a, b, out_dtype=tl.float16)
        acc = tl.dot(a.to(tl.float8e4nv), b.to(tl.float8e4nv), acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16) + acc16)


@triton.jit
def abs_bits_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if x.dtype == tl.float16:
        y = (x.to(tl.int16, bitcast=True) & 0x7FFF).to(tl.float16, bitcast=True)
    else:
        y = tl.abs(x)
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def paged_bytes_kernel(pos_ptr, buf_ptr, out_ptr, PAGE: tl.constexpr, scale_off: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    pos = tl.load(pos_ptr + row)
    src = (pos // PAGE) * BLOCK + (pos % PAGE) + scale_off + tl.arange(0, BLOCK)
    x = tl.load(buf_ptr + src)
    tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), (x % 2.5).to(tl.uint8))


@triton.jit
def pack_bits_kernel(w_ptr, out_ptr, W_nbits: tl.constexpr, out_dtype: tl.constexpr, PER: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, PER)
    values = tl.load(w_ptr + pid * PER + cols).to(out_dtype)
    tl.store(out_ptr + pid, tl.sum(values << (cols * W_nbits).to(out_dtype), axis=0))


@triton.jit
def flip_bytes_kernel(x_ptr, y_ptr, n_bytes, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    b = tl.load(x_ptr.to(tl.pointer_type(tl.uint8)) + offs, mask=offs < n_bytes, other=0)
    tl.store(y_ptr.to(tl.pointer_type(tl.uint8)) + offs, b ^ 0xFF, mask=offs < n_bytes)


@triton.jit
def masked_last_kernel(a_ptr, c_ptr, eta, N, T, H, B: tl.constexpr, DOT_PRECISION: tl.constexpr,
                       USE_G: tl.constexpr, USE_G_GAMMA: tl.constexpr):
    i_t = tl.program_id(0)
    o = tl.arange(0, B)
    p_a = tl.make_block_ptr(a_ptr, (N, N), (N, 1), (0, 0), (B, B), (1, 0))
    p_c = tl.make_block_ptr(c_ptr, (N, N), (N, 1), (0, 0), (B, B), (1, 0))
    a = tl.load(p_a, boundary_check=(0, 1))
    m = (o[:, None] >= o[None, :]) * (o[None, :] < N)
    c = tl.dot(a, a, input_precision=DOT_PRECISION) * m
    if USE_G or USE_G_GAMMA:
        p_last = eta + (T - 1) * H if i_t == tl.cdiv(T, B) - 1 else eta + (i_t * B + B - 1) * H
        c = c * tl.load(p_last)
    tl.store(p_c, c.to(p_c.dtype.element_ty), boundary_check=(0, 1))
