//! Matrix products: `mm` and `matmul` in all of its shape cases.

use crate::cpu;
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Layout, Shape, Tensor, broadcast_shapes};
use crate::testing::{f32s, sample};
use crate::torch_function;

/// `dense` seen with one more dimension of size one at `at` (no copy).
fn unsqueezed(dense: &Dense, at: usize) -> Dense {
    let mut layout = dense.layout.clone();
    let stride = layout.strides.get(at).map_or(1, |s| s * layout.shape[at]);
    let mut shape: Vec<usize> = layout.shape.to_vec();
    shape.insert(at, 1);
    layout.strides.insert(at, stride);
    layout.shape = Shape::from(shape);
    Dense { layout, ..dense.clone() }
}

fn dims(shape: &Shape) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// The shared body of `mm`, `matmul` and `@`.
fn product(
    func: &str,
    (a_name, a): (&str, &Tensor),
    (b_name, b): (&str, &Tensor),
    matrices_only: bool,
) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    let (xs, ys) = (&x.layout.shape, &y.layout.shape);
    if matrices_only && (xs.len() != 2 || ys.len() != 2) {
        let which = if xs.len() != 2 { a_name } else { b_name };
        bail!(
            Runtime,
            "{func}(): {which} must be a matrix (2-D), but it has {} dimensions",
            if xs.len() != 2 { xs.len() } else { ys.len() }
        );
    }
    if xs.is_empty() || ys.is_empty() {
        bail!(Runtime, "{func}(): both arguments need to be at least 1D, but they are {}D and {}D", xs.len(), ys.len());
    }
    if x.dtype != y.dtype {
        bail!(Runtime, "{func}(): expected both arguments to have the same dtype, but got: {} != {}", x.dtype, y.dtype);
    }
    if xs.len() == 1 && ys.len() == 1 && xs[0] != ys[0] {
        bail!(
            Runtime,
            "{func}(): inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, \
             but got {} and {} elements respectively",
            xs[0],
            ys[0],
            xs[0],
            ys[0]
        );
    }
    // A vector on the left is a row, on the right a column; their dimension is dropped after.
    let lhs = if xs.len() == 1 { unsqueezed(x, 0) } else { x.clone() };
    let rhs = if ys.len() == 1 { unsqueezed(y, 1) } else { y.clone() };
    let (ls, rs) = (&lhs.layout.shape, &rhs.layout.shape);
    let (n, k, k2, m) = (ls[ls.len() - 2], ls[ls.len() - 1], rs[rs.len() - 2], rs[rs.len() - 1]);
    if k != k2 {
        bail!(Runtime, "{func}(): mat1 and mat2 shapes cannot be multiplied ({} and {})", dims(xs), dims(ys));
    }
    let batch = broadcast_shapes(&Shape::new(&ls[..ls.len() - 2]), &Shape::new(&rs[..rs.len() - 2]), func)?;
    let out = match x.dtype {
        DType::Float32 => cpu::matmul::<f32>(&lhs, &rhs, &batch)?,
        DType::Float64 => cpu::matmul::<f64>(&lhs, &rhs, &batch)?,
        DType::Int32 => cpu::matmul::<i32>(&lhs, &rhs, &batch)?,
        DType::Int64 => cpu::matmul::<i64>(&lhs, &rhs, &batch)?,
        DType::Bool => bail!(Runtime, "{func}(): matrix products are not implemented for bool tensors"),
    };
    let mut shape: Vec<usize> = batch.to_vec();
    if xs.len() > 1 {
        shape.push(n);
    }
    if ys.len() > 1 {
        shape.push(m);
    }
    Ok(Tensor::from_dense(Dense { layout: Layout::contiguous(Shape::from(shape)), ..out }))
}

/// The product of two matrices (`torch.mm`): `input` is `n x k`, `mat2` is `k x m`.
#[torch_function(module = "torchfn")]
pub fn mm(input: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    product("mm", ("input", input), ("mat2", mat2), true)
}

/// The matrix product of two tensors (`torch.matmul`): the dot product of two vectors, the
/// matrix-vector and vector-matrix products, the matrix product, and batched products whose
/// leading dimensions broadcast.
///
/// ```
/// let a = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
/// let v = torchfn::tensor([1.0f32, 1.0])?;
/// assert_eq!(torchfn::matmul(&a, &v)?.to_vec::<f32>()?, [3.0, 7.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn matmul(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    product("matmul", ("input", input), ("other", other), false)
}

impl Tensor {
    /// The matrix product: the method form of [`mm`](crate::mm()).
    #[torch_function]
    pub fn mm(&self, mat2: &Tensor) -> Result<Tensor> {
        product("mm", ("self", self), ("mat2", mat2), true)
    }

    /// The matrix product: the method form of [`matmul`](crate::matmul()).
    #[torch_function]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        product("matmul", ("self", self), ("other", other), false)
    }

    /// The `@` operator (`self @ other`), which Rust spells as this method.
    #[torch_function]
    pub fn __matmul__(&self, other: &Tensor) -> Result<Tensor> {
        product("__matmul__", ("self", self), ("other", other), false)
    }
}

crate::samples! {
    MM => [sample([f32s(&[2, 3]), f32s(&[3, 4])])],
    MATMUL => [sample([f32s(&[3]), f32s(&[3])]), sample([f32s(&[2, 3]), f32s(&[3])]), sample([f32s(&[2, 2, 3]), f32s(&[3, 2])])],
    Tensor::MM => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
    Tensor::MATMUL => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
    Tensor::__MATMUL__ => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
}
