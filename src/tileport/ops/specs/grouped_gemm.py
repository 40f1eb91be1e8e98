"""grouped_gemm: G matrix products of different sizes in one persistent launch, f16 / bf16, f32 accumulation.

Inputs (a, b, sizes): sizes [G, 3] int32 (M_g, N_g, K_g) in device memory; a [RA, KA] and b [RB, NB] hold
the problems packed by rows, each problem's rows starting at a multiple of ROW_ALIGN (8): A_g in a's rows
ra_g.., columns 0..K_g; B_g in b's rows rb_g.., columns 0..N_g (kernels/grouped_gemm.py). Output c [RA, NB]:
A_g @ B_g in a's rows of problem g, zeros elsewhere. The data outside the problems in a and b is random in
the test inputs (the kernel must not read it).

Why a table and packed arrays, not a tuple of arrays: cuTile Python takes a list of arrays as a kernel
parameter, but cutile 0.5.0 has no tensor-array parameter (its launcher passes one tensor per parameter;
`load_tensor` builds a view from a device table of pointers, which a launcher would have to fill), and
the translator refuses the list parameter with a located diagnostic. `Array.slice` views of packed
arrays express the same problems with what both sides already carry, and keep view (TMA-capable) loads.

Shapes (G, M, N, K): problem g is (M, N, K) scaled by one of 1/3, 2/3, 3/3 per dimension, in turn.
Tolerance: matmul's (f32 accumulation, one rounding).
"""

from __future__ import annotations

from ..spec import Capture, Launch, OpSpec
from ._common import ELEMENT_SIZE, TOL_MATMUL, cdiv, generator, next_pow2, num_sms, randn, torch

DTYPES = ("float16", "bfloat16")
ROW_ALIGN = 8  # kernels/grouped_gemm.py's ROW_ALIGN
TILES = (128, 256, 64)  # (TILE_M, TILE_N, TILE_K): matmul's best one-CTA tile (num_worker_warps=8)
MAX_G = 1024
SHAPES = [(1, 1, 1, 1), (3, 17, 33, 65), (4, 300, 200, 100), (7, 1000, 520, 300), (16, 512, 768, 1024)]
BENCH_SHAPES = [(8, 4096, 4096, 4096), (64, 1024, 1024, 1024), (16, 2048, 7168, 2048)]
TOLERANCES = {dt: TOL_MATMUL[dt] for dt in DTYPES}


def problem_sizes(shape) -> list[tuple[int, int, int]]:
    g, m, n, k = shape
    return [tuple(max(1, d * ((i + j) % 3 + 1) // 3) for j, d in enumerate((m, n, k))) for i in range(g)]


def packed_rows(extents) -> list[int]:
    """The first row of each problem: the problems before it, each rounded up to ROW_ALIGN rows."""
    rows, at = [], 0
    for e in extents:
        rows.append(at)
        at += cdiv(e, ROW_ALIGN) * ROW_ALIGN
    return rows + [at]


def make_inputs(shape, dtype, device, seed=0):
    t = torch()
    probs = problem_sizes(shape)
    ms, ns, ks = zip(*probs)
    g = generator(device, seed)
    s = float(max(ks)) ** -0.25  # so that the outputs are O(1)
    a = randn((packed_rows(ms)[-1], max(ks)), dtype, device, g, scale=s)
    b = randn((packed_rows(ks)[-1], max(ns)), dtype, device, g, scale=s)
    return a, b, t.tensor(probs, dtype=t.int32).to(device)


def reference(a, b, sizes):
    t = torch()
    probs = [tuple(p) for p in sizes.tolist()]
    ms, ns, ks = zip(*probs)
    ra, rb = packed_rows(ms), packed_rows(ks)
    c = t.zeros((a.shape[0], b.shape[1]), dtype=t.float32, device=a.device)
    for i, (m, n, k) in enumerate(probs):
        c[ra[i]:ra[i] + m, :n] = a[ra[i]:ra[i] + m, :k].float() @ b[rb[i]:rb[i] + k, :n].float()
    return c.to(a.dtype)


def allocate(a, b, sizes):
    return torch().empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def constants(g: int) -> dict:
    tm, tn, tk = TILES
    return {"G_PAD": next_pow2(g), "TILE_M": tm, "TILE_N": tn, "TILE_K": tk}


def plan(a, b, sizes, outs):
    t = torch()
    if a.dim() != 2 or b.dim() != 2 or a.dtype != b.dtype or a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("grouped_gemm takes packed a [RA, KA] and b [RB, NB] of one dtype (unit last stride)")
    if sizes.dim() != 2 or sizes.shape[1] != 3 or sizes.dtype != t.int32 or not 1 <= sizes.shape[0] <= MAX_G:
        raise ValueError(f"grouped_gemm takes sizes [G, 3] int32 (M, N, K per problem), 1 <= G <= {MAX_G}")
    # One resident wave: blocks past the problems' tiles find no work (the tile count is in device memory).
    return [Launch("grouped_gemm_kernel", (num_sms(a.device), 1, 1),
                   {"a": a, "b": b, "c": outs, "sizes": sizes, **constants(sizes.shape[0])})]


def grouped_flops(shape) -> int:
    return sum(2 * m * n * k for m, n, k in problem_sizes(shape))


def grouped_bytes(shape, dt) -> int:
    return sum((m * k + k * n + m * n) * ELEMENT_SIZE[dt] for m, n, k in problem_sizes(shape))


SPEC = OpSpec(
    name="grouped_gemm",
    kernel_file="grouped_gemm.py",
    kernels=["grouped_gemm_kernel"],
    dtypes=list(DTYPES),
    make_inputs=make_inputs,
    reference=reference,
    allocate=allocate,
    plan=plan,
    shapes=SHAPES,
    bench_shapes=BENCH_SHAPES,
    tolerances=TOLERANCES,
    captures=[Capture("grouped_gemm_kernel", {"a": (dt, 2), "b": (dt, 2), "c": (dt, 2), "sizes": ("int32", 2)},
                      constants=constants(BENCH_SHAPES[0][0])) for dt in DTYPES],
    bytes=grouped_bytes,
    flops=grouped_flops,
    kind="compute",
)
