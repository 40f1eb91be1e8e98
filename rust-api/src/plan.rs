//! Launch plans: per operator, the kernels it launches, their grids and tile constants, chosen from
//! the shapes and the dtype alone (no device needed), as the Python operators of
//! `src/tileport/ops/specs` choose them by default (no tuned configuration).
//!
//! A plan validates its shapes first: every shape error an operator reports comes from here, so
//! it can be checked without a GPU. The CPU tests hold the plans to the Python operators' on the
//! cases of `tests/data/plans.json`, which tileport's `tests/test_rust_api.py` writes from the
//! specs and checks against them (a changed default fails there until both sides follow).

use crate::element::Dtype;
use crate::error::{Error, Result, shape, unsupported, value};

/// A tile constant or an entry-selecting flag of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constant {
    Int(i32),
    Bool(bool),
}

/// One kernel launch of a plan: the generated kernel (its name in `rust/kernels.json`), the grid
/// and the constants, by the kernel's parameter names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLaunch {
    pub kernel: &'static str,
    pub grid: [u32; 3],
    pub constants: Vec<(&'static str, Constant)>,
}

impl KernelLaunch {
    fn new(kernel: &'static str, grid: [usize; 3], ints: &[(&'static str, usize)]) -> Self {
        let constants = ints.iter().map(|&(name, v)| (name, Constant::Int(v as i32))).collect();
        // past u32 (never for i32 extents), the driver rejects the grid
        let grid = grid.map(|g| u32::try_from(g).unwrap_or(u32::MAX));
        KernelLaunch { kernel, grid, constants }
    }

    fn flag(mut self, name: &'static str, value: bool) -> Self {
        self.constants.push((name, Constant::Bool(value)));
        self
    }

    /// The integer constant `name` (a plan always sets the constants its launcher reads).
    pub fn int(&self, name: &str) -> i32 {
        match self.constant(name) {
            Constant::Int(v) => v,
            Constant::Bool(_) => panic!("constant `{name}` of `{}` is a flag", self.kernel),
        }
    }

    /// The flag `name`.
    pub fn bool(&self, name: &str) -> bool {
        match self.constant(name) {
            Constant::Bool(v) => v,
            Constant::Int(_) => panic!("constant `{name}` of `{}` is an integer", self.kernel),
        }
    }

    fn constant(&self, name: &str) -> Constant {
        let found = self.constants.iter().find(|(n, _)| *n == name);
        found.unwrap_or_else(|| panic!("`{}` has no constant `{name}`", self.kernel)).1
    }
}

/// H200's SM count: what plans assume where the caller gives none (the CPU tests).
pub const DEFAULT_NUM_SMS: u32 = 132;

pub(crate) fn next_pow2(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

fn nonempty(op: &'static str, name: &str, dims: &[usize]) -> Result<()> {
    if dims.contains(&0) {
        return Err(shape(op, format!("`{name}` {dims:?} is empty")));
    }
    Ok(())
}

fn rank(op: &'static str, name: &str, dims: &[usize], want: usize, layout: &str) -> Result<()> {
    if dims.len() != want {
        return Err(shape(op, format!("`{name}` must be {layout}, got shape {dims:?}")));
    }
    nonempty(op, name, dims)
}

// ---------------------------------------------------------------- element-wise (ops/specs/_elementwise.py)

/// 1-D tile of the flattened element-wise kernels (`FLAT_TILE`, measured on H200).
const FLAT_TILE: usize = 1024;

/// `vector_add`: a + b, tensors of one shape.
pub fn vector_add(a: &[usize], b: &[usize]) -> Result<KernelLaunch> {
    elementwise("vector_add", "vector_add_kernel", &[("a", a), ("b", b)])
}

/// `relu` of a tensor.
pub fn relu(x: &[usize]) -> Result<KernelLaunch> {
    elementwise("relu", "relu_kernel", &[("x", x)])
}

/// `gelu` (tanh approximation) of a tensor.
pub fn gelu(x: &[usize]) -> Result<KernelLaunch> {
    elementwise("gelu", "gelu_tanh_kernel", &[("x", x)])
}

/// `swiglu`: silu(a) * b, tensors of one shape.
pub fn swiglu(a: &[usize], b: &[usize]) -> Result<KernelLaunch> {
    elementwise("swiglu", "swiglu_kernel", &[("a", a), ("b", b)])
}

/// `geglu`: gelu(a) * b, tensors of one shape.
pub fn geglu(a: &[usize], b: &[usize]) -> Result<KernelLaunch> {
    elementwise("geglu", "geglu_kernel", &[("a", a), ("b", b)])
}

/// The flattened element-wise kernels (ops/specs/_elementwise.py): inputs of one shape (any rank),
/// one launch over all elements.
fn elementwise(
    op: &'static str, kernel: &'static str, inputs: &[(&str, &[usize])],
) -> Result<KernelLaunch> {
    let (first, dims) = inputs[0];
    nonempty(op, first, dims)?;
    if let Some((name, other)) = inputs[1..].iter().find(|(_, d)| *d != dims) {
        return Err(shape(op, format!("`{name}` {other:?} differs from `{first}` {dims:?}")));
    }
    let n: usize = dims.iter().product();
    let tile = next_pow2(n).min(FLAT_TILE);
    Ok(KernelLaunch::new(kernel, [cdiv(n, tile), 1, 1], &[("TILE", tile)]))
}

/// `silu_and_mul` (ops/specs/silu_and_mul.py): x [M, 2N] -> [M, N], one row of up to 1024 columns
/// per block.
pub fn silu_and_mul(x: &[usize]) -> Result<KernelLaunch> {
    const OP: &str = "silu_and_mul";
    rank(OP, "x", x, 2, "[M, 2N]")?;
    if x[1] % 2 != 0 {
        return Err(shape(OP, format!("`x` must be [M, 2N]: its {} columns are odd", x[1])));
    }
    let (m, n) = (x[0], x[1] / 2);
    let block_n = next_pow2(n).min(1024);
    let block_m = next_pow2(m).min(1024 / block_n).max(1);
    let grid = [cdiv(n, block_n), cdiv(m, block_m), 1];
    Ok(KernelLaunch::new(
        "silu_and_mul_kernel",
        grid,
        &[("BLOCK_M", block_m), ("BLOCK_N", block_n)],
    ))
}

// ---------------------------------------------------------------- row kernels (ops/specs/_common.py, _tune.py)

/// Bytes one row tile load moves (`ROW_TILE_BYTES`).
const ROW_TILE_BYTES: usize = 16384;
/// The longest row (a power-of-two tile) the row kernels hold in one tile.
const MAX_ROW_TILE: usize = 16384;

/// BLOCK_M rows of `tile` columns per block: about `target` bytes, a power of two, at most the rows.
fn rows_per_block(n_rows: usize, tile: usize, dtype: Dtype, target: usize) -> usize {
    let bm = (target / (tile * dtype.size())).max(1);
    let bm = 1 << bm.ilog2(); // round down to a power of two
    bm.min(next_pow2(n_rows))
}

/// One resident wave of a grid-stride kernel: `sms * occupancy` blocks, at most one per tile.
fn persistent(n_blocks: usize, sms: u32, occupancy: usize) -> [usize; 3] {
    [n_blocks.min(sms as usize * occupancy).max(1), 1, 1]
}

fn rows(op: &'static str, x: &[usize], params: &[(&str, &[usize])]) -> Result<usize> {
    rank(op, "x", x, 2, "[M, N]")?;
    for (name, dims) in params {
        if *dims != [x[1]] {
            return Err(shape(
                op,
                format!("`{name}` must be [{}] (x's columns), got {dims:?}", x[1]),
            ));
        }
    }
    let tile = next_pow2(x[1]);
    if tile > MAX_ROW_TILE {
        return Err(unsupported(op, format!("rows longer than {MAX_ROW_TILE} columns")));
    }
    Ok(tile)
}

/// `rms_norm` (ops/specs/rms_norm.py): x [M, N], w \[N\]; about 16 KiB of rows per block, persistent.
pub fn rms_norm(x: &[usize], w: &[usize], dtype: Dtype, sms: u32) -> Result<KernelLaunch> {
    let tile = rows("rms_norm", x, &[("w", w)])?;
    let block_m = rows_per_block(x[0], tile, dtype, ROW_TILE_BYTES);
    let grid = persistent(cdiv(x[0], block_m), sms, 2);
    Ok(KernelLaunch::new("rms_norm_kernel", grid, &[("BLOCK_M", block_m), ("TILE", tile)]))
}

/// `layer_norm` (ops/specs/layer_norm.py, `default`): rows of up to 2048 values one per block at
/// occupancy 4 where the search offers it, else about 8 KiB of rows per block at occupancy 2.
pub fn layer_norm(
    x: &[usize], w: &[usize], b: &[usize], dtype: Dtype, sms: u32,
) -> Result<KernelLaunch> {
    const ROW_BYTES: usize = 8192;
    let tile = rows("layer_norm", x, &[("w", w), ("b", b)])?;
    let keep = rows_per_block(x[0], tile, dtype, ROW_BYTES);
    // one-row blocks are among the occupancy-4 entry's candidates: its three largest row blocks
    // (within 8192 f32 values per tile) reach down to one row, or the default's row block is one
    let largest = next_pow2(x[0]).min(8192 / tile);
    if tile <= 2048 && (largest <= 4 || keep == 1) {
        let grid = persistent(x[0], sms, 4);
        return Ok(KernelLaunch::new(
            "layer_norm_fwd_occ4_kernel",
            grid,
            &[("BLOCK_M", 1), ("TILE", tile)],
        ));
    }
    let grid = persistent(cdiv(x[0], keep), sms, 2);
    Ok(KernelLaunch::new("layer_norm_fwd_kernel", grid, &[("BLOCK_M", keep), ("TILE", tile)]))
}

/// `softmax` over the last axis of x [M, N] (ops/specs/softmax.py, `operator_default`): per row
/// width the variant measured fastest on H200: gather rows up to 8192 columns, TMA rows up to
/// 16384, then the split pair (fewer than 512 rows) or the chunked online kernel. The split pair
/// reads f32 partials [M, SPLITS] the caller allocates (`softmax_partials`).
pub fn softmax(x: &[usize], dtype: Dtype, sms: u32) -> Result<Vec<KernelLaunch>> {
    rank("softmax", "x", x, 2, "[M, N]")?;
    let (m, n) = (x[0], x[1]);
    let tile = next_pow2(n);
    if tile <= 8192 {
        let launch = KernelLaunch::new("softmax_gather_kernel", [m, 1, 1], &[("TILE", tile)]);
        return Ok(vec![launch]);
    }
    if tile <= MAX_ROW_TILE {
        let block_m = rows_per_block(m, tile, dtype, ROW_TILE_BYTES);
        // the prefetch entry holds the next tile beside the f32 one: a 16384-wide f16 row at most
        let prefetch = block_m * tile * (4 + dtype.size()) <= 16384 * 6;
        let kernel =
            if prefetch { "softmax_tma_prefetch_kernel" } else { "softmax_tma_wide_kernel" };
        let grid = persistent(cdiv(m, block_m), sms, 2);
        return Ok(vec![KernelLaunch::new(kernel, grid, &[("BLOCK_M", block_m), ("TILE", tile)])]);
    }
    if m < 512 {
        let (stats, write) = softmax_split(m, n);
        return Ok(vec![stats, write]);
    }
    let chunk = tile.min(4096);
    let grid = persistent(m, sms, 4);
    Ok(vec![KernelLaunch::new(
        "softmax_online_rev_kernel",
        grid,
        &[("BLOCK_M", 1), ("CHUNK", chunk)],
    )])
}

/// Columns per block of the split pair's default.
const SPLIT_TILE: usize = 2048;

/// The split pair over all rows at once (one row group: fewer than 512 rows).
fn softmax_split(m: usize, n: usize) -> (KernelLaunch, KernelLaunch) {
    let splits = cdiv(n, SPLIT_TILE);
    let grid = [splits, m, 1];
    let stats = KernelLaunch::new("softmax_split_stats_kernel", grid, &[("TILE", SPLIT_TILE)]);
    let consts = [("TILE", SPLIT_TILE), ("SPLITS", next_pow2(splits))];
    (stats, KernelLaunch::new("softmax_split_write_kernel", grid, &consts))
}

/// The shape [M, splits] of the split pair's f32 partials (row maxima and sums) for x [M, N].
pub fn softmax_partials(x: &[usize]) -> [usize; 2] {
    [x[0], cdiv(x[1], SPLIT_TILE)]
}

// ---------------------------------------------------------------- rope (ops/specs/rope.py)

/// Rotary embedding kernels over [B * S, H, 2, D/2] (the others take [B, S, H, 2, D/2]).
pub const ROPE_ROWS_ENTRIES: [&str; 3] =
    ["rope_rows_kernel", "rope_rows_pair_kernel", "rope_rows_pair_persistent_kernel"];

/// `rope` (`default`): x [B, S, H, D] (D even), cos / sin [S, D/2]; all heads of one position up to
/// 2048 values per half-tile; the persistent entry on half of them from 32 heads per block; a batch
/// of one through the rows entries (two or four positions per block where they divide S).
pub fn rope(x: &[usize], cos: &[usize], sin: &[usize], sms: u32) -> Result<KernelLaunch> {
    const OP: &str = "rope";
    rank(OP, "x", x, 4, "[B, S, H, D]")?;
    let (b, s, h, d) = (x[0], x[1], x[2], x[3]);
    if d % 2 != 0 {
        return Err(shape(OP, format!("the head dim {d} of `x` must be even")));
    }
    for (name, table) in [("cos", cos), ("sin", sin)] {
        if table != [s, d / 2] {
            return Err(shape(OP, format!("`{name}` must be [{s}, {}], got {table:?}", d / 2)));
        }
    }
    let half_tile = next_pow2(d / 2);
    let block_h = next_pow2(h).min((2048 / half_tile).max(1));
    let (kernel, block_s, block_h) = if block_h >= 32 {
        ("rope_persistent_kernel", 1, block_h / 2)
    } else if b == 1 && s % 4 == 0 && 4 * block_h * half_tile <= 2048 {
        (ROPE_ROWS_ENTRIES[2], 4, block_h)
    } else if b == 1 && s % 2 == 0 {
        (ROPE_ROWS_ENTRIES[1], 2, block_h)
    } else if b == 1 {
        (ROPE_ROWS_ENTRIES[0], 1, block_h)
    } else {
        ("rope_kernel", 1, block_h)
    };
    let (seq_blocks, head_blocks) = (cdiv(s, block_s), cdiv(h, block_h));
    let sms = sms as usize;
    let grid = match kernel {
        "rope_rows_pair_persistent_kernel" => {
            [(b * seq_blocks).min((sms * 4 / head_blocks).max(1)), head_blocks, 1]
        }
        "rope_rows_kernel" | "rope_rows_pair_kernel" => [b * seq_blocks, head_blocks, 1],
        "rope_persistent_kernel" => {
            [seq_blocks.min((sms * 4 / (head_blocks * b)).max(1)), head_blocks, b]
        }
        _ => [seq_blocks, head_blocks, b],
    };
    let consts = [("BLOCK_S", block_s), ("BLOCK_H", block_h), ("HALF_TILE", half_tile)];
    Ok(KernelLaunch::new(kernel, grid, &consts))
}

// ---------------------------------------------------------------- matmul, bmm (ops/specs/matmul.py)

/// (TILE_M, TILE_N, TILE_K) per dtype for the kernels' 2-CTA clusters (measured on H200; TF32
/// halves TILE_K).
fn mma_tiles(dtype: Dtype) -> [usize; 3] {
    match dtype {
        Dtype::F32 => [256, 256, 32],
        Dtype::F16 | Dtype::BF16 => [256, 256, 64],
    }
}

fn mma_launch(kernel: &'static str, tiles: usize, dtype: Dtype, sms: u32) -> KernelLaunch {
    let [tm, tn, tk] = mma_tiles(dtype);
    // one resident wave of 2-CTA clusters, at most one block per output tile
    let grid = [tiles.min(sms as usize / 2).max(1), 1, 1];
    let consts = [("TILE_M", tm), ("TILE_N", tn), ("TILE_K", tk), ("GROUP_M", 8)];
    KernelLaunch::new(kernel, grid, &consts).flag("USE_TF32", dtype == Dtype::F32)
}

/// `matmul`: a [M, K] @ b [K, N]; f16 / bf16 with f32 accumulation, f32 through TF32.
pub fn matmul(a: &[usize], b: &[usize], dtype: Dtype, sms: u32) -> Result<KernelLaunch> {
    rank("matmul", "a", a, 2, "[M, K]")?;
    rank("matmul", "b", b, 2, "[K, N]")?;
    if a[1] != b[0] {
        return Err(shape("matmul", format!("inner dims differ: a {a:?}, b {b:?}")));
    }
    let [tm, tn, _] = mma_tiles(dtype);
    Ok(mma_launch("matmul_kernel", cdiv(a[0], tm) * cdiv(b[1], tn), dtype, sms))
}

/// `bmm`: a [B, M, K] @ b [B, K, N].
pub fn bmm(a: &[usize], b: &[usize], dtype: Dtype, sms: u32) -> Result<KernelLaunch> {
    rank("bmm", "a", a, 3, "[B, M, K]")?;
    rank("bmm", "b", b, 3, "[B, K, N]")?;
    if a[0] != b[0] || a[2] != b[1] {
        return Err(shape("bmm", format!("batch or inner dims differ: a {a:?}, b {b:?}")));
    }
    let [tm, tn, _] = mma_tiles(dtype);
    Ok(mma_launch("bmm_kernel", cdiv(a[1], tm) * cdiv(b[2], tn) * a[0], dtype, sms))
}

/// `matmul_splitk` (ops/specs/matmul_splitk.py): a [M, K] @ b [K, N] with K split over S tile blocks
/// per output tile into an f32 workspace [S, M, N] (`k_tiles_per_split` K tiles each; no split empty),
/// then a reduce of the S partial sums into c: S = min(ceil(SMs / tiles), K tiles / 4), at least 1.
pub fn matmul_splitk(
    a: &[usize], b: &[usize], dtype: Dtype, sms: u32,
) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "matmul_splitk";
    rank(OP, "a", a, 2, "[M, K]")?;
    rank(OP, "b", b, 2, "[K, N]")?;
    if a[1] != b[0] {
        return Err(shape(OP, format!("inner dims differ: a {a:?}, b {b:?}")));
    }
    let (m, k, n) = (a[0], a[1], b[1]);
    let (tm, tn, tk) = (128, 128, if dtype == Dtype::F32 { 32 } else { 64 });
    let tiles = cdiv(m, tm) * cdiv(n, tn);
    let num_k = cdiv(k, tk).max(1);
    let splits = cdiv(sms as usize, tiles).min(num_k / 4).max(1);
    let per_split = cdiv(num_k, splits);
    let consts = [
        ("TILE_M", tm),
        ("TILE_N", tn),
        ("TILE_K", tk),
        ("GROUP_M", 8),
        ("k_tiles_per_split", per_split),
    ];
    let split =
        KernelLaunch::new("matmul_splitk_kernel", [tiles, cdiv(num_k, per_split), 1], &consts);
    let (rm, rn) = (64, 128);
    let reduce = KernelLaunch::new(
        "splitk_reduce_kernel",
        [cdiv(m, rm), cdiv(n, rn), 1],
        &[("TILE_M", rm), ("TILE_N", rn)],
    );
    Ok(vec![split.flag("USE_TF32", dtype == Dtype::F32), reduce])
}

// ---------------------------------------------------------------- attention (ops/specs/_attention.py)

/// Head dims the attention kernels are ported for.
pub const HEAD_DIMS: [usize; 2] = [64, 128];

/// `fmha` (attention prefill): q [B, Hq, S, D], k and v [B, Hkv, S, D] with Hkv dividing Hq, f16 or
/// bf16; 128 query rows x 128 keys per step.
pub fn fmha(
    q: &[usize], k: &[usize], v: &[usize], causal: bool, dtype: Dtype,
) -> Result<KernelLaunch> {
    prefill("fmha", q, k, v, dtype, &HEAD_DIMS, Variant { causal, ..Variant::default() })
}

/// The head dims `fmha_sinks` is ported for (gpt-oss).
pub const SINKS_HEAD_DIMS: [usize; 1] = [64];
/// The head dims `fmha_softcap` is ported for.
pub const SOFTCAP_HEAD_DIMS: [usize; 1] = [128];

/// `fmha_sinks` (`fmha_fwd_sinks`): causal prefill as `fmha`, with per-head sink logits `sinks`
/// \[Hq\] f32 (in the softmax denominator only) and a sliding window of `window` keys ending at the
/// query (0: none); head dim 64.
pub fn fmha_sinks(
    q: &[usize], k: &[usize], v: &[usize], sinks: &[usize], window: usize, dtype: Dtype,
) -> Result<KernelLaunch> {
    const OP: &str = "fmha_sinks";
    let variant = Variant { causal: true, sliding: window > 0, sinks: true, softcap: false };
    let launch = prefill(OP, q, k, v, dtype, &SINKS_HEAD_DIMS, variant)?;
    if sinks != [q[1]] {
        return Err(shape(OP, format!("`sinks` must be [{}], got {sinks:?}", q[1])));
    }
    if i32::try_from(window).is_err() {
        return Err(shape(OP, format!("window {window} is past i32")));
    }
    Ok(launch)
}

/// `fmha_softcap` (`fmha_fwd_softcap`): causal prefill as `fmha`, the scaled logits capped as
/// `softcap * tanh(s / softcap)` (Gemma), `softcap` > 0; head dim 128.
pub fn fmha_softcap(
    q: &[usize], k: &[usize], v: &[usize], softcap: f32, dtype: Dtype,
) -> Result<KernelLaunch> {
    const OP: &str = "fmha_softcap";
    let variant = Variant { causal: true, softcap: true, ..Variant::default() };
    let launch = prefill(OP, q, k, v, dtype, &SOFTCAP_HEAD_DIMS, variant)?;
    if !(softcap > 0.0 && softcap.is_finite()) {
        return Err(value(OP, format!("softcap must be > 0 and finite, got {softcap}")));
    }
    Ok(launch)
}

/// `dropout` (ops/specs/dropout.py): one flattened launch over x, the keep mask of element i drawn by
/// Philox4x32-10 from (seed, `offset` + i); `p` in [0, 1), 0 <= `offset`, `offset` + numel < 2^63.
pub fn dropout(x: &[usize], offset: i64, p: f64) -> Result<KernelLaunch> {
    dropout_launch("dropout", "dropout_fwd_kernel", "x", x, offset, p)
}

/// `dropout_bwd`: `dropout`'s launch over dy, the mask of the same (seed, offset, p) recomputed.
pub fn dropout_bwd(dy: &[usize], offset: i64, p: f64) -> Result<KernelLaunch> {
    dropout_launch("dropout_bwd", "dropout_bwd_kernel", "dy", dy, offset, p)
}

/// The 24-bit threshold a kept element's random word reaches: round(p * 2^24), ties to even (Python's).
pub fn dropout_threshold(p: f64) -> i32 {
    (p * f64::from(1u32 << 24)).round_ties_even() as i32
}

/// 1 / (1 - p) as the f32 the kernel multiplies kept elements by.
pub fn dropout_scale(p: f64) -> f32 {
    (1.0 / (1.0 - p)) as f32
}

fn dropout_launch(
    op: &'static str, kernel: &'static str, name: &str, x: &[usize], offset: i64, p: f64,
) -> Result<KernelLaunch> {
    let launch = elementwise(op, kernel, &[(name, x)])?;
    if !(0.0..1.0).contains(&p) {
        return Err(value(op, format!("p must lie in [0, 1), got {p}")));
    }
    let n: usize = x.iter().product();
    if offset < 0 || (offset as u64).checked_add(n as u64).is_none_or(|end| end >= 1 << 63) {
        return Err(value(
            op,
            format!("0 <= offset and offset + numel < 2^63, got offset {offset}"),
        ));
    }
    Ok(launch)
}

// ---------------------------------------------------------------- MoE routing (ops/specs/moe_topk_softmax.py)

/// The most experts a token is routed to.
pub const MOE_MAX_K: usize = 16;

/// `moe_topk_softmax` / `moe_topk_sigmoid`: router logits [T, E] -> the k experts of each token,
/// k a power of two <= min(16, E); BLOCK_T tokens x E_PAD (E padded to a power of two) scores per
/// block, BLOCK_T x E_PAD <= 4096.
pub fn moe_topk(logits: &[usize], k: usize, sigmoid: bool) -> Result<KernelLaunch> {
    let op = if sigmoid { "moe_topk_sigmoid" } else { "moe_topk_softmax" };
    rank(op, "logits", logits, 2, "[T, E]")?;
    let (t, e) = (logits[0], logits[1]);
    if !(1..=MOE_MAX_K.min(e)).contains(&k) || !k.is_power_of_two() {
        return Err(value(
            op,
            format!("k must be a power of two <= {MOE_MAX_K} and <= the experts ({e}), got {k}"),
        ));
    }
    let e_pad = next_pow2(e);
    let block_t = (4096 / e_pad).min(next_pow2(t)).max(1);
    let consts = [("BLOCK_T", block_t), ("E_PAD", e_pad), ("K", k)];
    Ok(KernelLaunch::new("moe_topk_kernel", [cdiv(t, block_t), 1, 1], &consts)
        .flag("SIGMOID", sigmoid))
}

/// `moe_route` (ops/specs/moe_route.py): `moe_topk(logits, k, false)`, then the alignment of the
/// T * k token slots in three kernels over `chunks` blocks of TILE x STEPS slots (count, offsets,
/// scatter; `moe_align_config`); `block_size` a power of two.
pub fn moe_route(logits: &[usize], k: usize, block_size: usize) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "moe_route";
    let topk = moe_topk(logits, k, false).map_err(|e| match e {
        Error::Shape { message, .. } => shape(OP, message),
        Error::Value { message, .. } => value(OP, message),
        other => other,
    })?;
    if !block_size.is_power_of_two() || i32::try_from(block_size).is_err() {
        return Err(value(OP, format!("block_size must be a power of two, got {block_size}")));
    }
    let c = moe_align_config(logits[0] * k, logits[1]);
    let (e_pad, tile) = (("E_PAD", c.e_pad), ("TILE", c.tile));
    let count = [("SLOTS", c.tile * c.steps), e_pad];
    let offsets = [("BLOCK", block_size), e_pad, ("ROWS", c.rows)];
    let scatter = [("BLOCK", block_size), e_pad, tile, ("STEPS", c.steps), ("ID_TILE", c.id_tile)];
    Ok(vec![
        topk,
        KernelLaunch::new("moe_align_count_kernel", [c.chunks, 1, 1], &count),
        KernelLaunch::new("moe_align_offsets_kernel", [1, 1, 1], &offsets),
        KernelLaunch::new("moe_align_scatter_kernel", [c.chunks, 1, 1], &scatter),
    ])
}

/// The alignment's tiling of `n` token slots over `experts` experts (ops/specs/moe_route.py's
/// `align_config`): slots per tile and tiles per block, blocks (`chunks`, at most 128 unless a
/// block takes more tiles), and the offsets kernel's row tile and the expert-id tile (each of at
/// most 4096 entries with E_PAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeAlignConfig {
    pub e_pad: usize,
    pub tile: usize,
    pub steps: usize,
    pub chunks: usize,
    pub rows: usize,
    pub id_tile: usize,
}

/// See [`MoeAlignConfig`].
pub fn moe_align_config(n: usize, experts: usize) -> MoeAlignConfig {
    let e_pad = next_pow2(experts);
    let tile = next_pow2(n).min(64);
    let steps = next_pow2(cdiv(n, tile * 128));
    let chunks = cdiv(n, tile * steps);
    let width = (4096 / e_pad).max(1);
    MoeAlignConfig {
        e_pad,
        tile,
        steps,
        chunks,
        rows: width.min(next_pow2(chunks)),
        id_tile: width.min(64),
    }
}

/// (len(sorted_ids), len(expert_ids)) of `moe_route` over `n` token slots: every expert's group
/// may take `block_size - 1` padding slots.
pub fn moe_route_sizes(n: usize, experts: usize, block_size: usize) -> (usize, usize) {
    let padded = n + experts * (block_size - 1);
    (padded, cdiv(padded, block_size))
}

// ---------------------------------------------------------------- cross-entropy (ops/specs/cross_entropy.py)

/// Columns per chunk of the cross-entropy kernels, and BLOCK_M x CHUNK at most.
const CE_MAX_CHUNK: usize = 4096;
const CE_TILE_ELEMENTS: usize = 8192;

/// `cross_entropy`: logits [M, V], labels \[M\] i32 -> loss and lse \[M\] f32; BLOCK_M rows x CHUNK
/// columns (a power of two up to 4096) per step, BLOCK_M x CHUNK <= 8192; persistent (occupancy 4).
pub fn cross_entropy(logits: &[usize], labels: &[usize], sms: u32) -> Result<KernelLaunch> {
    ce_rows("cross_entropy", "cross_entropy_fwd_kernel", logits, &[("labels", labels)], sms)
}

/// `cross_entropy_bwd`: logits [M, V], labels \[M\] i32, lse and dloss \[M\] f32 -> dlogits [M, V];
/// the tiles and grid of `cross_entropy`.
pub fn cross_entropy_bwd(
    logits: &[usize], labels: &[usize], lse: &[usize], dloss: &[usize], sms: u32,
) -> Result<KernelLaunch> {
    let rows = [("labels", labels), ("lse", lse), ("dloss", dloss)];
    ce_rows("cross_entropy_bwd", "cross_entropy_bwd_kernel", logits, &rows, sms)
}

fn ce_rows(
    op: &'static str, kernel: &'static str, logits: &[usize], rows: &[(&str, &[usize])], sms: u32,
) -> Result<KernelLaunch> {
    rank(op, "logits", logits, 2, "[M, V]")?;
    let m = logits[0];
    if let Some((name, dims)) = rows.iter().find(|(_, d)| *d != [m]) {
        return Err(shape(op, format!("`{name}` must be [{m}] (a value per row), got {dims:?}")));
    }
    let chunk = next_pow2(logits[1]).min(CE_MAX_CHUNK);
    let block_m = (CE_TILE_ELEMENTS / chunk).min(next_pow2(m));
    let grid = persistent(cdiv(m, block_m), sms, 4);
    Ok(KernelLaunch::new(kernel, grid, &[("BLOCK_M", block_m), ("CHUNK", chunk)]))
}

/// `fmha_bwd` (ops/specs/fmha_bwd.py): the gradients of `fmha`'s attention, the forward's q, k, v
/// (as `fmha`'s), o and do [B, Hq, S, D], lse and dlse [B, Hq, S]: delta = rowsum(do * o) - dlse
/// (64 rows per block), then dk, dv over key tiles and dq over query tiles (per head dim: (32, 64)
/// and (64, 64) query x key tiles at 128, (64, 64) both at 64).
#[allow(clippy::too_many_arguments)]
pub fn fmha_bwd(
    q: &[usize], k: &[usize], v: &[usize], o: &[usize], lse: &[usize], do_: &[usize],
    dlse: &[usize], causal: bool, dtype: Dtype,
) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "fmha_bwd";
    prefill(OP, q, k, v, dtype, &HEAD_DIMS, Variant { causal, ..Variant::default() })?;
    if o != q || do_ != q || lse != &q[..3] || dlse != &q[..3] {
        let msg = format!(
            "o and do must be q's {q:?}, lse and dlse {:?}: o {o:?}, do {do_:?}, lse {lse:?}, dlse {dlse:?}",
            &q[..3]
        );
        return Err(shape(OP, msg));
    }
    let (batch, hq, s, d) = (q[0], q[1], q[2], q[3]);
    let pre = [("BLOCK_M", 64), ("HEAD_DIM", d)];
    let grads = |kernel, [bm, bn]: [usize; 2], grid| {
        let consts = [("BLOCK_M", bm), ("BLOCK_N", bn), ("HEAD_DIM", d)];
        KernelLaunch::new(kernel, grid, &consts).flag("CAUSAL", causal)
    };
    let dkdv = if d == 128 { [32, 64] } else { [64, 64] };
    Ok(vec![
        KernelLaunch::new("fmha_bwd_preprocess_kernel", [cdiv(s, 64), batch * hq, 1], &pre),
        grads("fmha_bwd_dkdv_kernel", dkdv, [cdiv(s, dkdv[1]), batch * k[1], 1]),
        grads("fmha_bwd_dq_kernel", [64, 64], [cdiv(s, 64), batch * hq, 1]),
    ])
}

/// The latent (LORA) and rope widths of the MLA kernels (DeepSeek-V2/V3).
pub const MLA_LORA: usize = 512;
pub const MLA_ROPE: usize = 64;

/// `mla_decode` (ops/specs/mla_decode.py): absorbed multi-head latent attention decode, q_nope
/// [B, H, 512], q_pe [B, H, 64] against ckv [B, S, 512], kpe [B, S, 64] up to kv_lens \[B\]: the
/// partial kernel over (splits, B x H/16 head blocks), 32 positions a tile, then the combine kernel.
pub fn mla_decode(
    q_nope: &[usize], q_pe: &[usize], ckv: &[usize], kpe: &[usize], kv_lens: &[usize],
    dtype: Dtype, sms: u32,
) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "mla_decode";
    rank(OP, "q_nope", q_nope, 3, "[B, H, 512]")?;
    rank(OP, "ckv", ckv, 3, "[B, S, 512]")?;
    let (batch, heads, s) = (q_nope[0], q_nope[1], ckv[1]);
    if q_nope[2] != MLA_LORA
        || q_pe != [batch, heads, MLA_ROPE]
        || ckv[0] != batch
        || ckv[2] != MLA_LORA
        || kpe != [batch, s, MLA_ROPE]
        || kv_lens != [batch]
    {
        let msg = format!(
            "takes q_nope [B, H, 512], q_pe [B, H, 64], ckv [B, S, 512], kpe [B, S, 64], kv_lens [B]: q_nope {q_nope:?}, q_pe {q_pe:?}, ckv {ckv:?}, kpe {kpe:?}, kv_lens {kv_lens:?}"
        );
        return Err(shape(OP, msg));
    }
    if dtype == Dtype::F32 {
        return Err(unsupported(OP, "f32 (the attention kernels take f16 and bf16)"));
    }
    let (head_tile, block_n) = (16, 32);
    let head_blocks = cdiv(heads, head_tile);
    let tiles = cdiv(s, block_n).max(1);
    let splits = tiles.min(cdiv(DECODE_BLOCKS_PER_SM * sms as usize, batch * head_blocks)).max(1);
    let per_split = cdiv(tiles, splits);
    let splits = cdiv(tiles, per_split);
    let consts = [
        ("HEAD_TILE", head_tile),
        ("BLOCK_N", block_n),
        ("LORA", MLA_LORA),
        ("ROPE", MLA_ROPE),
        ("tiles_per_split", per_split),
    ];
    let partial =
        KernelLaunch::new("mla_decode_partial_kernel", [splits, batch * head_blocks, 1], &consts);
    let combine = [("HEAD_DIM", MLA_LORA), ("n_splits", splits)];
    Ok(vec![partial, KernelLaunch::new("flash_decode_combine_kernel", [batch, heads, 1], &combine)])
}

/// `mla_prefill` (ops/specs/mla_prefill.py): absorbed multi-head latent attention prefill, causal
/// and ragged: q_nope [B, H, S, 512], q_pe [B, H, S, 64], ckv [B, S, 512], kpe [B, S, 64], seq_lens
/// \[B\]; 64 query rows x 32 latent rows per step.
pub fn mla_prefill(
    q_nope: &[usize], q_pe: &[usize], ckv: &[usize], kpe: &[usize], seq_lens: &[usize],
    dtype: Dtype,
) -> Result<KernelLaunch> {
    const OP: &str = "mla_prefill";
    rank(OP, "q_nope", q_nope, 4, "[B, H, S, 512]")?;
    let (batch, heads, s) = (q_nope[0], q_nope[1], q_nope[2]);
    if q_nope[3] != MLA_LORA
        || q_pe != [batch, heads, s, MLA_ROPE]
        || ckv != [batch, s, MLA_LORA]
        || kpe != [batch, s, MLA_ROPE]
        || seq_lens != [batch]
    {
        let msg = format!(
            "takes q_nope [B, H, S, 512], q_pe [B, H, S, 64], ckv [B, S, 512], kpe [B, S, 64], seq_lens [B]: q_nope {q_nope:?}, q_pe {q_pe:?}, ckv {ckv:?}, kpe {kpe:?}, seq_lens {seq_lens:?}"
        );
        return Err(shape(OP, msg));
    }
    if dtype == Dtype::F32 {
        return Err(unsupported(OP, "f32 (the attention kernels take f16 and bf16)"));
    }
    let consts = [("BLOCK_M", 64), ("BLOCK_N", 32), ("LORA", MLA_LORA), ("ROPE", MLA_ROPE)];
    Ok(KernelLaunch::new("mla_prefill_kernel", [cdiv(s, 64), batch * heads, 1], &consts))
}

/// Query heads per kv head `flash_decode` takes at most (a block's query tile).
pub const DECODE_GROUP_TILE: usize = 16;
const DECODE_BLOCK_N: usize = 128;
const DECODE_BLOCKS_PER_SM: usize = 2;
const MAX_DECODE_SPLITS: usize = 64;
const BLOCK_OVERHEAD_TILES: usize = 4;

/// `flash_decode` (ops/specs/flash_decode.py): one query token per sequence, q [B, Hq, D], against
/// its caches k, v [B, Hkv, S, D] (Hkv | Hq, Hq / Hkv <= 16) up to `kv_lens` \[B\]; f16 or bf16, head
/// dim 64 or 128. The keys split over `decode_splits` blocks per (sequence, kv head): the partial
/// kernel, then (more than one split) the combine kernel; one split writes o and lse directly (FINAL).
pub fn flash_decode(
    q: &[usize], k: &[usize], v: &[usize], kv_lens: &[usize], dtype: Dtype, sms: u32,
) -> Result<Vec<KernelLaunch>> {
    let caches = Caches { k, v, block_table: None };
    decode("flash_decode", q, caches, kv_lens, dtype, sms, &HEAD_DIMS, Variant::default())
}

/// `flash_decode_paged`: `flash_decode` over page pools k, v [P, Hkv, 64, D] (64 positions a page)
/// and `block_table` [B, pages] (i32: sequence b's page t is pool page `block_table[b, t]`).
pub fn flash_decode_paged(
    q: &[usize], k: &[usize], v: &[usize], block_table: &[usize], kv_lens: &[usize], dtype: Dtype,
    sms: u32,
) -> Result<Vec<KernelLaunch>> {
    let caches = Caches { k, v, block_table: Some(block_table) };
    decode("flash_decode_paged", q, caches, kv_lens, dtype, sms, &HEAD_DIMS, Variant::default())
}

/// `flash_decode_sinks`: `flash_decode` with per-head sink logits `sinks` \[Hq\] and a sliding
/// window of `window` keys (0: none); head dim 64.
#[allow(clippy::too_many_arguments)]
pub fn flash_decode_sinks(
    q: &[usize], k: &[usize], v: &[usize], kv_lens: &[usize], sinks: &[usize], window: usize,
    dtype: Dtype, sms: u32,
) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "flash_decode_sinks";
    let variant = Variant { sliding: window > 0, sinks: true, ..Variant::default() };
    let caches = Caches { k, v, block_table: None };
    let launches = decode(OP, q, caches, kv_lens, dtype, sms, &SINKS_HEAD_DIMS, variant)?;
    if sinks != [q[1]] {
        return Err(shape(OP, format!("`sinks` must be [{}], got {sinks:?}", q[1])));
    }
    if i32::try_from(window).is_err() {
        return Err(value(OP, format!("window {window} is past i32")));
    }
    Ok(launches)
}

/// `flash_decode_softcap`: `flash_decode` with the scaled logits capped as `softcap * tanh(s /
/// softcap)`, `softcap` > 0; head dim 128.
pub fn flash_decode_softcap(
    q: &[usize], k: &[usize], v: &[usize], kv_lens: &[usize], softcap: f32, dtype: Dtype, sms: u32,
) -> Result<Vec<KernelLaunch>> {
    const OP: &str = "flash_decode_softcap";
    let variant = Variant { softcap: true, ..Variant::default() };
    let caches = Caches { k, v, block_table: None };
    let launches = decode(OP, q, caches, kv_lens, dtype, sms, &SOFTCAP_HEAD_DIMS, variant)?;
    if !(softcap > 0.0 && softcap.is_finite()) {
        return Err(value(OP, format!("softcap must be > 0 and finite, got {softcap}")));
    }
    Ok(launches)
}

/// Positions of a page of the paged caches.
pub const PAGE_SIZE: usize = 64;

/// The caches of a decode: contiguous [B, Hkv, S, D], or page pools with their block table.
struct Caches<'a> {
    k: &'a [usize],
    v: &'a [usize],
    block_table: Option<&'a [usize]>,
}

#[allow(clippy::too_many_arguments)]
fn decode(
    op: &'static str, q: &[usize], caches: Caches, kv_lens: &[usize], dtype: Dtype, sms: u32,
    head_dims: &[usize], variant: Variant,
) -> Result<Vec<KernelLaunch>> {
    let (k, v) = (caches.k, caches.v);
    rank(op, "q", q, 3, "[B, Hq, D]")?;
    rank(op, "k", k, 4, "[B, Hkv, S, D]")?;
    let (batch, hq, d) = (q[0], q[1], q[2]);
    let same_batch = caches.block_table.is_some() || k[0] == batch;
    if k != v || !same_batch || hq % k[1] != 0 || k[3] != d || kv_lens != [batch] {
        let msg = format!(
            "q {q:?} takes caches [B, Hkv, S, D] with Hkv | Hq and kv_lens [B]: k {k:?}, v {v:?}, kv_lens {kv_lens:?}"
        );
        return Err(shape(op, msg));
    }
    if dtype == Dtype::F32 {
        return Err(unsupported(op, "f32 (the attention kernels take f16 and bf16)"));
    }
    let hkv = k[1];
    if !head_dims.contains(&d) || hq / hkv > DECODE_GROUP_TILE {
        let msg = format!(
            "head dim {d} / query group {} (head dims {head_dims:?}, groups <= {DECODE_GROUP_TILE})",
            hq / hkv
        );
        return Err(unsupported(op, msg));
    }
    let (block_n, max_len) = match caches.block_table {
        Some(table) => {
            if k[2] != PAGE_SIZE || table.len() != 2 || table[0] != batch {
                let msg = format!(
                    "pages hold {PAGE_SIZE} positions and block_table is [B, pages]: k {k:?}, block_table {table:?}"
                );
                return Err(shape(op, msg));
            }
            (PAGE_SIZE, table[1] * PAGE_SIZE)
        }
        None => (DECODE_BLOCK_N, k[2]),
    };
    let (splits, per_split) = decode_splits(batch, hkv, max_len, sms, block_n);
    let last = splits == 1;
    let consts = [
        ("GROUP_TILE", DECODE_GROUP_TILE),
        ("BLOCK_N", block_n),
        ("HEAD_DIM", d),
        ("tiles_per_split", per_split),
    ];
    let partial =
        KernelLaunch::new("flash_decode_partial_kernel", [splits, batch * hkv, 1], &consts)
            .flag("PAGED", caches.block_table.is_some())
            .flag("SLIDING", variant.sliding)
            .flag("HAS_SINKS", variant.sinks)
            .flag("SOFTCAP", variant.softcap)
            .flag("FINAL", last);
    if last {
        return Ok(vec![partial]);
    }
    let combine = [("HEAD_DIM", d), ("n_splits", splits)];
    Ok(vec![partial, KernelLaunch::new("flash_decode_combine_kernel", [batch, hq, 1], &combine)])
}

/// (splits, key tiles per split) of a decode over `max_len` keys: the count that makes the longest
/// chain of blocks shortest (waves of 2 blocks per SM, each split's tiles plus a block's fixed cost of
/// 4 tiles), fewer splits on a tie; at most 64, none empty.
pub fn decode_splits(
    batch: usize, hkv: usize, max_len: usize, sms: u32, block_n: usize,
) -> (usize, usize) {
    let tiles = cdiv(max_len, block_n).max(1);
    let slots = DECODE_BLOCKS_PER_SM * sms as usize;
    let mut best: Option<((usize, usize), usize, usize)> = None;
    for splits in 1..=tiles.min(MAX_DECODE_SPLITS) {
        let per_split = cdiv(tiles, splits);
        let used = cdiv(tiles, per_split);
        let cost = (cdiv(batch * hkv * used, slots) * (per_split + BLOCK_OVERHEAD_TILES), used);
        if best.is_none_or(|(c, ..)| cost < c) {
            best = Some((cost, used, per_split));
        }
    }
    let (_, used, per_split) = best.expect("at least one split");
    (used, per_split)
}

/// The entry-selecting flags of `fmha_fwd_kernel`.
#[derive(Debug, Default, Clone, Copy)]
struct Variant {
    causal: bool,
    sliding: bool,
    sinks: bool,
    softcap: bool,
}

/// One `fmha_fwd_kernel` launch of the variant, for the head dims `head_dims` its operator is ported for.
fn prefill(
    op: &'static str, q: &[usize], k: &[usize], v: &[usize], dtype: Dtype, head_dims: &[usize],
    variant: Variant,
) -> Result<KernelLaunch> {
    rank(op, "q", q, 4, "[B, Hq, S, D]")?;
    rank(op, "k", k, 4, "[B, Hkv, S, D]")?;
    if k != v || q[0] != k[0] || q[2..] != k[2..] || q[1] % k[1] != 0 {
        let msg = format!("q {q:?} takes k and v [B, Hkv, S, D] with Hkv | Hq: k {k:?}, v {v:?}");
        return Err(shape(op, msg));
    }
    if dtype == Dtype::F32 {
        return Err(unsupported(op, "f32 (the attention kernels take f16 and bf16)"));
    }
    let d = q[3];
    if !head_dims.contains(&d) {
        return Err(unsupported(op, format!("head dim {d} (ported for {head_dims:?})")));
    }
    let (block_m, block_n) = (128, 128);
    let grid = [cdiv(q[2], block_m), q[0] * q[1], 1];
    let consts = [("BLOCK_M", block_m), ("BLOCK_N", block_n), ("HEAD_DIM", d)];
    Ok(KernelLaunch::new("fmha_fwd_kernel", grid, &consts)
        .flag("CAUSAL", variant.causal)
        .flag("SLIDING", variant.sliding)
        .flag("HAS_SINKS", variant.sinks)
        .flag("SOFTCAP", variant.softcap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_per_block_follows_the_python_rule() {
        // 16 KiB of f32 rows of 1024: 4 rows; bf16: 8; never more than the rows
        assert_eq!(rows_per_block(4096, 1024, Dtype::F32, ROW_TILE_BYTES), 4);
        assert_eq!(rows_per_block(4096, 1024, Dtype::BF16, ROW_TILE_BYTES), 8);
        assert_eq!(rows_per_block(3, 1024, Dtype::BF16, ROW_TILE_BYTES), 4);
        assert_eq!(rows_per_block(4096, 16384, Dtype::F32, ROW_TILE_BYTES), 1);
    }

    #[test]
    fn layer_norm_takes_one_row_blocks_for_narrow_rows() {
        let narrow = layer_norm(&[16384, 2048], &[2048], &[2048], Dtype::F16, 132).unwrap();
        assert_eq!((narrow.kernel, narrow.int("BLOCK_M")), ("layer_norm_fwd_occ4_kernel", 1));
        let wide = layer_norm(&[8192, 4096], &[4096], &[4096], Dtype::BF16, 132).unwrap();
        assert_eq!((wide.kernel, wide.int("BLOCK_M")), ("layer_norm_fwd_kernel", 1));
        let short = layer_norm(&[1000, 512], &[512], &[512], Dtype::F32, 132).unwrap();
        assert_eq!((short.kernel, short.int("BLOCK_M")), ("layer_norm_fwd_kernel", 4));
    }

    #[test]
    fn softmax_picks_the_variant_by_row_width() {
        let kernels = |m, n, dt| -> Vec<&str> {
            softmax(&[m, n], dt, 132).unwrap().iter().map(|l| l.kernel).collect()
        };
        assert_eq!(kernels(4096, 4096, Dtype::F16), ["softmax_gather_kernel"]);
        assert_eq!(kernels(1024, 16384, Dtype::F16), ["softmax_tma_prefetch_kernel"]);
        assert_eq!(kernels(1024, 16384, Dtype::F32), ["softmax_tma_wide_kernel"]);
        assert_eq!(
            kernels(16, 100_003, Dtype::F32),
            ["softmax_split_stats_kernel", "softmax_split_write_kernel"]
        );
        assert_eq!(kernels(1024, 32768, Dtype::BF16), ["softmax_online_rev_kernel"]);
    }

    #[test]
    fn rope_picks_the_entry_by_batch_and_heads() {
        let cs = |s, d: usize| [s, d / 2];
        let pick = |x: [usize; 4]| rope(&x, &cs(x[1], x[3]), &cs(x[1], x[3]), 132).unwrap();
        assert_eq!(pick([4, 4096, 32, 128]).kernel, "rope_persistent_kernel");
        assert_eq!(pick([1, 16384, 8, 128]).kernel, "rope_rows_pair_persistent_kernel");
        assert_eq!(pick([1, 130, 5, 96]).kernel, "rope_rows_pair_kernel");
        assert_eq!(pick([1, 129, 8, 128]).kernel, "rope_rows_kernel");
        assert_eq!(pick([2, 7, 3, 80]).kernel, "rope_kernel");
    }
}
