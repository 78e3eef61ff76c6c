//! Adaptive average pooling (`adaptive_avg_pool2d`): each output cell averages the input rows
//! `floor(i * H / out_h) .. ceil((i + 1) * H / out_h)` and likewise for columns, as PyTorch's.
//! Computed as two matrix products with averaging matrices, `P @ x @ Q^T`, so it runs on every
//! device and differentiates through matmul; the global average (a 1 x 1 output) is a mean.

use crate::backend::{Buffer, Device, Reduce};
use crate::error::{Result, bail};
use crate::ops::IntList;
use crate::primitive;
use crate::tensor::{DType, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The `[out, size]` matrix whose row `i` averages positions `floor(i * size / out)` up to
/// `ceil((i + 1) * size / out)`, as `dtype` on `device`.
fn averaging(out: usize, size: usize, dtype: DType, device: Device) -> Result<Tensor> {
    let Some(n) = out.checked_mul(size).filter(|&n| n <= isize::MAX as usize / 8) else {
        bail!(Runtime, "adaptive_avg_pool2d(): a {out} x {size} averaging matrix is larger than memory can hold");
    };
    let mut weights = crate::backend::host::alloc::<f64>("adaptive_avg_pool2d", n)?;
    weights.resize(n, 0.0);
    let (o, z) = (out as u128, size as u128);
    for i in 0..out {
        let start = (i as u128 * z / o) as usize;
        let end = ((i as u128 + 1) * z).div_ceil(o) as usize;
        for w in &mut weights[i * size + start..i * size + end] {
            *w = 1.0 / (end - start) as f64;
        }
    }
    let data = match dtype {
        DType::Float64 => Buffer::from_vec(weights),
        _ => Buffer::from_vec(weights.into_iter().map(|w| w as f32).collect::<Vec<f32>>()),
    };
    primitive::upload(device, data, Shape::from([out, size]))
}

/// Average pooling of `input` (`[N, C, H, W]` or `[C, H, W]`) to an output plane of
/// `output_size` (one positive int for a square, or a pair)
/// (`torch.nn.functional.adaptive_avg_pool2d`). Floating-point tensors.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]])?;
/// assert_eq!(F::adaptive_avg_pool2d(&x, 1)?.to_vec::<f32>()?, [3.5]);
/// assert_eq!(F::adaptive_avg_pool2d(&x, [1, 2])?.to_vec::<f32>()?, [3.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn adaptive_avg_pool2d(input: &Tensor, output_size: impl Into<IntList>) -> Result<Tensor> {
    const FUNC: &str = "adaptive_avg_pool2d";
    let x = input.data(FUNC, "input")?;
    let shape = &x.layout.shape;
    if !matches!(shape.len(), 3 | 4) || shape[shape.len() - 2..].contains(&0) {
        bail!(
            Runtime,
            "{FUNC}(): expected a 3-D or 4-D input with non-zero height and width, but got {:?}",
            &shape[..]
        );
    }
    if !x.dtype.is_floating_point() {
        bail!(NotImplemented, "{FUNC}(): not implemented for {} inputs; expected a floating point tensor", x.dtype);
    }
    let (h, w) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let sizes = output_size.into();
    let (oh, ow) = match *sizes.as_slice() {
        [n] => (n, n),
        [a, b] => (a, b),
        _ => bail!(Runtime, "{FUNC}(): output_size must be one int or a pair, but got {:?}", sizes.as_slice()),
    };
    let size = |v: i64| -> Result<usize> {
        match usize::try_from(v) {
            Ok(v) if v > 0 => Ok(v),
            _ => bail!(Runtime, "{FUNC}(): output_size must be positive, but got {v}"),
        }
    };
    let (oh, ow) = (size(oh)?, size(ow)?);
    if (oh, ow) == (1, 1) {
        // The global average (ResNet's pooling): a mean, as PyTorch computes it (no products).
        let n = shape.len();
        let mean = primitive::reduce(input, &[n - 2, n - 1], Reduce::Mean, x.dtype)?;
        let kept: Shape = shape[..n - 2].iter().copied().chain([1, 1]).collect();
        return primitive::reshape(&mean, &kept);
    }
    let rows = averaging(oh, h, x.dtype, x.device())?;
    let columns = averaging(ow, w, x.dtype, x.device())?;
    let pooled_rows = primitive::matmul(&rows, input, x.dtype)?; // [.., oh, w]
    let columns_t = super::super::products::transposed(&columns)?; // [w, ow]
    primitive::matmul(&pooled_rows, &columns_t, x.dtype)
}

crate::samples! {
    ADAPTIVE_AVG_POOL2D => [
        sample([f32s(&[2, 3, 4, 4]), Value::Int(1)]),
        sample([f32s(&[1, 2, 5, 5]), Value::List(vec![2.into(), 3.into()])]),
        sample([f32s(&[2, 3, 3]), Value::List(vec![3.into(), 2.into()])]),
    ],
}
