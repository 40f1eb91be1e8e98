//! The device side of an operator: the stream's device, output allocation, the descriptors the
//! generated launchers take, their return codes, and the wait for completion.

use std::sync::Arc;

use cutile::cuda_async::device_operation::DeviceOp;
use cutile::cuda_core::Stream;
use cutile::tensor::{Reshape, Tensor};
use tileport_kernels::support::{MAX_DIMS, TensorDesc, tileport_last_error};

use crate::element::DeviceElement;
use crate::error::{Error, Result, cuda};

/// Where an operator's launches run: the stream's device and its SM count (persistent grids).
pub(crate) struct Target<'s> {
    pub op: &'static str,
    pub stream: &'s Arc<Stream>,
    pub device_id: i32,
    pub sms: u32,
}

impl<'s> Target<'s> {
    pub fn new(op: &'static str, stream: &'s Arc<Stream>) -> Result<Self> {
        let context = stream.context();
        let sms = context.multiprocessor_count().map_err(|e| cuda(op, e))?;
        let device_id = i32::try_from(context.ordinal()).map_err(|e| cuda(op, e))?;
        Ok(Target { op, stream, device_id, sms })
    }

    /// The tensor is on the stream's device and contiguous (the operators' layout).
    pub fn input<T: DeviceElement>(&self, name: &str, t: &Tensor<T>) -> Result<Vec<usize>> {
        if t.device_id() as i32 != self.device_id {
            let message = format!(
                "`{name}` is on device {}, the stream on {}",
                t.device_id(),
                self.device_id
            );
            return Err(Error::Device { op: self.op, message });
        }
        if !t.is_contiguous() {
            let message = format!(
                "`{name}` is strided (shape {:?}, strides {:?}); pass a contiguous tensor",
                t.shape(),
                t.strides()
            );
            return Err(Error::Layout { op: self.op, message });
        }
        Ok(t.shape().iter().map(|&d| d as usize).collect())
    }

    /// A new tensor of `shape` on the stream's device, to be written whole by a launch.
    pub fn output<T: DeviceElement>(&self, shape: &[usize]) -> Result<Tensor<T>> {
        let len = shape.iter().product();
        let raw =
            Tensor::<T>::uninitialized(len).sync_on(self.stream).map_err(|e| cuda(self.op, e))?;
        // SAFETY: the caller's launches write every element before anything reads it.
        let flat = unsafe { raw.assume_init() };
        flat.reshape(shape).map_err(|e| cuda(self.op, e))
    }

    /// The stream's raw handle, as the launchers take it.
    pub fn handle(&self) -> u64 {
        self.stream.cu_stream() as u64
    }

    /// Turn a launcher's return code into a result (its message from the launcher's thread-local).
    pub fn check(&self, kernel: &'static str, code: i32) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: the launcher just set the message on this thread; it stays valid until the next failure.
        let message = unsafe { std::ffi::CStr::from_ptr(tileport_last_error()) };
        let message = message.to_string_lossy().into_owned();
        Err(Error::Launch { op: self.op, kernel, code, message })
    }

    /// Wait for the stream: the launchers enqueue outside cutile's access tracking, so an operator
    /// returns only once its kernels are done with every tensor it was given.
    pub fn finish(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| cuda(self.op, e))
    }
}

/// The descriptor of a contiguous tensor.
pub(crate) fn desc<T: DeviceElement>(t: &Tensor<T>) -> TensorDesc {
    let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
    view(t, &dims)
}

/// The descriptor of a contiguous tensor seen with another shape of as many elements (a flat
/// view, x [M, 2N] as [2M, N], x [B, S, H, D] as [B, S, H, 2, D/2]).
pub(crate) fn view<T: DeviceElement>(t: &Tensor<T>, dims: &[usize]) -> TensorDesc {
    debug_assert_eq!(dims.iter().product::<usize>(), t.size());
    let mut d = TensorDesc {
        ptr: t.device_pointer().cu_deviceptr(),
        ndim: dims.len() as i32,
        shape: [0; MAX_DIMS],
        strides: [0; MAX_DIMS],
        dtype: T::CODE,
    };
    let mut stride = 1i64;
    for (i, &n) in dims.iter().enumerate().rev() {
        d.shape[i] = n as i64;
        d.strides[i] = stride;
        stride *= n as i64;
    }
    d
}
