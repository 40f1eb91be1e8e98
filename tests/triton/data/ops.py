"""Triton kernels of common operators, written for the frontend's tests (one construct family each)."""

import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import tanh
except ModuleNotFoundError:
    from triton.language.extra.cuda.libdevice import tanh


@triton.jit
def gelu_libdevice_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + tanh(inner))
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def silu_relu_kernel(x_ptr, silu_ptr, relu_ptr, leaky_ptr, n, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(silu_ptr + offs, x * tl.sigmoid(x), mask=mask)
    tl.store(relu_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    tl.store(leaky_ptr + offs, tl.where(x > 0, x, x * slope), mask=mask)


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += a
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        d = tl.where(cols < n_cols, a - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        a = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (a - mean) * rstd * w + b
        tl.store(y_ptr + cols, y, mask=mask)


@triton.jit
def rms_norm_row_kernel(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * y_row_stride + cols, (x * rstd) * w, mask=mask)


@triton.jit
def rope_heads_kernel(q_ptr, cos_ptr, sin_ptr, q_row_stride, cos_row_stride, seq_len, n_heads,
                HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    pos = row % seq_len
    half = tl.arange(0, HEAD_DIM // 2)
    heads = tl.arange(0, BLOCK_H)
    hmask = heads[:, None] < n_heads
    cos = tl.load(cos_ptr + pos * cos_row_stride + half)
    sin = tl.load(sin_ptr + pos * cos_row_stride + half)
    base = q_ptr + row * q_row_stride + heads[:, None] * HEAD_DIM
    x1 = tl.load(base + half[None, :], mask=hmask, other=0.0)
    x2 = tl.load(base + HEAD_DIM // 2 + half[None, :], mask=hmask, other=0.0)
    tl.store(base + half[None, :], x1 * cos - x2 * sin, mask=hmask)
    tl.store(base + HEAD_DIM // 2 + half[None, :], x2 * cos + x1 * sin, mask=hmask)


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4),
                          triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8)],
                 key=["M", "N", "K"])
@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                          stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_m[:, None] + stride_cn * offs_n[None, :]
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def block_ptr_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                            stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K),
                                (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N),
                                (1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, stride_cn), (pid_m * BLOCK_M, pid_n * BLOCK_N),
                                (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@triton.jit
def mha_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh,
                         stride_kn, stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, n_heads, seq_len,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // n_heads
    off_h = off_hz % n_heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :], mask=cols[:, None] < seq_len, other=0.0)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :], mask=cols[:, None] < seq_len, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        qk = tl.where(cols[None, :] < seq_len, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seq_len)


@triton.jit
def cumsum_argmax_kernel(x_ptr, cs_ptr, am_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(am_ptr + row, tl.argmax(x, axis=0))
    z = tl.where(mask, x, 0.0)
    tl.store(cs_ptr + row * stride + cols, tl.cumsum(z, axis=0), mask=mask)


@triton.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, EVEN_N: tl.constexpr, REPEAT: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if EVEN_N:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    for _ in tl.static_range(REPEAT):
        x = x * alpha
    if pid == 0:
        x = x + 1.0
    if EVEN_N:
        tl.store(y_ptr + offs, x)
    else:
        tl.store(y_ptr + offs, x, mask=offs < n)


@triton.jit
def tf32_dot_kernel(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr):
    """f32 dots as Triton computes them: tf32 inputs by default, three tf32 products for tf32x3."""
    offs = tl.arange(0, BLOCK)
    tile = offs[:, None] * BLOCK + offs[None, :]
    a = tl.load(a_ptr + tile).to(tl.float32)
    b = tl.load(b_ptr + tile).to(tl.float32)
    tl.store(c_ptr + tile, tl.dot(a, b))
    tl.store(d_ptr + tile, tl.dot(a, b, input_precision="tf32x3") + tl.dot(a, b, allow_tf32=False))
