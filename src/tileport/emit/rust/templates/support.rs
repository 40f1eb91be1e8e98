//! Runtime support shared by every generated launcher: the tensor descriptor that crosses the C ABI,
//! error codes and messages, panic containment, CUDA context/stream borrowing and the CPU-only
//! Tile IR export. Copied verbatim into the generated crate by tileport.

use core::ffi::{c_char, c_void};
use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cutile::cuda_core::{Context, Stream};
use cutile::tensor::Tensor;

/// Largest array rank a descriptor carries (cutile-rs kernels support up to rank 6).
pub const MAX_DIMS: usize = 6;

/// A tensor crossing the C ABI: device pointer, rank, extents and strides (in elements), dtype code.
#[repr(C)]
pub struct TensorDesc {
    pub ptr: u64,
    pub ndim: i32,
    pub shape: [i64; MAX_DIMS],
    pub strides: [i64; MAX_DIMS],
    pub dtype: i32,
}

/// Element dtype codes (kept in sync with tileport.runtime.abi.DTYPE_CODES).
pub mod dtype {
    pub const F32: i32 = 0;
    pub const F16: i32 = 1;
    pub const BF16: i32 = 2;
    pub const F64: i32 = 3;
    pub const I32: i32 = 4;
    pub const I64: i32 = 5;
    pub const I16: i32 = 6;
    pub const I8: i32 = 7;
    pub const U8: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const F8E4M3FN: i32 = 10;
    pub const F8E5M2: i32 = 11;

    pub fn name(code: i32) -> &'static str {
        match code {
            F32 => "f32",
            F16 => "f16",
            BF16 => "bf16",
            F64 => "f64",
            I32 => "i32",
            I64 => "i64",
            I16 => "i16",
            I8 => "i8",
            U8 => "u8",
            BOOL => "bool",
            F8E4M3FN => "f8e4m3fn",
            F8E5M2 => "f8e5m2",
            _ => "unknown",
        }
    }

    /// Bytes per element.
    pub fn size(code: i32) -> Option<i64> {
        match code {
            F64 | I64 => Some(8),
            F32 | I32 => Some(4),
            F16 | BF16 | I16 => Some(2),
            I8 | U8 | BOOL | F8E4M3FN | F8E5M2 => Some(1),
            _ => None,
        }
    }
}

/// Return codes (kept in sync with tileport.runtime.abi.ERRORS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    NullPointer = -1,
    DType = -2,
    Rank = -3,
    Shape = -4,
    Device = -5,
    InvalidArgument = -6,
    Launch = -7,
    Panic = -8,
    Layout = -9,
}

/// An error carried back across the C ABI as a return code plus a message.
#[derive(Debug)]
pub struct Error {
    pub code: Code,
    pub message: String,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = text);
}

/// The message of the last failed call on this thread (valid until the next failure).
#[unsafe(no_mangle)]
pub extern "C" fn tileport_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

/// ABI revision of the descriptor and return codes; the Python binding checks it at load.
#[unsafe(no_mangle)]
pub extern "C" fn tileport_abi_version() -> i32 {
    1
}

/// Turn on cutile's on-disk cubin cache (`~/.cache/cutile/kernels`), so later processes reuse compiled
/// kernels instead of running the JIT again (cuTile Python caches the same way by default).
#[unsafe(no_mangle)]
pub extern "C" fn tileport_enable_jit_cache() -> i32 {
    guard("tileport_enable_jit_cache", || {
        cutile::jit_cache::enable_default().map_err(|e| Error::new(Code::Device, format!("cubin cache: {e}")))
    })
}

/// Run `body`, turning errors into return codes and panics into `Code::Panic`: nothing unwinds
/// across the C boundary.
pub fn guard(what: &str, body: impl FnOnce() -> Result<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_last_error(&format!("{what}: {}", e.message));
            e.code as i32
        }
        Err(payload) => {
            let text = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".to_string());
            set_last_error(&format!("{what}: internal panic: {text}"));
            Code::Panic as i32
        }
    }
}

/// Check a descriptor before anything touches the device: not null, the expected rank, extents and
/// strides that fit the i32 indexing cutile kernels use.
pub fn check_desc<'a>(name: &str, desc: *const TensorDesc, rank: usize) -> Result<&'a TensorDesc> {
    let d = unsafe { desc.as_ref() }
        .ok_or_else(|| Error::new(Code::NullPointer, format!("tensor `{name}` is a null descriptor")))?;
    if d.ndim != rank as i32 {
        return Err(Error::new(
            Code::Rank,
            format!("tensor `{name}` has rank {}, the kernel needs rank {rank}", d.ndim),
        ));
    }
    if d.ptr == 0 {
        return Err(Error::new(Code::NullPointer, format!("tensor `{name}` has a null data pointer")));
    }
    for i in 0..rank {
        if d.shape[i] < 0 || d.shape[i] > i32::MAX as i64 {
            return Err(Error::new(
                Code::Shape,
                format!("tensor `{name}` extent {} of dim {i} is outside 0..=i32::MAX", d.shape[i]),
            ));
        }
        if d.strides[i].abs() > i32::MAX as i64 {
            return Err(Error::new(
                Code::Layout,
                format!("tensor `{name}` stride {} of dim {i} does not fit in i32", d.strides[i]),
            ));
        }
    }
    Ok(d)
}

/// The dtype code shared by every array of one generic element type, checked against `allowed`.
pub fn common_dtype(arrays: &[(&str, &TensorDesc)], allowed: &[i32]) -> Result<i32> {
    let (first, head) = arrays[0];
    for (name, d) in &arrays[1..] {
        if d.dtype != head.dtype {
            return Err(Error::new(
                Code::DType,
                format!(
                    "tensor `{name}` is {} but `{first}` is {}; they must match",
                    dtype::name(d.dtype),
                    dtype::name(head.dtype)
                ),
            ));
        }
    }
    if !allowed.contains(&head.dtype) {
        let names: Vec<&str> = allowed.iter().map(|c| dtype::name(*c)).collect();
        return Err(Error::new(
            Code::DType,
            format!("dtype {} is not supported (supported: {})", dtype::name(head.dtype), names.join(", ")),
        ));
    }
    Ok(head.dtype)
}

/// Check that an array of fixed element type has exactly that dtype.
pub fn require_dtype(name: &str, d: &TensorDesc, code: i32) -> Result<()> {
    if d.dtype != code {
        return Err(Error::new(
            Code::DType,
            format!("tensor `{name}` must be {}, got {}", dtype::name(code), dtype::name(d.dtype)),
        ));
    }
    Ok(())
}

/// The static length an entry takes for `axis` of an array (its unit-axis generic): 1 where the launch's
/// length is 1, as cuTile Python's launcher compiles such an axis, else -1 (dynamic). cutile 0.5.0 gives the
/// k-th dynamic axis of an entry's tensor the shape divisibility of axis k, not of its own axis (the two
/// differ once a static axis precedes it): the array's axes of length 1 are static only where what that
/// claims of each dynamic length holds, else every axis of the array stays dynamic.
pub fn unit_axis(d: &TensorDesc, axis: usize) -> i32 {
    let n = (d.ndim.max(0) as usize).min(MAX_DIMS);
    let dims = &d.shape[..n];
    // cutile's `DivHint::from_value`: the largest power of two dividing the length, at most 16 (0: 16)
    let div = |v: i64| if v == 0 { 16 } else { (v & -v).min(16) };
    let sound = (0..n).filter(|&i| dims[i] != 1).enumerate().all(|(k, i)| dims[i] % div(dims[k]) == 0);
    if sound && dims[axis] == 1 { 1 } else { -1 }
}

/// The divisibility cuTile Python's launcher claims of a launch's array, as cutile's entry reads it: per
/// dynamic length, 16 where 16 divides it, else nothing; per dynamic stride, 16 bytes (16 / element size
/// elements) where that divides it, else nothing; the base address 16-byte aligned, else nothing. cutile's own
/// claim (`compute_spec`: the largest power of two dividing each value, up to 16) says more of some launches
/// (a row of 1000 f32: 8 and 8 where cuTile Python says 1 and 4), and the entry compiles to other machine code;
/// what cuTile Python claims holds wherever cutile's does. cutile 0.5.0 gives the k-th dynamic length (stride)
/// of an entry's tensor the divisibility at position k (kernel_entry_generator.rs, `generate_statements`), so
/// each claim sits at its dynamic axis' position: `static_axes[i]` is true where the entry takes axis i's
/// length as a constant (a unit axis), and an axis of stride 1 is static (`stride_one`).
pub fn python_claims(d: &TensorDesc, element_bytes: i64, static_axes: &[bool]) -> cutile::tensor::SpecializationBits {
    use cutile::cutile_compiler::specialization::DivHint;
    let n = (d.ndim.max(0) as usize).min(MAX_DIMS);
    let claim = |divisor: i64, v: i64| DivHint { divisor: if v % divisor == 0 { divisor as i32 } else { 1 }, max: 16 };
    let stride_divisor = if element_bytes > 0 && 16 % element_bytes == 0 { 16 / element_bytes } else { 1 };
    let mut shape_div = vec![DivHint::default(); n];
    let dynamic_lengths = (0..n).filter(|&i| !static_axes.get(i).copied().unwrap_or(false));
    for (k, i) in dynamic_lengths.enumerate() {
        shape_div[k] = claim(16, d.shape[i]);
    }
    let mut stride_div = vec![DivHint::default(); n];
    for (k, i) in (0..n).filter(|&i| d.strides[i] != 1).enumerate() {
        stride_div[k] = claim(stride_divisor, d.strides[i]);
    }
    let shape: Vec<i32> = d.shape[..n].iter().map(|&v| v as i32).collect();
    let strides: Vec<i32> = d.strides[..n].iter().map(|&v| v as i32).collect();
    let own = cutile::tensor::compute_spec(d.ptr, &shape, &strides, element_bytes as i32);
    cutile::tensor::SpecializationBits {
        shape_div,
        stride_div,
        stride_one: own.stride_one,
        base_ptr_div: DivHint { divisor: if d.ptr % 16 == 0 { 16 } else { 1 }, max: 16 },
        elements_disjoint: own.elements_disjoint,
    }
}

/// A borrowed tensor passed to cutile's launcher with cuTile Python's divisibility claims
/// (`python_claims`) in place of cutile's: cutile's `KernelInput` / `KernelInputStored` (tensor.rs) are
/// its public interface for kernel inputs; everything but the claims is the tensor's own.
pub struct Claimed<'a, E: cutile::cuda_core::DType + Sync> {
    tensor: &'a Tensor<E>,
    spec: cutile::tensor::SpecializationBits,
}

impl<'a, E: cutile::cuda_core::DType + Sync> Claimed<'a, E> {
    pub fn new(tensor: &'a Tensor<E>, d: &TensorDesc, static_axes: &[bool]) -> Self {
        Self { tensor, spec: python_claims(d, std::mem::size_of::<E>() as i64, static_axes) }
    }

    pub fn spec(&self) -> &cutile::tensor::SpecializationBits {
        &self.spec
    }
}

// SAFETY: the borrowed tensor supplies the arguments, their retention and the dtype (its own
// `KernelInputStored`); the claims are its own specialization facts or weaker ones (each divisor divides
// the one cutile computes for the same value), laid out where cutile's entry reads them.
unsafe impl<'a, E: cutile::cuda_core::DType + Sync> cutile::tensor::KernelInputStored for Claimed<'a, E> {
    fn retain(
        &self,
        ctx: &cutile::cuda_async::device_operation::ExecutionContext,
    ) -> std::result::Result<(), cutile::cuda_async::error::DeviceError> {
        cutile::tensor::KernelInputStored::retain(&self.tensor, ctx)
    }
    fn push_kernel_args(&self, launcher: &mut cutile::cuda_async::launch::AsyncKernelLaunchBuilder) {
        cutile::tensor::KernelInputStored::push_kernel_args(&self.tensor, launcher)
    }
    fn shape(&self) -> &[i32] {
        self.tensor.shape()
    }
    fn strides(&self) -> &[i32] {
        self.tensor.strides()
    }
    fn spec(&self) -> &cutile::tensor::SpecializationBits {
        &self.spec
    }
    fn dtype_str(&self) -> &'static str {
        cutile::tensor::KernelInputStored::dtype_str(&self.tensor)
    }
}

/// Passed to a launcher as is, as a `&Tensor` is.
impl<'a, E: cutile::cuda_core::DType + Sync> cutile::cuda_async::device_operation::IntoDeviceOp<Claimed<'a, E>>
    for Claimed<'a, E>
{
    type Op = cutile::cuda_async::device_operation::Value<Claimed<'a, E>>;
    fn into_op(self) -> Self::Op {
        cutile::cuda_async::device_operation::value(self)
    }
}

impl<'a, E: cutile::cuda_core::DType + Sync> cutile::tensor::KernelInput<E> for Claimed<'a, E> {
    type Stored = Self;
    type Returned = Self;
    fn prepare(self) -> Self {
        self
    }
    fn recover(stored: Self) -> Self {
        stored
    }
}

/// Outputs are written by many blocks at once: their elements must not overlap (the dimensions,
/// sorted by stride, each start past the span of the ones below; no heap allocation).
pub fn require_disjoint(name: &str, d: &TensorDesc) -> Result<()> {
    let n = (d.ndim.max(0) as usize).min(MAX_DIMS);
    let mut dims = [(0i64, 0i64); MAX_DIMS];
    let mut used = 0;
    for i in 0..n {
        if d.shape[i] > 1 {
            dims[used] = (d.strides[i], d.shape[i]);
            used += 1;
        }
    }
    let dims = &mut dims[..used];
    dims.sort_unstable();
    let mut span = 1i64;
    for &(stride, extent) in dims.iter() {
        if stride < span {
            return Err(Error::new(
                Code::Layout,
                format!("output tensor `{name}` has overlapping elements (strides {:?})", &d.strides[..n]),
            ));
        }
        span = stride.saturating_mul(extent);
    }
    Ok(())
}

/// A tile-shape constant: positive and a power of two, as Tile IR requires.
pub fn check_tile_dim(name: &str, value: i32) -> Result<()> {
    if value <= 0 || value & (value - 1) != 0 {
        return Err(Error::new(Code::InvalidArgument, format!("`{name}` = {value} must be a positive power of two")));
    }
    Ok(())
}

pub fn check_grid(grid: (u32, u32, u32)) -> Result<()> {
    if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
        return Err(Error::new(Code::InvalidArgument, format!("grid {grid:?} has an empty dimension")));
    }
    Ok(())
}

/// The device's primary context (the one the CUDA runtime and PyTorch use), retained once per
/// ordinal (called only when a (device, stream) pair is seen for the first time).
fn primary_context(device_id: i32) -> Result<Arc<Context>> {
    static CONTEXTS: OnceLock<Mutex<Vec<Option<Arc<Context>>>>> = OnceLock::new();
    let ordinal = usize::try_from(device_id)
        .map_err(|_| Error::new(Code::Device, format!("invalid device id {device_id}")))?;
    let mut contexts = CONTEXTS.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|p| p.into_inner());
    if contexts.len() <= ordinal {
        contexts.resize(ordinal + 1, None);
    }
    if contexts[ordinal].is_none() {
        let ctx = Context::new(ordinal)
            .map_err(|e| Error::new(Code::Device, format!("cannot open CUDA device {device_id}: {e}")))?;
        contexts[ordinal] = Some(ctx);
    }
    Ok(contexts[ordinal].clone().expect("context was just created"))
}

/// Where a launch runs: the caller's device and stream, both borrowed (never destroyed here).
///
/// One target per (device, stream) pair, made at its first launch and kept for the life of the
/// process, so that a launch never drops a `Stream`: cuda-core's `Drop for Stream` calls
/// `cuStreamQuery` on the stream, which is illegal on a stream being captured into a CUDA graph
/// (it invalidates the capture in every capture mode), and on a busy stream records an event and
/// hands the stream to a completion worker thread, per launch. Targets are never freed: the
/// memory is one small record per distinct stream handle the caller launches on.
pub struct LaunchTarget {
    pub context: Arc<Context>,
    pub stream: Arc<Stream>,
}

type TargetMap = RwLock<HashMap<(i32, u64), &'static LaunchTarget>>;

thread_local! {
    /// The (device, stream) target this thread launched on last: a thread mostly launches on one
    /// stream, and a target, once made, is never replaced or freed, so the reference stays valid.
    static LAST_TARGET: Cell<Option<(i32, u64, &'static LaunchTarget)>> = const { Cell::new(None) };
}

impl LaunchTarget {
    /// The target of `(device_id, stream)`, with the device's context bound to this thread.
    pub fn get(device_id: i32, stream: u64) -> Result<&'static LaunchTarget> {
        static TARGETS: OnceLock<TargetMap> = OnceLock::new();
        let target = match LAST_TARGET.with(Cell::get) {
            Some((d, s, target)) if d == device_id && s == stream => target, // no lock, no hash
            _ => {
                let target = Self::shared(&TARGETS, device_id, stream)?;
                LAST_TARGET.with(|last| last.set(Some((device_id, stream, target))));
                target
            }
        };
        target
            .context
            .bind_to_thread()
            .map_err(|e| Error::new(Code::Device, format!("cannot bind device {device_id}: {e}")))?;
        Ok(target)
    }

    /// The process-wide target of `(device_id, stream)`, made at its first use.
    fn shared(targets: &'static OnceLock<TargetMap>, device_id: i32, stream: u64) -> Result<&'static LaunchTarget> {
        let targets = targets.get_or_init(|| RwLock::new(HashMap::new()));
        let cached = targets.read().unwrap_or_else(|p| p.into_inner()).get(&(device_id, stream)).copied();
        Ok(match cached {
            Some(target) => target,
            None => {
                let mut map = targets.write().unwrap_or_else(|p| p.into_inner());
                match map.get(&(device_id, stream)) {
                    Some(target) => *target,
                    None => {
                        let context = primary_context(device_id)?;
                        let stream_ref = unsafe { Stream::borrow_raw(stream as *mut c_void, &context) };
                        let target: &'static LaunchTarget =
                            Box::leak(Box::new(LaunchTarget { context, stream: stream_ref }));
                        map.insert((device_id, stream), target);
                        target
                    }
                }
            }
        })
    }

    /// A non-owning view of caller memory: no copy, no device allocation, never freed by cutile.
    pub fn tensor<E: cutile::cuda_core::DType>(&self, d: &TensorDesc) -> Tensor<E> {
        let n = d.ndim as usize;
        let shape: Vec<i32> = d.shape[..n].iter().map(|&v| v as i32).collect();
        let strides: Vec<i32> = d.strides[..n].iter().map(|&v| v as i32).collect();
        unsafe { Tensor::<E>::borrow_raw_parts(d.ptr, self.context.clone(), shape, strides) }
    }
}

// ---------------------------------------------------------------- the resolved launch path

/// Words a launch key holds at most (the translator checks every launcher's key fits).
pub const KEY_WORDS: usize = 192;
/// Kernel parameters a resolved launch passes at most (the translator checks every kernel fits).
pub const MAX_PARAMS: usize = 128;
/// Array arguments a prepared launch rebinds at most (a launch with more is never prepared).
pub const MAX_ARRAYS: usize = 32;

/// Everything a launch's specialization and its launch-time checks depend on: the entry, the
/// device, the grid, the element types and constants, every array's extents, strides and base
/// address alignment, and every scalar. The first launch of a key goes through cutile's own
/// launcher (which compiles, loads and checks it); a later launch with an equal key reuses the
/// loaded function and passes the same checks, so it is launched directly.
/// Only the first `len` words are written (no buffer-wide zeroing on the launch path).
#[derive(Clone, Copy)]
pub struct LaunchKey {
    len: usize,
    words: [MaybeUninit<i64>; KEY_WORDS],
}

impl LaunchKey {
    pub fn new(entry: &'static str, device_id: i32, grid: (u32, u32, u32)) -> Self {
        let mut key = LaunchKey { len: 0, words: [MaybeUninit::uninit(); KEY_WORDS] };
        key.text(entry);
        key.word(device_id as i64);
        key.word(grid.0 as i64);
        key.word(grid.1 as i64);
        key.word(grid.2 as i64);
        key
    }

    #[inline]
    pub fn word(&mut self, value: i64) {
        self.words[self.len] = MaybeUninit::new(value);
        self.len += 1;
    }

    /// A static text (entry or dtype name), by address and length: equal addresses hold equal text.
    pub fn text(&mut self, value: &'static str) {
        self.word(value.as_ptr() as i64);
        self.word(value.len() as i64);
    }

    pub fn float(&mut self, value: f64) {
        self.word(value.to_bits() as i64);
    }

    /// Rank, extents, strides and the alignment class of the base address: its trailing zero bits,
    /// clamped at 4 (16 bytes) as cutile's own specialization key clamps them. Unclamped, every new
    /// allocation address with another power-of-two alignment was a new key: a launch through
    /// cutile's slow launcher and one more entry in the map, for the same loaded function.
    pub fn array(&mut self, d: &TensorDesc) {
        let n = d.ndim as usize;
        self.word(d.ndim as i64);
        for i in 0..n {
            self.word(d.shape[i]);
            self.word(d.strides[i]);
        }
        self.word(alignment_class(d.ptr));
    }

    fn words(&self) -> &[i64] {
        // SAFETY: the first `len` words were written by `word`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<i64>(), self.len) }
    }
}

/// log2 of the base address's alignment, up to 16 bytes (what a specialization can depend on).
pub fn alignment_class(ptr: u64) -> i64 {
    ptr.trailing_zeros().min(4) as i64
}

impl PartialEq for LaunchKey {
    fn eq(&self, other: &Self) -> bool {
        self.words() == other.words()
    }
}

impl Eq for LaunchKey {}

impl std::hash::Hash for LaunchKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.words().hash(state)
    }
}

/// A multiply-rotate hasher over the key's words (SipHash costs more than the rest of a lookup).
#[derive(Default)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_i64(&mut self, value: i64) {
        self.write_u64(value as u64);
    }
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
}

type Resolved = HashMap<LaunchKey, &'static cutile::cuda_core::Function, std::hash::BuildHasherDefault<KeyHasher>>;

fn resolved_map() -> &'static RwLock<Resolved> {
    static RESOLVED: OnceLock<RwLock<Resolved>> = OnceLock::new();
    RESOLVED.get_or_init(|| RwLock::new(HashMap::default()))
}

/// The loaded function of a key launched before, if any.
pub fn resolved(key: &LaunchKey) -> Option<&'static cutile::cuda_core::Function> {
    resolved_map().read().unwrap_or_else(|p| p.into_inner()).get(key).copied()
}

/// The kernel parameters of a resolved launch, in the order cutile's launcher pushes them: an
/// array is its base address, then its extents and strides as i32; a scalar is its value. Each
/// value sits in its own zeroed 16-byte slot, as in cutile's argument arena. Lives on the stack;
/// only the slots in use are written.
pub struct KernelParams {
    len: usize,
    slots: [MaybeUninit<u128>; MAX_PARAMS],
    /// (slot of the base address, descriptor address) of each array pushed, for `PreparedLaunch`.
    arrays: [MaybeUninit<(usize, usize)>; MAX_ARRAYS],
    n_arrays: usize,
}

impl KernelParams {
    pub fn new() -> Self {
        KernelParams {
            len: 0,
            slots: [MaybeUninit::uninit(); MAX_PARAMS],
            arrays: [MaybeUninit::uninit(); MAX_ARRAYS],
            n_arrays: 0,
        }
    }

    #[inline]
    pub fn push<T: Copy>(&mut self, value: T) {
        const { assert!(std::mem::size_of::<T>() <= 16 && std::mem::align_of::<T>() <= 16) };
        let slot = &mut self.slots[self.len];
        slot.write(0);
        // SAFETY: the slot is 16 bytes, 16-byte aligned, and T fits in it (checked above).
        unsafe { std::ptr::write(slot.as_mut_ptr().cast::<T>(), value) };
        self.len += 1;
    }

    pub fn array(&mut self, d: &TensorDesc) {
        let n = d.ndim as usize;
        if self.n_arrays < MAX_ARRAYS {
            self.arrays[self.n_arrays].write((self.len, d as *const TensorDesc as usize));
        }
        self.n_arrays += 1; // past MAX_ARRAYS: such a launch is never prepared
        self.push(d.ptr);
        for i in 0..n {
            self.push(d.shape[i] as i32);
        }
        for i in 0..n {
            self.push(d.strides[i] as i32);
        }
    }
}

/// Launch a resolved function on the target's stream: one `cuLaunchKernel`, nothing else.
pub fn launch_resolved(
    target: &LaunchTarget,
    function: &'static cutile::cuda_core::Function,
    grid: (u32, u32, u32),
    params: &mut KernelParams,
) -> std::result::Result<(), cutile::cuda_core::DriverError> {
    if RECORDING.with(Cell::get) {
        record(function, grid, params);
    }
    launch_slots(target, function, grid, &mut params.slots[..params.len])
}

/// Launch `function` with `slots` (each written, as `KernelParams::push` writes them) as its parameters.
fn launch_slots(
    target: &LaunchTarget,
    function: &'static cutile::cuda_core::Function,
    grid: (u32, u32, u32),
    slots: &mut [MaybeUninit<u128>],
) -> std::result::Result<(), cutile::cuda_core::DriverError> {
    let mut pointers = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
    for (pointer, slot) in pointers.iter_mut().zip(slots.iter_mut()) {
        *pointer = slot.as_mut_ptr().cast::<c_void>();
    }
    // SAFETY: one pointer per parameter of `function`, each to a written slot that outlives the call (the
    // driver copies the values before it returns), on the target's live stream.
    unsafe {
        cutile::cuda_core::launch_kernel(
            function.cu_function(),
            grid,
            (1, 1, 1),
            0,
            target.stream.cu_stream(),
            &mut pointers[..slots.len()],
        )
    }
}

// ---------------------------------------------------------------- prepared launches
//
// A caller that launches one entry again and again with the same descriptors (extents, strides,
// dtypes), scalars, constants, grid and device, and only new base addresses and streams (the
// Python plan cache: every value but the addresses and the stream is a function of its call key),
// records one resolved launch of it and replays that: the launch key, and so every check the
// launcher made and the function it chose, is the same as long as each address keeps its
// alignment class, which a replay checks. A replay copies the recorded parameters, writes the
// new addresses and launches: no checks of unchanged descriptors, no key, no map lookup.

thread_local! {
    /// Set by `tileport_record_next`: the next resolved launch on this thread is also recorded.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    static RECORDED: Cell<Option<Box<Recorded>>> = const { Cell::new(None) };
}

/// One resolved launch as `launch_resolved` saw it.
struct Recorded {
    function: &'static cutile::cuda_core::Function,
    grid: (u32, u32, u32),
    len: usize,
    slots: [u128; MAX_PARAMS],
    arrays: Vec<(usize, usize)>, // (slot, descriptor address); empty past MAX_ARRAYS
    launches: usize,             // resolved launches while recording (a prepared launch needs one)
}

fn record(function: &'static cutile::cuda_core::Function, grid: (u32, u32, u32), params: &KernelParams) {
    let mut slots = [0u128; MAX_PARAMS];
    for (slot, value) in slots.iter_mut().zip(params.slots.iter()).take(params.len) {
        // SAFETY: the first `len` slots were written by `push`.
        *slot = unsafe { value.assume_init() };
    }
    let arrays = if params.n_arrays <= MAX_ARRAYS {
        // SAFETY: the first `n_arrays` entries were written by `array`.
        params.arrays[..params.n_arrays].iter().map(|a| unsafe { a.assume_init() }).collect()
    } else {
        Vec::new()
    };
    let launches = RECORDED.with(|r| r.take()).map_or(0, |r| r.launches);
    let recorded = Recorded { function, grid, len: params.len, slots, arrays, launches: launches + 1 };
    RECORDED.with(|r| r.set(Some(Box::new(recorded))));
}

// A slot's bytes are the value `push` wrote, then zeros: on a little-endian target, the u128 of the same value.
const _: () = assert!(cfg!(target_endian = "little"));

/// A recorded launch ready for replay: immutable, so any thread may replay it at once.
struct PreparedLaunch {
    function: &'static cutile::cuda_core::Function,
    grid: (u32, u32, u32),
    device_id: i32,
    len: usize,
    slots: [u128; MAX_PARAMS],
    /// (index into the caller's address list, parameter slot, alignment class at recording)
    rebind: Vec<(usize, usize, i64)>,
    n_addresses: usize,
}

/// Record the next resolved launch this thread makes (`tileport_take_prepared` collects it).
#[unsafe(no_mangle)]
pub extern "C" fn tileport_record_next() {
    RECORDED.with(|r| r.take());
    RECORDING.with(|r| r.set(true));
}

/// The launch recorded since `tileport_record_next`, as a prepared launch on `device_id` whose
/// arrays are rebound from an address list in the order of `descs` (the `n` descriptor addresses
/// the recorded call was given); 0 (and the reason as the last error) when none can be made: the
/// call took cutile's own launcher (its first launch), made no launch or more than one, or pushed
/// an array whose descriptor is not in `descs`. Recording stops either way.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_take_prepared(device_id: i32, descs: *const u64, n: usize) -> u64 {
    RECORDING.with(|r| r.set(false));
    let Some(recorded) = RECORDED.with(|r| r.take()) else {
        set_last_error("tileport_take_prepared: no resolved launch was recorded");
        return 0;
    };
    if recorded.launches != 1 || recorded.arrays.is_empty() || descs.is_null() || n == 0 || n > MAX_ARRAYS {
        set_last_error("tileport_take_prepared: the recorded call cannot be prepared");
        return 0;
    }
    // SAFETY: the caller passes `n` descriptor addresses.
    let descs = unsafe { std::slice::from_raw_parts(descs, n) };
    let mut rebind = Vec::with_capacity(recorded.arrays.len());
    for &(slot, desc) in &recorded.arrays {
        let Some(index) = descs.iter().position(|&d| d as usize == desc) else {
            set_last_error("tileport_take_prepared: an array of the recorded launch is not among the descriptors");
            return 0;
        };
        let address = recorded.slots[slot] as u64; // the u64 `push` wrote at the slot's start (little-endian)
        rebind.push((index, slot, alignment_class(address)));
    }
    let prepared = PreparedLaunch {
        function: recorded.function,
        grid: recorded.grid,
        device_id,
        len: recorded.len,
        slots: recorded.slots,
        rebind,
        n_addresses: n,
    };
    Box::into_raw(Box::new(prepared)) as u64
}

/// Launch a prepared launch with the arrays at `addresses` (as many as its descriptors) on
/// `stream`: each address must be non-null and keep its alignment class (else the launch key,
/// and so the function and its checks, could differ: the caller launches through the entry).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_launch_prepared(prepared: u64, addresses: *const u64, stream: u64) -> i32 {
    guard("tileport_launch_prepared", || {
        // SAFETY: `prepared` comes from `tileport_take_prepared` and is not freed yet.
        let p = unsafe { (prepared as *const PreparedLaunch).as_ref() }
            .ok_or_else(|| Error::new(Code::NullPointer, "null prepared launch"))?;
        if addresses.is_null() {
            return Err(Error::new(Code::NullPointer, "null address list"));
        }
        // SAFETY: the caller passes one address per descriptor of the recorded call.
        let addresses = unsafe { std::slice::from_raw_parts(addresses, p.n_addresses) };
        let target = LaunchTarget::get(p.device_id, stream)?;
        let mut slots = [MaybeUninit::<u128>::uninit(); MAX_PARAMS];
        for (slot, value) in slots.iter_mut().zip(p.slots.iter()).take(p.len) {
            slot.write(*value);
        }
        for &(index, slot, class) in &p.rebind {
            let address = addresses[index];
            if address == 0 {
                return Err(Error::new(Code::NullPointer, format!("array {index} has a null data pointer")));
            }
            if alignment_class(address) != class {
                return Err(Error::new(
                    Code::Layout,
                    format!("array {index} at {address:#x} is aligned otherwise than the prepared launch's"),
                ));
            }
            slots[slot].write(u128::from(address)); // as `push` writes it (little-endian)
        }
        launch_slots(target, p.function, p.grid, &mut slots[..p.len]).map_err(|e| launch_error("tileport_launch_prepared", e))
    })
}

/// Free a prepared launch (no launch may use it after).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_free_prepared(prepared: u64) {
    if prepared != 0 {
        drop(unsafe { Box::from_raw(prepared as *mut PreparedLaunch) });
    }
}

/// What cutile's launcher keys a specialization on, taken from the tensors it was launched with.
pub struct Specialization {
    pub generics: Vec<String>,
    pub tensors: Vec<(&'static str, cutile::cutile_compiler::specialization::SpecializationBits)>,
    pub int_scalars: Vec<(&'static str, i32)>,
}

/// After cutile's launcher ran `key`'s first launch: look up the function it loaded (the same
/// specialization key as its launcher builds, so cutile's kernel cache answers without compiling)
/// and keep it for the key's later launches.
pub fn resolve(
    key: LaunchKey,
    target: &LaunchTarget,
    module_ast: fn() -> cutile::cutile_compiler::ast::Module,
    module: &str,
    function: &str,
    source_hash: &str,
    spec: Specialization,
) -> Result<()> {
    use cutile::cutile_compiler::specialization::DivHint;
    let stride_args = spec
        .tensors
        .iter()
        .map(|(name, bits)| (name.to_string(), bits.stride_one.iter().map(|&one| if one { 1 } else { -1 }).collect()))
        .collect();
    let hints = spec.int_scalars.iter().map(|(name, value)| (name.to_string(), DivHint::from_value(*value))).collect();
    let spec_args = spec.tensors.into_iter().map(|(name, bits)| (name.to_string(), bits)).collect();
    let ctx = cutile::cuda_async::device_operation::ExecutionContext::new(target.stream.clone());
    let entry = cutile::cutile_compiler::kernel_naming::KernelNaming::new(function).entry_name();
    let (loaded, _validator) = cutile::tile_kernel::compile_from_context(
        &ctx,
        module_ast,
        module,
        function,
        &entry,
        spec.generics,
        stride_args,
        spec_args,
        hints,
        None,
        cutile::tile_kernel::CompileOptions::default(),
        source_hash,
    )
    .map_err(|e| Error::new(Code::Launch, format!("resolving `{module}::{function}` for later launches: {e}")))?;
    // One reference is leaked on purpose: the function (and its module) stay loaded for good.
    let loaded: &'static cutile::cuda_core::Function = Box::leak(Box::new(loaded));
    resolved_map().write().unwrap_or_else(|p| p.into_inner()).insert(key, loaded);
    Ok(())
}

/// The path every resolved launch takes, with no kernel of its own: the (device, stream) target,
/// the context check and one `cuLaunchKernel` of `function` (a CUfunction the caller loaded, with
/// no parameters) on one block of one thread. What a benchmark subtracts to tell the launchers'
/// shared cost from the driver's and from each kernel's own checks and key.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_launch_empty(function: u64, device_id: i32, stream: u64) -> i32 {
    guard("tileport_launch_empty", || {
        if function == 0 {
            return Err(Error::new(Code::NullPointer, "null function"));
        }
        let target = LaunchTarget::get(device_id, stream)?;
        unsafe {
            cutile::cuda_core::launch_kernel(
                function as usize as *mut _,
                (1, 1, 1),
                (1, 1, 1),
                0,
                target.stream.cu_stream(),
                &mut [],
            )
        }
        .map_err(|e| launch_error("tileport_launch_empty", e))
    })
}

pub fn launch_error(kernel: &str, e: impl std::fmt::Display) -> Error {
    Error::new(Code::Launch, format!("launching `{kernel}` failed: {e}"))
}

// ---------------------------------------------------------------- CPU-only Tile IR export

/// What the IR export needs to know about an entry: its module and array parameters (name, rank).
pub struct EntryInfo {
    pub module_ast: fn() -> cutile::cutile_compiler::ast::Module,
    pub module: &'static str,
    pub function: &'static str,
    pub arrays: &'static [(&'static str, usize)],
}

fn leak(bytes: Vec<u8>) -> (*mut u8, usize) {
    let boxed = bytes.into_boxed_slice();
    let len = boxed.len();
    (Box::into_raw(boxed) as *mut u8, len)
}

/// Per array of an entry (in `EntryInfo::arrays` order): which strides are one, and the divisibility claimed.
type ArraySpecs = Vec<(Vec<i32>, cutile::tensor::SpecializationBits)>;

/// The capture signature: last dimension stride one, 16-byte aligned base, nothing else known.
fn capture_specs(info: &EntryInfo) -> ArraySpecs {
    use cutile::cutile_compiler::specialization::DivHint;
    info.arrays
        .iter()
        .map(|&(_, rank)| {
            let bits = cutile::tensor::SpecializationBits {
                shape_div: vec![DivHint::default(); rank],
                stride_div: vec![DivHint::default(); rank],
                stride_one: (0..rank).map(|i| i + 1 == rank).collect(),
                base_ptr_div: DivHint { divisor: 16, max: 16 },
                elements_disjoint: true,
            };
            ((0..rank).map(|i| if i + 1 == rank { 1 } else { -1 }).collect(), bits)
        })
        .collect()
}

/// A launch's signature: each array's descriptor with the claims a launcher makes of it (cutile's own,
/// `compute_spec`, or cuTile Python's, `python_claims`), `static_axes[a]` bit i set where the entry takes
/// axis i of array a as a constant.
fn launch_specs(info: &EntryInfo, descs: &[TensorDesc], static_axes: &[u32], python: bool) -> Result<ArraySpecs> {
    if descs.len() != info.arrays.len() || static_axes.len() != info.arrays.len() {
        return Err(Error::new(Code::InvalidArgument, format!("the entry has {} arrays", info.arrays.len())));
    }
    let mut specs = Vec::new();
    for (((name, rank), d), &mask) in info.arrays.iter().zip(descs).zip(static_axes) {
        let d = check_desc(name, d, *rank)?;
        let bytes = dtype::size(d.dtype)
            .ok_or_else(|| Error::new(Code::DType, format!("tensor `{name}` has an unknown dtype code {}", d.dtype)))?;
        let statics: Vec<bool> = (0..*rank).map(|i| mask >> i & 1 == 1).collect();
        let shape: Vec<i32> = d.shape[..*rank].iter().map(|&v| v as i32).collect();
        let strides: Vec<i32> = d.strides[..*rank].iter().map(|&v| v as i32).collect();
        let bits = if python {
            python_claims(d, bytes, &statics)
        } else {
            cutile::tensor::compute_spec(d.ptr, &shape, &strides, bytes as i32)
        };
        specs.push((bits.stride_one.iter().map(|&one| if one { 1 } else { -1 }).collect(), bits));
    }
    Ok(specs)
}

fn compile_ir(info: &EntryInfo, generics: Vec<String>, target: &str, specs: ArraySpecs) -> Result<(Vec<u8>, Vec<u8>)> {
    use cutile::compile_api::KernelCompiler;
    let stride_refs: Vec<(&str, &[i32])> =
        info.arrays.iter().zip(&specs).map(|((name, _), (strides, _))| (*name, strides.as_slice())).collect();
    let bits: Vec<(&str, cutile::tensor::SpecializationBits)> =
        info.arrays.iter().zip(&specs).map(|((name, _), (_, bits))| (*name, bits.clone())).collect();
    let artifacts = KernelCompiler::new(info.module_ast, info.module, info.function)
        .generics(generics)
        .strides(&stride_refs)
        .spec_args(&bits)
        .target(target)
        .bytecode_version(cutile_ir::bytecode::BytecodeVersion::V13_4)
        .compile()
        .map_err(|e| Error::new(Code::Launch, format!("{e}")))?;
    let bytecode = artifacts.bytecode().map_err(|e| Error::new(Code::Launch, format!("{e}")))?;
    Ok((artifacts.ir_text().into_bytes(), bytecode))
}

/// Compile one entry to Tile IR on the CPU (no GPU, no driver): `generics` is the comma-separated
/// generic argument list in declaration order. Buffers are freed with `tileport_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_ir(
    entry: *const c_char,
    generics: *const c_char,
    target: *const c_char,
    out_text: *mut *mut u8,
    out_text_len: *mut usize,
    out_bytecode: *mut *mut u8,
    out_bytecode_len: *mut usize,
) -> i32 {
    let specs = |info: &EntryInfo| Ok(capture_specs(info));
    unsafe { export_ir(entry, generics, target, out_text, out_text_len, out_bytecode, out_bytecode_len, specs) }
}

/// `tileport_ir` at a launch's signature: the entry's `n` arrays are `descs` (in the entry's order, only
/// extents, strides, dtype and the base address's alignment are read), `static_axes` one axis mask per array
/// (see `launch_specs`), and `python` selects cuTile Python's claims (1) or cutile's own (0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_ir_launch(
    entry: *const c_char,
    generics: *const c_char,
    target: *const c_char,
    descs: *const TensorDesc,
    static_axes: *const u32,
    n: usize,
    python: i32,
    out_text: *mut *mut u8,
    out_text_len: *mut usize,
    out_bytecode: *mut *mut u8,
    out_bytecode_len: *mut usize,
) -> i32 {
    if descs.is_null() || static_axes.is_null() {
        set_last_error("tileport_ir_launch: null argument");
        return Code::NullPointer as i32;
    }
    // SAFETY: the caller passes `n` descriptors and `n` masks; both are copied before the compiler thread runs.
    let descs: Vec<TensorDesc> = unsafe { std::slice::from_raw_parts(descs, n) }
        .iter()
        .map(|d| TensorDesc { ptr: d.ptr, ndim: d.ndim, shape: d.shape, strides: d.strides, dtype: d.dtype })
        .collect();
    let masks = unsafe { std::slice::from_raw_parts(static_axes, n) }.to_vec();
    let specs = move |info: &EntryInfo| launch_specs(info, &descs, &masks, python != 0);
    unsafe { export_ir(entry, generics, target, out_text, out_text_len, out_bytecode, out_bytecode_len, specs) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn export_ir(
    entry: *const c_char,
    generics: *const c_char,
    target: *const c_char,
    out_text: *mut *mut u8,
    out_text_len: *mut usize,
    out_bytecode: *mut *mut u8,
    out_bytecode_len: *mut usize,
    specs: impl FnOnce(&EntryInfo) -> Result<ArraySpecs> + Send + 'static,
) -> i32 {
    if entry.is_null() || generics.is_null() || target.is_null() || out_text.is_null() || out_bytecode.is_null() {
        set_last_error("tileport_ir: null argument");
        return Code::NullPointer as i32;
    }
    let text = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    let (entry, generics, target) = (text(entry), text(generics), text(target));
    // The compiler recurses deeply: run it on a thread with a large stack, and carry the
    // thread-local error message back.
    let worker = std::thread::Builder::new().stack_size(64 << 20).spawn(move || {
        let mut result = None;
        let rc = guard("tileport_ir", || {
            let info = crate::entry_info(&entry)
                .ok_or_else(|| Error::new(Code::InvalidArgument, format!("unknown entry `{entry}`")))?;
            let list = generics.split(',').filter(|g| !g.is_empty()).map(|g| g.trim().to_string()).collect();
            let specs = specs(&info)?;
            result = Some(compile_ir(&info, list, &target, specs)?);
            Ok(())
        });
        (rc, LAST_ERROR.with(|slot| slot.borrow().to_string_lossy().into_owned()), result)
    });
    match worker.map(|handle| handle.join()) {
        Ok(Ok((0, _, Some((ir, bytecode))))) => {
            let (tp, tl) = leak(ir);
            let (bp, bl) = leak(bytecode);
            unsafe {
                *out_text = tp;
                *out_text_len = tl;
                *out_bytecode = bp;
                *out_bytecode_len = bl;
            }
            0
        }
        Ok(Ok((rc, message, _))) => {
            set_last_error(&message);
            rc
        }
        _ => {
            set_last_error("tileport_ir: compiler thread failed");
            Code::Panic as i32
        }
    }
}

/// Free a buffer returned by `tileport_ir`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tileport_free(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
    }
}
