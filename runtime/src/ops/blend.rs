//! Fused pointwise blends of three tensors, as optimizers use them: `addcmul`, `addcdiv`,
//! `lerp`, and their in-place forms. Each broadcasts its operands and computes in their
//! promoted dtype; autograd differentiates them through their primitives.

use crate::backend::Binary;
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::inplace::update;
use crate::primitive;
use crate::tensor::{DType, Scalar, Tensor, broadcast_shapes, result_type};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The dtype `func` computes in for `operands` (name, tensor), after checking that they
/// share a device and broadcast together; floats only where `floats` says so.
fn common(func: &str, operands: &[(&str, &Tensor)], floats: bool) -> Result<DType> {
    let data = operands.iter().map(|&(name, t)| Ok((name, t.data(func, name)?))).collect::<Result<Vec<_>>>()?;
    device_of(func, &data)?;
    let mut shape = data[0].1.layout.shape.clone();
    for (_, d) in &data[1..] {
        shape = broadcast_shapes(&shape, &d.layout.shape, func)?;
    }
    let dtype = result_type(data.iter().map(|(_, d)| d.participant()));
    if floats && !dtype.is_floating_point() {
        bail!(Runtime, "{func}(): expected floating point tensors, but got {dtype}");
    }
    if dtype == DType::Bool {
        bail!(Runtime, "{func}(): not implemented for bool tensors");
    }
    Ok(dtype)
}

/// `input + value * (t1 op t2)`, written into `out` where it can be (an in-place form's target).
fn add_scaled(
    func: &str,
    input: &Tensor,
    (t1, t2): (&Tensor, &Tensor),
    op: Binary,
    value: Scalar,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let floats = op == Binary::Div;
    let dtype = common(func, &[("input", input), ("tensor1", t1), ("tensor2", t2)], floats)?;
    if !dtype.is_floating_point() && value.is_floating_point() {
        bail!(Runtime, "{func}(): for integral input tensors, argument value must not be a floating point number");
    }
    let product = primitive::binary(t1, t2, op, dtype, None)?;
    primitive::binary(input, &product, Binary::Add(value), dtype, out)
}

/// `target += value * (t1 op t2)`, in place.
fn add_scaled_in_place(
    func: &str,
    target: &Tensor,
    (t1, t2): (&Tensor, &Tensor),
    op: Binary,
    value: Scalar,
) -> Result<Tensor> {
    update(func, target, &[t1, t2], |source| add_scaled(func, source, (t1, t2), op, value, Some(target)))
}

/// `input + weight * (end - input)`, as `start + weight * (end - start)`, written into `out`
/// where it can be (`lerp_`'s target).
pub(crate) fn lerp_impl(
    func: &str,
    input: &Tensor,
    end: &Tensor,
    weight: &Tensor,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let dtype = common(func, &[("input", input), ("end", end), ("weight", weight)], true)?;
    let step = primitive::binary(end, input, Binary::Sub(Scalar::Int(1)), dtype, None)?;
    let scaled = primitive::binary(weight, &step, Binary::Mul, dtype, None)?;
    primitive::binary(input, &scaled, Binary::Add(Scalar::Int(1)), dtype, out)
}

/// `input + value * tensor1 * tensor2`, broadcast (`torch.addcmul`).
///
/// ```
/// let x = torchfn::tensor([1.0f32, 1.0])?;
/// let (a, b) = (torchfn::tensor([2.0f32, 3.0])?, torchfn::tensor([4.0f32, 5.0])?);
/// assert_eq!(torchfn::addcmul(&x, &a, &b, 0.5)?.to_vec::<f32>()?, [5.0, 8.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn addcmul(
    input: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    #[keyword_only]
    #[default(1)]
    value: impl Into<Scalar>,
) -> Result<Tensor> {
    add_scaled("addcmul", input, (tensor1, tensor2), Binary::Mul, value.into(), None)
}

/// `input + value * tensor1 / tensor2`, broadcast (`torch.addcdiv`); floating-point tensors.
#[torch_function(module = "torchfn")]
pub fn addcdiv(
    input: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    #[keyword_only]
    #[default(1)]
    value: impl Into<Scalar>,
) -> Result<Tensor> {
    add_scaled("addcdiv", input, (tensor1, tensor2), Binary::Div, value.into(), None)
}

/// The linear interpolation `input + weight * (end - input)`, broadcast (`torch.lerp`);
/// `weight` is a tensor or a Python number ([`Tensor::scalar`]). Floating-point tensors.
///
/// ```
/// let (a, b) = (torchfn::tensor([0.0f32, 10.0])?, torchfn::tensor([10.0f32, 20.0])?);
/// assert_eq!(torchfn::lerp(&a, &b, &0.25.into())?.to_vec::<f32>()?, [2.5, 12.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn lerp(input: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    lerp_impl("lerp", input, end, weight, None)
}

impl Tensor {
    /// `self += value * tensor1 * tensor2`, in place (`Tensor.addcmul_`); returns `self`.
    #[torch_function]
    pub fn addcmul_(
        &self,
        tensor1: &Tensor,
        tensor2: &Tensor,
        #[keyword_only]
        #[default(1)]
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        add_scaled_in_place("addcmul_", self, (tensor1, tensor2), Binary::Mul, value.into())
    }

    /// `self += value * tensor1 / tensor2`, in place (`Tensor.addcdiv_`); returns `self`.
    #[torch_function]
    pub fn addcdiv_(
        &self,
        tensor1: &Tensor,
        tensor2: &Tensor,
        #[keyword_only]
        #[default(1)]
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        add_scaled_in_place("addcdiv_", self, (tensor1, tensor2), Binary::Div, value.into())
    }

    /// `self += weight * (end - self)`, in place (`Tensor.lerp_`); returns `self`.
    #[torch_function]
    pub fn lerp_(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        update("lerp_", self, &[end, weight], |source| lerp_impl("lerp_", source, end, weight, Some(self)))
    }
}

crate::samples! {
    ADDCMUL => [sample([f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[3])]).kw("value", 0.5)],
    ADDCDIV => [sample([f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[1, 3])]).kw("value", -0.5)],
    LERP => [sample([f32s(&[2, 3]), f32s(&[2, 3]), Value::Float(0.3)]), sample([f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[3])])],
    Tensor::ADDCMUL_ => [sample([f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[2, 3])])],
    Tensor::ADDCDIV_ => [sample([f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[2, 3])]).kw("value", 0.1)],
    Tensor::LERP_ => [sample([f32s(&[2, 3]), f32s(&[2, 3]), Value::Float(0.1)])],
}
