//! GPU tests (`cargo test -- --ignored` on a machine with a GPU and tileiras): every operator
//! against its CPU reference (`tileport_ops::reference`) on ragged shapes, per dtype.

use std::sync::Arc;

use tileport_ops::half::{bf16, f16};
use tileport_ops::reference::{self as r, max_abs_diff};
use tileport_ops::{Element, Stream, Tensor, download, upload};

fn stream() -> Arc<Stream> {
    tileport_ops::stream(0).expect("a CUDA device")
}

/// Deterministic inputs in [-scale, scale), rounded to the element type.
fn values<T: Element>(n: usize, seed: u64, scale: f32) -> Vec<T> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            T::from_f32((2.0 * unit - 1.0) * scale)
        })
        .collect()
}

fn f32s<T: Element>(v: &[T]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// The tensor's values as f32.
fn host<T: Element>(t: &Tensor<T>, s: &Arc<Stream>) -> Vec<f32> {
    f32s(&download(t, s).unwrap())
}

/// Tolerance of element-wise ops and norms per element type (one rounding of an f32 result).
fn tol<T: Element>() -> f32 {
    match T::ELEMENT {
        tileport_ops::Dtype::F32 => 1e-4,
        tileport_ops::Dtype::F16 => 4e-3,
        tileport_ops::Dtype::BF16 => 3e-2,
    }
}

fn check(what: &str, got: &[f32], want: &[f32], tol: f32) {
    let err = max_abs_diff(got, want);
    assert!(err <= tol, "{what}: max |error| {err} > {tol}");
}

fn elementwise<T: Element>() {
    let s = stream();
    for shape in [vec![1usize], vec![7, 33], vec![1000, 1000], vec![4097]] {
        let n: usize = shape.iter().product();
        let (a, b) = (values::<T>(n, 1, 3.0), values::<T>(n, 2, 1.0));
        let (da, db) = (upload(&a, &shape, &s).unwrap(), upload(&b, &shape, &s).unwrap());
        let (fa, fb) = (f32s(&a), f32s(&b));
        let sum: Vec<f32> = fa.iter().zip(&fb).map(|(x, y)| x + y).collect();
        let relu: Vec<f32> = fa.iter().map(|x| x.max(0.0)).collect();
        let t = tol::<T>() * 4.0;
        check("vector_add", &host(&tileport_ops::vector_add(&da, &db, &s).unwrap(), &s), &sum, t);
        check("relu", &host(&tileport_ops::relu(&da, &s).unwrap(), &s), &relu, t);
        check("gelu", &host(&tileport_ops::gelu(&da, &s).unwrap(), &s), &r::gelu(&fa), t);
        let swiglu = tileport_ops::swiglu(&da, &db, &s).unwrap();
        check("swiglu", &host(&swiglu, &s), &r::swiglu(&fa, &fb), t);
        let geglu = tileport_ops::geglu(&da, &db, &s).unwrap();
        check("geglu", &host(&geglu, &s), &r::geglu(&fa, &fb), t);
    }
    for (m, n) in [(1, 8), (7, 100), (129, 4097)] {
        let x = values::<T>(m * 2 * n, 3, 3.0);
        let y = tileport_ops::silu_and_mul(&upload(&x, &[m, 2 * n], &s).unwrap(), &s).unwrap();
        check("silu_and_mul", &host(&y, &s), &r::silu_and_mul(&f32s(&x), m, n), tol::<T>() * 4.0);
    }
}

fn rows<T: Element>() {
    let s = stream();
    for (m, n) in [(1, 1), (3, 17), (37, 1000), (64, 16384), (16, 100_003), (600, 20000)] {
        let x = values::<T>(m * n, 4, 4.0);
        let dx = upload(&x, &[m, n], &s).unwrap();
        let y = tileport_ops::softmax(&dx, &s).unwrap();
        check(&format!("softmax {m}x{n}"), &host(&y, &s), &r::softmax(&f32s(&x), n), tol::<T>());
        if n > 16384 {
            continue; // the norms hold a row in one tile
        }
        let (w, b) = (values::<T>(n, 5, 1.0), values::<T>(n, 6, 0.1));
        let (dw, db) = (upload(&w, &[n], &s).unwrap(), upload(&b, &[n], &s).unwrap());
        let (fx, fw, fb) = (f32s(&x), f32s(&w), f32s(&b));
        let rms = tileport_ops::rms_norm(&dx, &dw, 1e-6, &s).unwrap();
        check("rms_norm", &host(&rms, &s), &r::rms_norm(&fx, &fw, 1e-6), tol::<T>() * 8.0);
        let ln = tileport_ops::layer_norm(&dx, &dw, &db, 1e-5, &s).unwrap();
        let (y, mean, rstd) = r::layer_norm(&fx, &fw, &fb, 1e-5);
        check("layer_norm", &host(&ln.y, &s), &y, tol::<T>() * 8.0);
        check("layer_norm mean", &host(&ln.mean, &s), &mean, 1e-4);
        let rstd_got = host(&ln.rstd, &s);
        let rel: Vec<f32> = rstd_got.iter().zip(&rstd).map(|(g, w)| g / w).collect();
        check("layer_norm rstd (relative)", &rel, &vec![1.0; rel.len()], 1e-3);
    }
}

fn rope<T: Element>() {
    let s = stream();
    for [b, sq, h, d] in
        [[1, 1, 1, 2], [2, 7, 3, 80], [1, 129, 8, 128], [1, 132, 5, 96], [4, 64, 32, 128]]
    {
        let x = values::<T>(b * sq * h * d, 7, 1.0);
        let half = d / 2;
        let angle = |p: usize, i: usize| p as f32 * 10000f32.powf(-2.0 * i as f32 / d as f32);
        let cos: Vec<f32> = (0..sq * half).map(|k| angle(k / half, k % half).cos()).collect();
        let sin: Vec<f32> = (0..sq * half).map(|k| angle(k / half, k % half).sin()).collect();
        let dx = upload(&x, &[b, sq, h, d], &s).unwrap();
        let (dc, ds) =
            (upload(&cos, &[sq, half], &s).unwrap(), upload(&sin, &[sq, half], &s).unwrap());
        let y = tileport_ops::rope(&dx, &dc, &ds, &s).unwrap();
        let want = r::rope(&f32s(&x), &cos, &sin, sq, h, d);
        check(&format!("rope {b}x{sq}x{h}x{d}"), &host(&y, &s), &want, tol::<T>() * 4.0);
    }
}

fn matmuls<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 3e-2 } else { 1.5e-2 };
    for (m, n, k) in [(1, 1, 1), (17, 33, 65), (129, 255, 100), (512, 768, 1024)] {
        let scale = (k as f32).powf(-0.25);
        let (a, b) = (values::<T>(m * k, 8, scale), values::<T>(k * n, 9, scale));
        let (da, db) = (upload(&a, &[m, k], &s).unwrap(), upload(&b, &[k, n], &s).unwrap());
        let c = tileport_ops::matmul(&da, &db, &s).unwrap();
        let want = r::matmul(&f32s(&a), &f32s(&b), m, k, n);
        check(&format!("matmul {m}x{n}x{k}"), &host(&c, &s), &want, tol);
    }
    let (bt, m, n, k) = (3, 17, 33, 65);
    let (a, b) = (values::<T>(bt * m * k, 10, 0.5), values::<T>(bt * k * n, 11, 0.5));
    let (da, db) = (upload(&a, &[bt, m, k], &s).unwrap(), upload(&b, &[bt, k, n], &s).unwrap());
    let c = host(&tileport_ops::bmm(&da, &db, &s).unwrap(), &s);
    let (fa, fb) = (f32s(&a), f32s(&b));
    for i in 0..bt {
        let want = r::matmul(&fa[i * m * k..][..m * k], &fb[i * k * n..][..k * n], m, k, n);
        check("bmm", &c[i * m * n..][..m * n], &want, tol);
    }
}

fn attention<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 2e-2 } else { 4e-3 };
    for (shape, causal) in
        [([1, 1, 1, 1, 64], false), ([2, 4, 2, 77, 64], true), ([2, 8, 1, 300, 128], false)]
    {
        let [b, hq, hkv, sq, d] = shape;
        let q = values::<T>(b * hq * sq * d, 12, 1.5);
        let (k, v) =
            (values::<T>(b * hkv * sq * d, 13, 1.5), values::<T>(b * hkv * sq * d, 14, 1.0));
        let dq = upload(&q, &[b, hq, sq, d], &s).unwrap();
        let dk = upload(&k, &[b, hkv, sq, d], &s).unwrap();
        let dv = upload(&v, &[b, hkv, sq, d], &s).unwrap();
        let lens: Vec<usize> = (0..b).map(|i| (sq - i * (sq / (b + 1)) - 3 * i).max(1)).collect();
        let lens_i32: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let dl = upload(&lens_i32, &[b], &s).unwrap();
        let out = tileport_ops::fmha_varlen(&dq, &dk, &dv, &dl, causal, &s).unwrap();
        let (o, lse) = r::attention(&f32s(&q), &f32s(&k), &f32s(&v), shape, &lens, causal);
        check(&format!("fmha o {shape:?}"), &host(&out.o, &s), &o, tol);
        check(&format!("fmha lse {shape:?}"), &host(&out.lse, &s), &lse, 1e-3);
        let full = tileport_ops::fmha(&dq, &dk, &dv, causal, &s).unwrap();
        let (o, _) = r::attention(&f32s(&q), &f32s(&k), &f32s(&v), shape, &vec![sq; b], causal);
        check(&format!("fmha (full lengths) o {shape:?}"), &host(&full.o, &s), &o, tol);
    }
}

/// `fmha_sinks` (head dim 64; without and with a sliding window) and `fmha_softcap` (head dim 128)
/// on ragged batches, the window shorter than a key tile, longer than one, longer than the sequence.
fn attention_variants<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 2e-2 } else { 4e-3 };
    let cases = [([2, 4, 2, 77, 64], 0), ([2, 4, 2, 300, 64], 35), ([3, 8, 1, 513, 64], 129)];
    let cases = cases.into_iter().map(|(shape, w)| (shape, Some(w)));
    let cases = cases.chain([([2, 4, 2, 77, 128], None), ([3, 8, 1, 200, 128], None)]);
    for (shape, window) in cases {
        let [b, hq, hkv, sq, d] = shape;
        let q = values::<T>(b * hq * sq * d, 15, 1.5);
        let (k, v) =
            (values::<T>(b * hkv * sq * d, 16, 1.5), values::<T>(b * hkv * sq * d, 17, 1.0));
        let dq = upload(&q, &[b, hq, sq, d], &s).unwrap();
        let dk = upload(&k, &[b, hkv, sq, d], &s).unwrap();
        let dv = upload(&v, &[b, hkv, sq, d], &s).unwrap();
        let lens: Vec<usize> = (0..b).map(|i| (sq - i * (sq / (b + 1)) - 3 * i).max(1)).collect();
        let lens_i32: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let dl = upload(&lens_i32, &[b], &s).unwrap();
        let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.7 - 1.0).collect();
        let (out, variant) = match window {
            Some(window) => {
                let ds = upload(&sinks, &[hq], &s).unwrap();
                let out = tileport_ops::fmha_sinks(&dq, &dk, &dv, &dl, &ds, window, &s).unwrap();
                (
                    out,
                    r::AttentionVariant { causal: true, window, sinks: Some(&sinks), softcap: 0.0 },
                )
            }
            None => {
                let out = tileport_ops::fmha_softcap(&dq, &dk, &dv, &dl, 5.0, &s).unwrap();
                (out, r::AttentionVariant { causal: true, softcap: 5.0, ..Default::default() })
            }
        };
        let (o, lse) = r::attention_with(&f32s(&q), &f32s(&k), &f32s(&v), shape, &lens, variant);
        check(&format!("{variant:?} o {shape:?}"), &host(&out.o, &s), &o, tol);
        check(&format!("{variant:?} lse {shape:?}"), &host(&out.lse, &s), &lse, 1e-3);
    }
}

/// `dropout` and `dropout_bwd` against the reference mask and scale, exactly (one f32 product rounded
/// once to the element type), the counters crossing 2^32 inside the tensor.
fn dropouts<T: Element>() {
    let s = stream();
    let (seed, offset, p) = (0x5EED_1234_ABCD, (1i64 << 32) - 3000, 0.3);
    for shape in [vec![1usize], vec![3, 50021], vec![1000, 1000]] {
        let n: usize = shape.iter().product();
        let x = values::<T>(n, 18, 2.0);
        let dx = upload(&x, &shape, &s).unwrap();
        let want: Vec<f32> = r::dropout(&f32s(&x), seed, offset, p)
            .iter()
            .map(|&v| T::from_f32(v).to_f32())
            .collect();
        let y = tileport_ops::dropout(&dx, seed, offset, p, &s).unwrap();
        check(&format!("dropout {shape:?}"), &host(&y, &s), &want, 0.0);
        let g = tileport_ops::dropout_bwd(&dx, seed, offset, p, &s).unwrap();
        check(&format!("dropout_bwd {shape:?}"), &host(&g, &s), &want, 0.0);
    }
}

/// `cross_entropy` and `cross_entropy_bwd` on ragged vocabularies, every 7th row ignored.
fn cross_entropies<T: Element>() {
    let s = stream();
    for [m, v] in [[1usize, 1], [3, 17], [37, 1000], [4, 50257]] {
        let x = values::<T>(m * v, 19, 4.0);
        let labels: Vec<i32> =
            (0..m).map(|i| if i % 7 == 0 { -100 } else { ((i * 7919) % v) as i32 }).collect();
        let dloss: Vec<f32> = (0..m).map(|i| 1.0 - i as f32 * 0.3).collect();
        let (dx, dl) = (upload(&x, &[m, v], &s).unwrap(), upload(&labels, &[m], &s).unwrap());
        let out = tileport_ops::cross_entropy(&dx, &dl, -100, &s).unwrap();
        let (loss, lse) = r::cross_entropy(&f32s(&x), &labels, v, -100);
        check(&format!("cross_entropy loss [{m}, {v}]"), &host(&out.loss, &s), &loss, 2e-4);
        check(&format!("cross_entropy lse [{m}, {v}]"), &host(&out.lse, &s), &lse, 2e-4);
        let dd = upload(&dloss, &[m], &s).unwrap();
        let g = tileport_ops::cross_entropy_bwd(&dx, &dl, &out.lse, &dd, -100, &s).unwrap();
        let want = r::cross_entropy_bwd(&f32s(&x), &labels, &lse, &dloss, v, -100);
        check(&format!("cross_entropy_bwd [{m}, {v}]"), &host(&g, &s), &want, tol::<T>() * 8.0);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn cross_entropy_matches_the_reference() {
    cross_entropies::<f32>();
    cross_entropies::<f16>();
    cross_entropies::<bf16>();
}

fn matmul_splitks<T: Element>() {
    let s = stream();
    let tol = match T::ELEMENT {
        tileport_ops::Dtype::F32 => 2e-2, // TF32 products
        tileport_ops::Dtype::F16 => 3e-2,
        tileport_ops::Dtype::BF16 => 2e-1,
    };
    for (m, n, k) in [(1, 1, 1), (17, 33, 1000), (100, 300, 5000)] {
        let (a, b) = (values::<T>(m * k, 20, 0.5), values::<T>(k * n, 21, 0.5));
        let (da, db) = (upload(&a, &[m, k], &s).unwrap(), upload(&b, &[k, n], &s).unwrap());
        let c = host(&tileport_ops::matmul_splitk(&da, &db, &s).unwrap(), &s);
        check(
            &format!("matmul_splitk {m}x{n}x{k}"),
            &c,
            &r::matmul(&f32s(&a), &f32s(&b), m, k, n),
            tol,
        );
    }
}

#[test]
#[ignore = "needs a GPU"]
fn matmul_splitk_matches_the_reference() {
    matmul_splitks::<f32>();
    matmul_splitks::<f16>();
    matmul_splitks::<bf16>();
}

/// The MoE top-k routers: ids exactly (ties included: repeated values), weights within 1e-5.
fn moe_topks<T: Element>() {
    let s = stream();
    for (t, e, k) in [(1, 8, 2), (7, 8, 2), (100, 60, 4), (1000, 64, 8), (3, 256, 16)] {
        let mut x = values::<T>(t * e, 22, 2.0);
        x[e / 2] = x[0]; // a tie in the first token
        let dx = upload(&x, &[t, e], &s).unwrap();
        for sigmoid in [false, true] {
            let top = if sigmoid {
                tileport_ops::moe_topk_sigmoid(&dx, k, &s).unwrap()
            } else {
                tileport_ops::moe_topk_softmax(&dx, k, &s).unwrap()
            };
            let (w, ids) = r::moe_topk(&f32s(&x), e, k, sigmoid);
            assert_eq!(
                download(&top.ids, &s).unwrap(),
                ids,
                "moe_topk ids {t}x{e}, k {k}, sigmoid {sigmoid}"
            );
            check(
                &format!("moe_topk weights {t}x{e}, k {k}, sigmoid {sigmoid}"),
                &host(&top.weights, &s),
                &w,
                1e-5,
            );
        }
    }
}

/// `moe_route`: the routing as `moe_topk_softmax`'s, the alignment exactly.
fn moe_routes<T: Element>() {
    let s = stream();
    for (t, e, k, block) in
        [(1, 8, 2, 16), (7, 8, 2, 16), (100, 60, 4, 64), (1000, 64, 8, 64), (4097, 128, 8, 128)]
    {
        let x = values::<T>(t * e, 34, 2.0);
        let dx = upload(&x, &[t, e], &s).unwrap();
        let out = tileport_ops::moe_route(&dx, k, block, &s).unwrap();
        let (w, ids) = r::moe_topk(&f32s(&x), e, k, false);
        assert_eq!(download(&out.top.ids, &s).unwrap(), ids, "moe_route ids {t}x{e}");
        check(&format!("moe_route weights {t}x{e}"), &host(&out.top.weights, &s), &w, 1e-5);
        let (sorted, experts, total) = r::moe_align(&ids, e, block);
        assert_eq!(download(&out.sorted_ids, &s).unwrap(), sorted, "moe_route sorted_ids {t}x{e}");
        assert_eq!(download(&out.expert_ids, &s).unwrap(), experts, "moe_route expert_ids {t}x{e}");
        assert_eq!(
            download(&out.num_post_pad, &s).unwrap(),
            [total],
            "moe_route num_post_pad {t}x{e}"
        );
    }
}

#[test]
#[ignore = "needs a GPU"]
fn moe_route_matches_the_reference() {
    moe_routes::<f32>();
    moe_routes::<f16>();
}

#[test]
#[ignore = "needs a GPU"]
fn moe_topk_matches_the_reference() {
    moe_topks::<f32>();
    moe_topks::<bf16>();
}

/// `flash_decode` on ragged caches, one split (FINAL) and several.
fn decodes<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 2e-2 } else { 4e-3 };
    for shape in [[1, 1, 1, 1, 64], [2, 8, 2, 77, 64], [3, 32, 8, 1000, 128], [4, 8, 1, 4099, 128]]
    {
        let [b, hq, hkv, sk, d] = shape;
        let q = values::<T>(b * hq * d, 23, 1.5);
        let (k, v) =
            (values::<T>(b * hkv * sk * d, 24, 1.5), values::<T>(b * hkv * sk * d, 25, 1.0));
        let lens: Vec<usize> = (0..b).map(|i| (sk - i * (sk / (b + 1)) - 3 * i).max(1)).collect();
        let lens_i32: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let dq = upload(&q, &[b, hq, d], &s).unwrap();
        let dk = upload(&k, &[b, hkv, sk, d], &s).unwrap();
        let dv = upload(&v, &[b, hkv, sk, d], &s).unwrap();
        let dl = upload(&lens_i32, &[b], &s).unwrap();
        let out = tileport_ops::flash_decode(&dq, &dk, &dv, &dl, &s).unwrap();
        let (o, lse) = r::decode(&f32s(&q), &f32s(&k), &f32s(&v), shape, &lens);
        check(&format!("flash_decode o {shape:?}"), &host(&out.o, &s), &o, tol);
        check(&format!("flash_decode lse {shape:?}"), &host(&out.lse, &s), &lse, 1e-3);
    }
}

/// The page pool of a contiguous cache [B, H, S, D]: sequence b's page t (64 positions, zero-padded)
/// at pool page `table[b * pages + t]`.
fn to_pages<T: Element>(cache: &[T], [b, h, s, d]: [usize; 4], table: &[i32]) -> Vec<T> {
    let pages = s.div_ceil(64);
    let mut pool = vec![T::from_f32(0.0); b * pages * h * 64 * d];
    for (i, &page) in table.iter().enumerate() {
        let (seq, t) = (i / pages, i % pages);
        for head in 0..h {
            for p in 0..64.min(s - t * 64) {
                let from = ((seq * h + head) * s + t * 64 + p) * d;
                let to = ((page as usize * h + head) * 64 + p) * d;
                pool[to..to + d].copy_from_slice(&cache[from..from + d]);
            }
        }
    }
    pool
}

/// `flash_decode_paged`, `flash_decode_sinks` and `flash_decode_softcap` against `decode_with` over
/// the same contiguous caches.
fn decode_variants<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 2e-2 } else { 4e-3 };
    for (shape, kind) in
        [([2, 8, 2, 77, 64], 0), ([3, 32, 8, 1000, 64], 1), ([2, 8, 2, 300, 128], 2)]
    {
        let [b, hq, hkv, sk, d] = shape;
        let q = values::<T>(b * hq * d, 31, 1.5);
        let (k, v) =
            (values::<T>(b * hkv * sk * d, 32, 1.5), values::<T>(b * hkv * sk * d, 33, 1.0));
        let lens: Vec<usize> = (0..b).map(|i| (sk - i * (sk / (b + 1)) - 3 * i).max(1)).collect();
        let lens_i32: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let dq = upload(&q, &[b, hq, d], &s).unwrap();
        let dl = upload(&lens_i32, &[b], &s).unwrap();
        let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.3 - 2.0).collect();
        let (dk, dv) =
            (upload(&k, &[b, hkv, sk, d], &s).unwrap(), upload(&v, &[b, hkv, sk, d], &s).unwrap());
        let (out, variant, what) = match kind {
            0 => {
                let pages = sk.div_ceil(64);
                let table: Vec<i32> =
                    (0..b * pages).map(|i| ((i * 5 + 3) % (b * pages)) as i32).collect();
                let up = |x: &[T]| {
                    upload(&to_pages(x, [b, hkv, sk, d], &table), &[b * pages, hkv, 64, d], &s)
                        .unwrap()
                };
                let dt = upload(&table, &[b, pages], &s).unwrap();
                let out =
                    tileport_ops::flash_decode_paged(&dq, &up(&k), &up(&v), &dt, &dl, &s).unwrap();
                (out, r::AttentionVariant::default(), "flash_decode_paged")
            }
            1 => {
                let ds = upload(&sinks, &[hq], &s).unwrap();
                let out =
                    tileport_ops::flash_decode_sinks(&dq, &dk, &dv, &dl, &ds, 129, &s).unwrap();
                (
                    out,
                    r::AttentionVariant { window: 129, sinks: Some(&sinks), ..Default::default() },
                    "flash_decode_sinks",
                )
            }
            _ => {
                let out = tileport_ops::flash_decode_softcap(&dq, &dk, &dv, &dl, 5.0, &s).unwrap();
                (
                    out,
                    r::AttentionVariant { softcap: 5.0, ..Default::default() },
                    "flash_decode_softcap",
                )
            }
        };
        let (o, lse) = r::decode_with(&f32s(&q), &f32s(&k), &f32s(&v), shape, &lens, variant);
        check(&format!("{what} o {shape:?}"), &host(&out.o, &s), &o, tol);
        check(&format!("{what} lse {shape:?}"), &host(&out.lse, &s), &lse, 1e-3);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn decode_variants_match_the_reference() {
    decode_variants::<f16>();
    decode_variants::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn flash_decode_matches_the_reference() {
    decodes::<f16>();
    decodes::<bf16>();
}

/// `fmha_bwd` after `fmha_varlen` on ragged batches, GQA, causal and not.
fn attention_grads<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 1e-1 } else { 2e-2 };
    for (shape, causal) in
        [([1, 1, 1, 1, 64], true), ([2, 4, 2, 77, 64], true), ([2, 4, 1, 150, 128], false)]
    {
        let [b, hq, hkv, sq, d] = shape;
        let q = values::<T>(b * hq * sq * d, 26, 1.5);
        let (k, v) =
            (values::<T>(b * hkv * sq * d, 27, 1.5), values::<T>(b * hkv * sq * d, 28, 1.0));
        let (g, dlse) =
            (values::<T>(b * hq * sq * d, 29, 1.0), values::<f32>(b * hq * sq, 30, 0.5));
        let lens: Vec<usize> = (0..b).map(|i| (sq - i * (sq / (b + 1)) - 3 * i).max(1)).collect();
        let lens_i32: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let up = |x: &[T], h| upload(x, &[b, h, sq, d], &s).unwrap();
        let (dq, dk, dv, dg) = (up(&q, hq), up(&k, hkv), up(&v, hkv), up(&g, hq));
        let (dl, ddlse) =
            (upload(&lens_i32, &[b], &s).unwrap(), upload(&dlse, &[b, hq, sq], &s).unwrap());
        let fwd = tileport_ops::fmha_varlen(&dq, &dk, &dv, &dl, causal, &s).unwrap();
        let out =
            tileport_ops::fmha_bwd(&dq, &dk, &dv, &dl, causal, &fwd.o, &fwd.lse, &dg, &ddlse, &s)
                .unwrap();
        let (wq, wk, wv) = r::attention_bwd(
            &f32s(&q),
            &f32s(&k),
            &f32s(&v),
            &f32s(&g),
            &dlse,
            shape,
            &lens,
            causal,
        );
        check(&format!("fmha_bwd dq {shape:?}"), &host(&out.dq, &s), &wq, tol);
        check(&format!("fmha_bwd dk {shape:?}"), &host(&out.dk, &s), &wk, tol);
        check(&format!("fmha_bwd dv {shape:?}"), &host(&out.dv, &s), &wv, tol);
    }
}

#[test]
#[ignore = "needs a GPU"]
fn fmha_bwd_matches_the_reference() {
    attention_grads::<f16>();
    attention_grads::<bf16>();
}

/// `mla_decode` and `mla_prefill` on ragged lengths against `reference::mla`.
fn mlas<T: Element>() {
    let s = stream();
    let tol = if T::ELEMENT == tileport_ops::Dtype::BF16 { 2e-2 } else { 4e-3 };
    for (b, h, sk) in [(1, 1, 1), (2, 16, 77), (3, 19, 1000)] {
        let lens: Vec<usize> = (0..b).map(|i| (sk - i * (sk / (b + 1)) - 3 * i).max(1)).collect();
        let dl = upload(&lens.iter().map(|&l| l as i32).collect::<Vec<_>>(), &[b], &s).unwrap();
        let (ckv, kpe) = (values::<T>(b * sk * 512, 35, 1.0), values::<T>(b * sk * 64, 36, 1.0));
        let (dc, dk) =
            (upload(&ckv, &[b, sk, 512], &s).unwrap(), upload(&kpe, &[b, sk, 64], &s).unwrap());
        for nq in [1, sk] {
            let (qn, qp) =
                (values::<T>(b * h * nq * 512, 37, 1.0), values::<T>(b * h * nq * 64, 38, 1.0));
            let (o, lse) = r::mla(
                &f32s(&qn),
                &f32s(&qp),
                &f32s(&ckv),
                &f32s(&kpe),
                [b, h, nq, sk],
                &lens,
                nq > 1,
            );
            let out = if nq == 1 {
                let (dn, dp) =
                    (upload(&qn, &[b, h, 512], &s).unwrap(), upload(&qp, &[b, h, 64], &s).unwrap());
                tileport_ops::mla_decode(&dn, &dp, &dc, &dk, &dl, &s).unwrap()
            } else {
                let dn = upload(&qn, &[b, h, nq, 512], &s).unwrap();
                let dp = upload(&qp, &[b, h, nq, 64], &s).unwrap();
                tileport_ops::mla_prefill(&dn, &dp, &dc, &dk, &dl, &s).unwrap()
            };
            check(&format!("mla o {b}x{h}x{sk}, {nq} queries"), &host(&out.o, &s), &o, tol);
            check(&format!("mla lse {b}x{h}x{sk}, {nq} queries"), &host(&out.lse, &s), &lse, 1e-3);
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn mla_matches_the_reference() {
    mlas::<f16>();
    mlas::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn dropout_matches_the_reference() {
    dropouts::<f32>();
    dropouts::<f16>();
    dropouts::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn elementwise_ops_match_the_reference() {
    elementwise::<f32>();
    elementwise::<f16>();
    elementwise::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn row_ops_match_the_reference() {
    rows::<f32>();
    rows::<f16>();
    rows::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn rope_matches_the_reference() {
    rope::<f32>();
    rope::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn matmuls_match_the_reference() {
    matmuls::<f32>();
    matmuls::<f16>();
    matmuls::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn attention_matches_the_reference() {
    attention::<f16>();
    attention::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn attention_variants_match_the_reference() {
    attention_variants::<f16>();
    attention_variants::<bf16>();
}

#[test]
#[ignore = "needs a GPU"]
fn operators_reject_bad_inputs_before_launching() {
    let s = stream();
    let a = upload(&vec![1.0f32; 6], &[2, 3], &s).unwrap();
    let err = tileport_ops::matmul(&a, &a, &s).unwrap_err();
    assert!(matches!(err, tileport_ops::Error::Shape { op: "matmul", .. }), "{err}");
    let h = upload(&vec![f16::ONE; 6], &[1, 1, 1, 6], &s).unwrap();
    let err = tileport_ops::fmha(&h, &h, &h, false, &s).unwrap_err();
    assert!(matches!(err, tileport_ops::Error::Unsupported { op: "fmha", .. }), "{err}");
}
