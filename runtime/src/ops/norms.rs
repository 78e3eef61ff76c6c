//! Norms and distances: `torch.linalg.vector_norm`, `matrix_norm` and `norm`, `torch.norm`
//! and `torch.cdist`, composed of operations, with PyTorch's zero gradient where a norm is 0.

use crate::error::{Result, bail};
use crate::ops::NormOrder;
use crate::tensor::{DType, Dims, ReduceDims, Tensor, normalize_dim};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// `norm` where `total` (a sum of powers) is 0, else `f(total)`: a root whose gradient at 0
/// would be infinite times 0, so PyTorch's masked 0 there instead of NaN.
fn root_or_zero(total: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let zero = total.eq(&Tensor::scalar(0.0))?;
    let safe = crate::r#where(&zero, &Tensor::scalar(1.0), total)?;
    crate::r#where(&zero, &Tensor::scalar(0.0), &f(&safe)?)
}

/// The `ord`-norm of `x` over `dims` (every dimension for `None`): the body of
/// [`vector_norm`], its arguments checked.
fn vector(func: &str, x: &Tensor, ord: f64, dims: &ReduceDims, keepdim: bool) -> Result<Tensor> {
    let size = x.abs()?;
    let every = || Vec::<i64>::new();
    let dims = dims.as_dims().map_or_else(every, |d| d.as_slice().to_vec());
    let sum = |t: &Tensor| {
        if dims.is_empty() { crate::sum_dim(t, None::<Dims>, keepdim) } else { t.sum_dim(dims.clone(), keepdim) }
    };
    if ord == f64::INFINITY {
        return crate::amax(&size, dims, keepdim);
    }
    if ord == f64::NEG_INFINITY {
        return crate::amin(&size, dims, keepdim);
    }
    if ord == 0.0 {
        return sum(&size.ne(&Tensor::scalar(0.0))?.to(x.dtype()?, false, false)?);
    }
    if ord == 1.0 {
        return sum(&size);
    }
    if ord == 2.0 {
        return root_or_zero(&sum(&x.mul(x)?)?, |t| t.sqrt());
    }
    if !ord.is_finite() {
        bail!(Runtime, "{func}(): ord must be a number or ±inf, got {ord}");
    }
    let powers = size.pow(&Tensor::scalar(ord))?;
    root_or_zero(&sum(&powers)?, |t| t.pow(&Tensor::scalar(1.0 / ord)))
}

/// `x` in `dtype` when given, after checking that the norm takes it: floating-point only.
fn floating_input(func: &str, x: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    let have = x.dtype()?;
    if !have.is_floating_point() {
        bail!(
            NotImplemented,
            "{func}(): Expected a floating point or complex tensor as input. Got {}",
            have.scalar_type_name()
        );
    }
    match dtype {
        Some(d) if d != have => x.to(d, false, false),
        _ => Ok(x.clone()),
    }
}

/// The vector `ord`-norm (`torch.linalg.vector_norm`): `sum(|x|^ord)^(1/ord)` over `dim` (every
/// dimension when `None`), with `ord` = `inf` the largest `|x|`, `-inf` the smallest, 0 the
/// count of non-zero elements. Floating-point input, computed in `dtype` when given. The
/// gradient where the norm is 0 is 0, as PyTorch's.
///
/// ```
/// let x = torchfn::tensor([[3.0f32, 4.0], [0.0, -2.0]])?;
/// let n = torchfn::linalg::vector_norm(&x, 2.0, None::<torchfn::Dims>, false, None)?;
/// assert!((n.item()?.to_f64() - 29f64.sqrt()).abs() < 1e-6);
/// let rows = torchfn::linalg::vector_norm(&x, f64::INFINITY, 1, false, None)?;
/// assert_eq!(rows.to_vec::<f32>()?, [4.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn vector_norm(
    x: &Tensor,
    #[default(2.0)] ord: f64,
    #[default(None)] dim: impl Into<ReduceDims>,
    #[default(false)] keepdim: bool,
    #[default(None)] dtype: Option<DType>,
) -> Result<Tensor> {
    let x = floating_input("linalg.vector_norm", x, dtype)?;
    vector("linalg.vector_norm", &x, ord, &dim.into(), keepdim)
}

/// The matrix norm over the two dimensions `dim` (`torch.linalg.matrix_norm`): `"fro"` (the
/// square root of the sum of squares), or `ord` 1 / -1 (the largest / smallest column sum of
/// `|x|`), `inf` / `-inf` (the largest / smallest row sum), 2 / -2 (the largest / smallest
/// singular value) and `"nuc"` (their sum).
///
/// ```
/// let a = torchfn::tensor([[1.0f64, -2.0], [3.0, 4.0]])?;
/// let fro = torchfn::linalg::matrix_norm(&a, "fro", vec![-2, -1], false, None)?;
/// assert!((fro.item()?.to_f64() - 30f64.sqrt()).abs() < 1e-12);
/// assert_eq!(torchfn::linalg::matrix_norm(&a, f64::INFINITY, vec![-2, -1], false, None)?.item()?.to_f64(), 7.0);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn matrix_norm(
    a: &Tensor,
    #[default("fro")] ord: impl Into<NormOrder>,
    #[default(vec![-2, -1])] dim: Vec<i64>,
    #[default(false)] keepdim: bool,
    #[default(None)] dtype: Option<DType>,
) -> Result<Tensor> {
    const FUNC: &str = "linalg.matrix_norm";
    let a = floating_input(FUNC, a, dtype)?;
    let ndim = a.shape()?.len();
    if ndim < 2 {
        bail!(Runtime, "{FUNC}(): The input tensor A must have at least 2 dimensions.");
    }
    let [row, col] = match dim[..] {
        [r, c] => [normalize_dim(r, ndim, FUNC)?, normalize_dim(c, ndim, FUNC)?],
        _ => bail!(Runtime, "{FUNC}(): dim must be a 2-tuple. Got {dim:?}"),
    };
    if row == col {
        bail!(Runtime, "{FUNC}(): dims must be different. Got ({row}, {col})");
    }
    let (row, col) = (row as i64, col as i64);
    // Sums of |a| along one dimension, then the extreme over the other.
    let lines = |along: i64, across: i64, largest: bool| -> Result<Tensor> {
        let sums = a.abs()?.sum_dim(along, true)?;
        let extreme = if largest { crate::amax(&sums, across, true)? } else { crate::amin(&sums, across, true)? };
        if keepdim { Ok(extreme) } else { extreme.squeeze_dim(vec![row, col]) }
    };
    match ord.into() {
        NormOrder::Default => vector(FUNC, &a, 2.0, &ReduceDims::from(vec![row, col]), keepdim),
        NormOrder::Name(name) if name == "fro" => vector(FUNC, &a, 2.0, &ReduceDims::from(vec![row, col]), keepdim),
        NormOrder::Number(1.0) => lines(row, col, true),
        NormOrder::Number(-1.0) => lines(row, col, false),
        NormOrder::Number(p) if p == f64::INFINITY => lines(col, row, true),
        NormOrder::Number(p) if p == f64::NEG_INFINITY => lines(col, row, false),
        NormOrder::Number(2.0) => singular(&a, row, col, keepdim, |s| crate::amax(s, -1, false)),
        NormOrder::Number(-2.0) => singular(&a, row, col, keepdim, |s| crate::amin(s, -1, false)),
        NormOrder::Name(name) if name == "nuc" => singular(&a, row, col, keepdim, |s| s.sum_dim(-1, false)),
        other => bail!(Runtime, "{FUNC}(): Order {other:?} not supported."),
    }
}

/// `reduce` of the singular values of `a`'s matrices over the dimensions `row` and `col` (the
/// spectral norms and the nuclear norm), keeping both as size one with `keepdim`.
fn singular(
    a: &Tensor,
    row: i64,
    col: i64,
    keepdim: bool,
    reduce: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let ndim = a.shape()?.len() as i64;
    let order: Vec<i64> = (0..ndim).filter(|d| *d != row && *d != col).chain([row, col]).collect();
    let norms = reduce(&crate::ops::linalg::svdvals(&a.permute(order)?)?)?;
    if !keepdim {
        return Ok(norms);
    }
    let (first, second) = (row.min(col), row.max(col));
    norms.unsqueeze(first)?.unsqueeze(second)
}

/// The norm `torch.linalg.norm` computes: the vector 2-norm of the flattened input for no
/// `ord` and `dim` (or the vector `ord`-norm over one `dim`), the Frobenius or another
/// [`matrix_norm`] over two dimensions (or a 2-D input with an `ord`). `ord` is a number or
/// `"fro"` / `"nuc"`; none given is the 2-norm or the Frobenius norm.
///
/// ```
/// use torchfn::{Dims, NormOrder};
/// let a = torchfn::tensor([[1.0f64, -2.0], [3.0, 4.0]])?;
/// let all = torchfn::linalg::norm(&a, NormOrder::Default, None::<Dims>, false, None)?;
/// assert!((all.item()?.to_f64() - 30f64.sqrt()).abs() < 1e-12);
/// assert_eq!(torchfn::linalg::norm(&a, 1.0, 1, false, None)?.to_vec::<f64>()?, [3.0, 7.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn norm(
    a: &Tensor,
    #[default(NormOrder::Default)] ord: impl Into<NormOrder>,
    #[default(None)] dim: impl Into<ReduceDims>,
    #[default(false)] keepdim: bool,
    #[default(None)] dtype: Option<DType>,
) -> Result<Tensor> {
    const FUNC: &str = "linalg.norm";
    let (ord, dim) = (ord.into(), dim.into());
    let dims = dim.as_dims().map(|d| d.as_slice().to_vec());
    let two = match (&dims, &ord) {
        (Some(d), _) => d.len() == 2,
        (None, NormOrder::Default) => false,
        (None, _) => a.shape()?.len() == 2,
    };
    if two {
        return matrix_norm(a, ord, dims.unwrap_or_else(|| vec![-2, -1]), keepdim, dtype);
    }
    let ord = match ord {
        NormOrder::Default => 2.0,
        NormOrder::Number(p) => p,
        NormOrder::Name(name) => {
            bail!(Runtime, "{FUNC}(): ord={name} is a matrix norm; it needs a 2-D input or two dims")
        }
    };
    let a = floating_input(FUNC, a, dtype)?;
    vector(FUNC, &a, ord, &dim, keepdim)
}

/// The `p`-norm of the pairwise differences of the rows of `x1` (`[B, P, M]`) and `x2`
/// (`[B, R, M]`, the batch dimensions broadcasting) (`torch.cdist`): `[B, P, R]`. With the
/// norm's zero gradient where two rows coincide. `compute_mode` is accepted for PyTorch's
/// signature; the distances are always computed from the differences.
///
/// ```
/// let a = torchfn::tensor([[0.0f32, 0.0], [1.0, 1.0]])?;
/// let b = torchfn::tensor([[3.0f32, 4.0]])?;
/// let d = torchfn::cdist(&a, &b, 2.0, "use_mm_for_euclid_dist_if_necessary")?;
/// assert_eq!(d.shape()?, [2, 1]);
/// assert!((d.to_vec::<f32>()?[0] - 5.0).abs() < 1e-6);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn cdist(
    x1: &Tensor,
    x2: &Tensor,
    #[default(2.0)] p: f64,
    #[default("use_mm_for_euclid_dist_if_necessary")] compute_mode: &str,
) -> Result<Tensor> {
    const FUNC: &str = "cdist";
    let _ = compute_mode;
    let (s1, s2) = (x1.shape()?, x2.shape()?);
    if s1.len() < 2 || s2.len() < 2 {
        bail!(Runtime, "{FUNC}(): cdist only supports at least 2D tensors, X1 got: {}D", s1.len().min(s2.len()));
    }
    if s1[s1.len() - 1] != s2[s2.len() - 1] {
        bail!(
            Runtime,
            "{FUNC}(): X1 and X2 must have the same number of columns. X1: {} X2: {}",
            s1[s1.len() - 1],
            s2[s2.len() - 1]
        );
    }
    if p < 0.0 {
        bail!(Runtime, "{FUNC}(): cdist only supports non-negative p values");
    }
    let x1 = floating_input(FUNC, x1, None)?;
    let differences = x1.unsqueeze(-2)?.sub(&x2.unsqueeze(-3)?, 1)?; // [B, P, R, M]
    vector(FUNC, &differences, p, &ReduceDims::from(-1), false)
}

crate::samples! {
    VECTOR_NORM => [
        sample([f32s(&[2, 3])]),
        sample([f32s(&[2, 3]), Value::Float(1.0), Value::Int(1)]).kw("keepdim", true),
        sample([f32s(&[4]), Value::Float(f64::INFINITY)]),
        sample([f32s(&[2, 2]), Value::Float(3.0)]).kw("dtype", DType::Float64),
    ],
    MATRIX_NORM => [
        sample([f32s(&[3, 3])]),
        sample([f32s(&[2, 2, 3]), Value::Float(f64::INFINITY)]),
        sample([f32s(&[2, 3]), Value::Float(-1.0)]).kw("keepdim", true),
        sample([f32s(&[3, 3]), Value::Float(2.0)]),
        sample([f32s(&[2, 2, 3]), Value::from("nuc")]).kw("keepdim", true),
        sample([f32s(&[3, 2]), Value::Float(-2.0)]),
    ],
    NORM => [
        sample([f32s(&[2, 3])]),
        sample([f32s(&[2, 3]), Value::Float(1.0), Value::Int(0)]),
        sample([f32s(&[3, 3]), Value::from("fro")]),
    ],
    CDIST => [
        sample([f32s(&[3, 2]), f32s(&[4, 2])]),
        sample([f32s(&[2, 3, 2]), f32s(&[2, 2, 2]), Value::Float(1.0)]),
    ],
}
