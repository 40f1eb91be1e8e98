//! # tileport-ops
//!
//! A typed, safe Rust API over tileport's operator library: the cuTile Python operators of
//! `src/tileport/ops`, ported to cuTile Rust by tileport into the generated kernels crate
//! (`rust/`, `tileport_kernels`). This crate is the hand-written API layer over the generated
//! kernels: the kernels and their launchers are generated (and proven against their sources);
//! what is written here is, per operator, a function over [`cutile`] tensors and a stream that
//!
//! - checks the inputs (rank, extents, device, layout) and returns a typed [`Error`];
//! - takes the tile sizes, kernel entry and grid the Python operator takes by default for the
//!   shapes and dtype ([`plan`]: computed on the CPU, testable without a GPU);
//! - allocates the outputs, launches the generated entries through their launchers on the
//!   stream, and waits for the stream before it returns.
//!
//! | operator | inputs | output |
//! |---|---|---|
//! | [`vector_add`], [`swiglu`], [`geglu`] | two tensors of one shape | that shape |
//! | [`relu`], [`gelu`] | one tensor | its shape |
//! | [`silu_and_mul`] | x [M, 2N] | [M, N] |
//! | [`softmax`] | x [M, N] (last axis) | [M, N] |
//! | [`rms_norm`] | x [M, N], w \[N\], eps | [M, N] |
//! | [`layer_norm`] | x [M, N], w \[N\], b \[N\], eps | [`LayerNorm`]: y, mean, rstd |
//! | [`rope`] | x [B, S, H, D], cos / sin [S, D/2] f32 | [B, S, H, D] |
//! | [`moe_topk_softmax`] / [`moe_topk_sigmoid`] | router logits [T, E], k | [`TopK`]: weights f32, ids i32 [T, k] |
//! | [`moe_route`] | router logits [T, E], k, block_size | [`MoeRoute`]: the top k, sorted_ids, expert_ids, num_post_pad |
//! | [`matmul_splitk`] | [M, K] @ [K, N] (K split, an f32 workspace) | [M, N] |
//! | [`matmul`] / [`bmm`] | [M, K] @ [K, N] / [B, M, K] @ [B, K, N] | [M, N] / [B, M, N] |
//! | [`fmha`] / [`fmha_varlen`] | q [B, Hq, S, D], k, v [B, Hkv, S, D] (f16 / bf16) | [`Attention`]: o, lse |
//! | [`dropout`] / [`dropout_bwd`] | x (dy), seed, offset, p | x's shape |
//! | [`cross_entropy`] | logits [M, V], labels \[M\] i32, ignore_index | [`CrossEntropy`]: loss, lse |
//! | [`cross_entropy_bwd`] | logits, labels, lse, dloss \[M\], ignore_index | [M, V] |
//! | [`flash_decode`] | q [B, Hq, D], k, v [B, Hkv, S, D], kv_lens \[B\] (f16 / bf16) | [`Attention`]: o [B, Hq, D], lse |
//! | [`flash_decode_paged`] / [`flash_decode_sinks`] / [`flash_decode_softcap`] | as [`flash_decode`]: page pools and a block table / sinks and a window / a cap | [`Attention`] |
//! | [`mla_decode`] / [`mla_prefill`] | q_nope, q_pe; ckv [B, S, 512], kpe [B, S, 64]; lengths | [`Attention`]: o (latent, 512), lse |
//! | [`fmha_bwd`] | `fmha_varlen`'s inputs, o, lse, do, dlse | [`AttentionGrads`]: dq, dk, dv |
//! | [`fmha_sinks`] / [`fmha_softcap`] | as [`fmha_varlen`], sinks \[Hq\] and a window / a cap | [`Attention`]: o, lse |
//!
//! Every operator takes f32, f16 and bf16 ([`Element`]) except attention (f16 and bf16), computes
//! in f32 and rounds once to the element type.
//!
//! ## Example
//!
//! ```no_run
//! # fn main() -> Result<(), tileport_ops::Error> {
//! use tileport_ops::{download, rms_norm, softmax, stream, upload};
//!
//! let stream = stream(0)?; // a stream on device 0
//! let x = upload(&vec![1.0f32; 8 * 4096], &[8, 4096], &stream)?;
//! let w = upload(&vec![1.0f32; 4096], &[4096], &stream)?;
//! let h = rms_norm(&x, &w, 1e-6, &stream)?;
//! let p = softmax(&h, &stream)?;
//! let host: Vec<f32> = download(&p, &stream)?;
//! assert!((host[0] - 1.0 / 4096.0).abs() < 1e-6);
//! # Ok(()) }
//! ```
//!
//! Errors are values, never panics: a shape that does not fit is an [`Error::Shape`] before
//! anything touches the device.
//!
//! ```no_run
//! # fn main() -> Result<(), tileport_ops::Error> {
//! # let stream = tileport_ops::stream(0)?;
//! let a = tileport_ops::upload(&vec![0.0f32; 6], &[2, 3], &stream)?;
//! let err = tileport_ops::matmul(&a, &a, &stream).unwrap_err();
//! assert!(matches!(err, tileport_ops::Error::Shape { op: "matmul", .. }));
//! # Ok(()) }
//! ```
//!
//! ## Runtime
//!
//! The kernels are compiled for the device at their first launch (cuTile Rust's JIT, then a
//! per-process cache), which needs `tileiras` from the CUDA Tile toolchain: on `PATH` or named by
//! `CUTILE_TILEIRAS_PATH`. Each operator returns once its kernels are done, so its inputs may be
//! dropped and its output read at once.

mod element;
mod error;
mod launch;
mod ops;
pub mod plan;
pub mod reference;

use std::sync::Arc;

pub use cutile::cuda_core::Stream;
pub use cutile::half;
pub use cutile::tensor::{Reshape, Tensor};

pub use element::{DeviceElement, Dtype, Element};
pub use error::{Error, Result};
pub use ops::{
    Attention, AttentionGrads, CrossEntropy, LayerNorm, MoeRoute, TopK, bmm, cross_entropy,
    cross_entropy_bwd, dropout, dropout_bwd, flash_decode, flash_decode_paged, flash_decode_sinks,
    flash_decode_softcap, fmha, fmha_bwd, fmha_sinks, fmha_softcap, fmha_varlen, geglu, gelu,
    layer_norm, matmul, matmul_splitk, mla_decode, mla_prefill, moe_route, moe_topk_sigmoid,
    moe_topk_softmax, relu, rms_norm, rope, silu_and_mul, softmax, swiglu, vector_add,
};

use cutile::api;
use cutile::cuda_async::device_operation::DeviceOp;
use cutile::cuda_core::Context;
use cutile::tensor::ToHostVec;

use error::cuda;

/// A new stream on device `ordinal` (its primary context, the one the CUDA runtime uses).
pub fn stream(ordinal: usize) -> Result<Arc<Stream>> {
    let context = Context::new(ordinal).map_err(|e| cuda("stream", e))?;
    context.new_stream().map_err(|e| cuda("stream", e))
}

/// A tensor of `shape` on the stream's device holding `host` (row-major).
pub fn upload<T: DeviceElement>(
    host: &[T], shape: &[usize], stream: &Arc<Stream>,
) -> Result<Tensor<T>> {
    let n: usize = shape.iter().product();
    if n != host.len() || n == 0 {
        let message = format!("{} values for shape {shape:?}", host.len());
        return Err(Error::Shape { op: "upload", message });
    }
    let flat = api::copy_host_vec_to_device(&Arc::new(host.to_vec()))
        .sync_on(stream)
        .map_err(|e| cuda("upload", e))?;
    flat.reshape(shape).map_err(|e| cuda("upload", e))
}

/// The values of a tensor, row-major (copied through a device-side duplicate: `t` stays usable).
pub fn download<T: DeviceElement>(t: &Tensor<T>, stream: &Arc<Stream>) -> Result<Vec<T>> {
    let copy = t.dup().sync_on(stream).map_err(|e| cuda("download", e))?;
    copy.to_host_vec().sync_on(stream).map_err(|e| cuda("download", e))
}
