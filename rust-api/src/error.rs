//! The errors of the operators: what was wrong with the inputs, or what failed on the device.

use std::fmt;

/// An operator's failure, naming the operator (`op`) it came from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An input's rank or extents do not fit the operator, or its operands do not fit each other.
    Shape { op: &'static str, message: String },
    /// A scalar argument outside the values the operator takes (a probability, a cap, an offset).
    Value { op: &'static str, message: String },
    /// A dtype, head dimension or row length the operator has no kernel for.
    Unsupported { op: &'static str, message: String },
    /// An input is not laid out as the operator reads it (the operators take contiguous tensors).
    Layout { op: &'static str, message: String },
    /// A tensor lives on another device than the stream.
    Device { op: &'static str, message: String },
    /// The generated launcher rejected or failed a launch: its return code and message.
    Launch { op: &'static str, kernel: &'static str, code: i32, message: String },
    /// The CUDA runtime failed around a launch (allocation, synchronization, a device query).
    Cuda { op: &'static str, message: String },
}

/// The result of an operator.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The operator the error came from.
    pub fn op(&self) -> &'static str {
        match self {
            Error::Shape { op, .. }
            | Error::Value { op, .. }
            | Error::Unsupported { op, .. }
            | Error::Layout { op, .. }
            | Error::Device { op, .. }
            | Error::Launch { op, .. }
            | Error::Cuda { op, .. } => op,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { op, message } => write!(f, "{op}: shape: {message}"),
            Error::Value { op, message } => write!(f, "{op}: value: {message}"),
            Error::Unsupported { op, message } => write!(f, "{op}: unsupported: {message}"),
            Error::Layout { op, message } => write!(f, "{op}: layout: {message}"),
            Error::Device { op, message } => write!(f, "{op}: device: {message}"),
            Error::Launch { op, kernel, code, message } => {
                write!(f, "{op}: launching `{kernel}` failed ({code}): {message}")
            }
            Error::Cuda { op, message } => write!(f, "{op}: CUDA: {message}"),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn shape(op: &'static str, message: impl Into<String>) -> Error {
    Error::Shape { op, message: message.into() }
}

pub(crate) fn value(op: &'static str, message: impl Into<String>) -> Error {
    Error::Value { op, message: message.into() }
}

pub(crate) fn unsupported(op: &'static str, message: impl Into<String>) -> Error {
    Error::Unsupported { op, message: message.into() }
}

pub(crate) fn cuda(op: &'static str, e: impl fmt::Display) -> Error {
    Error::Cuda { op, message: e.to_string() }
}
