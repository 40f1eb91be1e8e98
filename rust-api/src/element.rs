//! The element types the operators take: f32, f16 and bf16.

use cutile::half::{bf16, f16};
use tileport_kernels::support::dtype;

/// An element dtype of the operators, as the plans see it (no tensor needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F16,
    BF16,
}

impl Dtype {
    /// The name the kernels' generic element type takes (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::BF16 => "bf16",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
    impl Sealed for i32 {}
}

/// A type whose tensors cross to the generated launchers: its dtype code there.
pub trait DeviceElement: cutile::DType + Copy + Send + Sync + sealed::Sealed {
    /// The code of the launchers' tensor descriptor (`tileport_kernels::support::dtype`).
    const CODE: i32;
}

/// A floating-point element type of the operators (f32, f16, bf16).
pub trait Element: DeviceElement {
    const ELEMENT: Dtype;
    fn to_f32(self) -> f32;
    fn from_f32(value: f32) -> Self;
}

impl DeviceElement for i32 {
    const CODE: i32 = dtype::I32;
}

impl DeviceElement for f32 {
    const CODE: i32 = dtype::F32;
}

impl DeviceElement for f16 {
    const CODE: i32 = dtype::F16;
}

impl DeviceElement for bf16 {
    const CODE: i32 = dtype::BF16;
}

impl Element for f32 {
    const ELEMENT: Dtype = Dtype::F32;
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(value: f32) -> Self {
        value
    }
}

impl Element for f16 {
    const ELEMENT: Dtype = Dtype::F16;
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(value: f32) -> Self {
        f16::from_f32(value)
    }
}

impl Element for bf16 {
    const ELEMENT: Dtype = Dtype::BF16;
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(value: f32) -> Self {
        bf16::from_f32(value)
    }
}
