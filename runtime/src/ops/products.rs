//! Matrix and vector products: `mm`, `addmm`, `matmul` in all of its shape cases, `bmm`,
//! `baddbmm`, `mv`, `dot` and `outer`.

use crate::backend::Binary;
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::inplace::write_out;
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor, broadcast_shapes, result_type};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;

fn dims(shape: &Shape) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// `x` with its last two dimensions swapped (a view); `x` has at least two.
pub(crate) fn transposed(x: &Tensor) -> Result<Tensor> {
    primitive::view(x, |l| {
        let mut layout = l.clone();
        let n = layout.ndim();
        let mut shape: Vec<usize> = layout.shape.to_vec();
        shape.swap(n - 2, n - 1);
        layout.strides.swap(n - 2, n - 1);
        layout.shape = Shape::from(shape);
        Ok(layout)
    })
}

/// The shared body of `mm`, `matmul`, `@` and `linear`.
pub(crate) fn product(
    func: &str,
    (a_name, a): (&str, &Tensor),
    (b_name, b): (&str, &Tensor),
    matrices_only: bool,
) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    device_of(func, &[(a_name, x), (b_name, y)])?;
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
    let lhs = if xs.len() == 1 { primitive::reshape(a, &Shape::from([1, xs[0]]))? } else { a.clone() };
    let rhs = if ys.len() == 1 { primitive::reshape(b, &Shape::from([ys[0], 1]))? } else { b.clone() };
    let (ls, rs) = (&lhs.shape()?, &rhs.shape()?);
    let (n, k, k2, m) = (ls[ls.len() - 2], ls[ls.len() - 1], rs[rs.len() - 2], rs[rs.len() - 1]);
    if k != k2 {
        bail!(Runtime, "{func}(): mat1 and mat2 shapes cannot be multiplied ({} and {})", dims(xs), dims(ys));
    }
    let batch = broadcast_shapes(&Shape::new(&ls[..ls.len() - 2]), &Shape::new(&rs[..rs.len() - 2]), func)?;
    if x.dtype == DType::Bool {
        bail!(Runtime, "{func}(): matrix products are not implemented for bool tensors");
    }
    let out = primitive::matmul(&lhs, &rhs, x.dtype)?;
    let mut shape: Vec<usize> = batch.to_vec();
    if xs.len() > 1 {
        shape.push(n);
    }
    if ys.len() > 1 {
        shape.push(m);
    }
    primitive::reshape(&out, &Shape::from(shape))
}

/// `bmm`: both operands three-dimensional, with the same batch size.
fn batched(func: &str, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    let (xs, ys) = (&x.layout.shape, &y.layout.shape);
    if xs.len() != 3 {
        bail!(Runtime, "{func}(): batch1 ({a_name}) must be a 3D tensor, but it has {} dimensions", xs.len());
    }
    if ys.len() != 3 {
        bail!(Runtime, "{func}(): batch2 ({b_name}) must be a 3D tensor, but it has {} dimensions", ys.len());
    }
    if xs[0] != ys[0] || xs[2] != ys[1] {
        bail!(
            Runtime,
            "{func}(): expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
            xs[0],
            xs[2],
            ys[0],
            ys[1]
        );
    }
    product(func, (a_name, a), (b_name, b), false)
}

/// `mv`: a matrix times a vector.
fn matrix_vector(func: &str, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    let (xs, ys) = (&x.layout.shape, &y.layout.shape);
    if xs.len() != 2 || ys.len() != 1 {
        bail!(
            Runtime,
            "{func}(): vector + matrix @ vector expected, got a {}-D {a_name} and a {}-D {b_name} \
             ({a_name} must be 2-D and {b_name} 1-D)",
            xs.len(),
            ys.len()
        );
    }
    if xs[1] != ys[0] {
        bail!(Runtime, "{func}(): size mismatch, got {a_name} ({}x{}) and {b_name} ({})", xs[0], xs[1], ys[0]);
    }
    product(func, (a_name, a), (b_name, b), false)
}

/// `dot`: the inner product of two vectors of the same length and dtype.
fn inner(func: &str, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    let (xs, ys) = (&x.layout.shape, &y.layout.shape);
    if xs.len() != 1 || ys.len() != 1 {
        bail!(Runtime, "{func}(): 1D tensors expected, but got {}D and {}D tensors", xs.len(), ys.len());
    }
    if x.dtype != y.dtype {
        bail!(Runtime, "{func}(): expected both vectors to have same dtype, but found {} and {}", x.dtype, y.dtype);
    }
    product(func, (a_name, a), (b_name, b), false)
}

/// `outer`: `a[i] * b[j]` for every pair, with PyTorch's type promotion (logical and for bools).
fn outer_product(func: &str, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    for (name, d) in [(a_name, x), (b_name, y)] {
        if d.layout.ndim() != 1 {
            bail!(Runtime, "{func}(): expected 1-D argument {name}, but got {}-D", d.layout.ndim());
        }
    }
    device_of(func, &[(a_name, x), (b_name, y)])?;
    let column = primitive::reshape(a, &Shape::from([x.layout.shape[0], 1]))?;
    let common = result_type([x.participant(), y.participant()]);
    primitive::binary(&column, b, Binary::Mul, common, None)
}

/// The product of two matrices (`torch.mm`): `input` is `n x k`, `mat2` is `k x m`.
#[torch_function(module = "torchfn")]
pub fn mm(input: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    product("mm", ("input", input), ("mat2", mat2), true)
}

/// `input @ mat2` written into `out` (`torch.mm(input, mat2, *, out)`); returns `out`.
#[torch_function(overload_of = MM)]
pub fn mm_out(input: &Tensor, mat2: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("mm", out, &[input, mat2], || product("mm", ("input", input), ("mat2", mat2), true))
}

/// `beta * input + alpha * (mat1 @ mat2)` (`torch.addmm`): `mat1` is `n x k`, `mat2` `k x m`,
/// `input` broadcasts to `n x m` (a bias row, say). With `beta` 0, `input` is not read (its
/// NaNs do not propagate), as in PyTorch.
///
/// ```
/// let bias = torchfn::tensor([1.0f32, 2.0])?;
/// let a = torchfn::tensor([[1.0f32, 0.0], [0.0, 1.0]])?;
/// let b = torchfn::tensor([[3.0f32, 4.0], [5.0, 6.0]])?;
/// assert_eq!(torchfn::addmm(&bias, &a, &b, 1, 2)?.to_vec::<f32>()?, [7.0, 10.0, 11.0, 14.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn addmm(
    input: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    #[keyword_only]
    #[default(1)]
    beta: impl Into<Scalar>,
    #[default(1)] alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    input.data("addmm", "input")?;
    let product = product("addmm", ("mat1", mat1), ("mat2", mat2), true)?;
    add_scaled_product("addmm", input, ("mat1", product), beta.into(), alpha.into(), false)
}

/// `beta * input + alpha * product` (the product of `of` and another operand): the shared end
/// of `addmm` and `baddbmm`. `input` must
/// broadcast to the product's shape (and, with `same_dtype`, have its dtype, as `baddbmm`
/// requires); with `beta` 0 it is not read.
fn add_scaled_product(
    func: &str,
    input: &Tensor,
    (of, product): (&str, Tensor),
    beta: Scalar,
    alpha: Scalar,
    same_dtype: bool,
) -> Result<Tensor> {
    let x = input.data(func, "input")?;
    let p = product.data(func, of)?;
    device_of(func, &[("input", x), (of, p)])?;
    if same_dtype && x.dtype != p.dtype {
        bail!(Runtime, "{func}(): Input dtypes must be the same, got: input {}, {of}: {}", x.dtype, p.dtype);
    }
    if broadcast_shapes(&x.layout.shape, &p.layout.shape, func)? != p.layout.shape {
        bail!(
            Runtime,
            "{func}(): the input of shape {:?} does not broadcast to the product's shape {:?}",
            x.layout.shape.as_ref(),
            p.layout.shape.as_ref()
        );
    }
    let dtype = result_type([x.participant(), p.participant()]);
    let scaled = if alpha.to_f64() == 1.0 {
        product
    } else {
        primitive::binary(&product, &Tensor::scalar(alpha), Binary::Mul, dtype, None)?
    };
    if beta.to_f64() == 0.0 {
        return Ok(scaled);
    }
    primitive::binary(&scaled, input, Binary::Add(beta), dtype, None)
}

/// `beta * input + alpha * (batch1 @ batch2)`, batch by batch (`torch.baddbmm`): `batch1` is
/// `b x n x k`, `batch2` `b x k x m` (as [`bmm`]), and `input` broadcasts to `b x n x m`. The
/// three must have one dtype. With `beta` 0, `input` is not read (its NaNs do not propagate),
/// as in PyTorch. Attention scores with an additive bias are one use.
///
/// ```
/// let bias = torchfn::tensor([10.0f32, 20.0])?; // broadcast to 1 x 1 x 2
/// let a = torchfn::tensor([[[1.0f32, 2.0]]])?; // 1 x 1 x 2
/// let b = torchfn::tensor([[[1.0f32, 0.0], [0.0, 1.0]]])?; // 1 x 2 x 2
/// assert_eq!(torchfn::baddbmm(&bias, &a, &b, 0.5, 2)?.to_vec::<f32>()?, [7.0, 14.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn baddbmm(
    input: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    #[keyword_only]
    #[default(1)]
    beta: impl Into<Scalar>,
    #[default(1)] alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    baddbmm_impl("baddbmm", ("input", input), (batch1, batch2), beta.into(), alpha.into())
}

fn baddbmm_impl(
    func: &str,
    (name, input): (&str, &Tensor),
    (batch1, batch2): (&Tensor, &Tensor),
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    input.data(func, name)?;
    let product = batched(func, ("batch1", batch1), ("batch2", batch2))?;
    add_scaled_product(func, input, ("batch1", product), beta, alpha, true)
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

/// The matrix product written into `out` (`torch.matmul(input, other, *, out)`); returns `out`.
#[torch_function(overload_of = MATMUL)]
pub fn matmul_out(input: &Tensor, other: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("matmul", out, &[input, other], || product("matmul", ("input", input), ("other", other), false))
}

/// Batched matrix products (`torch.bmm`): `input` is `b x n x k`, `mat2` is `b x k x m`, the
/// result `b x n x m`. Both must be three-dimensional with the same batch size and dtype; no
/// broadcasting (use [`matmul`] for that).
///
/// ```
/// let a = torchfn::tensor([[[1.0f32, 2.0]], [[3.0, 4.0]]])?; // 2 x 1 x 2
/// let b = torchfn::tensor([[[1.0f32], [1.0]], [[2.0], [0.5]]])?; // 2 x 2 x 1
/// assert_eq!(torchfn::bmm(&a, &b)?.to_vec::<f32>()?, [3.0, 8.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn bmm(input: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    batched("bmm", ("input", input), ("mat2", mat2))
}

/// The batched products written into `out` (`torch.bmm(input, mat2, *, out)`); returns `out`.
#[torch_function(overload_of = BMM)]
pub fn bmm_out(input: &Tensor, mat2: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("bmm", out, &[input, mat2], || batched("bmm", ("input", input), ("mat2", mat2)))
}

/// The product of a matrix and a vector (`torch.mv`): `input` is `n x m`, `vec` has `m`
/// elements, the result `n`. Both must have the same dtype.
///
/// ```
/// let a = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// let v = torchfn::tensor([1i64, -1])?;
/// assert_eq!(torchfn::mv(&a, &v)?.to_vec::<i64>()?, [-1, -1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn mv(input: &Tensor, vec: &Tensor) -> Result<Tensor> {
    matrix_vector("mv", ("input", input), ("vec", vec))
}

/// The dot product of two vectors of the same length and dtype, as a zero-dimensional tensor
/// (`torch.dot`; PyTorch names the second argument `tensor`). Unlike [`matmul`], it accepts
/// only one-dimensional tensors and never promotes.
///
/// ```
/// let a = torchfn::tensor([1.0f32, 2.0, 3.0])?;
/// let b = torchfn::tensor([4.0f32, -5.0, 6.0])?;
/// assert_eq!(torchfn::dot(&a, &b)?.item()?, torchfn::Scalar::Float(12.0));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn dot(input: &Tensor, tensor: &Tensor) -> Result<Tensor> {
    inner("dot", ("input", input), ("tensor", tensor))
}

/// The outer product of two vectors (`torch.outer`): `out[i][j] = input[i] * vec2[j]`, with
/// PyTorch's type promotion (an int64 vector and a float32 vector give float32).
///
/// ```
/// let a = torchfn::tensor([1i64, 2])?;
/// let b = torchfn::tensor([1i64, 10, 100])?;
/// assert_eq!(torchfn::outer(&a, &b)?.to_vec::<i64>()?, [1, 10, 100, 2, 20, 200]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn outer(input: &Tensor, vec2: &Tensor) -> Result<Tensor> {
    outer_product("outer", ("input", input), ("vec2", vec2))
}

impl Tensor {
    /// `beta * self + alpha * (batch1 @ batch2)`: the method form of
    /// [`baddbmm`](crate::baddbmm()).
    #[torch_function]
    pub fn baddbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        #[keyword_only]
        #[default(1)]
        beta: impl Into<Scalar>,
        #[default(1)] alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        baddbmm_impl("baddbmm", ("self", self), (batch1, batch2), beta.into(), alpha.into())
    }

    /// Batched matrix products: the method form of [`bmm`](crate::bmm()).
    #[torch_function]
    pub fn bmm(&self, mat2: &Tensor) -> Result<Tensor> {
        batched("bmm", ("self", self), ("mat2", mat2))
    }

    /// The matrix-vector product: the method form of [`mv`](crate::mv()).
    #[torch_function]
    pub fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        matrix_vector("mv", ("self", self), ("vec", vec))
    }

    /// The dot product: the method form of [`dot`](crate::dot()).
    #[torch_function]
    pub fn dot(&self, tensor: &Tensor) -> Result<Tensor> {
        inner("dot", ("self", self), ("tensor", tensor))
    }

    /// The outer product: the method form of [`outer`](crate::outer()).
    #[torch_function]
    pub fn outer(&self, vec2: &Tensor) -> Result<Tensor> {
        outer_product("outer", ("self", self), ("vec2", vec2))
    }

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

    /// The reflected `@` operator (`other @ self`).
    #[torch_function]
    pub fn __rmatmul__(&self, other: &Tensor) -> Result<Tensor> {
        product("__rmatmul__", ("other", other), ("self", self), false)
    }
}

crate::samples! {
    MM => [sample([f32s(&[2, 3]), f32s(&[3, 4])])],
    ADDMM => [sample([f32s(&[4]), f32s(&[2, 3]), f32s(&[3, 4])]), sample([f32s(&[2, 4]), f32s(&[2, 3]), f32s(&[3, 4])]).kw("beta", 0.5).kw("alpha", 2.0)],
    BADDBMM => [sample([f32s(&[2, 2, 4]), f32s(&[2, 2, 3]), f32s(&[2, 3, 4])]),
        sample([f32s(&[4]), f32s(&[2, 2, 3]), f32s(&[2, 3, 4])]).kw("beta", 0.5).kw("alpha", -2.0),
        sample([f32s(&[2, 1, 1]), f32s(&[2, 2, 3]), f32s(&[2, 3, 1])]).kw("beta", 0)],
    Tensor::BADDBMM => [sample([f32s(&[1, 2, 1]), f32s(&[3, 2, 3]), f32s(&[3, 3, 2])]).kw("alpha", 0.5)],
    MATMUL => [sample([f32s(&[3]), f32s(&[3])]), sample([f32s(&[2, 3]), f32s(&[3])]), sample([f32s(&[2, 2, 3]), f32s(&[3, 2])])],
    BMM => [sample([f32s(&[2, 2, 3]), f32s(&[2, 3, 4])]), sample([i64s(&[3, 1, 2]), i64s(&[3, 2, 2])])],
    MV => [sample([f32s(&[2, 3]), f32s(&[3])])],
    DOT => [sample([f32s(&[4]), f32s(&[4])]), sample([i64s(&[3]), i64s(&[3])])],
    OUTER => [sample([f32s(&[3]), f32s(&[2])]), sample([i64s(&[2]), f32s(&[3])]), sample([bools(&[2]), bools(&[2])])],
    Tensor::BMM => [sample([f32s(&[2, 2, 3]), f32s(&[2, 3, 1])])],
    Tensor::MV => [sample([f32s(&[2, 3]), f32s(&[3])])],
    Tensor::DOT => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::OUTER => [sample([f32s(&[3]), f32s(&[2])])],
    Tensor::MM => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
    Tensor::MATMUL => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
    Tensor::__MATMUL__ => [sample([f32s(&[2, 3]), f32s(&[3, 2])])],
    Tensor::__RMATMUL__ => [sample([f32s(&[2, 3]), f32s(&[4, 2])])],
}
