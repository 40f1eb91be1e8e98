//! The operators: each checks its inputs, takes its plan (`crate::plan`), allocates its outputs,
//! launches the generated kernels on the stream and waits for them.

use std::sync::Arc;

use cutile::cuda_core::Stream;
use cutile::tensor::Tensor;
use tileport_kernels::support::TensorDesc;
use tileport_kernels::{
    attention, attention_bwd, bmm, cross_entropy as ce, dropout as dp, geglu, gelu,
};
use tileport_kernels::{layer_norm as ln, matmul as mm, matmul_splitk as mmk, moe_routing, relu};
use tileport_kernels::{rms_norm as rms, rope as rp, silu_and_mul as sm, softmax as sx};
use tileport_kernels::{swiglu, vector_add as va};

use crate::element::Element;
use crate::launch::{Target, desc, view};
use crate::plan::{self, KernelLaunch};
use crate::{Result, upload};

type Desc<'a> = Option<&'a TensorDesc>;
/// An element-wise launcher of one input: (x, y, TILE, grid, device, stream).
type Unary = extern "C" fn(Desc, Desc, i32, u32, u32, u32, i32, u64) -> i32;
/// A dropout launcher: (x, y, seed, offset, threshold, scale, TILE, grid, device, stream).
type Dropout = extern "C" fn(Desc, Desc, i64, i64, i32, f32, i32, u32, u32, u32, i32, u64) -> i32;
/// An element-wise launcher of two inputs: (a, b, y, TILE, grid, device, stream).
type Binary = extern "C" fn(Desc, Desc, Desc, i32, u32, u32, u32, i32, u64) -> i32;

fn unary<T: Element>(
    op: &'static str, plan: fn(&[usize]) -> Result<KernelLaunch>, launcher: Unary, x: &Tensor<T>,
    stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new(op, stream)?;
    let dims = t.input("x", x)?;
    let l = plan(&dims)?;
    let y = t.output::<T>(&dims)?;
    let flat = [x.size()];
    let [gx, gy, gz] = l.grid;
    let (xd, yd) = (view(x, &flat), view(&y, &flat));
    let code = launcher(Some(&xd), Some(&yd), l.int("TILE"), gx, gy, gz, t.device_id, t.handle());
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

fn binary<T: Element>(
    op: &'static str, plan: fn(&[usize], &[usize]) -> Result<KernelLaunch>, launcher: Binary,
    a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new(op, stream)?;
    let (da, db) = (t.input("a", a)?, t.input("b", b)?);
    let l = plan(&da, &db)?;
    let y = t.output::<T>(&da)?;
    let flat = [a.size()];
    let [gx, gy, gz] = l.grid;
    let (ad, bd, yd) = (view(a, &flat), view(b, &flat), view(&y, &flat));
    let tile = l.int("TILE");
    let code = launcher(Some(&ad), Some(&bd), Some(&yd), tile, gx, gy, gz, t.device_id, t.handle());
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

/// `a + b`, element-wise, for tensors of one shape (any rank).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let a = tileport_ops::upload(&[1.0f32, 2.0, 3.0], &[3], &stream)?;
/// let b = tileport_ops::upload(&[10.0f32, 20.0, 30.0], &[3], &stream)?;
/// let c = tileport_ops::vector_add(&a, &b, &stream)?;
/// assert_eq!(tileport_ops::download(&c, &stream)?, [11.0, 22.0, 33.0]);
/// # Ok(()) }
/// ```
pub fn vector_add<T: Element>(
    a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    binary("vector_add", plan::vector_add, va::tileport_vector_add_kernel, a, b, stream)
}

/// `max(x, 0)`, element-wise.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&[-1.0f32, 0.5, 2.0, -3.0], &[2, 2], &stream)?;
/// let y = tileport_ops::relu(&x, &stream)?;
/// assert_eq!(tileport_ops::download(&y, &stream)?, [0.0, 0.5, 2.0, 0.0]);
/// # Ok(()) }
/// ```
pub fn relu<T: Element>(x: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    unary("relu", plan::relu, relu::tileport_relu_kernel, x, stream)
}

/// GELU with the tanh approximation, element-wise (f32 math).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let host: Vec<bf16> = (0..4096).map(|i| bf16::from_f32(i as f32 / 512.0 - 4.0)).collect();
/// let x = tileport_ops::upload(&host, &[64, 64], &stream)?;
/// let y = tileport_ops::gelu(&x, &stream)?;
/// assert_eq!(y.shape(), [64, 64]);
/// # Ok(()) }
/// ```
pub fn gelu<T: Element>(x: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    unary("gelu", plan::gelu, gelu::tileport_gelu_tanh_kernel, x, stream)
}

/// `silu(a) * b`, element-wise (f32 math): the gated MLP activation with gate and up projections
/// as two tensors.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let gate = tileport_ops::upload(&vec![1.0f32; 8 * 256], &[8, 256], &stream)?;
/// let up = tileport_ops::upload(&vec![2.0f32; 8 * 256], &[8, 256], &stream)?;
/// let h = tileport_ops::swiglu(&gate, &up, &stream)?;
/// assert_eq!(h.shape(), [8, 256]);
/// # Ok(()) }
/// ```
pub fn swiglu<T: Element>(a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    binary("swiglu", plan::swiglu, swiglu::tileport_swiglu_kernel, a, b, stream)
}

/// `gelu_tanh(a) * b`, element-wise (f32 math).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let a = tileport_ops::upload(&vec![0.5f32; 1000], &[1000], &stream)?;
/// let b = tileport_ops::upload(&vec![3.0f32; 1000], &[1000], &stream)?;
/// let y = tileport_ops::geglu(&a, &b, &stream)?;
/// assert_eq!(y.shape(), [1000]);
/// # Ok(()) }
/// ```
pub fn geglu<T: Element>(a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    binary("geglu", plan::geglu, geglu::tileport_geglu_kernel, a, b, stream)
}

/// `silu(x[:, :N]) * x[:, N:]` of x [M, 2N] (gate and up projections side by side): y [M, N].
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&vec![1.0f32; 4 * 2 * 512], &[4, 1024], &stream)?;
/// let y = tileport_ops::silu_and_mul(&x, &stream)?;
/// assert_eq!(y.shape(), [4, 512]);
/// # Ok(()) }
/// ```
pub fn silu_and_mul<T: Element>(x: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    let t = Target::new("silu_and_mul", stream)?;
    let dims = t.input("x", x)?;
    let l = plan::silu_and_mul(&dims)?;
    let (m, n) = (dims[0], dims[1] / 2);
    let y = t.output::<T>(&[m, n])?;
    // the kernel reads row r's gate and up halves as rows 2r and 2r + 1 of an [2M, N] view
    let (xd, yd) = (view(x, &[2 * m, n]), desc(&y));
    let [gx, gy, gz] = l.grid;
    let (bm, bn) = (l.int("BLOCK_M"), l.int("BLOCK_N"));
    let code = sm::tileport_silu_and_mul_kernel(
        Some(&xd),
        Some(&yd),
        bm,
        bn,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

/// Softmax over the last axis of x [M, N] (f32 math), with the variant the Python operator takes
/// by default for the row width (`plan::softmax`).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2], &stream)?;
/// let y = tileport_ops::softmax(&x, &stream)?;
/// let p = tileport_ops::download(&y, &stream)?;
/// assert!(p.iter().all(|v| (v - 0.5).abs() < 1e-6));
/// # Ok(()) }
/// ```
pub fn softmax<T: Element>(x: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    let t = Target::new("softmax", stream)?;
    let dims = t.input("x", x)?;
    let launches = plan::softmax(&dims, T::ELEMENT, t.sms)?;
    let y = t.output::<T>(&dims)?;
    let (xd, yd) = (desc(x), desc(&y));
    // the split pair's f32 partials, kept until the stream is done with them
    let mut partials = None;
    if launches.len() == 2 {
        let shape = plan::softmax_partials(&dims);
        partials = Some((t.output::<f32>(&shape)?, t.output::<f32>(&shape)?));
    }
    for l in &launches {
        let [gx, gy, gz] = l.grid;
        let (dev, s) = (t.device_id, t.handle());
        let code = match (l.kernel, &partials) {
            ("softmax_gather_kernel", _) => sx::tileport_softmax_gather_kernel(
                Some(&xd),
                Some(&yd),
                l.int("TILE"),
                gx,
                gy,
                gz,
                dev,
                s,
            ),
            ("softmax_online_rev_kernel", _) => sx::tileport_softmax_online_rev_kernel(
                Some(&xd),
                Some(&yd),
                l.int("BLOCK_M"),
                l.int("CHUNK"),
                gx,
                gy,
                gz,
                dev,
                s,
            ),
            ("softmax_split_stats_kernel", Some((pm, ps))) => {
                let (pmd, psd) = (desc(pm), desc(ps));
                let tile = l.int("TILE");
                sx::tileport_softmax_split_stats_kernel(
                    Some(&xd),
                    Some(&pmd),
                    Some(&psd),
                    tile,
                    gx,
                    gy,
                    gz,
                    dev,
                    s,
                )
            }
            ("softmax_split_write_kernel", Some((pm, ps))) => {
                let (pmd, psd) = (desc(pm), desc(ps));
                let (tile, splits) = (l.int("TILE"), l.int("SPLITS"));
                sx::tileport_softmax_split_write_kernel(
                    Some(&xd),
                    Some(&pmd),
                    Some(&psd),
                    Some(&yd),
                    tile,
                    splits,
                    gx,
                    gy,
                    gz,
                    dev,
                    s,
                )
            }
            (kernel, _) => {
                let launcher = match kernel {
                    "softmax_tma_prefetch_kernel" => sx::tileport_softmax_tma_prefetch_kernel,
                    _ => sx::tileport_softmax_tma_wide_kernel,
                };
                let (bm, tile) = (l.int("BLOCK_M"), l.int("TILE"));
                launcher(Some(&xd), Some(&yd), bm, tile, gx, gy, gz, dev, s)
            }
        };
        t.check(l.kernel, code)?;
    }
    t.finish()?;
    drop(partials);
    Ok(y)
}

/// RMS norm of the rows of x [M, N] with weight w \[N\]: `x * rsqrt(mean(x^2) + eps) * w` (f32 math).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&[3.0f32, 4.0], &[1, 2], &stream)?;
/// let w = tileport_ops::upload(&[1.0f32, 1.0], &[2], &stream)?;
/// let y = tileport_ops::rms_norm(&x, &w, 1e-6, &stream)?;
/// assert_eq!(y.shape(), [1, 2]);
/// # Ok(()) }
/// ```
pub fn rms_norm<T: Element>(
    x: &Tensor<T>, w: &Tensor<T>, eps: f32, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new("rms_norm", stream)?;
    let (dx, dw) = (t.input("x", x)?, t.input("w", w)?);
    let l = plan::rms_norm(&dx, &dw, T::ELEMENT, t.sms)?;
    let y = t.output::<T>(&dx)?;
    let (xd, wd, yd) = (desc(x), desc(w), desc(&y));
    let [gx, gy, gz] = l.grid;
    let (bm, tile) = (l.int("BLOCK_M"), l.int("TILE"));
    let code = rms::tileport_rms_norm_kernel(
        Some(&xd),
        Some(&wd),
        Some(&yd),
        eps,
        bm,
        tile,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

/// What `layer_norm` returns: the normalized rows and each row's f32 mean and reciprocal std.
#[derive(Debug)]
pub struct LayerNorm<T: Element> {
    pub y: Tensor<T>,
    pub mean: Tensor<f32>,
    pub rstd: Tensor<f32>,
}

/// Layer norm of the rows of x [M, N] with weight w \[N\] and bias b \[N\] (f32 math).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&[1.0f32, 3.0], &[1, 2], &stream)?;
/// let w = tileport_ops::upload(&[1.0f32, 1.0], &[2], &stream)?;
/// let b = tileport_ops::upload(&[0.0f32, 0.0], &[2], &stream)?;
/// let out = tileport_ops::layer_norm(&x, &w, &b, 1e-5, &stream)?;
/// assert_eq!(tileport_ops::download(&out.mean, &stream)?, [2.0]);
/// # Ok(()) }
/// ```
pub fn layer_norm<T: Element>(
    x: &Tensor<T>, w: &Tensor<T>, b: &Tensor<T>, eps: f32, stream: &Arc<Stream>,
) -> Result<LayerNorm<T>> {
    let t = Target::new("layer_norm", stream)?;
    let (dx, dw, db) = (t.input("x", x)?, t.input("w", w)?, t.input("b", b)?);
    let l = plan::layer_norm(&dx, &dw, &db, T::ELEMENT, t.sms)?;
    let y = t.output::<T>(&dx)?;
    let (mean, rstd) = (t.output::<f32>(&dx[..1])?, t.output::<f32>(&dx[..1])?);
    let (xd, wd, bd, yd) = (desc(x), desc(w), desc(b), desc(&y));
    let (md, rd) = (desc(&mean), desc(&rstd));
    let launcher = match l.kernel {
        "layer_norm_fwd_occ4_kernel" => ln::tileport_layer_norm_fwd_occ4_kernel,
        _ => ln::tileport_layer_norm_fwd_kernel,
    };
    let [gx, gy, gz] = l.grid;
    let (bm, tile) = (l.int("BLOCK_M"), l.int("TILE"));
    let arrays = [Some(&xd), Some(&wd), Some(&bd), Some(&yd), Some(&md), Some(&rd)];
    let [x_, w_, b_, y_, m_, r_] = arrays;
    let code = launcher(x_, w_, b_, y_, m_, r_, eps, bm, tile, gx, gy, gz, t.device_id, t.handle());
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(LayerNorm { y, mean, rstd })
}

/// Rotary embedding (rotate-half) of x [B, S, H, D] with tables cos, sin [S, D/2] (f32):
/// `[x1 * cos - x2 * sin, x2 * cos + x1 * sin]` of the halves x1, x2 of each head.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let (s, d) = (16, 64);
/// let x = tileport_ops::upload(&vec![1.0f32; 2 * s * 4 * d], &[2, s, 4, d], &stream)?;
/// let cos = tileport_ops::upload(&vec![1.0f32; s * d / 2], &[s, d / 2], &stream)?;
/// let sin = tileport_ops::upload(&vec![0.0f32; s * d / 2], &[s, d / 2], &stream)?;
/// let y = tileport_ops::rope(&x, &cos, &sin, &stream)?; // the identity rotation
/// assert_eq!(y.shape(), [2, s as i32, 4, d as i32]);
/// # Ok(()) }
/// ```
pub fn rope<T: Element>(
    x: &Tensor<T>, cos: &Tensor<f32>, sin: &Tensor<f32>, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new("rope", stream)?;
    let (dx, dc, ds) = (t.input("x", x)?, t.input("cos", cos)?, t.input("sin", sin)?);
    let l = plan::rope(&dx, &dc, &ds, t.sms)?;
    let y = t.output::<T>(&dx)?;
    let (b, s, h, half) = (dx[0], dx[1], dx[2], dx[3] / 2);
    // each head as its two halves: [B * S, H, 2, D/2] for the rows entries, else [B, S, H, 2, D/2]
    let heads: Vec<usize> = if plan::ROPE_ROWS_ENTRIES.contains(&l.kernel) {
        vec![b * s, h, 2, half]
    } else {
        vec![b, s, h, 2, half]
    };
    let (xd, yd, cd, sd) = (view(x, &heads), view(&y, &heads), desc(cos), desc(sin));
    let launcher = match l.kernel {
        "rope_persistent_kernel" => rp::tileport_rope_persistent_kernel,
        "rope_rows_kernel" => rp::tileport_rope_rows_kernel,
        "rope_rows_pair_kernel" => rp::tileport_rope_rows_pair_kernel,
        "rope_rows_pair_persistent_kernel" => rp::tileport_rope_rows_pair_persistent_kernel,
        _ => rp::tileport_rope_kernel,
    };
    let [gx, gy, gz] = l.grid;
    let (bs, bh, ht) = (l.int("BLOCK_S"), l.int("BLOCK_H"), l.int("HALF_TILE"));
    let (x_, c_, s_, y_) = (Some(&xd), Some(&cd), Some(&sd), Some(&yd));
    let code = launcher(x_, c_, s_, y_, bs, bh, ht, gx, gy, gz, t.device_id, t.handle());
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

fn mma<T: Element>(
    t: &Target, l: &KernelLaunch, a: &Tensor<T>, b: &Tensor<T>, c: &Tensor<T>,
) -> Result<()> {
    let launcher = match l.kernel {
        "bmm_kernel" => bmm::tileport_bmm_kernel,
        _ => mm::tileport_matmul_kernel,
    };
    let (ad, bd, cd) = (desc(a), desc(b), desc(c));
    let [gx, gy, gz] = l.grid;
    let (tm, tn, tk, gm) = (l.int("TILE_M"), l.int("TILE_N"), l.int("TILE_K"), l.int("GROUP_M"));
    let tf32 = l.bool("USE_TF32");
    let (a_, b_, c_) = (Some(&ad), Some(&bd), Some(&cd));
    let code = launcher(a_, b_, c_, tm, tn, tk, gm, tf32, gx, gy, gz, t.device_id, t.handle());
    t.check(l.kernel, code)?;
    t.finish()
}

/// a [M, K] @ b [K, N]: f16 / bf16 with f32 accumulation, f32 through TF32.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let a = tileport_ops::upload(&vec![f16::ONE; 128 * 64], &[128, 64], &stream)?;
/// let b = tileport_ops::upload(&vec![f16::ONE; 64 * 32], &[64, 32], &stream)?;
/// let c = tileport_ops::matmul(&a, &b, &stream)?;
/// assert_eq!(tileport_ops::download(&c, &stream)?[0], f16::from_f32(64.0));
/// # Ok(()) }
/// ```
pub fn matmul<T: Element>(a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    let t = Target::new("matmul", stream)?;
    let (da, db) = (t.input("a", a)?, t.input("b", b)?);
    let l = plan::matmul(&da, &db, T::ELEMENT, t.sms)?;
    let c = t.output::<T>(&[da[0], db[1]])?;
    mma(&t, &l, a, b, &c)?;
    Ok(c)
}

/// Batched a [B, M, K] @ b [B, K, N], as `matmul` per batch.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let a = tileport_ops::upload(&vec![1.0f32; 2 * 16 * 8], &[2, 16, 8], &stream)?;
/// let b = tileport_ops::upload(&vec![1.0f32; 2 * 8 * 4], &[2, 8, 4], &stream)?;
/// let c = tileport_ops::bmm(&a, &b, &stream)?;
/// assert_eq!(c.shape(), [2, 16, 4]);
/// # Ok(()) }
/// ```
pub fn bmm<T: Element>(a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>) -> Result<Tensor<T>> {
    let t = Target::new("bmm", stream)?;
    let (da, db) = (t.input("a", a)?, t.input("b", b)?);
    let l = plan::bmm(&da, &db, T::ELEMENT, t.sms)?;
    let c = t.output::<T>(&[da[0], da[1], db[2]])?;
    mma(&t, &l, a, b, &c)?;
    Ok(c)
}

/// Dropout: `x / (1 - p)` where the mask keeps an element, 0 where it drops it, element i kept with
/// probability 1 - p by Philox4x32-10 of the counter `offset` + i under the key `seed` (bit for bit
/// the Python operator's mask: `reference::dropout_keep`). `p` in [0, 1); a caller drawing several
/// masks from one seed advances `offset` by the elements each used; `dropout_bwd` recomputes it.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let x = tileport_ops::upload(&vec![1.0f32; 4096], &[64, 64], &stream)?;
/// let y = tileport_ops::dropout(&x, 1234, 0, 0.25, &stream)?;
/// let kept = tileport_ops::download(&y, &stream)?.iter().filter(|&&v| v != 0.0).count();
/// assert!(kept > 2900 && kept < 3250); // about 3/4 of 4096, each 1 / 0.75
/// # Ok(()) }
/// ```
pub fn dropout<T: Element>(
    x: &Tensor<T>, seed: i64, offset: i64, p: f64, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    masked("dropout", plan::dropout, dp::tileport_dropout_fwd_kernel, x, seed, offset, p, stream)
}

/// The gradient of `dropout`: `dy / (1 - p)` where `dropout`'s mask of the same `seed`, `offset`
/// and `p` keeps an element (recomputed, not stored), 0 elsewhere.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let dy = tileport_ops::upload(&vec![2.0f32; 1000], &[1000], &stream)?;
/// let dx = tileport_ops::dropout_bwd(&dy, 1234, 0, 0.5, &stream)?;
/// assert!(tileport_ops::download(&dx, &stream)?.iter().all(|&v| v == 0.0 || v == 4.0));
/// # Ok(()) }
/// ```
pub fn dropout_bwd<T: Element>(
    dy: &Tensor<T>, seed: i64, offset: i64, p: f64, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let plan = plan::dropout_bwd;
    masked("dropout_bwd", plan, dp::tileport_dropout_bwd_kernel, dy, seed, offset, p, stream)
}

#[allow(clippy::too_many_arguments)]
fn masked<T: Element>(
    op: &'static str, plan: fn(&[usize], i64, f64) -> Result<KernelLaunch>, launcher: Dropout,
    x: &Tensor<T>, seed: i64, offset: i64, p: f64, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new(op, stream)?;
    let dims = t.input("x", x)?;
    let l = plan(&dims, offset, p)?;
    let y = t.output::<T>(&dims)?;
    let flat = [x.size()];
    let [gx, gy, gz] = l.grid;
    let (xd, yd) = (view(x, &flat), view(&y, &flat));
    let (threshold, scale) = (plan::dropout_threshold(p), plan::dropout_scale(p));
    let tile = l.int("TILE");
    let (device, handle) = (t.device_id, t.handle());
    let code = launcher(
        Some(&xd),
        Some(&yd),
        seed,
        offset,
        threshold,
        scale,
        tile,
        gx,
        gy,
        gz,
        device,
        handle,
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(y)
}

/// What the MoE top-k routers return: per token, the weights of its k experts (f32 [T, k], summing
/// to 1) and their ids (i32 [T, k], in decreasing logit order, the lowest id first among equal logits).
#[derive(Debug)]
pub struct TopK {
    pub weights: Tensor<f32>,
    pub ids: Tensor<i32>,
}

/// MoE routing with softmax scores: the `k` experts of each token with the largest router logits
/// (logits [T, E]; `k` a power of two <= min(16, E)), weighted by their softmax probabilities
/// renormalized over the k.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let logits = tileport_ops::upload(&[0.0f32, 3.0, 1.0, 2.0], &[1, 4], &stream)?;
/// let top = tileport_ops::moe_topk_softmax(&logits, 2, &stream)?;
/// assert_eq!(tileport_ops::download(&top.ids, &stream)?, [1, 3]);
/// # Ok(()) }
/// ```
pub fn moe_topk_softmax<T: Element>(
    logits: &Tensor<T>, k: usize, stream: &Arc<Stream>,
) -> Result<TopK> {
    topk("moe_topk_softmax", logits, k, false, stream)
}

/// MoE routing with sigmoid scores (DeepSeek-V3 style): as `moe_topk_softmax`, the weights the k
/// chosen logits' sigmoids renormalized to sum to 1.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let logits = tileport_ops::upload(&vec![0.5f32; 64 * 256], &[64, 256], &stream)?;
/// let top = tileport_ops::moe_topk_sigmoid(&logits, 8, &stream)?;
/// assert_eq!(top.weights.shape(), [64, 8]);
/// # Ok(()) }
/// ```
pub fn moe_topk_sigmoid<T: Element>(
    logits: &Tensor<T>, k: usize, stream: &Arc<Stream>,
) -> Result<TopK> {
    topk("moe_topk_sigmoid", logits, k, true, stream)
}

fn topk<T: Element>(
    op: &'static str, logits: &Tensor<T>, k: usize, sigmoid: bool, stream: &Arc<Stream>,
) -> Result<TopK> {
    let t = Target::new(op, stream)?;
    let l = plan::moe_topk(&t.input("logits", logits)?, k, sigmoid)?;
    let top = topk_launch(&t, logits, &l)?;
    t.finish()?;
    Ok(top)
}

/// The top-k launch `l` (its checks made), not waited for.
fn topk_launch<T: Element>(t: &Target<'_>, logits: &Tensor<T>, l: &KernelLaunch) -> Result<TopK> {
    let dl = t.input("logits", logits)?;
    let k = l.int("K") as usize;
    let (weights, ids) = (t.output::<f32>(&[dl[0], k])?, t.output::<i32>(&[dl[0], k])?);
    let (ld, wd, id) = (desc(logits), desc(&weights), desc(&ids));
    let [gx, gy, gz] = l.grid;
    let (bt, e_pad, kk) = (l.int("BLOCK_T"), l.int("E_PAD"), l.int("K"));
    let code = moe_routing::tileport_moe_topk_kernel(
        Some(&ld),
        Some(&wd),
        Some(&id),
        bt,
        e_pad,
        kk,
        l.bool("SIGMOID"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    Ok(TopK { weights, ids })
}

/// What `moe_route` returns: the routing (`TopK`) and what a fused-MoE expert GEMM reads of it.
#[derive(Debug)]
pub struct MoeRoute {
    pub top: TopK,
    /// The T * k token slots grouped by expert (ascending slots within a group), each group padded
    /// to a multiple of `block_size` with the value T * k: i32 [T * k + E * (block_size - 1)].
    pub sorted_ids: Tensor<i32>,
    /// The expert of each `block_size` block of `sorted_ids`, -1 past the padded total.
    pub expert_ids: Tensor<i32>,
    /// The padded total, i32 \[1\].
    pub num_post_pad: Tensor<i32>,
}

/// MoE routing for a fused expert GEMM: `moe_topk_softmax(logits, k)`, then its token slots sorted
/// by expert and padded per expert to whole blocks of `block_size` (a power of two).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let logits = tileport_ops::upload(&[0.0f32, 3.0, 1.0, 2.0], &[1, 4], &stream)?;
/// let r = tileport_ops::moe_route(&logits, 2, 4, &stream)?;
/// // slot 0 (expert 1) and slot 1 (expert 3), each padded to a block of 4 with the value 2
/// assert_eq!(tileport_ops::download(&r.num_post_pad, &stream)?, [8]);
/// # Ok(()) }
/// ```
pub fn moe_route<T: Element>(
    logits: &Tensor<T>, k: usize, block_size: usize, stream: &Arc<Stream>,
) -> Result<MoeRoute> {
    let t = Target::new("moe_route", stream)?;
    let dl = t.input("logits", logits)?;
    let launches = plan::moe_route(&dl, k, block_size)?;
    let top = topk_launch(&t, logits, &launches[0])?;
    let (n_sorted, n_blocks) = plan::moe_route_sizes(dl[0] * k, dl[1], block_size);
    let sorted_ids = t.output::<i32>(&[n_sorted])?;
    let (expert_ids, num_post_pad) = (t.output::<i32>(&[n_blocks])?, t.output::<i32>(&[1])?);
    // the alignment's workspace: per block of slots its tokens per expert, then where they start
    let c = plan::moe_align_config(dl[0] * k, dl[1]);
    let counts = t.output::<i32>(&[c.chunks, c.e_pad])?;
    let offsets = t.output::<i32>(&[c.chunks, c.e_pad])?;
    let ends = t.output::<i32>(&[c.e_pad])?;
    let ids = view(&top.ids, &[dl[0] * k]);
    let (sd, ed, nd) = (desc(&sorted_ids), desc(&expert_ids), desc(&num_post_pad));
    let (cd, od, end) = (desc(&counts), desc(&offsets), desc(&ends));
    let [count, offset, scatter] = [&launches[1], &launches[2], &launches[3]];
    let [gx, gy, gz] = count.grid;
    let code = moe_routing::tileport_moe_align_count_kernel(
        Some(&ids),
        Some(&cd),
        Some(&sd),
        count.int("SLOTS"),
        count.int("E_PAD"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(count.kernel, code)?;
    let [gx, gy, gz] = offset.grid;
    let code = moe_routing::tileport_moe_align_offsets_kernel(
        Some(&cd),
        Some(&od),
        Some(&end),
        Some(&nd),
        offset.int("BLOCK"),
        offset.int("E_PAD"),
        offset.int("ROWS"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(offset.kernel, code)?;
    let [gx, gy, gz] = scatter.grid;
    let code = moe_routing::tileport_moe_align_scatter_kernel(
        Some(&ids),
        Some(&od),
        Some(&end),
        Some(&sd),
        Some(&ed),
        scatter.int("BLOCK"),
        scatter.int("E_PAD"),
        scatter.int("TILE"),
        scatter.int("STEPS"),
        scatter.int("ID_TILE"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(scatter.kernel, code)?;
    t.finish()?;
    Ok(MoeRoute { top, sorted_ids, expert_ids, num_post_pad })
}

/// What `cross_entropy` returns: per row, the loss and the log-sum-exp of its logits, f32 \[M\].
#[derive(Debug)]
pub struct CrossEntropy {
    pub loss: Tensor<f32>,
    pub lse: Tensor<f32>,
}

/// Cross-entropy per row of logits [M, V] against labels \[M\] (i32 in [0, V), or `ignore_index`):
/// `loss[i] = logsumexp(logits[i]) - logits[i, labels[i]]` (0 where the label is `ignore_index`) and
/// `lse[i]` (what `cross_entropy_bwd` takes), f32 math over the logits as given. torch's mean loss is
/// the sum of `loss` over the rows not ignored, divided by their count.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let logits = tileport_ops::upload(&vec![0.0f32; 4 * 1000], &[4, 1000], &stream)?;
/// let labels = tileport_ops::upload(&[3i32, -100, 999, 0], &[4], &stream)?;
/// let out = tileport_ops::cross_entropy(&logits, &labels, -100, &stream)?;
/// let loss = tileport_ops::download(&out.loss, &stream)?;
/// assert!((loss[0] - 1000f32.ln()).abs() < 1e-4 && loss[1] == 0.0);
/// # Ok(()) }
/// ```
pub fn cross_entropy<T: Element>(
    logits: &Tensor<T>, labels: &Tensor<i32>, ignore_index: i32, stream: &Arc<Stream>,
) -> Result<CrossEntropy> {
    let t = Target::new("cross_entropy", stream)?;
    let (dx, dl) = (t.input("logits", logits)?, t.input("labels", labels)?);
    let l = plan::cross_entropy(&dx, &dl, t.sms)?;
    let (loss, lse) = (t.output::<f32>(&dl)?, t.output::<f32>(&dl)?);
    let (xd, ld, lossd, lsed) = (desc(logits), desc(labels), desc(&loss), desc(&lse));
    let [gx, gy, gz] = l.grid;
    let (block_m, chunk) = (l.int("BLOCK_M"), l.int("CHUNK"));
    let code = ce::tileport_cross_entropy_fwd_kernel(
        Some(&xd),
        Some(&ld),
        Some(&lossd),
        Some(&lsed),
        ignore_index,
        block_m,
        chunk,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(CrossEntropy { loss, lse })
}

/// The gradient of `cross_entropy` for the logits: `(exp(logits - lse) - onehot(labels)) * dloss`
/// per row (f32 math, rounded once to the element type), 0 on rows whose label is `ignore_index`;
/// `lse` is `cross_entropy`'s, `dloss` \[M\] f32 the loss's gradient.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let logits = tileport_ops::upload(&vec![0.0f32; 2 * 8], &[2, 8], &stream)?;
/// let labels = tileport_ops::upload(&[1i32, 5], &[2], &stream)?;
/// let out = tileport_ops::cross_entropy(&logits, &labels, -100, &stream)?;
/// let dloss = tileport_ops::upload(&[1.0f32, 1.0], &[2], &stream)?;
/// let g = tileport_ops::cross_entropy_bwd(&logits, &labels, &out.lse, &dloss, -100, &stream)?;
/// assert!((tileport_ops::download(&g, &stream)?[1] - (0.125 - 1.0)).abs() < 1e-5);
/// # Ok(()) }
/// ```
pub fn cross_entropy_bwd<T: Element>(
    logits: &Tensor<T>, labels: &Tensor<i32>, lse: &Tensor<f32>, dloss: &Tensor<f32>,
    ignore_index: i32, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new("cross_entropy_bwd", stream)?;
    let (dx, dl) = (t.input("logits", logits)?, t.input("labels", labels)?);
    let (dlse, dd) = (t.input("lse", lse)?, t.input("dloss", dloss)?);
    let l = plan::cross_entropy_bwd(&dx, &dl, &dlse, &dd, t.sms)?;
    let g = t.output::<T>(&dx)?;
    let (xd, ld, lsed, dld, gd) = (desc(logits), desc(labels), desc(lse), desc(dloss), desc(&g));
    let [gx, gy, gz] = l.grid;
    let (block_m, chunk) = (l.int("BLOCK_M"), l.int("CHUNK"));
    let code = ce::tileport_cross_entropy_bwd_kernel(
        Some(&xd),
        Some(&ld),
        Some(&lsed),
        Some(&dld),
        Some(&gd),
        ignore_index,
        block_m,
        chunk,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(g)
}

/// a [M, K] @ b [K, N] with K split over several tile blocks per output tile: the partial products
/// in an f32 workspace [S, M, N] (allocated here, S from `plan::matmul_splitk`), then their sum in
/// the element type. For a long K and few output tiles (the product `matmul` computes, with more
/// blocks busy).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// let stream = tileport_ops::stream(0)?;
/// let a = tileport_ops::upload(&vec![1.0f32; 64 * 16384], &[64, 16384], &stream)?;
/// let b = tileport_ops::upload(&vec![0.5f32; 16384 * 64], &[16384, 64], &stream)?;
/// let c = tileport_ops::matmul_splitk(&a, &b, &stream)?;
/// assert!((tileport_ops::download(&c, &stream)?[0] - 8192.0).abs() < 1.0); // TF32 products
/// # Ok(()) }
/// ```
pub fn matmul_splitk<T: Element>(
    a: &Tensor<T>, b: &Tensor<T>, stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let t = Target::new("matmul_splitk", stream)?;
    let (da, db) = (t.input("a", a)?, t.input("b", b)?);
    let [split, reduce] =
        <[KernelLaunch; 2]>::try_from(plan::matmul_splitk(&da, &db, T::ELEMENT, t.sms)?)
            .expect("a split-K plan is two launches");
    let ws = t.output::<f32>(&[split.grid[1] as usize, da[0], db[1]])?;
    let c = t.output::<T>(&[da[0], db[1]])?;
    let (ad, bd, wsd, cd) = (desc(a), desc(b), desc(&ws), desc(&c));
    let [gx, gy, gz] = split.grid;
    let (tm, tn, tk, gm) =
        (split.int("TILE_M"), split.int("TILE_N"), split.int("TILE_K"), split.int("GROUP_M"));
    let (per_split, tf32) = (split.int("k_tiles_per_split"), split.bool("USE_TF32"));
    let (a_, b_, ws_) = (Some(&ad), Some(&bd), Some(&wsd));
    let code = mmk::tileport_matmul_splitk_kernel(
        a_,
        b_,
        ws_,
        per_split,
        tm,
        tn,
        tk,
        gm,
        tf32,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(split.kernel, code)?;
    let [gx, gy, gz] = reduce.grid;
    let (rm, rn) = (reduce.int("TILE_M"), reduce.int("TILE_N"));
    let code = mmk::tileport_splitk_reduce_kernel(
        ws_,
        Some(&cd),
        rm,
        rn,
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(reduce.kernel, code)?;
    t.finish()?;
    Ok(c)
}

/// What `fmha` returns: the attention output [B, Hq, S, D] and the f32 log-sum-exp of each query's
/// scores [B, Hq, S] (natural log; -inf on padding); `flash_decode`'s: o [B, Hq, D], lse [B, Hq].
#[derive(Debug)]
pub struct Attention<T: Element> {
    pub o: Tensor<T>,
    pub lse: Tensor<f32>,
}

/// Attention decode (split-KV flash decoding): one query token per sequence, q [B, Hq, D], against its
/// caches k, v [B, Hkv, S, D] (grouped-query: Hkv divides Hq, at most 16 query heads per kv head) up to
/// `kv_lens[b]` positions (i32 \[B\]), scale 1/sqrt(D); f16 or bf16, head dim 64 or 128. Returns o
/// [B, Hq, D] and lse [B, Hq].
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, hq, hkv, s, d) = (2, 8, 2, 1000, 128);
/// let q = tileport_ops::upload(&vec![bf16::from_f32(0.1); b * hq * d], &[b, hq, d], &stream)?;
/// let cache = vec![bf16::from_f32(0.2); b * hkv * s * d];
/// let k = tileport_ops::upload(&cache, &[b, hkv, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[1000i32, 17], &[2], &stream)?;
/// let out = tileport_ops::flash_decode(&q, &k, &k, &lens, &stream)?;
/// assert_eq!(out.lse.shape(), [2, 8]);
/// # Ok(()) }
/// ```
pub fn flash_decode<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, kv_lens: &Tensor<i32>, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("flash_decode", stream)?;
    let (dq, dk, dv) = (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?);
    let dl = t.input("kv_lens", kv_lens)?;
    let launches = plan::flash_decode(&dq, &dk, &dv, &dl, T::ELEMENT, t.sms)?;
    decode(t, q, k, v, kv_lens, None, Extras::default(), &launches)
}

/// `flash_decode` over paged caches: k and v are page pools [P, Hkv, 64, D] (64 positions a page)
/// and sequence b's page t is pool page `block_table[b, t]` (i32 [B, pages]).
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, hq, hkv, d, pages) = (2, 8, 2, 128, 4);
/// let q = tileport_ops::upload(&vec![f16::from_f32(0.1); b * hq * d], &[b, hq, d], &stream)?;
/// let pool = vec![f16::from_f32(0.2); b * pages * hkv * 64 * d];
/// let k = tileport_ops::upload(&pool, &[b * pages, hkv, 64, d], &stream)?;
/// let table = tileport_ops::upload(&[7i32, 0, 3, 5, 1, 2, 4, 6], &[b, pages], &stream)?;
/// let lens = tileport_ops::upload(&[256i32, 100], &[2], &stream)?;
/// let out = tileport_ops::flash_decode_paged(&q, &k, &k, &table, &lens, &stream)?;
/// assert_eq!(out.o.shape(), q.shape());
/// # Ok(()) }
/// ```
pub fn flash_decode_paged<T: Element>(
    q: &Tensor<T>, k_pages: &Tensor<T>, v_pages: &Tensor<T>, block_table: &Tensor<i32>,
    kv_lens: &Tensor<i32>, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("flash_decode_paged", stream)?;
    let (dq, dk, dv) =
        (t.input("q", q)?, t.input("k_pages", k_pages)?, t.input("v_pages", v_pages)?);
    let (dt, dl) = (t.input("block_table", block_table)?, t.input("kv_lens", kv_lens)?);
    let launches = plan::flash_decode_paged(&dq, &dk, &dv, &dt, &dl, T::ELEMENT, t.sms)?;
    decode(t, q, k_pages, v_pages, kv_lens, Some(block_table), Extras::default(), &launches)
}

/// `flash_decode` with per-head sink logits (gpt-oss): the softmax denominators also hold
/// `exp(sinks[h])` (f32 \[Hq\]), over the `window` keys ending at the query when `window` > 0;
/// head dim 64.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, hq, s, d) = (1, 4, 500, 64);
/// let q = tileport_ops::upload(&vec![bf16::from_f32(0.1); b * hq * d], &[b, hq, d], &stream)?;
/// let k = tileport_ops::upload(&vec![bf16::from_f32(0.2); b * s * d], &[b, 1, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[500i32], &[1], &stream)?;
/// let sinks = tileport_ops::upload(&[0.5f32, -1.0, 2.0, 0.0], &[4], &stream)?;
/// let out = tileport_ops::flash_decode_sinks(&q, &k, &k, &lens, &sinks, 128, &stream)?;
/// assert_eq!(out.lse.shape(), [1, 4]);
/// # Ok(()) }
/// ```
pub fn flash_decode_sinks<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, kv_lens: &Tensor<i32>, sinks: &Tensor<f32>,
    window: usize, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("flash_decode_sinks", stream)?;
    let (dq, dk, dv) = (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?);
    let (dl, ds) = (t.input("kv_lens", kv_lens)?, t.input("sinks", sinks)?);
    let launches = plan::flash_decode_sinks(&dq, &dk, &dv, &dl, &ds, window, T::ELEMENT, t.sms)?;
    let extras = Extras { sinks: Some(sinks), window: window as i32, ..Extras::default() };
    decode(t, q, k, v, kv_lens, None, extras, &launches)
}

/// `flash_decode` with the scaled logits capped as `softcap * tanh(s / softcap)` (Gemma),
/// `softcap` > 0; head dim 128.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, hq, s, d) = (2, 8, 300, 128);
/// let q = tileport_ops::upload(&vec![f16::from_f32(0.1); b * hq * d], &[b, hq, d], &stream)?;
/// let k = tileport_ops::upload(&vec![f16::from_f32(0.2); b * 2 * s * d], &[b, 2, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[300i32, 9], &[2], &stream)?;
/// let out = tileport_ops::flash_decode_softcap(&q, &k, &k, &lens, 50.0, &stream)?;
/// assert_eq!(out.o.shape(), q.shape());
/// # Ok(()) }
/// ```
pub fn flash_decode_softcap<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, kv_lens: &Tensor<i32>, softcap: f32,
    stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("flash_decode_softcap", stream)?;
    let (dq, dk, dv) = (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?);
    let dl = t.input("kv_lens", kv_lens)?;
    let launches = plan::flash_decode_softcap(&dq, &dk, &dv, &dl, softcap, T::ELEMENT, t.sms)?;
    decode(t, q, k, v, kv_lens, None, Extras { softcap, ..Extras::default() }, &launches)
}

/// The launches of a decode plan (its checks made), then the wait.
#[allow(clippy::too_many_arguments)]
fn decode<T: Element>(
    t: Target<'_>, q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, kv_lens: &Tensor<i32>,
    block_table: Option<&Tensor<i32>>, extras: Extras, launches: &[KernelLaunch],
) -> Result<Attention<T>> {
    let (dq, dk) = (t.input("q", q)?, t.input("k", k)?);
    let partial = &launches[0];
    let (b, hq, d, hkv) = (dq[0], dq[1], dq[2], dk[1]);
    let (group, splits) = (hq / hkv, partial.grid[0] as usize);
    let o = t.output::<T>(&dq)?;
    let lse = t.output::<f32>(&[b, hq])?;
    // more than one split: f32 partials [B, Hq, splits, (D)] the combine kernel reads; else o and lse
    let parts = match launches.get(1) {
        Some(_) => {
            Some((t.output::<f32>(&[b, hq, splits, d])?, t.output::<f32>(&[b, hq, splits])?))
        }
        None => None,
    };
    let (o_part, lse_part) = match &parts {
        Some((op, lp)) => {
            (view(op, &[b, hkv, group, splits, d]), view(lp, &[b, hkv, group, splits]))
        }
        None => (view(&o, &[b, hkv, group, 1, d]), view(&lse, &[b, hkv, group, 1])),
    };
    let (qd, kd, vd, lensd) = (view(q, &[b, hkv, group, d]), desc(k), desc(v), desc(kv_lens));
    // a block table and sinks the variant does not read: one element of kv_lens, of lse
    let one = |d: TensorDesc, ndim: i32| TensorDesc { ndim, shape: [1; 6], strides: [1; 6], ..d };
    let table = block_table.map_or_else(|| one(desc(kv_lens), 2), desc);
    let sinks = extras.sinks.map_or_else(|| one(desc(&lse), 1), desc);
    // as the Python operators: scores in log2 units, or divided by the cap (the kernel applies cap * log2(e))
    let scale = (d as f32).sqrt().recip();
    let qk_scale = if extras.softcap > 0.0 {
        scale / extras.softcap
    } else {
        scale * std::f32::consts::LOG2_E
    };
    let [gx, gy, gz] = partial.grid;
    let code = attention::tileport_flash_decode_partial_kernel(
        Some(&qd),
        Some(&kd),
        Some(&vd),
        Some(&table),
        Some(&lensd),
        Some(&sinks),
        Some(&o_part),
        Some(&lse_part),
        qk_scale,
        extras.softcap,
        extras.window,
        partial.int("tiles_per_split"),
        partial.int("GROUP_TILE"),
        partial.int("BLOCK_N"),
        partial.int("HEAD_DIM"),
        partial.bool("PAGED"),
        partial.bool("SLIDING"),
        partial.bool("HAS_SINKS"),
        partial.bool("SOFTCAP"),
        partial.bool("FINAL"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(partial.kernel, code)?;
    if let (Some(combine), Some((op, lp))) = (launches.get(1), &parts) {
        let (opd, lpd, od, ld) = (desc(op), desc(lp), desc(&o), desc(&lse));
        let [gx, gy, gz] = combine.grid;
        let (n, hd) = (combine.int("n_splits"), combine.int("HEAD_DIM"));
        let code = attention::tileport_flash_decode_combine_kernel(
            Some(&opd),
            Some(&lpd),
            Some(&od),
            Some(&ld),
            n,
            hd,
            gx,
            gy,
            gz,
            t.device_id,
            t.handle(),
        );
        t.check(combine.kernel, code)?;
    }
    t.finish()?;
    Ok(Attention { o, lse })
}

/// What `fmha_bwd` returns: the gradients of q, k and v, in their shapes and element type.
#[derive(Debug)]
pub struct AttentionGrads<T: Element> {
    pub dq: Tensor<T>,
    pub dk: Tensor<T>,
    pub dv: Tensor<T>,
}

/// The backward pass of `fmha_varlen`: the gradients of q, k, v given the forward's inputs, its
/// outputs o and lse, and the gradients `do_` of o and `dlse` of lse (f32 [B, Hq, S]; zeros when only
/// o is used); 0 on padding positions. GQA: each kv head's gradients sum its query heads'.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s, d) = (1, 2, 100, 64);
/// let x = tileport_ops::upload(&vec![f16::from_f32(0.3); b * h * s * d], &[b, h, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[100i32], &[1], &stream)?;
/// let fwd = tileport_ops::fmha_varlen(&x, &x, &x, &lens, true, &stream)?;
/// let dlse = tileport_ops::upload(&vec![0.0f32; b * h * s], &[b, h, s], &stream)?;
/// let g = tileport_ops::fmha_bwd(&x, &x, &x, &lens, true, &fwd.o, &fwd.lse, &x, &dlse, &stream)?;
/// assert_eq!(g.dk.shape(), x.shape());
/// # Ok(()) }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn fmha_bwd<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, seq_lens: &Tensor<i32>, causal: bool,
    o: &Tensor<T>, lse: &Tensor<f32>, do_: &Tensor<T>, dlse: &Tensor<f32>, stream: &Arc<Stream>,
) -> Result<AttentionGrads<T>> {
    let t = Target::new("fmha_bwd", stream)?;
    let (dq, dk, dv) = (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?);
    let (d_o, dl, ddo, ddl) =
        (t.input("o", o)?, t.input("lse", lse)?, t.input("do", do_)?, t.input("dlse", dlse)?);
    let launches = plan::fmha_bwd(&dq, &dk, &dv, &d_o, &dl, &ddo, &ddl, causal, T::ELEMENT)?;
    let [pre, dkdv, dqk] = <[KernelLaunch; 3]>::try_from(launches).expect("three launches");
    if t.input("seq_lens", seq_lens)? != [dq[0]] {
        return Err(crate::error::shape("fmha_bwd", format!("`seq_lens` must be [{}]", dq[0])));
    }
    let delta = t.output::<f32>(&dq[..3])?;
    let grads = AttentionGrads {
        dq: t.output::<T>(&dq)?,
        dk: t.output::<T>(&dk)?,
        dv: t.output::<T>(&dv)?,
    };
    let (qd, kd, vd, od, lsed, dod) = (desc(q), desc(k), desc(v), desc(o), desc(lse), desc(do_));
    let (dlsed, deltad, lensd) = (desc(dlse), desc(&delta), desc(seq_lens));
    let (dqd, dkd, dvd) = (desc(&grads.dq), desc(&grads.dk), desc(&grads.dv));
    let scale = (dq[3] as f32).sqrt().recip();
    let qk_scale = scale * std::f32::consts::LOG2_E;
    let (dev, handle) = (t.device_id, t.handle());
    let [gx, gy, gz] = pre.grid;
    let (bm, hd) = (pre.int("BLOCK_M"), pre.int("HEAD_DIM"));
    let code = attention_bwd::tileport_fmha_bwd_preprocess_kernel(
        Some(&od),
        Some(&dod),
        Some(&dlsed),
        Some(&deltad),
        bm,
        hd,
        gx,
        gy,
        gz,
        dev,
        handle,
    );
    t.check(pre.kernel, code)?;
    let [gx, gy, gz] = dkdv.grid;
    let (bm, bn) = (dkdv.int("BLOCK_M"), dkdv.int("BLOCK_N"));
    let code = attention_bwd::tileport_fmha_bwd_dkdv_kernel(
        Some(&qd),
        Some(&kd),
        Some(&vd),
        Some(&dod),
        Some(&lsed),
        Some(&deltad),
        Some(&lensd),
        Some(&dkd),
        Some(&dvd),
        qk_scale,
        scale,
        bm,
        bn,
        hd,
        dkdv.bool("CAUSAL"),
        gx,
        gy,
        gz,
        dev,
        handle,
    );
    t.check(dkdv.kernel, code)?;
    let [gx, gy, gz] = dqk.grid;
    let (bm, bn) = (dqk.int("BLOCK_M"), dqk.int("BLOCK_N"));
    let code = attention_bwd::tileport_fmha_bwd_dq_kernel(
        Some(&qd),
        Some(&kd),
        Some(&vd),
        Some(&dod),
        Some(&lsed),
        Some(&deltad),
        Some(&lensd),
        Some(&dqd),
        qk_scale,
        scale,
        bm,
        bn,
        hd,
        dqk.bool("CAUSAL"),
        gx,
        gy,
        gz,
        dev,
        handle,
    );
    t.check(dqk.kernel, code)?;
    t.finish()?;
    Ok(grads)
}

/// 1 / sqrt(128 + 64): the MLA kernels' softmax scale (DeepSeek-V2/V3's qk head dim), in log2 units.
fn mla_qk_scale() -> f32 {
    (192f32).sqrt().recip() * std::f32::consts::LOG2_E
}

/// Multi-head latent attention decode (DeepSeek, absorbed): q_nope [B, H, 512] (in the latent space)
/// and q_pe [B, H, 64] against the latent cache ckv [B, S, 512] and rope keys kpe [B, S, 64] up to
/// `kv_lens[b]` (i32 \[B\], >= 1) positions, scale 1/sqrt(192): o [B, H, 512] (latent; the caller
/// applies the value up-projection) and lse [B, H].
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s) = (2, 16, 300);
/// let up = |n: usize, shape: &[usize]| tileport_ops::upload(&vec![bf16::from_f32(0.05); n], shape, &stream);
/// let (q_nope, q_pe) = (up(b * h * 512, &[b, h, 512])?, up(b * h * 64, &[b, h, 64])?);
/// let (ckv, kpe) = (up(b * s * 512, &[b, s, 512])?, up(b * s * 64, &[b, s, 64])?);
/// let lens = tileport_ops::upload(&[300i32, 7], &[2], &stream)?;
/// let out = tileport_ops::mla_decode(&q_nope, &q_pe, &ckv, &kpe, &lens, &stream)?;
/// assert_eq!(out.o.shape(), [2, 16, 512]);
/// # Ok(()) }
/// ```
pub fn mla_decode<T: Element>(
    q_nope: &Tensor<T>, q_pe: &Tensor<T>, ckv: &Tensor<T>, kpe: &Tensor<T>, kv_lens: &Tensor<i32>,
    stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("mla_decode", stream)?;
    let (dn, dp) = (t.input("q_nope", q_nope)?, t.input("q_pe", q_pe)?);
    let (dc, dk, dl) = (t.input("ckv", ckv)?, t.input("kpe", kpe)?, t.input("kv_lens", kv_lens)?);
    let launches = plan::mla_decode(&dn, &dp, &dc, &dk, &dl, T::ELEMENT, t.sms)?;
    let (partial, combine) = (&launches[0], &launches[1]);
    let (b, h, splits) = (dn[0], dn[1], partial.grid[0] as usize);
    let o = t.output::<T>(&dn)?;
    let lse = t.output::<f32>(&[b, h])?;
    let o_part = t.output::<f32>(&[b, h, splits, plan::MLA_LORA])?;
    let lse_part = t.output::<f32>(&[b, h, splits])?;
    let (nd, pd, cd, kd, ld) = (desc(q_nope), desc(q_pe), desc(ckv), desc(kpe), desc(kv_lens));
    let (opd, lpd, od, lsed) = (desc(&o_part), desc(&lse_part), desc(&o), desc(&lse));
    let (dev, handle) = (t.device_id, t.handle());
    let [gx, gy, gz] = partial.grid;
    let code = attention::tileport_mla_decode_partial_kernel(
        Some(&nd),
        Some(&pd),
        Some(&cd),
        Some(&kd),
        Some(&ld),
        Some(&opd),
        Some(&lpd),
        mla_qk_scale(),
        partial.int("tiles_per_split"),
        partial.int("HEAD_TILE"),
        partial.int("BLOCK_N"),
        partial.int("LORA"),
        partial.int("ROPE"),
        gx,
        gy,
        gz,
        dev,
        handle,
    );
    t.check(partial.kernel, code)?;
    let [gx, gy, gz] = combine.grid;
    let (n, hd) = (combine.int("n_splits"), combine.int("HEAD_DIM"));
    let code = attention::tileport_flash_decode_combine_kernel(
        Some(&opd),
        Some(&lpd),
        Some(&od),
        Some(&lsed),
        n,
        hd,
        gx,
        gy,
        gz,
        dev,
        handle,
    );
    t.check(combine.kernel, code)?;
    t.finish()?;
    Ok(Attention { o, lse })
}

/// Multi-head latent attention prefill (DeepSeek, absorbed), causal over ragged sequences: q_nope
/// [B, H, S, 512], q_pe [B, H, S, 64], ckv [B, S, 512], kpe [B, S, 64], `seq_lens` (i32 \[B\]), scale
/// 1/sqrt(192): o [B, H, S, 512] (latent) and lse [B, H, S]; 0 and -inf on padding rows.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s) = (1, 4, 77);
/// let up = |n: usize, shape: &[usize]| tileport_ops::upload(&vec![f16::from_f32(0.05); n], shape, &stream);
/// let (q_nope, q_pe) = (up(b * h * s * 512, &[b, h, s, 512])?, up(b * h * s * 64, &[b, h, s, 64])?);
/// let (ckv, kpe) = (up(b * s * 512, &[b, s, 512])?, up(b * s * 64, &[b, s, 64])?);
/// let lens = tileport_ops::upload(&[77i32], &[1], &stream)?;
/// let out = tileport_ops::mla_prefill(&q_nope, &q_pe, &ckv, &kpe, &lens, &stream)?;
/// assert_eq!(out.lse.shape(), [1, 4, 77]);
/// # Ok(()) }
/// ```
pub fn mla_prefill<T: Element>(
    q_nope: &Tensor<T>, q_pe: &Tensor<T>, ckv: &Tensor<T>, kpe: &Tensor<T>, seq_lens: &Tensor<i32>,
    stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("mla_prefill", stream)?;
    let (dn, dp) = (t.input("q_nope", q_nope)?, t.input("q_pe", q_pe)?);
    let (dc, dk, dl) = (t.input("ckv", ckv)?, t.input("kpe", kpe)?, t.input("seq_lens", seq_lens)?);
    let l = plan::mla_prefill(&dn, &dp, &dc, &dk, &dl, T::ELEMENT)?;
    let o = t.output::<T>(&dn)?;
    let lse = t.output::<f32>(&dn[..3])?;
    let (nd, pd, cd, kd, ld) = (desc(q_nope), desc(q_pe), desc(ckv), desc(kpe), desc(seq_lens));
    let (od, lsed) = (desc(&o), desc(&lse));
    let [gx, gy, gz] = l.grid;
    let code = attention::tileport_mla_prefill_kernel(
        Some(&nd),
        Some(&pd),
        Some(&cd),
        Some(&kd),
        Some(&ld),
        Some(&od),
        Some(&lsed),
        mla_qk_scale(),
        l.int("BLOCK_M"),
        l.int("BLOCK_N"),
        l.int("LORA"),
        l.int("ROPE"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(Attention { o, lse })
}

/// Attention prefill (flash attention forward), softmax scale 1/sqrt(D): q [B, Hq, S, D], k and v
/// [B, Hkv, S, D] (grouped-query: Hkv divides Hq), f16 or bf16, head dim 64 or 128, causal or not.
/// Every sequence of the batch is S long; `fmha_varlen` takes per-sequence lengths.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s, d) = (1, 4, 256, 64);
/// let data = vec![bf16::from_f32(0.1); b * h * s * d];
/// let q = tileport_ops::upload(&data, &[b, h, s, d], &stream)?;
/// let k = tileport_ops::upload(&data[..b * s * d], &[b, 1, s, d], &stream)?; // one KV head
/// let v = tileport_ops::upload(&data[..b * s * d], &[b, 1, s, d], &stream)?;
/// let out = tileport_ops::fmha(&q, &k, &v, true, &stream)?;
/// assert_eq!(out.o.shape(), q.shape());
/// # Ok(()) }
/// ```
pub fn fmha<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, causal: bool, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("fmha", stream)?;
    let l =
        plan::fmha(&t.input("q", q)?, &t.input("k", k)?, &t.input("v", v)?, causal, T::ELEMENT)?;
    prefill(t, q, k, v, None, Extras::default(), &l, stream)
}

/// `fmha` over a ragged batch: sequence b holds `seq_lens[b]` positions (i32 \[B\], at most S) of
/// the padded layout; the outputs are 0 (o) and -inf (lse) on its padding.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let data = vec![f16::from_f32(0.5); 2 * 2 * 100 * 128];
/// let q = tileport_ops::upload(&data, &[2, 2, 100, 128], &stream)?;
/// let lens = tileport_ops::upload(&[100i32, 37], &[2], &stream)?;
/// let out = tileport_ops::fmha_varlen(&q, &q, &q, &lens, false, &stream)?;
/// assert_eq!(out.lse.shape(), [2, 2, 100]);
/// # Ok(()) }
/// ```
pub fn fmha_varlen<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, seq_lens: &Tensor<i32>, causal: bool,
    stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("fmha", stream)?;
    let l =
        plan::fmha(&t.input("q", q)?, &t.input("k", k)?, &t.input("v", v)?, causal, T::ELEMENT)?;
    prefill(t, q, k, v, Some(seq_lens), Extras::default(), &l, stream)
}

/// Causal attention prefill with per-head sink logits (gpt-oss): `fmha_varlen` (causal) whose softmax
/// denominators also hold `exp(sinks[h])` (f32 \[Hq\], no value row of their own), over the `window`
/// keys ending at each query when `window` > 0 (a sliding window); head dim 64.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::bf16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s, d) = (1, 4, 300, 64);
/// let q = tileport_ops::upload(&vec![bf16::from_f32(0.1); b * h * s * d], &[b, h, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[300i32], &[1], &stream)?;
/// let sinks = tileport_ops::upload(&[0.5f32, -1.0, 2.0, 0.0], &[4], &stream)?;
/// let out = tileport_ops::fmha_sinks(&q, &q, &q, &lens, &sinks, 128, &stream)?;
/// assert_eq!(out.o.shape(), q.shape());
/// # Ok(()) }
/// ```
pub fn fmha_sinks<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, seq_lens: &Tensor<i32>, sinks: &Tensor<f32>,
    window: usize, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("fmha_sinks", stream)?;
    let (dq, dk, dv, ds) =
        (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?, t.input("sinks", sinks)?);
    let l = plan::fmha_sinks(&dq, &dk, &dv, &ds, window, T::ELEMENT)?;
    let extras = Extras { sinks: Some(sinks), window: window as i32, ..Extras::default() };
    prefill(t, q, k, v, Some(seq_lens), extras, &l, stream)
}

/// Causal attention prefill with logit soft-capping (Gemma): `fmha_varlen` (causal) whose scaled
/// scores s are `softcap * tanh(s / softcap)` before the softmax, `softcap` > 0; head dim 128.
///
/// ```no_run
/// # fn main() -> Result<(), tileport_ops::Error> {
/// use tileport_ops::half::f16;
/// let stream = tileport_ops::stream(0)?;
/// let (b, h, s, d) = (2, 2, 77, 128);
/// let q = tileport_ops::upload(&vec![f16::from_f32(0.5); b * h * s * d], &[b, h, s, d], &stream)?;
/// let lens = tileport_ops::upload(&[77i32, 40], &[2], &stream)?;
/// let out = tileport_ops::fmha_softcap(&q, &q, &q, &lens, 50.0, &stream)?;
/// assert_eq!(out.lse.shape(), [2, 2, 77]);
/// # Ok(()) }
/// ```
pub fn fmha_softcap<T: Element>(
    q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, seq_lens: &Tensor<i32>, softcap: f32,
    stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let t = Target::new("fmha_softcap", stream)?;
    let (dq, dk, dv) = (t.input("q", q)?, t.input("k", k)?, t.input("v", v)?);
    let l = plan::fmha_softcap(&dq, &dk, &dv, softcap, T::ELEMENT)?;
    prefill(t, q, k, v, Some(seq_lens), Extras { softcap, ..Extras::default() }, &l, stream)
}

/// The arguments of `fmha_fwd_kernel` its variants read: sink logits, the soft cap (0: none), the
/// window (0: none).
#[derive(Default, Clone, Copy)]
struct Extras<'a> {
    sinks: Option<&'a Tensor<f32>>,
    softcap: f32,
    window: i32,
}

/// One `fmha_fwd_kernel` launch of the plan `l` (its checks made), then the wait.
#[allow(clippy::too_many_arguments)]
fn prefill<T: Element>(
    t: Target<'_>, q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, seq_lens: Option<&Tensor<i32>>,
    extras: Extras, l: &KernelLaunch, stream: &Arc<Stream>,
) -> Result<Attention<T>> {
    let op = t.op;
    let dq = t.input("q", q)?;
    let (batch, seq) = (dq[0], dq[2]);
    let full;
    let lens = match seq_lens {
        Some(lens) => lens,
        None => {
            full = upload(&vec![seq as i32; batch], &[batch], stream)?;
            &full
        }
    };
    let dl = t.input("seq_lens", lens)?;
    if dl != [batch] {
        return Err(crate::error::shape(op, format!("`seq_lens` must be [{batch}], got {dl:?}")));
    }
    let o = t.output::<T>(&dq)?;
    let lse = t.output::<f32>(&dq[..3])?;
    let (qd, kd, vd, od, ld, lensd) = (desc(q), desc(k), desc(v), desc(&o), desc(&lse), desc(lens));
    // the kernel's sinks argument, unread without sinks: the first element of lse
    let sinks = match extras.sinks {
        Some(s) => desc(s),
        None => {
            TensorDesc { ndim: 1, shape: [1, 0, 0, 0, 0, 0], strides: [1, 0, 0, 0, 0, 0], ..ld }
        }
    };
    // as the Python operators: scores in log2 units, or divided by the cap (the kernel applies cap * log2(e))
    let scale = (dq[3] as f32).sqrt().recip();
    let qk_scale = if extras.softcap > 0.0 {
        scale / extras.softcap
    } else {
        scale * std::f32::consts::LOG2_E
    };
    let [gx, gy, gz] = l.grid;
    let code = attention::tileport_fmha_fwd_kernel(
        Some(&qd),
        Some(&kd),
        Some(&vd),
        Some(&od),
        Some(&ld),
        Some(&lensd),
        Some(&sinks),
        qk_scale,
        extras.softcap,
        extras.window,
        l.int("BLOCK_M"),
        l.int("BLOCK_N"),
        l.int("HEAD_DIM"),
        l.bool("CAUSAL"),
        l.bool("SLIDING"),
        l.bool("HAS_SINKS"),
        l.bool("SOFTCAP"),
        gx,
        gy,
        gz,
        t.device_id,
        t.handle(),
    );
    t.check(l.kernel, code)?;
    t.finish()?;
    Ok(Attention { o, lse })
}
