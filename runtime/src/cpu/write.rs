//! Writing into an existing tensor's storage: the kernel behind in-place operations and `out=`.

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
