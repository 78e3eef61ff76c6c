//! The memory behind tensors: one typed buffer, shared by every view of it.

use std::any::Any;
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::dtype::{DType, Element};

/// A typed, contiguous buffer of elements.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Buffer {
    Bool(Vec<bool>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Float32(Vec<f32>),
    Float64(Vec<f64>),
}

impl Buffer {
    /// Takes ownership of a vector of elements.
    pub(crate) fn from_vec<T: Element>(data: Vec<T>) -> Buffer {
        let mut slot = Some(data);
        let any: &mut dyn Any = &mut slot;
        // Exactly one arm matches: `T::DTYPE` names the element type.
        let buffer = match T::DTYPE {
            DType::Bool => any.downcast_mut::<Option<Vec<bool>>>().and_then(Option::take).map(Buffer::Bool),
            DType::Int32 => any.downcast_mut::<Option<Vec<i32>>>().and_then(Option::take).map(Buffer::Int32),
            DType::Int64 => any.downcast_mut::<Option<Vec<i64>>>().and_then(Option::take).map(Buffer::Int64),
            DType::Float32 => any.downcast_mut::<Option<Vec<f32>>>().and_then(Option::take).map(Buffer::Float32),
            DType::Float64 => any.downcast_mut::<Option<Vec<f64>>>().and_then(Option::take).map(Buffer::Float64),
        };
        buffer.expect("Element::DTYPE names the element's own type")
    }

    pub(crate) fn dtype(&self) -> DType {
        match self {
            Buffer::Bool(_) => DType::Bool,
            Buffer::Int32(_) => DType::Int32,
            Buffer::Int64(_) => DType::Int64,
            Buffer::Float32(_) => DType::Float32,
            Buffer::Float64(_) => DType::Float64,
        }
    }

    fn as_any(&self) -> &dyn Any {
        match self {
            Buffer::Bool(v) => v,
            Buffer::Int32(v) => v,
            Buffer::Int64(v) => v,
            Buffer::Float32(v) => v,
            Buffer::Float64(v) => v,
        }
    }

    /// The elements, when they are of type `T`.
    pub(crate) fn as_slice<T: Element>(&self) -> Option<&[T]> {
        self.as_any().downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        match self {
            Buffer::Bool(v) => v,
            Buffer::Int32(v) => v,
            Buffer::Int64(v) => v,
            Buffer::Float32(v) => v,
            Buffer::Float64(v) => v,
        }
    }

    /// The elements, mutably, when they are of type `T`.
    pub(crate) fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        self.as_any_mut().downcast_mut::<Vec<T>>().map(Vec::as_mut_slice)
    }

    /// The vector of elements, when they are of type `T`.
    pub(crate) fn into_vec<T: Element>(mut self) -> Option<Vec<T>> {
        self.as_any_mut().downcast_mut::<Vec<T>>().map(std::mem::take)
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        match self {
            Buffer::Bool(v) => v.len(),
            Buffer::Int32(v) => v.len(),
            Buffer::Int64(v) => v.len(),
            Buffer::Float32(v) => v.len(),
            Buffer::Float64(v) => v.len(),
        }
    }
}

/// A buffer shared by a tensor and all its views. Reads take a shared lock, so views can be read
/// from many threads at once; writes (in-place operations) take it exclusively.
#[derive(Debug)]
pub(crate) struct Storage {
    buffer: RwLock<Buffer>,
}

/// A storage's buffer goes to the pool of large buffers when the last view of it is dropped.
impl Drop for Storage {
    fn drop(&mut self) {
        super::pool::give(std::mem::replace(self.buffer.get_mut(), Buffer::Bool(Vec::new())));
    }
}

impl Storage {
    pub(crate) fn new(buffer: Buffer) -> Arc<Storage> {
        Arc::new(Storage { buffer: RwLock::new(buffer) })
    }

    /// The buffer, when no one else holds this storage; the storage back otherwise.
    pub(crate) fn try_into_buffer(self: Arc<Self>) -> Result<Buffer, Arc<Self>> {
        Arc::try_unwrap(self).map(|mut s| std::mem::replace(s.buffer.get_mut(), Buffer::Bool(Vec::new())))
    }

    /// The address of the first element.
    pub(crate) fn address(&self) -> usize {
        let buffer = self.read();
        match &*buffer {
            Buffer::Bool(v) => v.as_ptr() as usize,
            Buffer::Int32(v) => v.as_ptr() as usize,
            Buffer::Int64(v) => v.as_ptr() as usize,
            Buffer::Float32(v) => v.as_ptr() as usize,
            Buffer::Float64(v) => v.as_ptr() as usize,
        }
    }

    /// Exclusive access, for in-place operations. Callers read what they need before taking it,
    /// so that a tensor written from itself (`x.add_(&x)`) never waits on its own read.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Buffer> {
        self.buffer.write()
    }

    /// Exclusive access if no one reads or writes now: kernels that hold other locks take this,
    /// never wait, and fall back to computing a new tensor when it fails.
    pub(crate) fn try_write(&self) -> Option<RwLockWriteGuard<'_, Buffer>> {
        self.buffer.try_write()
    }

    /// Shared access if no one writes now (for kernels that hold other locks).
    pub(crate) fn try_read(&self) -> Option<RwLockReadGuard<'_, Buffer>> {
        self.buffer.try_read_recursive()
    }

    /// Shared access. Recursive, so one thread may read the same storage twice (`x + x`).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Buffer> {
        self.buffer.read_recursive()
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
        let s = Storage::new(Buffer::from_vec(vec![1.0f64]));
        let other = s.clone();
        let s = s.try_into_buffer().unwrap_err();
        drop(other);
        assert_eq!(s.try_into_buffer().ok(), Some(Buffer::from_vec(vec![1.0f64])));
    }

    #[test]
    fn recursive_reads_do_not_deadlock() {
        let s = Storage::new(Buffer::from_vec(vec![1i32]));
        let a = s.read();
        let b = s.read();
        assert_eq!(a.as_slice::<i32>(), b.as_slice::<i32>());
    }
}
