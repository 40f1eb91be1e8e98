
// ---------------------------------------------------------------- launches: one generic path
//
// Every launcher of the crate describes its launch to `launch`: its arguments checked (`Launch`), then the
// entry and, in the entry's order, what the launch key, the kernel parameters and the specialization hold
// (`Call`). A launch whose key was launched before takes the loaded function (`resolved`); the first one
// compiles the entry for the specialization cutile's own launcher would build (`resolve`: its kernel cache
// then answers the same) and launches it the same way, with the parameters in cutile's order.

/// A generated entry: what cutile's JIT compiles it from, and its name in launch keys.
#[derive(Clone, Copy)]
pub struct Entry {
    pub path: &'static str,
    pub module_ast: fn() -> cutile::cutile_compiler::ast::Module,
    pub module: &'static str,
    pub function: &'static str,
    pub source_hash: &'static str,
}

/// `entry!(module::function)`: the `Entry` of a generated entry.
#[macro_export]
macro_rules! entry {
    ($module:ident :: $function:ident) => {
        $crate::support::Entry {
            path: concat!(stringify!($module), "::", stringify!($function)),
            module_ast: $module::__module_ast_self,
            module: stringify!($module),
            function: stringify!($function),
            source_hash: $module::_SOURCE_HASH,
        }
    };
}

/// An array argument of a C launcher: a descriptor pointer that may be null (`*const TensorDesc` in C).
pub type Desc<'a> = Option<&'a TensorDesc>;

/// The entries of a kernel specialized for values of some of its constants: each entry with the values it
/// takes, in the order of `names`.
pub struct Entries<K: 'static, const N: usize> {
    pub names: [&'static str; N],
    pub rows: &'static [([K; N], Entry)],
}

impl<K: PartialEq + Copy + std::fmt::Display, const N: usize> Entries<K, N> {
    /// The entry specialized for `values`.
    pub fn find(&self, values: [K; N]) -> Option<Entry> {
        self.rows.iter().find(|(row, _)| *row == values).map(|&(_, entry)| entry)
    }

    /// `NAME=value, ..`: the constants of a call, for messages.
    fn shown(&self, values: [K; N]) -> String {
        let pairs: Vec<String> = self.names.iter().zip(values).map(|(n, v)| format!("{n}={v}")).collect();
        pairs.join(", ")
    }
}

/// The entries of a kernel whose launches also differ in their arrays' element types and stride arguments:
/// each entry with the values it takes, in the order of `names`, and its `Layout`.
pub struct Layouts<K: 'static, const N: usize> {
    pub names: [&'static str; N],
    pub rows: &'static [([K; N], Entry, Layout)],
}

/// What an entry takes of the launcher's arrays (in its order): each one's dtype code, `GENERIC` for the
/// entry's element type, and the strides it passes as arguments (array, axis, name), in the entry's order.
#[derive(Clone, Copy)]
pub struct Layout {
    pub dtypes: &'static [i32],
    pub strides: &'static [(usize, usize, &'static str)],
}

/// The dtype code of a `Layout` array typed by the entry's element type generic (no array has it).
pub const GENERIC: i32 = -1;

/// Run a C launcher: `body` checks the arguments and makes the launch (`Launch::call`); errors come back as
/// return codes with a message (`tileport_last_error`), panics as `Code::Panic`.
pub fn launch(
    kernel: &'static str,
    grid: [u32; 3],
    device_id: i32,
    stream: u64,
    body: impl FnOnce(&Launch) -> Result<()>,
) -> i32 {
    guard(kernel, || body(&Launch { kernel, grid: (grid[0], grid[1], grid[2]), device_id, stream }))
}

/// The arguments of one C launcher call.
pub struct Launch {
    pub kernel: &'static str,
    pub grid: (u32, u32, u32),
    pub device_id: i32,
    pub stream: u64,
}

/// An array argument, checked: its name in messages and specializations, its descriptor.
#[derive(Clone, Copy)]
pub struct Arr<'a> {
    pub name: &'static str,
    pub desc: &'a TensorDesc,
}

impl Arr<'_> {
    /// The same array under the entry's identifier for it (a source name that is no Rust identifier).
    pub fn ident(self, name: &'static str) -> Self {
        Arr { name, ..self }
    }
}

/// The element types of floating-point generics the kernels take (f32, f16, bf16).
pub const FLOATS: &[i32] = &[dtype::F32, dtype::F16, dtype::BF16];

/// An array argument of a launcher: its name, descriptor and the rank the entry takes.
pub type ArrayArg<'a> = (&'static str, Option<&'a TensorDesc>, usize);

impl Launch {
    /// The array descriptors, in order: each present, of its rank, with extents and strides the kernels'
    /// i32 indexing takes (`check_desc`).
    pub fn arrays<'a, const N: usize>(&self, args: [ArrayArg<'a>; N]) -> Result<[Arr<'a>; N]> {
        let mut out = [None; N];
        for (slot, (name, desc, rank)) in out.iter_mut().zip(args) {
            let desc = check_desc(name, desc.map_or(std::ptr::null(), |d| d as *const TensorDesc), rank)?;
            *slot = Some(Arr { name, desc });
        }
        Ok(out.map(|a| a.expect("every array was checked")))
    }

    /// The outputs' elements do not overlap (many blocks write them at once) and the grid is not empty.
    pub fn writes(&self, outputs: &[Arr]) -> Result<&Self> {
        for a in outputs {
            require_disjoint(a.name, a.desc)?;
        }
        check_grid(self.grid).map(|()| self)
    }

    /// The dtype code the arrays of one generic element type share, one of `allowed`.
    pub fn dtype(&self, arrays: &[Arr], allowed: &[i32]) -> Result<i32> {
        let head = arrays[0];
        if let Some(a) = arrays[1..].iter().find(|a| a.desc.dtype != head.desc.dtype) {
            let (name, first) = (dtype::name(a.desc.dtype), dtype::name(head.desc.dtype));
            let message = format!("tensor `{}` is {name} but `{}` is {first}; they must match", a.name, head.name);
            return Err(Error::new(Code::DType, message));
        }
        common_dtype(&[(head.name, head.desc)], allowed)
    }

    /// Arrays of a fixed element type have it.
    pub fn require(&self, arrays: &[Arr], code: i32) -> Result<&Self> {
        arrays.iter().try_for_each(|a| require_dtype(a.name, a.desc, code)).map(|()| self)
    }

    /// A tile-shape constant (a positive power of two), returned.
    pub fn tile(&self, name: &str, value: i32) -> Result<i32> {
        check_tile_dim(name, value).map(|()| value)
    }

    /// Tile-shape constants, in order (see `tile`).
    pub fn tiles(&self, constants: &[(&str, i32)]) -> Result<&Self> {
        constants.iter().try_for_each(|&(name, value)| check_tile_dim(name, value)).map(|()| self)
    }

    /// No entry is specialized for these constants (`values`: `NAME=value, ..`).
    pub fn unspecialized(&self, values: String) -> Error {
        Error::new(Code::InvalidArgument, format!("no entry of `{}` is specialized for {values}", self.kernel))
    }

    /// The entry of `table` specialized for `values`, else the error that none is.
    pub fn entry<K: PartialEq + Copy + std::fmt::Display, const N: usize>(
        &self,
        table: &Entries<K, N>,
        values: [K; N],
    ) -> Result<Entry> {
        table.find(values).ok_or_else(|| self.unspecialized(table.shown(values)))
    }

    /// The entry of `table` specialized for `values` and its layout, else the error that none is.
    pub fn layout<K: PartialEq + Copy + std::fmt::Display, const N: usize>(
        &self,
        table: &Layouts<K, N>,
        values: [K; N],
    ) -> Result<(Entry, Layout)> {
        let row = table.rows.iter().find(|(row, ..)| *row == values);
        let shown = || Entries { names: table.names, rows: &[] }.shown(values);
        row.map(|&(_, entry, layout)| (entry, layout)).ok_or_else(|| self.unspecialized(shown()))
    }

    /// The arrays as `layout` types them, checked in the order of the per-entry checks (`dtype` of the
    /// generic ones, then `require` of each fixed dtype, in the order the arrays first have it): the
    /// generic's dtype code, one of `allowed`.
    pub fn typed(&self, arrays: &[Arr], layout: Layout, allowed: &[i32]) -> Result<i32> {
        let of = |code: i32| arrays.iter().zip(layout.dtypes).filter(move |&(_, &d)| d == code).map(|(&a, _)| a);
        let head = of(GENERIC).next().expect("a layout types an array by the generic");
        if let Some(a) = of(GENERIC).find(|a| a.desc.dtype != head.desc.dtype) {
            self.dtype(&[head, a], allowed)?;
        }
        let code = common_dtype(&[(head.name, head.desc)], allowed)?;
        for (i, &fixed) in layout.dtypes.iter().enumerate() {
            if fixed != GENERIC && !layout.dtypes[..i].contains(&fixed) {
                of(fixed).try_for_each(|a| require_dtype(a.name, a.desc, fixed))?;
            }
        }
        Ok(code)
    }

    /// No entry takes the arrays' dtypes.
    pub fn no_dtype_entry(&self) -> Error {
        Error::new(Code::DType, format!("no entry of `{}` takes these dtypes", self.kernel))
    }

    /// The launch of `entry`, described by the `Call` methods in the entry's order.
    pub fn call(&self, entry: Entry) -> Call<'_> {
        Call {
            launch: self,
            entry,
            key: LaunchKey::new(entry.path, self.device_id, self.grid),
            params: KernelParams::new(),
            generics: [Generic::Int(0); MAX_GENERICS],
            n_generics: 0,
            tensors: [None; MAX_ARRAYS],
            n_tensors: 0,
            unit_axes: [""; MAX_ARRAYS],
            n_unit_axes: 0,
            ints: [("", 0); MAX_PARAMS],
            n_ints: 0,
            python_claims: true,
        }
    }
}

/// Generic arguments an entry takes at most (the translator checks every entry fits).
pub const MAX_GENERICS: usize = 64;

/// A generic argument, kept as a value until a first launch renders it.
#[derive(Clone, Copy)]
pub enum Generic<'a> {
    Text(&'static str),
    Int(i32),
    Bool(bool),
    Float(f64),
    UnitAxis(&'a TensorDesc, usize),
}

/// An array of the specialization: its name, descriptor and the axes the entry takes as constants.
type SpecTensor<'a> = Option<(&'static str, &'a TensorDesc, u32)>;

/// One launch being described: its key, kernel parameters and specialization, built on the stack (a
/// by-value builder: each method takes and returns it).
pub struct Call<'a> {
    launch: &'a Launch,
    entry: Entry,
    key: LaunchKey,
    params: KernelParams,
    generics: [Generic<'a>; MAX_GENERICS],
    n_generics: usize,
    tensors: [SpecTensor<'a>; MAX_ARRAYS],
    n_tensors: usize,
    unit_axes: [&'static str; MAX_ARRAYS],  // the arrays whose length-1 axes the entry takes as constants
    n_unit_axes: usize,
    ints: [(&'static str, i32); MAX_PARAMS],
    n_ints: usize,
    python_claims: bool,
}

/// A scalar kernel argument: how the launch key holds it and the divisibility hint an integer gives.
pub trait Scalar: Copy {
    fn key(self, key: &mut LaunchKey);
    fn hint(self) -> Option<i32>;
}

macro_rules! integer_scalars {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn key(self, key: &mut LaunchKey) {
                key.word(self as i64);
            }
            fn hint(self) -> Option<i32> {
                Some(self as i32)
            }
        }
    )*};
}
integer_scalars!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_scalars {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn key(self, key: &mut LaunchKey) {
                key.float(f64::from(self));
            }
            fn hint(self) -> Option<i32> {
                None
            }
        }
    )*};
}
float_scalars!(f32, f64, cutile::half::f16, cutile::half::bf16);

impl Scalar for bool {
    fn key(self, key: &mut LaunchKey) {
        key.word(self as i64);
    }
    fn hint(self) -> Option<i32> {
        None
    }
}

impl<'a> Call<'a> {
    #[inline]
    fn generic(mut self, g: Generic<'a>) -> Self {
        self.push_generic(g);
        self
    }

    fn push_generic(&mut self, g: Generic<'a>) {
        self.generics[self.n_generics] = g;
        self.n_generics += 1;
    }

    /// The arrays claim the divisibility cutile's launcher computes (`compute_spec`), not the one cuTile
    /// Python's claims (`python_claims`, the default: the launch of a kernel cuTile Python launches).
    #[inline]
    pub fn cutile_claims(mut self) -> Self {
        self.python_claims = false;
        self
    }

    /// An element type generic, by dtype code.
    #[inline]
    pub fn dtype(self, code: i32) -> Self {
        self.dtype_name(dtype::name(code))
    }

    /// An element type generic, by name (a derived one: `tf32`).
    #[inline]
    pub fn dtype_name(mut self, name: &'static str) -> Self {
        self.key.text(name);
        self.generic(Generic::Text(name))
    }

    /// An integer constant generic (a constant parameter, a derived tile dimension).
    #[inline]
    pub fn int(mut self, value: i32) -> Self {
        self.key.word(value as i64);
        self.generic(Generic::Int(value))
    }

    /// Integer constant generics, in order (see `int`).
    #[inline]
    pub fn ints(self, values: &[i32]) -> Self {
        values.iter().fold(self, |call, &v| call.int(v))
    }

    /// A boolean constant generic.
    #[inline]
    pub fn bool(mut self, value: bool) -> Self {
        self.key.word(value as i64);
        self.generic(Generic::Bool(value))
    }

    /// A float constant generic.
    #[inline]
    pub fn float(mut self, value: f64) -> Self {
        self.key.float(value);
        self.generic(Generic::Float(value))
    }

    /// A generic computed from the arrays' layout (a view's alignment): the arrays' words in the key fix it.
    #[inline]
    pub fn aligned(self, value: i32) -> Self {
        self.generic(Generic::Int(value))
    }

    /// The static length of each axis of each array: 1 where the launch's is (`unit_axis`), else dynamic.
    #[inline]
    pub fn unit_axes(mut self, arrays: &[Arr<'a>]) -> Self {
        for a in arrays {
            for axis in 0..a.desc.ndim.max(0) as usize {
                self.push_generic(Generic::UnitAxis(a.desc, axis));
            }
            self.unit_axes[self.n_unit_axes] = a.name;
            self.n_unit_axes += 1;
        }
        self
    }

    /// A stride the kernel reads as an i32 argument (passed first).
    #[inline]
    pub fn stride(mut self, a: Arr<'a>, axis: usize, name: &'static str) -> Self {
        let value = a.desc.strides[axis] as i32;
        self.params.push(value);
        self.int_hint(name, value)
    }

    /// The strides `layout` passes as arguments (see `stride`), of `arrays` (the launcher's, in order).
    #[inline]
    pub fn strides(mut self, arrays: &[Arr<'a>], layout: Layout) -> Self {
        for &(array, axis, name) in layout.strides {
            self = self.stride(arrays[array], axis, name);
        }
        self
    }

    #[inline]
    fn int_hint(mut self, name: &'static str, value: i32) -> Self {
        self.ints[self.n_ints] = (name, value);
        self.n_ints += 1;
        self
    }

    fn tensor(&mut self, a: Arr<'a>, statics: u32) {
        self.key.array(a.desc);
        self.tensors[self.n_tensors] = Some((a.name, a.desc, statics));
        self.n_tensors += 1;
    }

    /// Array arguments (`&Tensor`), in order; an array given to `unit_axes` has its length-1 axes static.
    #[inline]
    pub fn arrays(mut self, arrays: &[Arr<'a>]) -> Self {
        for &a in arrays {
            let n = a.desc.ndim.max(0) as usize;
            let unit = self.unit_axes[..self.n_unit_axes].contains(&a.name);
            let statics = (0..n).filter(|&i| unit && unit_axis(a.desc, i) == 1).fold(0, |m, i| m | 1 << i);
            self.tensor(a, statics);
            self.params.array(a.desc);
        }
        self
    }

    /// Array arguments whose length-1 axes the entry takes as constants (`unit_axes`, then `arrays`).
    #[inline]
    pub fn unit_arrays(self, arrays: &[Arr<'a>]) -> Self {
        self.unit_axes(arrays).arrays(arrays)
    }

    /// An output each tile block owns a `tile` of (`&mut Tensor`): cutile's launcher passes it with its
    /// partition's shape and strides.
    #[inline]
    pub fn owned(mut self, a: Arr<'a>, tile: &[i32]) -> Self {
        self.tensor(a, 0);
        self.params.array(a.desc);
        for &t in tile {
            self.params.push(t);
        }
        for i in 0..a.desc.ndim.max(0) as usize {
            self.params.push(a.desc.strides[i] as i32);
        }
        self
    }

    /// A scalar argument that gives no divisibility hint (a float, a bool).
    #[inline]
    pub fn arg<T: Scalar>(mut self, value: T) -> Self {
        value.key(&mut self.key);
        self.params.push(value);
        self
    }

    /// A scalar argument, named as the entry names it (an integer's hint is keyed by that name).
    #[inline]
    pub fn scalar<T: Scalar>(mut self, name: &'static str, value: T) -> Self {
        value.key(&mut self.key);
        self.params.push(value);
        match value.hint() {
            Some(hint) => self.int_hint(name, hint),
            None => self,
        }
    }

    /// Launch: the function loaded for an equal key, else the entry compiled for this specialization.
    pub fn go(mut self) -> Result<()> {
        let name = self.launch.kernel;
        let target = LaunchTarget::get(self.launch.device_id, self.launch.stream)?;
        if resolved(&self.key).is_none() {
            resolve(self.key, target, self.entry.module_ast, self.entry.module, self.entry.function,
                    self.entry.source_hash, self.specialization())?;
        }
        let function = resolved(&self.key).ok_or_else(|| Error::new(Code::Launch, "the entry did not load"))?;
        launch_resolved(target, function, self.launch.grid, &mut self.params).map_err(|e| launch_error(name, e))
    }

    /// What cutile's launcher keys the entry's specialization on, for this launch.
    fn specialization(&self) -> Specialization {
        let generics = self.generics[..self.n_generics]
            .iter()
            .map(|g| match *g {
                Generic::Text(t) => t.to_string(),
                Generic::Int(v) => v.to_string(),
                Generic::Bool(v) => v.to_string(),
                Generic::Float(v) => v.to_string(),
                Generic::UnitAxis(d, axis) => unit_axis(d, axis).to_string(),
            })
            .collect();
        let tensors = self.tensors[..self.n_tensors]
            .iter()
            .flatten()
            .map(|&(name, d, statics)| {
                let bytes = dtype::size(d.dtype).unwrap_or(1);
                let bits = if self.python_claims {
                    let axes: Vec<bool> = (0..d.ndim.max(0) as usize).map(|i| statics >> i & 1 == 1).collect();
                    python_claims(d, bytes, &axes)
                } else {
                    let n = d.ndim.max(0) as usize;
                    let shape: Vec<i32> = d.shape[..n].iter().map(|&v| v as i32).collect();
                    let strides: Vec<i32> = d.strides[..n].iter().map(|&v| v as i32).collect();
                    cutile::tensor::compute_spec(d.ptr, &shape, &strides, bytes as i32)
                };
                (name, bits)
            })
            .collect();
        Specialization { generics, tensors, int_scalars: self.ints[..self.n_ints].to_vec() }
    }
}
