//! The memory behind tensors: host buffers, or a backend's own memory, shared by every view.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::types::half::{bf16, f16};
use crate::types::{DType, Element};

use super::Device;

/// A typed, contiguous buffer of elements in host memory: what the CPU computes on, and what
/// moves between host and devices.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    /// `bool` elements.
    Bool(Vec<bool>),
    /// `u8` elements.
    UInt8(Vec<u8>),
    /// `i8` elements.
    Int8(Vec<i8>),
    /// `i16` elements.
    Int16(Vec<i16>),
    /// `i32` elements.
    Int32(Vec<i32>),
    /// `i64` elements.
    Int64(Vec<i64>),
    /// float16 elements.
    Float16(Vec<f16>),
    /// bfloat16 elements.
    BFloat16(Vec<bf16>),
    /// `f32` elements.
    Float32(Vec<f32>),
    /// `f64` elements.
    Float64(Vec<f64>),
}

/// `$body` with `$v` bound to the vector inside `$buffer`, whatever its element type.
macro_rules! each {
    ($buffer:expr, $v:ident => $body:expr) => {
        match $buffer {
            Buffer::Bool($v) => $body,
            Buffer::UInt8($v) => $body,
            Buffer::Int8($v) => $body,
            Buffer::Int16($v) => $body,
            Buffer::Int32($v) => $body,
            Buffer::Int64($v) => $body,
            Buffer::Float16($v) => $body,
            Buffer::BFloat16($v) => $body,
            Buffer::Float32($v) => $body,
            Buffer::Float64($v) => $body,
        }
    };
}

impl Buffer {
    /// Takes ownership of a vector of elements.
    pub fn from_vec<T: Element>(data: Vec<T>) -> Buffer {
        let mut slot = Some(data);
        let any: &mut dyn Any = &mut slot;
        fn take<U: 'static>(any: &mut dyn Any) -> Option<Vec<U>> {
            any.downcast_mut::<Option<Vec<U>>>().and_then(Option::take)
        }
        // Exactly one arm matches: `T::DTYPE` names the element type.
        let buffer = match T::DTYPE {
            DType::Bool => take(any).map(Buffer::Bool),
            DType::UInt8 => take(any).map(Buffer::UInt8),
            DType::Int8 => take(any).map(Buffer::Int8),
            DType::Int16 => take(any).map(Buffer::Int16),
            DType::Int32 => take(any).map(Buffer::Int32),
            DType::Int64 => take(any).map(Buffer::Int64),
            DType::Float16 => take(any).map(Buffer::Float16),
            DType::BFloat16 => take(any).map(Buffer::BFloat16),
            DType::Float32 => take(any).map(Buffer::Float32),
            DType::Float64 => take(any).map(Buffer::Float64),
        };
        buffer.expect("Element::DTYPE names the element's own type")
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        fn of<T: Element>(_: &[T]) -> DType {
            T::DTYPE
        }
        each!(self, v => of(v))
    }

    fn as_any(&self) -> &dyn Any {
        each!(self, v => v)
    }

    /// The elements, when they are of type `T`.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        self.as_any().downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        each!(self, v => v)
    }

    /// The elements, mutably, when they are of type `T`.
    pub fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        self.as_any_mut().downcast_mut::<Vec<T>>().map(Vec::as_mut_slice)
    }

    /// The vector of elements, when they are of type `T`.
    pub fn into_vec<T: Element>(mut self) -> Option<Vec<T>> {
        self.as_any_mut().downcast_mut::<Vec<T>>().map(std::mem::take)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first element.
    fn address(&self) -> usize {
        each!(self, v => v.as_ptr() as usize)
    }
}

/// The memory behind a tensor and all its views, on one device: host memory for the CPU, or
/// a backend's own memory (a GPU buffer) that the backend finds again with
/// [`memory`](Storage::memory).
///
/// Host reads take a shared lock, so views can be read from many threads at once; writes
/// (in-place operations) take it exclusively.
pub struct Storage {
    device: Device,
    memory: Memory,
    /// How many in-place writes this memory has had (PyTorch's version counter, shared by
    /// every view): autograd checks that tensors it saved were not modified since.
    version: AtomicU64,
}

enum Memory {
    Host(RwLock<Buffer>),
    Device(Box<dyn Any + Send + Sync>),
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Storage({})", self.device)
    }
}

/// How many storages exist in the process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many storages (the memory behind tensors and their views, on any device) exist in the
/// process now: a diagnostic, e.g. to check that backward freed the tensors its graph saved.
pub fn live_storages() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// A host buffer goes to the CPU backend's pool of large buffers when the last view of it is
/// dropped.
impl Drop for Storage {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if let Memory::Host(buffer) = &mut self.memory {
            crate::cpu::pool::give(std::mem::replace(buffer.get_mut(), Buffer::Bool(Vec::new())));
        }
    }
}

impl Storage {
    /// Host memory holding `buffer`, for the CPU.
    pub fn host(buffer: Buffer) -> Arc<Storage> {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Arc::new(Storage { device: Device::CPU, memory: Memory::Host(RwLock::new(buffer)), version: AtomicU64::new(0) })
    }

    /// A backend's own memory on `device` (a GPU buffer): the backend gets it back with
    /// [`memory`](Storage::memory).
    pub fn new(device: Device, memory: impl Any + Send + Sync) -> Arc<Storage> {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Arc::new(Storage { device, memory: Memory::Device(Box::new(memory)), version: AtomicU64::new(0) })
    }

    /// The device this memory is on.
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }

    /// How many in-place writes this memory has had.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Counts one more in-place write.
    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The backend's memory, when it is of type `M`.
    pub fn memory<M: Any>(&self) -> Option<&M> {
        match &self.memory {
            Memory::Device(m) => m.downcast_ref::<M>(),
            Memory::Host(_) => None,
        }
    }

    /// The host buffer, for host memory.
    #[inline]
    pub fn host_buffer(&self) -> Option<&RwLock<Buffer>> {
        match &self.memory {
            Memory::Host(buffer) => Some(buffer),
            Memory::Device(_) => None,
        }
    }

    /// The buffer, when no one else holds this host storage; the storage back otherwise.
    pub fn try_into_buffer(self: Arc<Self>) -> Result<Buffer, Arc<Self>> {
        if self.host_buffer().is_none() {
            return Err(self);
        }
        Arc::try_unwrap(self).map(|mut s| match &mut s.memory {
            Memory::Host(buffer) => std::mem::replace(buffer.get_mut(), Buffer::Bool(Vec::new())),
            Memory::Device(_) => unreachable!("checked above: host memory"),
        })
    }

    /// The address of the first element in host memory; for a backend's memory, the address
    /// of the object that holds it (distinct for distinct storages, equal for views of one).
    pub fn address(&self) -> usize {
        match &self.memory {
            Memory::Host(buffer) => buffer.read_recursive().address(),
            Memory::Device(m) => (&**m as *const (dyn Any + Send + Sync)).cast::<u8>() as usize,
        }
    }

    /// Exclusive access to host memory, for in-place operations. Callers read what they need
    /// before taking it, so that a tensor written from itself (`x.add_(&x)`) never waits on its
    /// own read.
    pub fn write(&self) -> Option<RwLockWriteGuard<'_, Buffer>> {
        Some(self.host_buffer()?.write())
    }

    /// Exclusive access to host memory if no one reads or writes now: kernels that hold other
    /// locks take this, never wait, and fall back to computing a new tensor when it fails.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, Buffer>> {
        self.host_buffer()?.try_write()
    }

    /// Shared access to host memory. Recursive, so one thread may read the same storage twice
    /// (`x + x`).
    pub fn read(&self) -> Option<RwLockReadGuard<'_, Buffer>> {
        Some(self.host_buffer()?.read_recursive())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_keep_their_element_type() {
        let b = Buffer::from_vec(vec![1.5f32, 2.5]);
        assert_eq!(b.dtype(), DType::Float32);
        assert_eq!(b.as_slice::<f32>(), Some(&[1.5f32, 2.5][..]));
        assert_eq!(b.as_slice::<f64>(), None);
        assert_eq!(Buffer::from_vec(vec![true]).dtype(), DType::Bool);
        assert_eq!(Buffer::from_vec(vec![1i64]).dtype(), DType::Int64);
        assert_eq!(Buffer::from_vec(vec![1i32, 2]).into_vec::<i32>(), Some(vec![1, 2]));
        assert_eq!(Buffer::from_vec(vec![1i32, 2]).into_vec::<i64>(), None);
    }

    #[test]
    fn only_a_sole_owner_takes_the_buffer() {
        let s = Storage::host(Buffer::from_vec(vec![1.0f64]));
        let other = s.clone();
        let s = s.try_into_buffer().unwrap_err();
        drop(other);
        assert_eq!(s.try_into_buffer().ok(), Some(Buffer::from_vec(vec![1.0f64])));
    }

    #[test]
    fn recursive_reads_do_not_deadlock() {
        let s = Storage::host(Buffer::from_vec(vec![1i32]));
        let a = s.read().unwrap();
        let b = s.read().unwrap();
        assert_eq!(a.as_slice::<i32>(), b.as_slice::<i32>());
    }
}
