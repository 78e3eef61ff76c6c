//! Writing results into existing tensors: the rules of in-place operations and `out=`, and the
//! in-place operations that are not arithmetic (`zero_`, `fill_`, `copy_`).

use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::tensor::{Scalar, Tensor, broadcast_shapes};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// Writes `result` into `target` (an in-place operation's `self`, or an `out=` tensor), which
/// must have the result's shape and a dtype the result can be cast to; returns `target`.
/// A result computed straight into `target` (same storage and layout) is already there.
pub(crate) fn write_into(func: &str, target: &Tensor, result: Tensor) -> Result<Tensor> {
    let (dst, src) = (target.data(func, "out")?, result.data(func, "result")?);
    if dst.layout.shape != src.layout.shape {
        bail!(
            Runtime,
            "{func}(): output with shape {:?} doesn't match the broadcast shape {:?}",
            dst.layout.shape.as_ref(),
            src.layout.shape.as_ref()
        );
    }
    device_of(func, &[("out", dst), ("result", src)])?;
    if !src.dtype.can_cast(dst.dtype) {
        bail!(Runtime, "{func}(): result type {} can't be cast to the desired output type {}", src.dtype, dst.dtype);
    }
    crate::primitive::write(func, target, &result)?;
    Ok(target.clone())
}

/// The in-place operation `func` on `target` composed of several kernels (`clamp_`, `lerp_`,
/// `masked_fill_`): `compute` reads `source` (the target itself, or, while recording, a
/// recorded copy of it, so the write cannot change what backward reads) and its result is
/// written into `target`. `others` are the operation's other operands. An in-place operation
/// that is one elementwise kernel (`add_`, `exp_`, `relu_`) instead gives the primitive
/// `target` itself as input and output, and the primitive writes and records it in place
/// ([`write_into`] then finds it done).
pub(crate) fn update(
    func: &str,
    target: &Tensor,
    others: &[&Tensor],
    compute: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let source = crate::primitive::inplace_source(target, others)?;
    write_into(func, target, compute(&source)?)
}

/// The `out=` form of `func`: `compute`'s result written into `out`. Refused while recording
/// with `inputs` that require grad, as in PyTorch.
pub(crate) fn write_out(
    func: &str,
    out: &Tensor,
    inputs: &[&Tensor],
    compute: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    crate::primitive::refuse_out(func, inputs)?;
    write_into(func, out, compute()?)
}

impl Tensor {
    /// Sets every element to zero, in place (`Tensor.zero_`); returns `self`.
    #[torch_function]
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(0)
    }

    /// Sets every element to `value`, converted to this tensor's dtype, in place
    /// (`Tensor.fill_`); returns `self`.
    ///
    /// ```
    /// let t = torchfn::zeros([2, 2], None, None)?;
    /// let view = t.get(0)?;
    /// view.fill_(7)?;
    /// assert_eq!(t.to_vec::<f32>()?, [7.0, 7.0, 0.0, 0.0]); // the write went through the view
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    ///
    /// The elements of an expanded dimension are one memory location, filled once, as PyTorch
    /// fills them: `zeros([1])?.expand([1 << 40])?.fill_(2)` writes one element (when the
    /// tensor has no history or tangent to update).
    #[torch_function]
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let dst = self.data("fill_", "self")?;
        let mut target = self.clone();
        let (shape, strides) = (&dst.layout.shape, &dst.layout.strides);
        let expanded: Vec<usize> = (0..shape.len()).filter(|&d| strides[d] == 0 && shape[d] > 1).collect();
        // The write goes to a narrower view, whose history and tangent alone it would update:
        // only an untracked tensor's expanded dimensions are narrowed (asked only of one that
        // has them).
        if !expanded.is_empty()
            && !crate::autograd::meta::requires_grad(self)
            && crate::autograd::forward_ad::tangent(self).is_none()
        {
            for d in expanded {
                target = super::view::narrow_impl("fill_", ("self", &target), d as i64, 0, 1)?;
            }
        }
        let shape = target.data("fill_", "self")?.layout.shape.clone();
        let filled = crate::primitive::new_full(&target, &shape, value.into(), dst.dtype)?;
        write_into("fill_", &target, filled)?;
        Ok(self.clone())
    }

    /// Copies `src` into this tensor, in place, broadcasting and converting it
    /// (`Tensor.copy_`); returns `self`.
    #[torch_function]
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        let (dst, from) = (self.data("copy_", "self")?, src.data("copy_", "src")?);
        let shape = broadcast_shapes(&dst.layout.shape, &from.layout.shape, "copy_")?;
        if shape != dst.layout.shape {
            bail!(
                Runtime,
                "copy_(): the source of shape {:?} does not broadcast to the destination's shape {:?}",
                from.layout.shape.as_ref(),
                dst.layout.shape.as_ref()
            );
        }
        let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        let expanded = super::view::expand_impl("copy_", ("src", src), &sizes)?;
        write_converted("copy_", self, &expanded)?;
        Ok(self.clone())
    }
}

/// Writes `src` (already of `dst`'s shape) into `dst`, converting it to `dst`'s dtype and
/// device: here, as a recorded operation, when `src` requires grad; else the write converts.
pub(crate) fn write_converted(func: &str, dst: &Tensor, src: &Tensor) -> Result<()> {
    let (to, from) = (dst.data(func, "self")?, src.data(func, "src")?);
    let converts = from.dtype != to.dtype || from.device() != to.device();
    let src = if converts && crate::autograd::meta::requires_grad(src) {
        &crate::primitive::transfer(src, to.device(), to.dtype)?
    } else {
        src
    };
    crate::primitive::write(func, dst, src)
}

crate::samples! {
    Tensor::ZERO_ => [sample([f32s(&[2, 3])])],
    Tensor::FILL_ => [sample([f32s(&[2, 3]), Value::Float(2.5)])],
    Tensor::COPY_ => [sample([f32s(&[2, 3]), i64s(&[3])])],
}
