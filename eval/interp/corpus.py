"""Small problems for the corpus kernels: the arguments, grid and outputs of one run per capture.

A capture fixes the kernel's dtypes and constants (its tile sizes); the problem picks small array
shapes around them (a few tile blocks, a ragged edge in every tiled dimension) so that the
interpreter runs each kernel in a fraction of a second. Float inputs are standard normal draws
rounded to the array's dtype; outputs start as NaN, so an element a kernel never writes is visible.
Where the math is short, a NumPy reference (computed in float64) comes with the problem.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Callable

import numpy as np

from tileport.ops.spec import KERNELS_DIR, Capture
from tileport.ops.specs import dropout
from tileport.tileir.interp.differential import Problem
from tileport.tileir.interp.executor import Array, Scalar
from tileport.tileir.interp.values import to_elem
from tileport.tileir.types import ScalarType

DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "f8E4M3FN", "int32": "i32",
          "int64": "i64", "float64": "f64"}
# Kernels whose outputs are a copy or one correctly rounded op of their inputs: compared exactly.
EXACT = frozenset({"vector_add_kernel", "relu_kernel", "splitk_reduce_kernel", "dropout_fwd_kernel",
                   "dropout_bwd_kernel", "moe_align_count_kernel", "moe_align_offsets_kernel",
                   "moe_align_scatter_kernel"})


def kernel_parameters(kernel_file: Path, kernel: str) -> list[str]:
    """Parameter names of a kernel, read from its file with `ast` (the file is not executed)."""
    tree = ast.parse(kernel_file.read_text(), str(kernel_file))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            return [a.arg for a in node.args.args]
    raise LookupError(f"{kernel_file} has no function {kernel}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Builder:
    """Arrays for one capture: inputs drawn from `rng`, outputs filled with NaN."""

    def __init__(self, capture: Capture, seed: int):
        self.capture = capture
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, Array] = {}

    def elem(self, name: str) -> str:
        return DTYPES[self.capture.arrays[name][0]]

    def input(self, name: str, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        elem = self.elem(name)
        data = to_elem(self.rng.standard_normal(shape) * scale, ScalarType(elem))
        self.arrays[name] = Array(data, elem)
        return data.astype(np.float64)

    def output(self, name: str, shape: tuple[int, ...]) -> None:
        elem = self.elem(name)
        self.arrays[name] = Array(to_elem(np.full(shape, np.nan), ScalarType(elem)), elem)


def _elementwise(inputs: dict[str, float], output: str, fn: Callable) -> Callable:
    """`inputs`: parameter -> scale of its random data (as in the op spec)."""
    def build(b: _Builder, c: dict) -> tuple:
        n = 2 * c["TILE"] + 452  # three blocks, the last one ragged
        xs = [b.input(name, (n,), scale) for name, scale in inputs.items()]
        b.output(output, (n,))
        return (_cdiv(n, c["TILE"]), 1, 1), [output], {output: fn(*xs)}
    return build


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _silu(x):
    return x / (1 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_problem(cols: Callable[[dict], int]) -> Callable:
    def build(b: _Builder, c: dict) -> tuple:
        m, n = 5, cols(c)
        x = b.input("x", (m, n), 4.0)
        b.output("y", (m, n))
        return (2, 1, 1), ["y"], {"y": _softmax(x)}
    return build


def _softmax_row_partials(x: np.ndarray, tile: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (row, column tile): the tile's max and sum(exp(x - max)) (softmax split pass 1)."""
    splits = _cdiv(x.shape[1], tile)
    pad = np.full((x.shape[0], splits * tile), -np.inf)
    pad[:, :x.shape[1]] = x
    tiles = pad.reshape(x.shape[0], splits, tile)
    tile_max = tiles.max(axis=2)
    return tile_max, np.exp(tiles - tile_max[..., None]).sum(axis=2)


def _softmax_split(write: bool) -> Callable:
    """3 rows of two full column tiles and a ragged one: the stats pass (partials out) or the write
    pass (f32 partials of the same rows in, y out)."""
    def build(b: _Builder, c: dict) -> tuple:
        m, n = 3, 2 * c["TILE"] + 904
        x = b.input("x", (m, n), 4.0)
        tile_max, tile_sum = _softmax_row_partials(x, c["TILE"])
        grid = (tile_max.shape[1], m, 1)
        if not write:
            b.output("part_max", tile_max.shape)
            b.output("part_sum", tile_sum.shape)
            return grid, ["part_max", "part_sum"], {"part_max": tile_max, "part_sum": tile_sum}
        b.arrays["part_max"] = Array(tile_max.astype(np.float32), "f32")
        b.arrays["part_sum"] = Array(tile_sum.astype(np.float32), "f32")
        b.output("y", (m, n))
        return grid, ["y"], {"y": _softmax(x)}
    return build


def _silu_and_mul(b: _Builder, c: dict) -> tuple:
    m, n = 3, c["BLOCK_N"] + 476
    x = b.input("x", (2 * m, n))  # the free [2M, N] view of the [M, 2N] input
    b.output("y", (m, n))
    return (_cdiv(n, c["BLOCK_N"]), _cdiv(m, c["BLOCK_M"]), 1), ["y"], \
        {"y": _silu(x[0::2]) * x[1::2]}


def _rms_norm(m: int, n: int) -> Callable:
    def build(b: _Builder, c: dict) -> tuple:
        x, w = b.input("x", (m, n)), b.input("w", (n,))
        b.output("y", (m, n))
        b.arrays["eps"] = Scalar(1e-6, "f32")
        y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w
        return (2, 1, 1), ["y"], {"y": y}
    return build


def _layer_norm(m: int, n: int) -> Callable:
    def build(b: _Builder, c: dict) -> tuple:
        x, w, bias = b.input("x", (m, n)), b.input("w", (n,)), b.input("b", (n,))
        for name, shape in (("y", (m, n)), ("mean", (m,)), ("rstd", (m,))):
            b.output(name, shape)
        b.arrays["eps"] = Scalar(1e-5, "f32")
        mean = x.mean(axis=1)
        rstd = 1 / np.sqrt(x.var(axis=1) + 1e-5)
        y = (x - mean[:, None]) * rstd[:, None] * w + bias
        return (2, 1, 1), ["y", "mean", "rstd"], {"y": y, "mean": mean, "rstd": rstd}
    return build


def _rope(b: _Builder, c: dict) -> tuple:
    batch, seq, heads, half = 2, 3, c["BLOCK_H"] + 8, c["HALF_TILE"] - 16
    x = b.input("x", (batch, seq, heads, 2, half))
    cos, sin = b.input("cos", (seq, half)), b.input("sin", (seq, half))
    b.output("y", x.shape)
    cc, ss = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[:, :, :, 0], x[:, :, :, 1]
    y = np.stack([x1 * cc - x2 * ss, x2 * cc + x1 * ss], axis=3)
    grid = (_cdiv(seq, c["BLOCK_S"]), _cdiv(heads, c["BLOCK_H"]), batch)
    return grid, ["y"], {"y": y}


def _rope_rows(b: _Builder, c: dict) -> tuple:
    """_rope's problem on the [B * S, H, 2, D/2] view (S a multiple of BLOCK_S, as the plan needs)."""
    batch, seq, heads, half = 2, 3 * c["BLOCK_S"], c["BLOCK_H"] + 8, c["HALF_TILE"] - 16
    x = b.input("x", (batch * seq, heads, 2, half))
    cos, sin = b.input("cos", (seq, half)), b.input("sin", (seq, half))
    b.output("y", x.shape)
    cc, ss = np.tile(cos, (batch, 1))[:, None, :], np.tile(sin, (batch, 1))[:, None, :]
    x1, x2 = x[:, :, 0], x[:, :, 1]
    y = np.stack([x1 * cc - x2 * ss, x2 * cc + x1 * ss], axis=2)
    return (_cdiv(batch * seq, c["BLOCK_S"]), _cdiv(heads, c["BLOCK_H"]), 1), ["y"], {"y": y}


def _rope_rows_persistent(b: _Builder, c: dict) -> tuple:
    """_rope_rows with 2 blocks along the rows: each loops over 3 of the 6 row blocks."""
    (_, head_blocks, _), outputs, reference = _rope_rows(b, c)
    return (2, head_blocks, 1), outputs, reference


def _matmul(b: _Builder, c: dict) -> tuple:
    m, n, k = c["TILE_M"] + 44, c["TILE_N"] + 4, c["TILE_K"] + 36
    a, bb = b.input("a", (m, k), 0.3), b.input("b", (k, n), 0.3)
    b.output("c", (m, n))
    return (3, 1, 1), ["c"], {"c": a @ bb}


def _bmm(b: _Builder, c: dict) -> tuple:
    batch, m, n, k = 2, c["TILE_M"] + 4, 100, c["TILE_K"] + 6
    a, bb = b.input("a", (batch, m, k), 0.3), b.input("b", (batch, k, n), 0.3)
    b.output("c", (batch, m, n))
    return (3, 1, 1), ["c"], {"c": a @ bb}


def _matmul_splitk(b: _Builder, c: dict) -> tuple:
    m, n, k_tiles, per_split = c["TILE_M"] + 72, c["TILE_N"] + 22, 5, 2
    k = k_tiles * c["TILE_K"] - 20
    splits = _cdiv(k_tiles, per_split)
    a, bb = b.input("a", (m, k), 0.3), b.input("b", (k, n), 0.3)
    b.output("ws", (splits, m, n))
    b.arrays["k_tiles_per_split"] = Scalar(per_split, "i32")
    tiles = _cdiv(m, c["TILE_M"]) * _cdiv(n, c["TILE_N"])
    parts = [a[:, s * per_split * c["TILE_K"]:(s + 1) * per_split * c["TILE_K"]]
             @ bb[s * per_split * c["TILE_K"]:(s + 1) * per_split * c["TILE_K"]] for s in range(splits)]
    return (tiles, splits, 1), ["ws"], {"ws": np.stack(parts)}


def _splitk_reduce(b: _Builder, c: dict) -> tuple:
    splits, m, n = 3, c["TILE_M"] + 36, c["TILE_N"] + 22
    ws = b.input("ws", (splits, m, n))
    b.output("c", (m, n))
    return (_cdiv(m, c["TILE_M"]), _cdiv(n, c["TILE_N"]), 1), ["c"], {"c": ws.sum(axis=0)}


def _attention_reference(q, k, v, lens, causal=False, window=0, sinks=None, softcap=0.0):
    """float64 attention per (batch, query head) over the first lens[b] keys; padded query rows
    give 0 and lse -inf. q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D]; queries sit at the end of the keys
    (query i is key position i + Sk_b - Sq_b when lens are (q lens, k lens) pairs)."""
    batch, hq, sq, d = q.shape
    group = hq // k.shape[1]
    o = np.zeros(q.shape)
    lse = np.full((batch, hq, sq), -np.inf)
    for b in range(batch):
        n_q, n_k = lens[b]
        qpos = np.arange(n_q)[:, None] + (n_k - n_q)
        kpos = np.arange(n_k)[None, :]
        keep = np.ones((n_q, n_k), bool)
        if causal:
            keep &= kpos <= qpos
        if window:
            keep &= qpos - kpos < window
        for h in range(hq):
            s = q[b, h, :n_q] @ k[b, h // group, :n_k].T / math.sqrt(d)
            if softcap:
                s = softcap * np.tanh(s / softcap)
            s = np.where(keep, s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            if sinks is not None:
                m = np.maximum(m, sinks[h])
            e = np.exp(s - m)
            den = e.sum(axis=1, keepdims=True) + (np.exp(sinks[h] - m) if sinks is not None else 0)
            o[b, h, :n_q] = e @ v[b, h // group, :n_k] / den
            lse[b, h, :n_q] = (m + np.log(den))[:, 0]
    return o, lse


def _fmha_fwd(b: _Builder, c: dict) -> tuple:
    """Two ragged sequences (a full one of BLOCK_M + BLOCK_N / 2 + 13 positions, a shorter one
    ending inside a key tile), 2 kv heads with 2 query heads each; a window shorter than a key
    tile when sliding (rows whose first key tile holds none of their window)."""
    batch, hkv, group, d = 2, 2, 2, c["HEAD_DIM"]
    s = c["BLOCK_M"] + c["BLOCK_N"] // 2 + 13
    lens = [s, c["BLOCK_N"] + 7]
    window = c["BLOCK_N"] // 2 + 3 if c["SLIDING"] else 0
    cap = 5.0 if c["SOFTCAP"] else 0.0
    q = b.input("q", (batch, hkv * group, s, d))
    k, v = b.input("k", (batch, hkv, s, d)), b.input("v", (batch, hkv, s, d))
    sinks = b.input("sinks", (hkv * group,))
    b.arrays["seq_lens"] = Array(np.array(lens, np.int32), "i32")
    for name, shape in (("o", q.shape), ("lse", (batch, hkv * group, s))):
        b.output(name, shape)
    scale = 1 / math.sqrt(d)
    # log2(e) is folded into qk_scale, or into the cap the kernel multiplies the tanh with
    b.arrays["qk_scale"] = Scalar(scale / cap if cap else scale * math.log2(math.e), "f32")
    b.arrays["softcap"] = Scalar(cap, "f32")
    b.arrays["window"] = Scalar(window, "i32")
    o, lse = _attention_reference(q, k, v, [(n, n) for n in lens], c["CAUSAL"], window,
                                  sinks if c["HAS_SINKS"] else None, cap)
    return (_cdiv(s, c["BLOCK_M"]), batch * hkv * group, 1), ["o", "lse"], {"o": o, "lse": lse}


def _flash_decode_partial(b: _Builder, c: dict) -> tuple:
    """3 sequences (one a key tile + 5 long, one 1 long, one ending inside a tile), 2 kv heads
    with 4 query heads each, 3 splits of 2 key tiles: the short ones leave empty splits (FINAL:
    one split over every tile, its lse in natural-log units). PAGED stores the cache as shuffled
    pages of one key tile."""
    batch, hkv, group, d, bn = 3, 2, 4, c["HEAD_DIM"], c["BLOCK_N"]
    per_split, splits = 2, 3
    s = splits * per_split * bn - bn // 2
    if c.get("FINAL"):
        per_split, splits = _cdiv(s, bn), 1
    lens = [bn + 5, 1, s]
    window = bn // 2 + 3 if c["SLIDING"] else 0
    cap = 5.0 if c["SOFTCAP"] else 0.0
    q = b.input("q", (batch, hkv, group, d))
    k, v = b.input("k", (batch, hkv, s, d)), b.input("v", (batch, hkv, s, d))
    sinks = b.input("sinks", (hkv * group,))
    if c["PAGED"]:
        pages = _cdiv(s, bn)
        order = b.rng.permutation(batch * pages)  # page of (sequence, tile) t is order[t]
        pool = lambda x: _to_pages(x, order, bn)  # noqa: E731
        for name, x in (("k", k), ("v", v)):
            b.arrays[name] = Array(to_elem(pool(x), ScalarType(b.elem(name))), b.elem(name))
        b.arrays["block_table"] = Array(order.reshape(batch, pages).astype(np.int32), "i32")
    else:
        b.arrays["block_table"] = Array(np.zeros((1, 1), np.int32), "i32")
    b.arrays["kv_lens"] = Array(np.array(lens, np.int32), "i32")
    b.output("o_part", (batch, hkv, group, splits, d))
    b.output("lse_part", (batch, hkv, group, splits))
    scale = 1 / math.sqrt(d)
    b.arrays["qk_scale"] = Scalar(scale / cap if cap else scale * math.log2(math.e), "f32")
    b.arrays["softcap"] = Scalar(cap, "f32")
    b.arrays["window"] = Scalar(window, "i32")
    b.arrays["tiles_per_split"] = Scalar(per_split, "i32")
    o, lse = _split_partials(q, k, v, lens, per_split * bn, splits, window,
                             sinks if c["HAS_SINKS"] else None, cap)
    if c.get("FINAL"):
        lse = lse * math.log(2)
    return (splits, batch * hkv, 1), ["o_part", "lse_part"], {"o_part": o, "lse_part": lse}


def _split_partials(q, k, v, lens, split_len, splits, window, sinks, cap):
    """Each split's normalized output and lse in log2 units over its keys (sinks in split 0);
    an empty split gives 0 and -inf. q [B, Hkv, G, D]."""
    batch, hkv, group, d = q.shape
    o = np.zeros((batch, hkv, group, splits, d))
    lse = np.full((batch, hkv, group, splits), -np.inf)
    for bi, n in enumerate(lens):
        for sp in range(splits):
            first = max(sp * split_len, n - window if window else 0)
            keys = np.arange(first, min((sp + 1) * split_len, n))
            for h in range(hkv):
                for g in range(group):
                    sc = k[bi, h, keys] @ q[bi, h, g] / math.sqrt(d)
                    if cap:
                        sc = cap * np.tanh(sc / cap)
                    extra = [sinks[h * group + g]] if sinks is not None and sp == 0 else []
                    if len(keys) + len(extra) == 0:
                        continue
                    m = max(sc.max(initial=-np.inf), *extra, -np.inf)
                    e = np.exp(sc - m)
                    den = e.sum() + sum(np.exp(x - m) for x in extra)
                    o[bi, h, g, sp] = e @ v[bi, h, keys] / den
                    lse[bi, h, g, sp] = (m + np.log(den)) / math.log(2)
    return o, lse


def _to_pages(x: np.ndarray, order: np.ndarray, page: int) -> np.ndarray:
    """[B, H, S, D] -> a page pool [P, H, page, D] with (sequence b, tile t) at order[b * pages + t]."""
    batch, heads, s, d = x.shape
    pages = _cdiv(s, page)
    padded = np.zeros((batch, heads, pages * page, d))
    padded[:, :, :s] = x
    tiles = padded.reshape(batch, heads, pages, page, d).transpose(0, 2, 1, 3, 4)
    pool = np.zeros((batch * pages, heads, page, d))
    pool[order] = tiles.reshape(batch * pages, heads, page, d)
    return pool


def _flash_decode_combine(b: _Builder, c: dict) -> tuple:
    """Partials of 3 splits, one of them empty (lse -inf, output 0) for the first sequence."""
    batch, hq, splits, d = 2, 3, 3, c["HEAD_DIM"]
    part = b.input("o_part", (batch, hq, splits, d))
    lse2 = b.input("lse_part", (batch, hq, splits), 2.0)
    lse2[0, :, 1] = -np.inf
    b.arrays["lse_part"] = Array(lse2.astype(np.float32), "f32")
    b.output("o", (batch, hq, d))
    b.output("lse", (batch, hq))
    b.arrays["n_splits"] = Scalar(splits, "i32")
    w = np.exp2(lse2 - lse2.max(axis=2, keepdims=True))
    o = (w[..., None] * part).sum(axis=2) / w.sum(axis=2)[..., None]
    lse = (np.log2(np.exp2(lse2).sum(axis=2))) * math.log(2)
    return (batch, hq, 1), ["o", "lse"], {"o": o, "lse": lse}


def _mla_decode_partial(b: _Builder, c: dict) -> tuple:
    """2 sequences (one ending inside a key tile, one of 3 tiles) over 2 splits of 2 tiles,
    HEAD_TILE + 3 heads (a ragged head block); the first sequence leaves split 1 empty."""
    batch, heads, bn, lora, rope = 2, c["HEAD_TILE"] + 3, c["BLOCK_N"], c["LORA"], c["ROPE"]
    per_split, splits = 2, 2
    s = 3 * bn + 5
    lens = [bn - 3, s]
    qn, qp = b.input("q_nope", (batch, heads, lora), 0.1), b.input("q_pe", (batch, heads, rope))
    ckv, kpe = b.input("ckv", (batch, s, lora)), b.input("kpe", (batch, s, rope))
    b.arrays["kv_lens"] = Array(np.array(lens, np.int32), "i32")
    b.output("o_part", (batch, heads, splits, lora))
    b.output("lse_part", (batch, heads, splits))
    scale = 1 / math.sqrt(lora // 4 + rope)
    b.arrays["qk_scale"] = Scalar(scale * math.log2(math.e), "f32")
    b.arrays["tiles_per_split"] = Scalar(per_split, "i32")
    o = np.zeros((batch, heads, splits, lora))
    lse = np.full((batch, heads, splits), -np.inf)
    for bi, n in enumerate(lens):
        for sp in range(splits):
            keys = np.arange(sp * per_split * bn, min((sp + 1) * per_split * bn, n))
            if not len(keys):
                continue
            sc = (qn[bi] @ ckv[bi, keys].T + qp[bi] @ kpe[bi, keys].T) * scale
            m = sc.max(axis=1, keepdims=True)
            e = np.exp(sc - m)
            o[bi, :, sp] = e @ ckv[bi, keys] / e.sum(axis=1, keepdims=True)
            lse[bi, :, sp] = (m[:, 0] + np.log(e.sum(axis=1))) / math.log(2)
    grid = (splits, batch * _cdiv(heads, c["HEAD_TILE"]), 1)
    return grid, ["o_part", "lse_part"], {"o_part": o, "lse_part": lse}

def _mla_prefill(b: _Builder, c: dict) -> tuple:
    """2 causal sequences (BLOCK_M + 13 positions, one ending inside a key tile), 3 heads."""
    batch, heads, lora, rope = 2, 3, c["LORA"], c["ROPE"]
    s = c["BLOCK_M"] + 13
    lens = [s, c["BLOCK_N"] + 5]
    qn, qp = b.input("q_nope", (batch, heads, s, lora), 0.1), b.input("q_pe", (batch, heads, s, rope))
    ckv, kpe = b.input("ckv", (batch, s, lora)), b.input("kpe", (batch, s, rope))
    b.arrays["seq_lens"] = Array(np.array(lens, np.int32), "i32")
    b.output("o", qn.shape)
    b.output("lse", (batch, heads, s))
    scale = 1 / math.sqrt(lora // 4 + rope)
    b.arrays["qk_scale"] = Scalar(scale * math.log2(math.e), "f32")
    o, lse = np.zeros(qn.shape), np.full((batch, heads, s), -np.inf)
    for bi, n in enumerate(lens):
        sc = (qn[bi, :, :n] @ ckv[bi, :n].T + qp[bi, :, :n] @ kpe[bi, :n].T) * scale
        sc = np.where(np.tril(np.ones((n, n), bool)), sc, -np.inf)
        m = sc.max(axis=2, keepdims=True)
        e = np.exp(sc - m)
        o[bi, :, :n] = e @ ckv[bi, :n] / e.sum(axis=2, keepdims=True)
        lse[bi, :, :n] = m[..., 0] + np.log(e.sum(axis=2))
    return (_cdiv(s, c["BLOCK_M"]), batch * heads, 1), ["o", "lse"], {"o": o, "lse": lse}



def _attention_grads(q, k, v, do, dlse, lens, causal):
    """float64 gradients (dq, dk, dv) of o and lse, with lse and delta = rowsum(do * o) - dlse;
    zero on padding rows. Shapes as _attention_reference's (Sq = Sk)."""
    batch, hq, s, d = q.shape
    group = hq // k.shape[1]
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    lse, delta = np.full((batch, hq, s), -np.inf), np.zeros((batch, hq, s))
    for b in range(batch):
        n = lens[b]
        keep = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
        for h in range(hq):
            kh, vh = k[b, h // group, :n], v[b, h // group, :n]
            sc = np.where(keep, q[b, h, :n] @ kh.T / math.sqrt(d), -np.inf)
            m = sc.max(axis=1, keepdims=True)
            e = np.exp(sc - m)
            p = e / e.sum(axis=1, keepdims=True)
            lse[b, h, :n] = (m + np.log(e.sum(axis=1, keepdims=True)))[:, 0]
            g = do[b, h, :n]
            delta[b, h, :n] = (g * (p @ vh)).sum(axis=1) - dlse[b, h, :n]
            ds = p * (g @ vh.T - delta[b, h, :n, None])
            dq[b, h, :n] = ds @ kh / math.sqrt(d)
            dk[b, h // group, :n] += ds.T @ q[b, h, :n] / math.sqrt(d)
            dv[b, h // group, :n] += p.T @ g
    return dq, dk, dv, lse, delta


def _fmha_bwd_preprocess(b: _Builder, c: dict) -> tuple:
    """delta of 2 x 3 heads x (BLOCK_M + 13) rows: a ragged last row tile."""
    shape = (2, 3, c["BLOCK_M"] + 13, c["HEAD_DIM"])
    o, do = b.input("o", shape), b.input("do", shape)
    dlse = b.input("dlse", shape[:3], 0.5)
    b.output("delta", shape[:3])
    return ((_cdiv(shape[2], c["BLOCK_M"]), 6, 1), ["delta"],
            {"delta": (o * do).sum(axis=3) - dlse})


def _fmha_bwd(outputs: tuple[str, ...]) -> Callable:
    """fmha_fwd's problem (two ragged sequences, 2 kv heads x 2 query heads) with random do and
    dlse; lse and delta in f32 from float64; the grid of the key-tile or the query-tile kernel."""
    def build(b: _Builder, c: dict) -> tuple:
        batch, hkv, group, d = 2, 2, 2, c["HEAD_DIM"]
        s = c["BLOCK_M"] + c["BLOCK_N"] // 2 + 13
        lens = [s, c["BLOCK_N"] + 7]
        q = b.input("q", (batch, hkv * group, s, d))
        k, v = b.input("k", (batch, hkv, s, d)), b.input("v", (batch, hkv, s, d))
        do = b.input("do", q.shape)
        dlse = b.rng.standard_normal(q.shape[:3]) * 0.5
        dq, dk, dv, lse, delta = _attention_grads(q, k, v, do, dlse, lens, c["CAUSAL"])
        b.arrays["lse"] = Array(lse.astype(np.float32), "f32")
        b.arrays["delta"] = Array(delta.astype(np.float32), "f32")
        b.arrays["seq_lens"] = Array(np.array(lens, np.int32), "i32")
        b.arrays["qk_scale"] = Scalar(math.log2(math.e) / math.sqrt(d), "f32")
        b.arrays["sm_scale"] = Scalar(1 / math.sqrt(d), "f32")
        grads = {"dq": dq, "dk": dk, "dv": dv}
        for name in outputs:
            b.output(name, grads[name].shape)
        if outputs == ("dq",):
            grid = (_cdiv(s, c["BLOCK_M"]), batch * hkv * group, 1)
        else:
            grid = (_cdiv(s, c["BLOCK_N"]), batch * hkv, 1)
        return grid, list(outputs), {n: grads[n] for n in outputs}
    return build



def _dropout(src: str, dst: str) -> Callable:
    """Three tiles, the last ragged, whose counters cross a 2^32 boundary (the high counter word
    changes); the mask is the op spec's NumPy-evaluated Philox, so the outputs agree exactly."""
    def build(b: _Builder, c: dict) -> tuple:
        n = 2 * c["TILE"] + 452
        x = b.input(src, (n,))
        b.output(dst, (n,))
        seed, offset, p = dropout.SEED, (1 << 32) - c["TILE"] - 7, dropout.P
        scale = np.float32(dropout.scale_of(p))
        for name, value, elem in (("seed", seed, "i64"), ("offset", offset, "i64"),
                                  ("threshold", dropout.threshold_of(p), "i32"), ("scale", scale, "f32")):
            b.arrays[name] = Scalar(value, elem)
        keep = dropout.keep_mask(np.arange(n, dtype=np.int64), seed, offset, dropout.threshold_of(p))
        ref = np.where(keep, x.astype(np.float32) * scale, 0.0)
        return (_cdiv(n, c["TILE"]), 1, 1), [dst], {dst: ref}
    return build


def _cross_entropy_rows(b: _Builder, c: dict) -> tuple:
    """5 rows of two full chunks and a ragged one (row 3 ignored), as the spec's f32 references compute them."""
    m, v = 5, 2 * c["CHUNK"] + 904
    x = b.input("logits", (m, v), 4.0)
    labels = b.rng.integers(0, v, m).astype(np.int32)
    labels[3] = -100
    b.arrays["labels"] = Array(labels, "i32")
    b.arrays["ignore_index"] = Scalar(-100, "i32")
    top = x.max(axis=1)
    lse = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
    return x, labels, lse, labels != -100


def _cross_entropy_fwd(b: _Builder, c: dict) -> tuple:
    x, labels, lse, valid = _cross_entropy_rows(b, c)
    b.output("loss", lse.shape)
    b.output("lse", lse.shape)
    target = x[np.arange(len(labels)), np.where(valid, labels, 0)]
    return (2, 1, 1), ["loss", "lse"], {"loss": np.where(valid, lse - target, 0.0), "lse": lse}


def _cross_entropy_bwd(b: _Builder, c: dict) -> tuple:
    x, labels, lse, valid = _cross_entropy_rows(b, c)
    b.arrays["lse"] = Array(lse.astype(np.float32), "f32")
    dloss = b.input("dloss", lse.shape)
    b.output("dlogits", x.shape)
    onehot = np.zeros_like(x)
    onehot[np.arange(len(labels))[valid], labels[valid]] = 1.0
    grad = np.exp(x - lse[:, None]) - onehot
    return (2, 1, 1), ["dlogits"], {"dlogits": grad * np.where(valid, dloss, 0.0)[:, None]}


def _moe_topk(b: _Builder, c: dict) -> tuple:
    """Two row tiles and a ragged one over one expert fewer than E_PAD (a padded column), ties included."""
    t, e, k = 2 * c["BLOCK_T"] + 3, max(c["K"], c["E_PAD"] - 1), c["K"]
    x = b.input("logits", (t, e))
    x[1, :] = x[1, 0]  # one token whose logits all tie: the lowest ids win
    b.arrays["logits"] = Array(to_elem(x, ScalarType(b.elem("logits"))), b.elem("logits"))
    b.output("topk_weights", (t, k))
    b.output("topk_ids", (t, k))
    rest, ids = x.copy(), np.zeros((t, k), dtype=np.int64)
    for j in range(k):
        ids[:, j] = rest.argmax(axis=1)
        rest[np.arange(t), ids[:, j]] = -np.inf
    chosen = np.take_along_axis(x, ids, axis=1)
    w = 1 / (1 + np.exp(-chosen)) if c["SIGMOID"] else np.exp(chosen - chosen[:, :1])
    return (_cdiv(t, c["BLOCK_T"]), 1, 1), ["topk_weights", "topk_ids"], \
        {"topk_weights": w / w.sum(axis=1, keepdims=True), "topk_ids": ids}


def _moe_align_ids(b: _Builder, e: int, n: int) -> np.ndarray:
    """n token slots, most of them on a few experts, one on the last expert (E_PAD - 1), the others empty."""
    ids = b.rng.integers(0, min(e, 5), n)
    ids[-2] = e - 1
    b.arrays["topk_ids"] = Array(ids.astype(np.int32), "i32")
    return ids


def _chunk_counts(ids: np.ndarray, slots: int, e: int) -> np.ndarray:
    """Tokens per expert of each chunk of `slots` slots: [chunks, e]."""
    chunks = _cdiv(len(ids), slots)
    return np.stack([np.bincount(ids[i * slots:(i + 1) * slots], minlength=e) for i in range(chunks)])


def _align_layout(counts: np.ndarray, block: int) -> tuple:
    """(chunk offsets, padded expert ends, padded total) of per-chunk counts: where each chunk's tokens of each
    expert start in sorted_ids."""
    padded = -(-counts.sum(axis=0) // block) * block
    ends = np.cumsum(padded)
    offsets = ends - padded + np.cumsum(counts, axis=0) - counts
    return offsets, ends, ends[-1:]


def _moe_align_count(b: _Builder, c: dict) -> tuple:
    """Three chunks of token slots and a ragged one; sorted_ids longer than the chunks (the fill's loop)."""
    e, slots = c["E_PAD"], c["SLOTS"]
    ids = _moe_align_ids(b, e, 3 * slots + 5)
    counts = _chunk_counts(ids, slots, e)
    n_sorted = len(ids) + e * 15
    b.output("counts", counts.shape)
    b.output("sorted_ids", (n_sorted,))
    return (len(counts), 1, 1), ["counts", "sorted_ids"], \
        {"counts": counts, "sorted_ids": np.full(n_sorted, len(ids))}


def _moe_align_offsets(b: _Builder, c: dict) -> tuple:
    """Per-chunk counts over two row tiles and a ragged one, some experts empty."""
    e = c["E_PAD"]
    counts = b.rng.integers(0, 2 * c["BLOCK"], (2 * c["ROWS"] + 3, e)) * (b.rng.random(e) < 0.7)
    b.arrays["counts"] = Array(counts.astype(np.int32), "i32")
    offsets, ends, total = _align_layout(counts, c["BLOCK"])
    for name, shape in (("offsets", counts.shape), ("expert_ends", (e,)), ("num_post_pad", (1,))):
        b.output(name, shape)
    return (1, 1, 1), ["offsets", "expert_ends", "num_post_pad"], \
        {"offsets": offsets, "expert_ends": ends, "num_post_pad": total}


def _moe_align_scatter(b: _Builder, c: dict) -> tuple:
    """Three chunks of STEPS tiles and a ragged one: the offsets and ends the offsets kernel makes of them,
    sorted_ids filled with N as the count kernel leaves it; out the slots in place, the expert ids, and each
    chunk's offsets moved past its tokens."""
    block, e, slots = c["BLOCK"], c["E_PAD"], c["TILE"] * c["STEPS"]
    ids = _moe_align_ids(b, e, 3 * slots + 5)
    n = len(ids)
    counts = _chunk_counts(ids, slots, e)
    offsets, ends, _ = _align_layout(counts, block)
    sorted_ids, expert_ids, _ = _align(ids, e, block)
    n_sorted = len(sorted_ids)
    b.arrays["offsets"] = Array(offsets.astype(np.int32), "i32")
    b.arrays["expert_ends"] = Array(ends.astype(np.int32), "i32")
    b.arrays["sorted_ids"] = Array(np.full(n_sorted, n, dtype=np.int32), "i32")
    b.output("expert_ids", expert_ids.shape)
    return (len(counts), 1, 1), ["sorted_ids", "expert_ids", "offsets"], \
        {"sorted_ids": sorted_ids, "expert_ids": expert_ids, "offsets": offsets + counts}


def _align(ids: np.ndarray, e: int, block: int) -> tuple:
    """moe_align_block_size of the expert ids of N token slots: (sorted_ids, expert_ids, ends of the padded
    expert groups)."""
    n = len(ids)
    counts = np.bincount(ids, minlength=e)
    padded = -(-counts // block) * block
    ends = np.cumsum(padded)
    starts = ends - padded
    n_sorted = n + e * (block - 1)
    sorted_ids = np.full(n_sorted, n)
    for expert in range(e):
        slots = np.flatnonzero(ids == expert)
        sorted_ids[starts[expert]:starts[expert] + len(slots)] = slots
    first = np.arange(_cdiv(n_sorted, block)) * block
    expert_ids = np.where(first < ends[-1], np.searchsorted(ends, first, side="right"), -1)
    return sorted_ids, expert_ids, ends


def _moe_blocks(b: _Builder, c: dict, tokens: int, experts: int) -> tuple:
    """Routing of `tokens` tokens over `experts` experts, TOP_K slots each (distinct experts per token, the
    last expert without tokens): sorted_ids and expert_ids given to the kernel as int32 arrays."""
    k = c["TOP_K"]
    ids = np.stack([b.rng.permutation(experts - 1)[:k] for _ in range(tokens)]).reshape(-1)
    sorted_ids, expert_ids, _ = _align(ids, experts, c["BLOCK"])
    b.arrays["sorted_ids"] = Array(sorted_ids.astype(np.int32), "i32")
    b.arrays["expert_ids"] = Array(expert_ids.astype(np.int32), "i32")
    return sorted_ids, expert_ids


def _moe_gate_up(b: _Builder, c: dict) -> tuple:
    """Two K steps and two column blocks, both ragged; blocks of padding slots, blocks past the total (left
    untouched: NaN)."""
    block, k = c["BLOCK"], c["TOP_K"]
    tokens, experts, h, f = 11, k + 2, c["TILE_K"] + 36, c["TILE_N"] + 20
    sorted_ids, expert_ids = _moe_blocks(b, c, tokens, experts)
    x = b.input("x", (tokens, h))
    w13 = b.input("w13", (experts, 2, f, h), h ** -0.5)
    b.output("act", (len(sorted_ids), f))
    act = np.full((len(sorted_ids), f), np.nan)
    for i, e in enumerate(expert_ids):
        if e >= 0:
            slots = sorted_ids[i * block:(i + 1) * block]
            rows = np.where((slots < tokens * k)[:, None], x[np.minimum(slots // k, tokens - 1)], 0.0)
            act[i * block:(i + 1) * block] = _silu(rows @ w13[e, 0].T) * (rows @ w13[e, 1].T)
    return (len(expert_ids), _cdiv(f, c["TILE_N"]), 1), ["act"], {"act": act}


def _moe_down(b: _Builder, c: dict) -> tuple:
    """Two K steps and two column blocks, both ragged; every token slot written once."""
    block, k = c["BLOCK"], 2
    tokens, experts, h, f = 9, 4, c["TILE_N"] + 20, c["TILE_K"] + 36
    sorted_ids, expert_ids = _moe_blocks(b, {**c, "TOP_K": k}, tokens, experts)
    act = b.input("act", (len(sorted_ids), f))
    w2 = b.input("w2", (experts, h, f), f ** -0.5)
    weights = b.rng.random(tokens * k).astype(np.float32)
    b.arrays["topk_weights"] = Array(weights, "f32")
    b.output("y", (tokens * k, h))
    y = np.zeros((tokens * k, h))
    for i, e in enumerate(expert_ids):
        for r, s in enumerate(sorted_ids[i * block:(i + 1) * block]):
            if e >= 0 and s < tokens * k:
                y[s] = weights[s] * (act[i * block + r] @ w2[e].T)
    return (len(expert_ids), _cdiv(h, c["TILE_N"]), 1), ["y"], {"y": y}


def _moe_sum(b: _Builder, c: dict) -> tuple:
    tokens, h = 2 * c["BLOCK_T"] + 1, c["TILE_H"] + 20
    y = b.input("y", (tokens, c["TOP_K"], h))
    b.output("out", (tokens, h))
    return (_cdiv(tokens, c["BLOCK_T"]), _cdiv(h, c["TILE_H"]), 1), ["out"], {"out": y.sum(axis=1)}


def _matmul_fp8(b: _Builder, c: dict) -> tuple:
    """fp8 operands (rounded to e4m3 by the builder), two column tiles over two b-scale blocks, three K steps
    (the last ragged), per-row / per-block scales, fewer blocks than tiles."""
    group = 128  # kernels/matmul_fp8.py's SCALE_BLOCK
    m, n, k = c["TILE_M"] + 44, c["TILE_N"] + 4, 2 * c["TILE_K"] + 36
    a, bb = b.input("a", (m, k)), b.input("b", (n, k))
    a_scale = (b.rng.random((m, _cdiv(k, group))) + 0.5).astype(np.float32)
    b_scale = (b.rng.random((_cdiv(n, group), _cdiv(k, group))) + 0.5).astype(np.float32)
    b.arrays["a_scale"] = Array(a_scale, "f32")
    b.arrays["b_scale"] = Array(b_scale, "f32")
    b.output("c", (m, n))
    sa = np.repeat(a_scale.astype(np.float64), group, axis=1)[:, :k]
    sb = np.repeat(np.repeat(b_scale.astype(np.float64), group, axis=0), group, axis=1)[:n, :k]
    return (3, 1, 1), ["c"], {"c": (a * sa) @ (bb * sb).T}


def _grouped_gemm(b: _Builder, c: dict) -> tuple:
    """Three problems of different ragged sizes (one of several tiles, one smaller than a tile, one empty in
    N's padding), packed with random data around them, on fewer blocks than tiles."""
    tm, tn, tk, align = c["TILE_M"], c["TILE_N"], c["TILE_K"], 8
    probs = [(tm + 5, tn - 7, tk + 3), (3, 20, 9), (17, tn + 1, 2 * tk)]
    rows = lambda ext: np.concatenate([[0], np.cumsum([-(-e // align) * align for e in ext])])  # noqa: E731
    ra, rb = rows([m for m, _, _ in probs]), rows([k for _, _, k in probs])
    nb = max(n for _, n, _ in probs)
    a = b.input("a", (ra[-1], max(k for _, _, k in probs)), 0.3)
    bb = b.input("b", (rb[-1], nb), 0.3)
    b.arrays["sizes"] = Array(np.array(probs, dtype=np.int32), "i32")
    b.output("c", (ra[-1], nb))
    c_ref = np.zeros((ra[-1], nb))
    for i, (m, n, k) in enumerate(probs):
        c_ref[ra[i]:ra[i] + m, :n] = a[ra[i]:ra[i] + m, :k] @ bb[rb[i]:rb[i] + k, :n]
    return (3, 1, 1), ["c"], {"c": c_ref}


def _block_partials(terms: np.ndarray, block_m: int, blocks: int) -> np.ndarray:
    """Row g: the sum of `terms` over the rows of the row blocks g, g + blocks, ... (a persistent block's)."""
    owner = (np.arange(terms.shape[0]) // block_m) % blocks
    return np.stack([terms[owner == g].sum(axis=0) for g in range(blocks)])


def _rms_norm_bwd(m: int, n: int) -> Callable:
    """m rows over 2 persistent blocks: dx and the blocks' dw partial rows."""
    def build(b: _Builder, c: dict) -> tuple:
        dy, x, w = b.input("dy", (m, n)), b.input("x", (m, n)), b.input("w", (n,))
        b.output("dx", (m, n))
        b.output("dw_part", (2, n))
        b.arrays["eps"] = Scalar(1e-6, "f32")
        r = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
        gw = dy * w
        dx = r * (gw - x * r * r * (gw * x).mean(axis=1, keepdims=True))
        return (2, 1, 1), ["dx", "dw_part"], {"dx": dx, "dw_part": _block_partials(dy * x * r, c["BLOCK_M"], 2)}
    return build


def _layer_norm_bwd(m: int, n: int) -> Callable:
    """m rows over 2 persistent blocks, the forward's f32 mean / rstd given: dx and the dw / db partial rows."""
    def build(b: _Builder, c: dict) -> tuple:
        dy, x, w = b.input("dy", (m, n)), b.input("x", (m, n), 2.0), b.input("w", (n,))
        mean, rstd = x.mean(axis=1), 1 / np.sqrt(x.var(axis=1) + 1e-5)
        b.arrays["mean"] = Array(mean.astype(np.float32), "f32")
        b.arrays["rstd"] = Array(rstd.astype(np.float32), "f32")
        for name, shape in (("dx", (m, n)), ("dw_part", (2, n)), ("db_part", (2, n))):
            b.output(name, shape)
        xhat = (x - mean[:, None]) * rstd[:, None]
        gw = dy * w
        dx = rstd[:, None] * (gw - gw.mean(axis=1, keepdims=True) - xhat * (gw * xhat).mean(axis=1, keepdims=True))
        parts = {"dw_part": _block_partials(dy * xhat, c["BLOCK_M"], 2), "db_part": _block_partials(dy, c["BLOCK_M"], 2)}
        return (2, 1, 1), ["dx", "dw_part", "db_part"], {"dx": dx, **parts}
    return build


def _norm_bwd_reduce(b: _Builder, c: dict) -> tuple:
    """Partial rows over two row tiles and a ragged one, three column tiles (the last ragged)."""
    g, n = 2 * c["TILE_G"] + 5, 2 * c["TILE_N"] + 44
    part = b.input("part", (g, n))
    b.output("out", (n,))
    return (_cdiv(n, c["TILE_N"]), 1, 1), ["out"], {"out": part.sum(axis=0)}

def _linear_ce_inputs(b: _Builder, n: int, h: int, v: int, ignored: int = 3) -> tuple:
    """hidden [n, h], weight [v, h] (logits of standard deviation ~3), labels with row `ignored` ignored, and
    the float64 logits and their lse."""
    x, w = b.input("hidden", (n, h)), b.input("weight", (v, h), 3.0 / math.sqrt(h))
    labels = b.rng.integers(0, v, n).astype(np.int32)
    labels[ignored] = -100
    b.arrays["labels"] = Array(labels, "i32")
    b.arrays["ignore_index"] = Scalar(-100, "i32")
    z = x @ w.T
    top = z.max(axis=1)
    return x, w, labels, z, top + np.log(np.exp(z - top[:, None]).sum(axis=1))


def _linear_ce_fwd(b: _Builder, c: dict) -> tuple:
    """Two row blocks (the second ragged), three K steps and three vocabulary chunks (the last of each ragged)."""
    n, h, v = c["BLOCK_M"] + 7, 2 * c["BLOCK_K"] + 10, 2 * c["BLOCK_V"] + 30
    _, _, labels, z, lse = _linear_ce_inputs(b, n, h, v)
    b.output("loss", (n,))
    b.output("lse", (n,))
    valid = labels != -100
    target = z[np.arange(n), np.where(valid, labels, 0)]
    return (2, 1, 1), ["loss", "lse"], {"loss": np.where(valid, lse - target, 0.0), "lse": lse}


def _linear_ce_dlogits(b: _Builder, c: dict) -> tuple:
    """The chunk of rows [BLOCK_M, 3 BLOCK_M) of a batch of 3 BLOCK_M - 5 rows (row_tile0 = 1), one of them
    ignored: its last rows lie past the batch (zero workspace rows); three vocabulary tiles, the last ragged."""
    bm = c["BLOCK_M"]
    n, h, v = 3 * bm - 5, c["BLOCK_K"] + 10, 2 * c["BLOCK_V"] + 30
    _, _, labels, z, lse = _linear_ce_inputs(b, n, h, v, ignored=bm + 3)
    b.arrays["lse"] = Array(lse.astype(np.float32), "f32")
    dloss = b.input("dloss", (n,))
    b.output("ws", (2 * bm, v))
    b.arrays["row_tile0"] = Scalar(1, "i32")
    valid = labels != -100
    onehot = np.zeros_like(z)
    onehot[np.arange(n)[valid], labels[valid]] = 1.0
    grad = (np.exp(z - lse[:, None]) - onehot) * np.where(valid, dloss, 0.0)[:, None]
    ws = np.zeros((2 * bm, v))
    ws[:n - bm] = grad[bm:]
    return (2, _cdiv(v, c["BLOCK_V"]), 1), ["ws"], {"ws": ws}


def _linear_ce_dh(b: _Builder, c: dict) -> tuple:
    """A 2 BLOCK_M-row workspace chunk at row tile 1 of a batch of 3 BLOCK_M - 5 rows: rows outside the chunk
    stay unwritten (NaN), those past the batch are dropped; three K steps and two H tiles, the last ragged."""
    bm = c["BLOCK_M"]
    n, h, v = 3 * bm - 5, c["BLOCK_H"] + 12, 2 * c["BLOCK_K"] + 6
    ws, w = b.input("ws", (2 * bm, v), 0.5), b.input("weight", (v, h), 0.3)
    b.output("dhidden", (n, h))
    b.arrays["row_tile0"] = Scalar(1, "i32")
    dh = np.full((n, h), np.nan)
    dh[bm:] = (ws @ w)[:n - bm]
    return (2, 2, 1), ["dhidden"], {"dhidden": dh}


def _linear_ce_dw(b: _Builder, c: dict) -> tuple:
    """dw_acc (given, ACCUMULATE; else written) += ws^T @ hidden rows [BLOCK_K, 3 BLOCK_K) of a batch of
    3 BLOCK_K - 5 rows, in a workspace of 3 BLOCK_K rows (zero rows past the batch in its last tile, NaN rows
    past that tile); two vocabulary and two H tiles, the last of each ragged."""
    bk = c["BLOCK_K"]
    n, h, v = 3 * bk - 5, c["BLOCK_H"] + 12, c["BLOCK_V"] + 20
    ws = b.input("ws", (3 * bk, v), 0.5)
    ws[n - bk:2 * bk] = 0.0
    ws[2 * bk:] = np.nan  # workspace rows past the batch's last row tile: never read
    b.arrays["ws"] = Array(to_elem(ws, ScalarType(b.elem("ws"))), b.elem("ws"))
    x = b.input("hidden", (n, h))
    if c["ACCUMULATE"]:
        acc = b.input("dw_acc", (v, h))
    else:  # the first chunk: dw_acc is written, not read (NaN before)
        acc = 0.0
        b.output("dw_acc", (v, h))
    b.output("dweight", (v, h))
    b.arrays["row_tile0"] = Scalar(1, "i32")
    dw = acc + ws[:n - bk].T @ x[bk:]
    return (2, 2, 1), ["dw_acc", "dweight"], {"dw_acc": dw, "dweight": dw}

def _gated_delta_rule(tokens: Callable[[dict], int]) -> Callable:
    """2 sequences of `tokens(constants)` tokens, 2 heads; Dk padded in its tile, two value tiles (the second
    ragged); the recurrence in float64 from the given state."""
    return lambda b, c: _gated_delta_problem(b, c, tokens(c))


def _gated_delta_problem(b: _Builder, c: dict, seq: int) -> tuple:
    batch, heads, dk, dv = 2, 2, c["BLOCK_K"] - 28, c["BLOCK_V"] + 20
    q, k = b.input("q", (batch, seq, heads, dk), 0.1), b.input("k", (batch, seq, heads, dk), 0.1)
    v = b.input("v", (batch, seq, heads, dv))
    g = -np.abs(b.rng.standard_normal((batch, seq, heads))).astype(np.float32) * 0.1
    beta = b.rng.uniform(0.0, 1.0, (batch, seq, heads)).astype(np.float32)
    b.arrays["g"], b.arrays["beta"] = Array(g, "f32"), Array(beta, "f32")
    s = b.input("state", (batch, heads, dk, dv), 0.1)
    b.output("o", v.shape)
    b.output("new_state", s.shape)
    b.arrays["scale"] = Scalar(dk ** -0.5, "f32")
    o = np.zeros(v.shape)
    for t in range(seq):
        s = s * np.exp(g[:, t].astype(np.float64))[..., None, None]
        delta = (v[:, t] - np.einsum("bhk,bhkv->bhv", k[:, t], s)) * beta[:, t][..., None]
        s = s + k[:, t][..., None] * delta[..., None, :]
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t], s) * dk ** -0.5
    return (_cdiv(dv, c["BLOCK_V"]), heads, batch), ["o", "new_state"], {"o": o, "new_state": s}

# Per kernel, one or more problems (variants): the first is the default; further ones cover what
# the first cannot (a row shorter than one chunk, a persistent block without work).
PROBLEMS: dict[str, tuple[Callable, ...]] = {
    "vector_add_kernel": (_elementwise({"a": 1.0, "b": 1.0}, "c", lambda a, b: a + b),),
    "relu_kernel": (_elementwise({"x": 1.0}, "y", lambda x: np.maximum(x, 0)),),
    "gelu_tanh_kernel": (_elementwise({"x": 3.0}, "y", _gelu),),
    "swiglu_kernel": (_elementwise({"a": 3.0, "b": 1.0}, "y", lambda a, b: _silu(a) * b),),
    "geglu_kernel": (_elementwise({"a": 3.0, "b": 1.0}, "y", lambda a, b: _gelu(a) * b),),
    "silu_and_mul_kernel": (_silu_and_mul,),
    "softmax_gather_kernel": (_softmax_problem(lambda c: 1000),),
    "softmax_tma_kernel": (_softmax_problem(lambda c: 1000),),
    "softmax_tma_wide_kernel": (_softmax_problem(lambda c: 1000),),
    "softmax_online_kernel": (_softmax_problem(lambda c: c["CHUNK"] + 904),
                              _softmax_problem(lambda c: 1000)),
    "softmax_online_rev_kernel": (_softmax_problem(lambda c: c["CHUNK"] + 904),
                                  _softmax_problem(lambda c: 1000)),
    "softmax_tma_prefetch_kernel": (_softmax_problem(lambda c: 1000),),
    "softmax_tma_lean_kernel": (_softmax_problem(lambda c: 1000),),
    "softmax_split_stats_kernel": (_softmax_split(write=False),),
    "softmax_split_write_kernel": (_softmax_split(write=True),),
    "rms_norm_kernel": (_rms_norm(5, 1000), _rms_norm(1, 37)),
    "layer_norm_fwd_kernel": (_layer_norm(5, 1000), _layer_norm(1, 37)),
    "layer_norm_fwd_occ4_kernel": (_layer_norm(5, 1000), _layer_norm(1, 37)),
    "layer_norm_fwd_prefetch_kernel": (_layer_norm(5, 1000), _layer_norm(1, 37)),
    "layer_norm_fwd_w8_kernel": (_layer_norm(5, 1000), _layer_norm(1, 37)),
    "rope_kernel": (_rope,),
    "rope_persistent_kernel": (_rope,),
    "rope_rows_kernel": (_rope_rows,),
    "rope_rows_pair_kernel": (_rope_rows,),
    "rope_rows_pair_persistent_kernel": (_rope_rows_persistent,),
    "rope_rows_notma_kernel": (_rope_rows,),
    "rope_rows_persistent_kernel": (_rope_rows_persistent,),
    "matmul_kernel": (_matmul,),
    "bmm_kernel": (_bmm,),
    "matmul_splitk_kernel": (_matmul_splitk,),
    "splitk_reduce_kernel": (_splitk_reduce,),
    "fmha_fwd_kernel": (_fmha_fwd,),
    "flash_decode_partial_kernel": (_flash_decode_partial,),
    "flash_decode_combine_kernel": (_flash_decode_combine,),
    "mla_decode_partial_kernel": (_mla_decode_partial,),
    "mla_prefill_kernel": (_mla_prefill,),
    "fmha_bwd_preprocess_kernel": (_fmha_bwd_preprocess,),
    "fmha_bwd_dkdv_kernel": (_fmha_bwd(("dk", "dv")),),
    "fmha_bwd_dq_kernel": (_fmha_bwd(("dq",)),),
    "dropout_fwd_kernel": (_dropout("x", "y"),),
    "dropout_bwd_kernel": (_dropout("dy", "dx"),),
    "cross_entropy_fwd_kernel": (_cross_entropy_fwd,),
    "cross_entropy_bwd_kernel": (_cross_entropy_bwd,),
    "moe_topk_kernel": (_moe_topk,),
    "moe_align_count_kernel": (_moe_align_count,),
    "moe_align_offsets_kernel": (_moe_align_offsets,),
    "moe_align_scatter_kernel": (_moe_align_scatter,),
    "rms_norm_bwd_kernel": (_rms_norm_bwd(5, 1000), _rms_norm_bwd(1, 37)),
    "layer_norm_bwd_kernel": (_layer_norm_bwd(5, 1000), _layer_norm_bwd(1, 37)),
    "norm_bwd_reduce_kernel": (_norm_bwd_reduce,),
    "linear_ce_fwd_kernel": (_linear_ce_fwd,),
    "linear_ce_dlogits_kernel": (_linear_ce_dlogits,),
    "linear_ce_dh_kernel": (_linear_ce_dh,),
    "linear_ce_dw_kernel": (_linear_ce_dw,),
    "gated_delta_rule_kernel": (_gated_delta_rule(lambda c: 3),),
    "gated_delta_chunk_kernel": (_gated_delta_rule(lambda c: c["CHUNK"] + 13), _gated_delta_rule(lambda c: 5)),
    "moe_gate_up_kernel": (_moe_gate_up,),
    "moe_down_kernel": (_moe_down,),
    "moe_sum_kernel": (_moe_sum,),
    "grouped_gemm_kernel": (_grouped_gemm,),
    "matmul_fp8_kernel": (_matmul_fp8,),
}


def problem(capture: Capture, kernel_file: str | Path, seed: int = 0,
            tolerance: tuple[float, float] = (1e-5, 1e-6), variant: int = 0) -> Problem:
    """A small problem of a corpus capture (`kernel_file`: name under ops/kernels or a path);
    `tolerance` (rtol, atol) is the one of the capture's dtype (the op spec's `tolerances`);
    `variant` picks one of the kernel's problems (`variants(capture)` of them)."""
    build = _builders(capture)[variant]
    path = Path(kernel_file)
    path = path if path.is_absolute() else KERNELS_DIR / path
    b = _Builder(capture, seed)
    grid, outputs, reference = build(b, dict(capture.constants))
    params = [p for p in kernel_parameters(path, capture.kernel) if p not in capture.constants]
    missing = [p for p in params if p not in b.arrays]
    if missing:
        raise LookupError(f"{capture.label}: the problem gives no value for {missing}")
    return Problem(capture.kernel, [(p, b.arrays[p]) for p in params], grid, outputs,
                   capture.kernel in EXACT, tolerance[0], tolerance[1], reference)


def variants(capture: Capture) -> int:
    return len(_builders(capture))


def problems(capture: Capture, kernel_file: str | Path, seed: int = 0,
             tolerance: tuple[float, float] = (1e-5, 1e-6)) -> list[Problem]:
    """Every problem of a capture."""
    return [problem(capture, kernel_file, seed, tolerance, v) for v in range(variants(capture))]


def _builders(capture: Capture) -> tuple[Callable, ...]:
    builders = PROBLEMS.get(capture.kernel)
    if builders is None:
        raise LookupError(f"no interpreter problem for kernel `{capture.kernel}` "
                          f"(add one to eval.interp.corpus.PROBLEMS)")
    return builders
