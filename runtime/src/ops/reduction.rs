//! Reductions over all elements: `sum`, `mean`.

use crate::cpu;
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Shape, Tensor};
use crate::torch_function;

fn sum_all(func: &str, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let scalar = Shape::default();
    let dense = match x.dtype {
        DType::Float32 => Dense::from_vec(vec![cpu::sum::<f32>(x)], scalar),
        DType::Float64 => Dense::from_vec(vec![cpu::sum::<f64>(x)], scalar),
        DType::Bool | DType::Int32 | DType::Int64 => Dense::from_vec(vec![cpu::sum::<i64>(x)], scalar),
    };
    Ok(Tensor::from_dense(dense))
}

fn mean_all(func: &str, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let n = x.layout.numel() as f64;
    let dense = match x.dtype {
        DType::Float32 => Dense::from_vec(vec![(f64::from(cpu::sum::<f32>(x)) / n) as f32], Shape::default()),
        DType::Float64 => Dense::from_vec(vec![cpu::sum::<f64>(x) / n], Shape::default()),
        other => bail!(
            Runtime,
            "{func}(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
            other.name()
        ),
    };
    Ok(Tensor::from_dense(dense))
}

/// The sum of all elements, as a zero-dimensional tensor (`torch.sum`). Integer and bool
/// tensors sum to int64.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// assert_eq!(torchfn::sum(&t)?.item()?, torchfn::Scalar::Int(10));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn sum(input: &Tensor) -> Result<Tensor> {
    sum_all("sum", ("input", input))
}

/// The mean of all elements, as a zero-dimensional tensor (`torch.mean`); floating-point
/// tensors only. The mean of no elements is NaN.
#[torch_function(module = "torchfn")]
pub fn mean(input: &Tensor) -> Result<Tensor> {
    mean_all("mean", ("input", input))
}

impl Tensor {
    /// The sum of all elements: the method form of [`sum`](crate::sum()).
    #[torch_function]
    pub fn sum(&self) -> Result<Tensor> {
        sum_all("sum", ("self", self))
    }

    /// The mean of all elements: the method form of [`mean`](crate::mean()).
    #[torch_function]
    pub fn mean(&self) -> Result<Tensor> {
        mean_all("mean", ("self", self))
    }
}
