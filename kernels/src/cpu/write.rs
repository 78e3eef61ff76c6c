//! Writing into an existing array's memory: the kernel behind in-place operations and `out=`.

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::types::{Layout, with_dtype};

use super::map::copied;
use super::strided::{Walk, distinct};
use super::{elements, internal};

/// Writes the elements of `src` (of `dst`'s shape, any dtype) into `dst`'s elements, converting
/// them to `dst`'s dtype. Unless `dst` is contiguous and its storage free, `src` is read
/// completely before `dst` is locked, so the two may share storage.
pub(super) fn assign(dst: &Array, src: &Array) -> Result<()> {
    if copied(dst, src)? {
        return Ok(());
    }
    if !distinct(&dst.layout) {
        return Err(overlapping());
    }
    with_dtype!(dst.dtype, T => {
        let values = elements::<T>("copy_", src)?;
        let source = Layout::contiguous(src.layout.shape.clone());
        let mut buffer = dst.storage.write().ok_or_else(|| internal("a write into memory not on the host"))?;
        let data = buffer.as_mut_slice::<T>().ok_or_else(|| internal("a tensor's dtype is not its storage's"))?;
        let walk = Walk::new(&dst.layout.shape, [&dst.layout, &source])
            .filter(|walk| walk.span(0) <= data.len() && walk.span(1) <= values.len())
            .ok_or_else(|| internal("a write outside its storage"))?;
        walk.runs(0..dst.layout.numel(), |[p, q], len, [s, t]| {
            for i in 0..len {
                data[p + i * s] = values[q + i * t];
            }
        });
        Ok(())
    })
}

/// PyTorch's error for a write into a tensor whose elements share memory.
fn overlapping() -> Error {
    Error::runtime_error(
        "unsupported operation: more than one element of the written-to tensor refers to a single memory location",
    )
}
