//! Writing into an existing array's memory: the kernel behind in-place operations and `out=`.

use ndarray::{ArrayViewMutD, IxDyn, ShapeBuilder};

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::types::with_dtype;

use super::map::copied;
use super::{elements, internal};

/// Writes the elements of `src` (of `dst`'s shape, any dtype) into `dst`'s elements, converting
/// them to `dst`'s dtype. `src` is read completely before `dst` is locked, so the two may share
/// storage.
pub(super) fn assign(dst: &Array, src: &Array) -> Result<()> {
    let layout = &dst.layout;
    if copied(dst, src) {
        return Ok(());
    }
    with_dtype!(dst.dtype, T => {
        let values = elements::<T>("copy_", src)?;
        let mut buffer = dst.storage.write().ok_or_else(|| internal("a write into memory not on the host"))?;
        let data = buffer.as_mut_slice::<T>().ok_or_else(|| internal("a tensor's dtype is not its storage's"))?;
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        let mut view = data
            .get_mut(layout.offset..)
            .and_then(|rest| ArrayViewMutD::from_shape(shape, rest).ok())
            .ok_or_else(overlapping)?;
        view.iter_mut().zip(values).for_each(|(d, s)| *d = s);
        Ok(())
    })
}

/// PyTorch's error for a write into a tensor whose elements share memory.
fn overlapping() -> Error {
    Error::runtime_error(
        "unsupported operation: more than one element of the written-to tensor refers to a single memory location",
    )
}
