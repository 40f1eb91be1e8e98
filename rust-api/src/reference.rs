//! CPU references of the operators, in f32 over row-major slices: what the GPU tests and the
//! example check the kernels against.

/// `silu(a) * b`.
pub fn swiglu(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(&a, &b)| a / (1.0 + (-a).exp()) * b).collect()
}

/// GELU, tanh approximation.
pub fn gelu(x: &[f32]) -> Vec<f32> {
    let c = (2.0 / std::f32::consts::PI).sqrt();
    x.iter().map(|&v| 0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())).collect()
}

/// `gelu(a) * b`.
pub fn geglu(a: &[f32], b: &[f32]) -> Vec<f32> {
    gelu(a).iter().zip(b).map(|(g, b)| g * b).collect()
}

/// `silu(x[:, :n]) * x[:, n:]` of x [m, 2n].
pub fn silu_and_mul(x: &[f32], m: usize, n: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(m * n);
    for row in x.chunks(2 * n).take(m) {
        y.extend(swiglu(&row[..n], &row[n..]));
    }
    y
}

/// Softmax of each row of x [m, n].
pub fn softmax(x: &[f32], n: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exp: Vec<f32> = row.iter().map(|v| (v - max).exp()).collect();
        let sum: f32 = exp.iter().sum();
        y.extend(exp.iter().map(|e| e / sum));
    }
    y
}

/// RMS norm of each row of x [m, n] with weight w \[n\].
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let n = w.len();
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let inv = (ms + eps).sqrt().recip();
        y.extend(row.iter().zip(w).map(|(v, w)| v * inv * w));
    }
    y
}

/// Layer norm of each row of x [m, n]: (y, mean, rstd).
pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = w.len();
    let (mut y, mut means, mut rstds) = (Vec::with_capacity(x.len()), vec![], vec![]);
    for row in x.chunks(n) {
        let mean = row.iter().sum::<f32>() / n as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
        let rstd = (var + eps).sqrt().recip();
        y.extend(row.iter().zip(w).zip(b).map(|((v, w), b)| (v - mean) * rstd * w + b));
        means.push(mean);
        rstds.push(rstd);
    }
    (y, means, rstds)
}

/// Rotate-half rotary embedding of x [b, s, h, d] with cos, sin [s, d/2].
pub fn rope(x: &[f32], cos: &[f32], sin: &[f32], s: usize, h: usize, d: usize) -> Vec<f32> {
    let half = d / 2;
    let mut y = vec![0.0; x.len()];
    for (i, (head, out)) in x.chunks(d).zip(y.chunks_mut(d)).enumerate() {
        let pos = (i / h) % s;
        let (c, sn) = (&cos[pos * half..][..half], &sin[pos * half..][..half]);
        for j in 0..half {
            let (x1, x2) = (head[j], head[half + j]);
            out[j] = x1 * c[j] - x2 * sn[j];
            out[half + j] = x2 * c[j] + x1 * sn[j];
        }
    }
    y
}

/// a [m, k] @ b [k, n].
pub fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p];
            let (brow, crow) = (&b[p * n..][..n], &mut c[i * n..][..n]);
            for j in 0..n {
                crow[j] += av * brow[j];
            }
        }
    }
    c
}

/// Attention of f32 q [B, Hq, S, D], k / v [B, Hkv, S, D] (`shape` = [B, Hq, Hkv, S, D]) over the
/// first `lens[b]` positions of each sequence, scale 1/sqrt(D): (o, lse), zeros / -inf on padding.
pub fn attention(
    q: &[f32], k: &[f32], v: &[f32], shape: [usize; 5], lens: &[usize], causal: bool,
) -> (Vec<f32>, Vec<f32>) {
    attention_with(q, k, v, shape, lens, AttentionVariant { causal, ..AttentionVariant::default() })
}

/// What an attention variant changes (`fmha_sinks`, `fmha_softcap`): the keys each query sees
/// (causal; the `window` keys ending at it when > 0), the scores (`softcap * tanh(s / softcap)`
/// when `softcap` > 0), the softmax denominator (`exp(sinks[h])` added when given).
#[derive(Debug, Default, Clone, Copy)]
pub struct AttentionVariant<'a> {
    pub causal: bool,
    pub window: usize,
    pub sinks: Option<&'a [f32]>,
    pub softcap: f32,
}

/// `attention` of a variant.
pub fn attention_with(
    q: &[f32], k: &[f32], v: &[f32], shape: [usize; 5], lens: &[usize], variant: AttentionVariant,
) -> (Vec<f32>, Vec<f32>) {
    let [batch, hq, hkv, s, d] = shape;
    let scale = (d as f32).sqrt().recip();
    let cap = |x: f32| {
        if variant.softcap > 0.0 { variant.softcap * (x / variant.softcap).tanh() } else { x }
    };
    let (mut o, mut lse) = (vec![0.0f32; q.len()], vec![f32::NEG_INFINITY; batch * hq * s]);
    for b in 0..batch {
        for h in 0..hq {
            let kv = (b * hkv + h / (hq / hkv)) * s * d;
            for i in 0..lens[b] {
                let row = ((b * hq + h) * s + i) * d;
                let end = if variant.causal || variant.window > 0 { i + 1 } else { lens[b] };
                let start =
                    if variant.window > 0 { (i + 1).saturating_sub(variant.window) } else { 0 };
                let scores: Vec<f32> = (start..end)
                    .map(|j| {
                        cap((0..d).map(|c| q[row + c] * k[kv + j * d + c]).sum::<f32>() * scale)
                    })
                    .collect();
                let sink = variant.sinks.map(|sinks| sinks[h]);
                let max = scores.iter().copied().chain(sink).fold(f32::NEG_INFINITY, f32::max);
                let p: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f32 = p.iter().sum::<f32>() + sink.map_or(0.0, |x| (x - max).exp());
                for (j, pj) in (start..end).zip(&p) {
                    for c in 0..d {
                        o[row + c] += pj / sum * v[kv + j * d + c];
                    }
                }
                lse[(b * hq + h) * s + i] = max + sum.ln();
            }
        }
    }
    (o, lse)
}

/// Whether dropout keeps element `index` (the Python operator's mask, bit for bit): word 0 of
/// Philox4x32-10 of the counter (lo32, hi32 of `offset` + `index`, 0, 0) under the key (lo32, hi32
/// of `seed`), shifted right by 8, reaches `threshold` (`plan::dropout_threshold`).
pub fn dropout_keep(index: u64, seed: i64, offset: i64, threshold: i32) -> bool {
    let counter = (offset as u64).wrapping_add(index);
    let (mut c0, mut c1, mut c2, mut c3) = (counter as u32, (counter >> 32) as u32, 0u32, 0u32);
    let (mut k0, mut k1) = (seed as u64 as u32, (seed as u64 >> 32) as u32);
    for _ in 0..10 {
        let (p0, p1) = (u64::from(c0) * 0xD251_1F53, u64::from(c2) * 0xCD9E_8D57);
        (c0, c1, c2, c3) =
            ((p1 >> 32) as u32 ^ c1 ^ k0, p1 as u32, (p0 >> 32) as u32 ^ c3 ^ k1, p0 as u32);
        (k0, k1) = (k0.wrapping_add(0x9E37_79B9), k1.wrapping_add(0xBB67_AE85));
    }
    i64::from(c0 >> 8) >= i64::from(threshold)
}

/// `dropout` of f32 values: x * scale where kept, 0 elsewhere (the caller rounds to its dtype).
pub fn dropout(x: &[f32], seed: i64, offset: i64, p: f64) -> Vec<f32> {
    let (threshold, scale) = (crate::plan::dropout_threshold(p), crate::plan::dropout_scale(p));
    let kept = |(i, v): (usize, &f32)| {
        if dropout_keep(i as u64, seed, offset, threshold) { v * scale } else { 0.0 }
    };
    x.iter().enumerate().map(kept).collect()
}

/// Cross-entropy of f32 logits [M, V] (row-major) per row: (loss, lse), loss 0 where the label is
/// `ignore_index`.
pub fn cross_entropy(
    logits: &[f32], labels: &[i32], v: usize, ignore_index: i32,
) -> (Vec<f32>, Vec<f32>) {
    let lse: Vec<f32> = logits.chunks(v).map(logsumexp).collect();
    let loss = labels
        .iter()
        .enumerate()
        .map(|(i, &l)| if l == ignore_index { 0.0 } else { lse[i] - logits[i * v + l as usize] })
        .collect();
    (loss, lse)
}

/// The gradient of `cross_entropy` for the logits (f32): (exp(x - lse) - onehot) * dloss per row, 0 on
/// ignored rows.
pub fn cross_entropy_bwd(
    logits: &[f32], labels: &[i32], lse: &[f32], dloss: &[f32], v: usize, ignore_index: i32,
) -> Vec<f32> {
    let mut g = vec![0.0f32; logits.len()];
    for (i, &label) in labels.iter().enumerate().filter(|&(_, &l)| l != ignore_index) {
        for j in 0..v {
            let onehot = if j == label as usize { 1.0 } else { 0.0 };
            g[i * v + j] = ((logits[i * v + j] - lse[i]).exp() - onehot) * dloss[i];
        }
    }
    g
}

fn logsumexp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    max + row.iter().map(|x| (x - max).exp()).sum::<f32>().ln()
}

/// MoE top-k routing of f32 logits [T, E]: per token, k times the first largest remaining logit
/// (its id; ties to the lowest id), weighted by softmax probabilities (or sigmoids) renormalized over
/// the k: (weights, ids), [T, k] each.
pub fn moe_topk(logits: &[f32], e: usize, k: usize, sigmoid: bool) -> (Vec<f32>, Vec<i32>) {
    let (mut weights, mut ids) = (Vec::new(), Vec::new());
    for row in logits.chunks(e) {
        let mut left = row.to_vec();
        let chosen: Vec<usize> = (0..k)
            .map(|_| {
                let best = (0..e).fold(0, |b, j| if left[j] > left[b] { j } else { b });
                left[best] = f32::NEG_INFINITY;
                best
            })
            .collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total: f32 = row.iter().map(|x| (x - max).exp()).sum();
        let score =
            |x: f32| if sigmoid { 1.0 / (1.0 + (-x).exp()) } else { (x - max).exp() / total };
        let w: Vec<f32> = chosen.iter().map(|&j| score(row[j])).collect();
        let sum: f32 = w.iter().sum();
        weights.extend(w.iter().map(|x| x / sum));
        ids.extend(chosen.iter().map(|&j| j as i32));
    }
    (weights, ids)
}

/// The gradients (dq, dk, dv) of `attention` (f32; `shape` = [B, Hq, Hkv, S, D]) given do [B, Hq, S, D]
/// and dlse [B, Hq, S]: p = softmax(q k^T * scale) (causal or not) over sequence b's first `lens[b]`
/// positions, delta = rowsum(do * p v) - dlse, ds = p * (do v^T - delta); 0 on padding.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd(
    q: &[f32], k: &[f32], v: &[f32], dout: &[f32], dlse: &[f32], shape: [usize; 5], lens: &[usize],
    causal: bool,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let [batch, hq, hkv, s, d] = shape;
    let scale = (d as f32).sqrt().recip();
    let (mut dq, mut dk, mut dv) =
        (vec![0.0f32; q.len()], vec![0.0f32; k.len()], vec![0.0f32; v.len()]);
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for b in 0..batch {
        for h in 0..hq {
            let (qh, kv) = ((b * hq + h) * s * d, (b * hkv + h / (hq / hkv)) * s * d);
            let n = lens[b];
            for i in 0..n {
                let row = &q[qh + i * d..][..d];
                let visible = if causal { i + 1 } else { n };
                let scores: Vec<f32> =
                    (0..visible).map(|j| dot(row, &k[kv + j * d..][..d]) * scale).collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f32 = e.iter().sum();
                let p: Vec<f32> = e.iter().map(|x| x / sum).collect();
                let g = &dout[qh + i * d..][..d];
                let pv: Vec<f32> =
                    (0..d).map(|c| (0..visible).map(|j| p[j] * v[kv + j * d + c]).sum()).collect();
                let delta = dot(g, &pv) - dlse[(b * hq + h) * s + i];
                for j in 0..visible {
                    let ds = p[j] * (dot(g, &v[kv + j * d..][..d]) - delta);
                    for c in 0..d {
                        dq[qh + i * d + c] += ds * k[kv + j * d + c] * scale;
                        dk[kv + j * d + c] += ds * row[c] * scale;
                        dv[kv + j * d + c] += p[j] * g[c];
                    }
                }
            }
        }
    }
    (dq, dk, dv)
}

/// Decode attention of f32 q [B, Hq, D] against k / v [B, Hkv, S, D] (`shape` = [B, Hq, Hkv, S, D]),
/// sequence b's first `lens[b]` keys, scale 1/sqrt(D): (o [B, Hq, D], lse [B, Hq]).
pub fn decode(
    q: &[f32], k: &[f32], v: &[f32], shape: [usize; 5], lens: &[usize],
) -> (Vec<f32>, Vec<f32>) {
    decode_with(q, k, v, shape, lens, AttentionVariant::default())
}

/// `decode` of a variant (the query is the last of its sequence's positions: `window` keys end at it).
pub fn decode_with(
    q: &[f32], k: &[f32], v: &[f32], shape: [usize; 5], lens: &[usize], variant: AttentionVariant,
) -> (Vec<f32>, Vec<f32>) {
    let [batch, hq, hkv, s, d] = shape;
    let cap = |x: f32| {
        if variant.softcap > 0.0 { variant.softcap * (x / variant.softcap).tanh() } else { x }
    };
    let scale = (d as f32).sqrt().recip();
    let (mut o, mut lse) = (vec![0.0f32; q.len()], vec![0.0f32; batch * hq]);
    for b in 0..batch {
        for h in 0..hq {
            let (row, kv) = ((b * hq + h) * d, (b * hkv + h / (hq / hkv)) * s * d);
            let start = if variant.window > 0 { lens[b].saturating_sub(variant.window) } else { 0 };
            let scores: Vec<f32> = (start..lens[b])
                .map(|j| cap((0..d).map(|c| q[row + c] * k[kv + j * d + c]).sum::<f32>() * scale))
                .collect();
            let sink = variant.sinks.map(|sinks| sinks[h]);
            let max = scores.iter().copied().chain(sink).fold(f32::NEG_INFINITY, f32::max);
            let p: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f32 = p.iter().sum::<f32>() + sink.map_or(0.0, |x| (x - max).exp());
            for (j, pj) in (start..lens[b]).zip(&p) {
                for c in 0..d {
                    o[row + c] += pj / sum * v[kv + j * d + c];
                }
            }
            lse[b * hq + h] = max + sum.ln();
        }
    }
    (o, lse)
}

/// `moe_route`'s alignment of token slots `ids` (the flattened top-k ids) over `experts`:
/// (sorted_ids, expert_ids, num_post_pad) as the Python operator's reference.
pub fn moe_align(ids: &[i32], experts: usize, block: usize) -> (Vec<i32>, Vec<i32>, i32) {
    let n = ids.len();
    let mut counts = vec![0usize; experts];
    for &e in ids {
        counts[e as usize] += 1;
    }
    let padded: Vec<usize> = counts.iter().map(|c| c.div_ceil(block) * block).collect();
    let starts: Vec<usize> = padded
        .iter()
        .scan(0, |acc, p| {
            let s = *acc;
            *acc += p;
            Some(s)
        })
        .collect();
    let total: usize = padded.iter().sum();
    let (n_sorted, n_blocks) = crate::plan::moe_route_sizes(n, experts, block);
    let mut sorted = vec![n as i32; n_sorted];
    let mut next = starts.clone();
    for (slot, &e) in ids.iter().enumerate() {
        sorted[next[e as usize]] = slot as i32;
        next[e as usize] += 1;
    }
    let expert_ids = (0..n_blocks)
        .map(|b| {
            let first = b * block;
            if first >= total {
                -1
            } else {
                (0..experts).rfind(|&e| starts[e] <= first && padded[e] > 0).unwrap() as i32
            }
        })
        .collect();
    (sorted, expert_ids, total as i32)
}

/// MLA attention of f32 inputs: queries q_nope [B, H, Q, 512], q_pe [B, H, Q, 64] (Q = 1: decode)
/// against ckv [B, S, 512], kpe [B, S, 64], scale 1/sqrt(192); query i of sequence b sees keys
/// `..lens[b]` (decode) or `..=i` below `lens[b]` (causal prefill; rows past it 0 / -inf):
/// (o [B, H, Q, 512], lse [B, H, Q]).
#[allow(clippy::too_many_arguments)]
pub fn mla(
    q_nope: &[f32], q_pe: &[f32], ckv: &[f32], kpe: &[f32], [batch, heads, nq, s]: [usize; 4],
    lens: &[usize], causal: bool,
) -> (Vec<f32>, Vec<f32>) {
    let (lora, rope, scale) = (512, 64, (192f32).sqrt().recip());
    let (mut o, mut lse) =
        (vec![0.0f32; q_nope.len()], vec![f32::NEG_INFINITY; batch * heads * nq]);
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..nq.min(if causal { lens[b] } else { nq }) {
                let row = (b * heads + h) * nq + i;
                let keys = if causal { i + 1 } else { lens[b] };
                let scores: Vec<f32> = (0..keys)
                    .map(|j| {
                        let c = &ckv[(b * s + j) * lora..][..lora];
                        let r = &kpe[(b * s + j) * rope..][..rope];
                        (dot(&q_nope[row * lora..][..lora], c)
                            + dot(&q_pe[row * rope..][..rope], r))
                            * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let p: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f32 = p.iter().sum();
                for (j, pj) in p.iter().enumerate() {
                    for c in 0..lora {
                        o[row * lora + c] += pj / sum * ckv[(b * s + j) * lora + c];
                    }
                }
                lse[row] = max + sum.ln();
            }
        }
    }
    (o, lse)
}

/// The largest |a - b| over two equally long slices (infinite values equal where both are; a NaN
/// on either side is an infinite difference).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "compared slices differ in length");
    let diff = |(x, y): (&f32, &f32)| match (x == y, x.is_nan() || y.is_nan()) {
        (true, _) => 0.0,
        (false, true) => f32::INFINITY,
        (false, false) => (x - y).abs(),
    };
    a.iter().zip(b).map(diff).fold(0.0, f32::max)
}
