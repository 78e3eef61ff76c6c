//! What kernels read and write: a strided view of a storage, with its dtype.

use std::sync::Arc;

use crate::types::{DType, Layout, Shape};

use super::{Device, Storage};

/// A strided array in some device's memory: the storage, the layout (shape, strides and offset
/// in elements) and the element type. Kernels read arrays of any layout and return fresh,
/// contiguous ones; cloning shares the storage.
#[derive(Clone, Debug)]
pub struct Array {
    /// The memory, shared by every view of it.
    pub storage: Arc<Storage>,
    /// Which elements of the storage this array is, and in what order.
    pub layout: Layout,
    /// The element type.
    pub dtype: DType,
}

impl Array {
    /// A fresh contiguous array of `shape` over `storage`.
    pub fn contiguous(storage: Arc<Storage>, shape: Shape, dtype: DType) -> Array {
        Array { storage, layout: Layout::contiguous(shape), dtype }
    }

    /// The device the elements are on.
    #[inline]
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The same elements seen with another layout (a view: nothing is copied).
    pub fn with_layout(&self, layout: Layout) -> Array {
        Array { layout, ..self.clone() }
    }

    /// True when both are views of one storage.
    pub fn shares(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arrays move through every operation by value; up to 128 bytes the compiler moves them
    /// with eight 16-byte stores, past that each move is a call to `memcpy`.
    #[test]
    fn an_array_moves_without_memcpy() {
        assert!(std::mem::size_of::<Array>() <= 128, "{} bytes", std::mem::size_of::<Array>());
    }
}
