//! Writing into an existing tensor's storage: the kernel behind in-place operations and `out=`.

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};

use crate::error::{Error, Result};
use crate::tensor::{Dense, with_dtype};

use super::map::{Operand, copy};
use super::{alloc, read_as, shares, with_operand, writable};

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
    if copied(dst, src) {
        return Ok(());
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

/// Copies `src` into `dst` in one parallel pass when both are contiguous, of one dtype, in
/// different storages (or `src` has one element); false, changing nothing, otherwise.
fn copied(dst: &Dense, src: &Dense) -> bool {
    let shape = &dst.layout.shape;
    !shares(dst, src)
        && with_dtype!(dst.dtype, T => with_operand(src, shape, |x: Option<Operand<'_, T>>| {
            match (x, writable::<T>(dst, shape)) {
                (Some(Operand::Slice(x)), Some(mut out)) => copy(x, &mut out),
                (Some(Operand::Repeat(v)), Some(mut out)) => out.fill(v),
                _ => return false,
            }
            true
        }))
}
