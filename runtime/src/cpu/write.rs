//! Writing into an existing tensor's storage: the kernel behind in-place operations and `out=`.

use std::sync::Arc;

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};

use crate::error::{Error, Result};
use crate::tensor::{Dense, with_dtype};

use super::read_as;

/// Writes the elements of `src` (of `dst`'s shape, any dtype) into `dst`'s elements, converting
/// them to `dst`'s dtype. `src` is read completely before `dst` is locked, so the two may share
/// storage.
pub(crate) fn assign(func: &str, dst: &Dense, src: &Dense) -> Result<()> {
    with_dtype!(dst.dtype, T => {
        let values: Vec<T> = read_as(src, |v: ArrayViewD<'_, T>| v.iter().copied().collect());
        let mut buffer = dst.storage.write();
        let data = buffer.as_mut_slice::<T>().ok_or_else(|| Error::runtime_error(format!("{func}(): internal dtype mismatch")))?;
        let layout = &dst.layout;
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        let mut view = data
            .get_mut(layout.offset..)
            .and_then(|rest| ArrayViewMutD::from_shape(shape, rest).ok())
            .ok_or_else(|| {
                Error::runtime_error(format!(
                    "{func}(): unsupported operation: more than one element of the written-to tensor refers to a single memory location"
                ))
            })?;
        view.iter_mut().zip(values).for_each(|(d, s)| *d = s);
        Ok(())
    })
}

/// Moves the elements of `src` into `dst` by exchanging their buffers, when both tensors are
/// contiguous, of one dtype, and each covers its whole storage: no element is copied. `src`
/// must be a fresh result nothing else holds, since it receives `dst`'s old buffer. Returns
/// false, changing nothing, when the layouts do not allow it.
pub(crate) fn replace(dst: &Dense, src: &Dense) -> bool {
    let whole = |d: &Dense, len: usize| d.layout.offset == 0 && d.layout.is_contiguous() && d.layout.numel() == len;
    if dst.dtype != src.dtype || Arc::ptr_eq(&dst.storage, &src.storage) {
        return false;
    }
    let mut to = dst.storage.write();
    let mut from = src.storage.write();
    if !whole(dst, to.len()) || !whole(src, from.len()) {
        return false;
    }
    std::mem::swap(&mut *to, &mut *from);
    true
}
