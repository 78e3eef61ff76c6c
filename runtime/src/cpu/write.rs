//! Writing into an existing tensor's storage: the kernel behind in-place operations and `out=`.

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};

use crate::error::{Error, Result};
use crate::tensor::{Dense, with_dtype};

use super::{alloc, read_as};

/// Writes the elements of `src` (of `dst`'s shape, any dtype) into `dst`'s elements, converting
/// them to `dst`'s dtype. `src` is read completely before `dst` is locked, so the two may share
/// storage.
pub(crate) fn assign(func: &str, dst: &Dense, src: &Dense) -> Result<()> {
    let layout = &dst.layout;
    // An expanded `dst` (a dimension of stride 0 holding two or more elements) is refused before
    // `src` is read: the values it would take may be far more than memory holds.
    let expanded = layout.shape.iter().zip(&layout.strides).any(|(&n, &s)| s == 0 && n > 1);
    if expanded && layout.numel() > 0 {
        return Err(overlapping(func));
    }
    with_dtype!(dst.dtype, T => {
        let values: Vec<T> = read_as(src, |v: ArrayViewD<'_, T>| -> Result<Vec<T>> {
            let mut values = alloc(func, v.len())?;
            values.extend(v.iter().copied());
            Ok(values)
        })?;
        let mut buffer = dst.storage.write();
        let data = buffer.as_mut_slice::<T>().ok_or_else(|| Error::runtime_error(format!("{func}(): internal dtype mismatch")))?;
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        let mut view = data
            .get_mut(layout.offset..)
            .and_then(|rest| ArrayViewMutD::from_shape(shape, rest).ok())
            .ok_or_else(|| overlapping(func))?;
        view.iter_mut().zip(values).for_each(|(d, s)| *d = s);
        Ok(())
    })
}

/// PyTorch's error for a write into a tensor whose elements share memory.
fn overlapping(func: &str) -> Error {
    Error::runtime_error(format!(
        "{func}(): unsupported operation: more than one element of the written-to tensor refers to a single memory \
         location"
    ))
}
