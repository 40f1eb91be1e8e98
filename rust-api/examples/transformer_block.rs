//! A small pre-norm transformer block from Rust alone, on the GPU through `tileport_ops`:
//!
//! ```text
//! h = x + Wo · attention(rms_norm(x) · Wq, · Wk, · Wv)     (causal, one head of 128 per sequence)
//! y = h + Wd · silu_and_mul(rms_norm(h) · Wgu)              (SwiGLU MLP)
//! ```
//!
//! over a batch of sequences in bf16, checked against the same block computed on the CPU in f32
//! (its inputs and each op's result rounded to bf16 as on the GPU). Prints the max error, the
//! first run's time (it JIT-compiles every kernel) and per-op times of later runs (each op waits
//! for its kernels). Exit code 1 when the error is over the tolerance, 2 on an error (no GPU, no
//! tileiras, bad arguments).
//!
//! `cargo run --release --example transformer_block [-- BATCH SEQ]` (needs a GPU and `tileiras`,
//! on PATH or named by CUTILE_TILEIRAS_PATH).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tileport_ops::half::bf16;
use tileport_ops::reference as r;
use tileport_ops::{Reshape, Stream, Tensor, download, upload};

const MODEL: usize = 256; // model width D
const HEAD: usize = 128; // attention width (one head)
const HIDDEN: usize = 1024; // MLP width F
const EPS: f32 = 1e-6;
const RUNS: usize = 10;
/// Tolerance of the output (values of magnitude ~1, bf16 roundings along the block).
const TOLERANCE: f32 = 0.1;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The block's weights: on the device, and their bf16 values as f32 for the CPU reference.
struct Weights {
    device: Vec<Tensor<bf16>>,
    host: Vec<Vec<f32>>,
}

/// Deterministic values in [-scale, scale), rounded to bf16.
fn values(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            bf16::from_f32((2.0 * unit - 1.0) * scale)
        })
        .collect()
}

fn f32s(v: &[bf16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// Round like the GPU's bf16 outputs.
fn round(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| bf16::from_f32(x).to_f32()).collect()
}

fn weights(stream: &Arc<Stream>) -> Result<Weights> {
    // (shape, scale): norm weights near 1, projections scaled by 1/sqrt(fan-in)
    let shapes: [([usize; 2], f32); 7] = [
        ([1, MODEL], 0.0),
        ([MODEL, HEAD], (MODEL as f32).sqrt().recip()),
        ([MODEL, HEAD], (MODEL as f32).sqrt().recip()),
        ([MODEL, HEAD], (MODEL as f32).sqrt().recip()),
        ([HEAD, MODEL], (HEAD as f32).sqrt().recip()),
        ([MODEL, 2 * HIDDEN], (MODEL as f32).sqrt().recip()),
        ([HIDDEN, MODEL], (HIDDEN as f32).sqrt().recip()),
    ];
    let (mut device, mut host) = (vec![], vec![]);
    for (i, (shape, scale)) in shapes.into_iter().enumerate() {
        let n = shape[0] * shape[1];
        let v = if scale == 0.0 {
            values(n, 100, 0.2).iter().map(|x| bf16::from_f32(1.0 + x.to_f32())).collect()
        } else {
            values(n, i as u64 + 1, scale * 3f32.sqrt())
        };
        let dims: &[usize] = if shape[0] == 1 { &shape[1..] } else { &shape };
        device.push(upload(&v, dims, stream)?);
        host.push(f32s(&v));
    }
    Ok(Weights { device, host })
}

/// Per-op wall times of one run of the block.
#[derive(Default)]
struct Times(Vec<(&'static str, Duration)>);

impl Times {
    fn time<T>(&mut self, op: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.0.push((op, start.elapsed()));
        out
    }
}

/// The block on the GPU: x [B * S, D] -> y [B * S, D].
fn block_gpu(
    x: &Tensor<bf16>, w: &Weights, batch: usize, seq: usize, stream: &Arc<Stream>,
    times: &mut Times,
) -> Result<Tensor<bf16>> {
    use tileport_ops as ops;
    let [norm, wq, wk, wv, wo, wgu, wd] = &w.device[..] else { unreachable!() };
    let h = times.time("rms_norm", || ops::rms_norm(x, norm, EPS, stream))?;
    // [B * S, HEAD] is [B, 1, S, HEAD]: one head per sequence
    let heads = [batch, 1, seq, HEAD];
    let q = times.time("matmul q", || ops::matmul(&h, wq, stream))?.reshape(&heads)?;
    let k = times.time("matmul k", || ops::matmul(&h, wk, stream))?.reshape(&heads)?;
    let v = times.time("matmul v", || ops::matmul(&h, wv, stream))?.reshape(&heads)?;
    let att = times.time("fmha", || ops::fmha(&q, &k, &v, true, stream))?;
    let o = att.o.reshape(&[batch * seq, HEAD])?;
    let proj = times.time("matmul o", || ops::matmul(&o, wo, stream))?;
    let h1 = times.time("residual", || ops::vector_add(x, &proj, stream))?;
    let h2 = times.time("rms_norm", || ops::rms_norm(&h1, norm, EPS, stream))?;
    let gu = times.time("matmul gate/up", || ops::matmul(&h2, wgu, stream))?;
    let act = times.time("silu_and_mul", || ops::silu_and_mul(&gu, stream))?;
    let down = times.time("matmul down", || ops::matmul(&act, wd, stream))?;
    Ok(times.time("residual", || ops::vector_add(&h1, &down, stream))?)
}

/// The block on the CPU in f32, each op's result rounded to bf16 as the GPU's.
fn block_cpu(x: &[f32], w: &Weights, batch: usize, seq: usize) -> Vec<f32> {
    let [norm, wq, wk, wv, wo, wgu, wd] = &w.host[..] else { unreachable!() };
    let t = batch * seq;
    let h = round(r::rms_norm(x, norm, EPS));
    let q = round(r::matmul(&h, wq, t, MODEL, HEAD));
    let k = round(r::matmul(&h, wk, t, MODEL, HEAD));
    let v = round(r::matmul(&h, wv, t, MODEL, HEAD));
    let (o, _) = r::attention(&q, &k, &v, [batch, 1, 1, seq, HEAD], &vec![seq; batch], true);
    let proj = round(r::matmul(&round(o), wo, t, HEAD, MODEL));
    let h1 = round(x.iter().zip(&proj).map(|(a, b)| a + b).collect());
    let h2 = round(r::rms_norm(&h1, norm, EPS));
    let gu = round(r::matmul(&h2, wgu, t, MODEL, 2 * HIDDEN));
    let act = round(r::silu_and_mul(&gu, t, HIDDEN));
    let down = round(r::matmul(&act, wd, t, HIDDEN, MODEL));
    round(h1.iter().zip(&down).map(|(a, b)| a + b).collect())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Option<Vec<usize>> =
        args.iter().map(|a| a.parse().ok().filter(|&n| n > 0)).collect();
    let (batch, seq) = match sizes.as_deref() {
        Some([]) => (4, 512),
        Some([batch, seq]) => (*batch, *seq),
        _ => {
            eprintln!("usage: transformer_block [BATCH SEQ] (positive integers; default 4 512)");
            return ExitCode::from(2);
        }
    };
    match run(batch, seq) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("transformer_block: {e}");
            ExitCode::from(2)
        }
    }
}

/// Run and check the block; false when its error is over the tolerance.
fn run(batch: usize, seq: usize) -> Result<bool> {
    let stream = tileport_ops::stream(0)?;
    let device = stream.context().name()?;
    println!(
        "device: {device}; block: batch {batch} x seq {seq}, D {MODEL}, head {HEAD}, MLP {HIDDEN}, bf16"
    );

    let w = weights(&stream)?;
    let x_host = values(batch * seq * MODEL, 42, 1.0);
    let x = upload(&x_host, &[batch * seq, MODEL], &stream)?;

    let start = Instant::now();
    let y = block_gpu(&x, &w, batch, seq, &stream, &mut Times::default())?;
    let first = start.elapsed();
    let got = f32s(&download(&y, &stream)?);
    let want = block_cpu(&f32s(&x_host), &w, batch, seq);
    let err = r::max_abs_diff(&got, &want);
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));

    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut times = Times::default();
        let start = Instant::now();
        block_gpu(&x, &w, batch, seq, &stream, &mut times)?;
        runs.push((start.elapsed(), times));
    }
    runs.sort_by_key(|(total, _)| *total);
    let (median, times) = &runs[RUNS / 2];

    println!(
        "max |error| vs the CPU reference: {err:.3e} (output max |value| {scale:.3}, tolerance {TOLERANCE})"
    );
    println!("first run (JIT-compiles every kernel): {:.1} ms", first.as_secs_f64() * 1e3);
    println!(
        "median run of {RUNS}: {:.3} ms; its ops (each waits for its kernels):",
        median.as_secs_f64() * 1e3
    );
    for (op, t) in &times.0 {
        println!("  {op:<16} {:>9.1} us", t.as_secs_f64() * 1e6);
    }
    let verdict = if err <= TOLERANCE { "PASS" } else { "FAIL" };
    println!(
        "{{\"example\": \"transformer_block\", \"device\": \"{device}\", \"batch\": {batch}, \"seq\": {seq}, \
         \"max_abs_error\": {err}, \"first_run_ms\": {:.3}, \"median_run_ms\": {:.3}, \"verdict\": \"{verdict}\"}}",
        first.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3
    );
    Ok(err <= TOLERANCE)
}
