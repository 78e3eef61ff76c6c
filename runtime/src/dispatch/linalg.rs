//! The matrix decompositions (`torch.linalg`'s kernels), computed on the host with the `faer`
//! crate for every device: a GPU tensor is read back, decomposed, and its results uploaded (as
//! PyTorch does for the decompositions it has no GPU kernel for). Inputs are float32 or float64
//! matrices `[..., m, n]`, each matrix of the batch decomposed on its own in the input's dtype
//! (as LAPACK's `s` and `d` routines). On the meta device: results of the right shapes.

use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, MatRef, Side};

use super::calls::{dense, intercept};
use super::{Output, aten};
use crate::backend::{Array, Buffer, Device, host};
use crate::error::{Error, Result};
use crate::tensor::{DType, Dense, Element, Scalar, Shape, Tensor};
use crate::value::{Kwargs, Value};

/// Which decomposition a `Kernel::Linalg` operator computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decomposition {
    /// `linalg_det`: the determinant (from a partially pivoted LU).
    Det,
    /// `linalg_slogdet`: the sign and the log of the absolute value of the determinant.
    Slogdet,
    /// `linalg_inv`: the inverse (LU); a singular matrix is an error.
    Inv,
    /// `linalg_solve`: `X` with `A X = B` (LU); a singular `A` is an error.
    Solve,
    /// `linalg_cholesky`: `L` lower triangular with `A = L Lᵀ`, reading `A`'s lower triangle (with
    /// `upper`, `U` with `A = Uᵀ U` from the upper one); not positive-definite is an error.
    Cholesky,
    /// `linalg_qr`: `Q` with orthonormal columns and `R` upper triangular, `A = Q R`
    /// (Householder, as LAPACK: the same signs).
    Qr,
    /// `_linalg_svd`: `U`, the singular values `S` (descending) and `Vh`, `A = U diag(S) Vh`.
    Svd,
    /// `_linalg_eigh`: the eigenvalues (ascending) and eigenvectors of a symmetric matrix,
    /// reading its lower triangle (the upper with `UPLO="U"`).
    Eigh,
}

/// The operator of each decomposition.
fn operator(op: Decomposition) -> &'static super::Operator {
    match op {
        Decomposition::Det => &aten::LINALG_DET,
        Decomposition::Slogdet => &aten::LINALG_SLOGDET,
        Decomposition::Inv => &aten::LINALG_INV,
        Decomposition::Solve => &aten::LINALG_SOLVE,
        Decomposition::Cholesky => &aten::LINALG_CHOLESKY,
        Decomposition::Qr => &aten::LINALG_QR,
        Decomposition::Svd => &aten::LINALG_SVD,
        Decomposition::Eigh => &aten::LINALG_EIGH,
    }
}

/// The keyword argument that carries a decomposition's option (`upper`, `mode`,
/// `full_matrices`, `UPLO`), as its operator's schema names it.
fn option(op: Decomposition, flag: bool) -> Kwargs {
    let mut kwargs = Kwargs::new();
    match op {
        Decomposition::Cholesky => kwargs.insert("upper", Value::Bool(flag)),
        Decomposition::Qr => kwargs.insert("mode", Value::from(if flag { "complete" } else { "reduced" })),
        Decomposition::Svd => kwargs.insert("full_matrices", Value::Bool(flag)),
        Decomposition::Eigh => kwargs.insert("UPLO", Value::from(if flag { "U" } else { "L" })),
        Decomposition::Det | Decomposition::Slogdet | Decomposition::Inv | Decomposition::Solve => {}
    }
    kwargs
}

/// The typed entry: `op` of `inputs` (`A`, and `B` for solve) with its option `flag` (see
/// [`option`]); its results in the operator's order.
pub(crate) fn decompose(op: Decomposition, inputs: &[&Tensor], flag: bool) -> Result<Vec<Output>> {
    let kernel = || -> Result<Vec<Array>> {
        let dense: Vec<&Dense> = inputs.iter().map(|t| dense(t)).collect::<Result<_>>()?;
        run(op, &dense, flag)
    };
    if super::mode::intercepting() {
        let args: Vec<Value> = inputs.iter().map(|t| Value::Tensor((*t).clone())).collect();
        return intercept(operator(op), &args, option(op, flag), &|| Ok(results(kernel()?)));
    }
    Ok(kernel()?.into_iter().map(Output::Array).collect())
}

/// The kernel's arrays as the operator's result value: one tensor, or a tuple.
pub(super) fn results(arrays: Vec<Array>) -> Value {
    let mut tensors: Vec<Value> = arrays.into_iter().map(|a| Value::Tensor(Tensor::from_array(a))).collect();
    if tensors.len() == 1 { tensors.remove(0) } else { Value::Tuple(tensors) }
}

/// Binds the value form's options: `op`'s option from its keyword (see [`option`]).
pub(super) fn flag_of(op: Decomposition, get: &dyn Fn(&str) -> Value) -> Result<bool> {
    Ok(match op {
        Decomposition::Cholesky => matches!(get("upper"), Value::Bool(true)),
        Decomposition::Svd => matches!(get("full_matrices"), Value::Bool(true)),
        Decomposition::Qr => match get("mode").as_str() {
            Some("reduced") | None => false,
            Some("complete") => true,
            Some(other) => {
                return Err(Error::value_error(format!(
                    "linalg_qr(): mode must be 'reduced' or 'complete' here, got '{other}'"
                )));
            }
        },
        Decomposition::Eigh => match get("UPLO").as_str() {
            Some("L") | None => false,
            Some("U") => true,
            Some(other) => {
                return Err(Error::runtime_error(format!("linalg.eigh: UPLO must be 'L' or 'U', got '{other}'")));
            }
        },
        Decomposition::Solve => {
            if matches!(get("left"), Value::Bool(false)) {
                return Err(Error::not_implemented("linalg_solve(): the kernel solves from the left (left=True)"));
            }
            false
        }
        Decomposition::Det | Decomposition::Slogdet | Decomposition::Inv => false,
    })
}

/// The element types the decompositions compute in: a matrix is decomposed in its own dtype,
/// float32 or float64, as LAPACK's `s` and `d` routines behind PyTorch's.
trait Real: faer::traits::RealField + Element + Copy + Into<f64> + std::ops::Neg<Output = Self> {}

impl Real for f32 {}
impl Real for f64 {}

/// The matrices of `x` (`[..., m, n]`), each as a faer matrix of `T`.
fn matrices<T: Real>(x: &Dense) -> Result<Vec<Mat<T>>> {
    let shape = &x.layout.shape;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let host = host::on_host(x)?;
    let values = crate::backend::host::elements::<T>("linalg", &host)?;
    let count = shape[..shape.len() - 2].iter().product();
    Ok((0..count).map(|b| Mat::from_fn(m, n, |i, j| values[b * m * n + i * n + j])).collect())
}

/// `batch` followed by `tail`.
fn shaped(batch: &[usize], tail: &[usize]) -> Shape {
    batch.iter().chain(tail).copied().collect()
}

/// Appends `a`'s elements row-major.
fn push<T: Real>(out: &mut Vec<T>, a: MatRef<'_, T>) {
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            out.push(a[(i, j)]);
        }
    }
}

/// The shapes of `op`'s results for an input `[batch..., m, n]` (and `b`'s trailing shape for
/// solve).
fn result_shapes(op: Decomposition, batch: &[usize], m: usize, n: usize, b: &[usize], flag: bool) -> Vec<Shape> {
    let k = m.min(n);
    match op {
        Decomposition::Det => vec![shaped(batch, &[])],
        Decomposition::Slogdet => vec![shaped(batch, &[]), shaped(batch, &[])],
        Decomposition::Inv | Decomposition::Cholesky => vec![shaped(batch, &[m, n])],
        Decomposition::Solve => vec![shaped(batch, b)],
        Decomposition::Qr if flag => vec![shaped(batch, &[m, m]), shaped(batch, &[m, n])],
        Decomposition::Qr => vec![shaped(batch, &[m, k]), shaped(batch, &[k, n])],
        Decomposition::Svd if flag => vec![shaped(batch, &[m, m]), shaped(batch, &[k]), shaped(batch, &[n, n])],
        Decomposition::Svd => vec![shaped(batch, &[m, k]), shaped(batch, &[k]), shaped(batch, &[k, n])],
        Decomposition::Eigh => vec![shaped(batch, &[n]), shaped(batch, &[n, n])],
    }
}

/// The error of a singular matrix, as PyTorch's (`LinAlgError`, a `RuntimeError`).
fn singular(op: Decomposition, batch: usize, count: usize, pivot: usize) -> Error {
    let which = if count > 1 { format!("(Batch element {batch}): ") } else { String::new() };
    Error::runtime_error(match op {
        Decomposition::Solve => {
            format!("torch.linalg.solve: {which}The solver failed because the input matrix is singular.")
        }
        _ => format!(
            "linalg.inv: {which}The diagonal element {pivot} is zero, the inversion could not be completed because \
             the input matrix is singular."
        ),
    })
}

/// The sign and the log of the absolute value of `a`'s determinant, from a partially pivoted
/// LU: the permutation's sign times the pivots'. The first zero pivot (where faer's
/// elimination goes on dividing by it) makes the matrix singular: sign 0, log -inf.
fn log_determinant<T: Real>(a: MatRef<'_, T>) -> (f64, f64) {
    let n = a.nrows();
    if n == 0 {
        return (1.0, 0.0);
    }
    let lu = a.partial_piv_lu();
    let (mut sign, mut log) = (parity(lu.P().arrays().0), 0.0);
    for i in 0..n {
        let u: f64 = lu.U()[(i, i)].into();
        if u == 0.0 {
            return (0.0, f64::NEG_INFINITY);
        }
        sign *= u.signum();
        log += u.abs().ln();
    }
    (sign, log)
}

/// Whether column `j`'s entry of largest magnitude (the first of equals) is negative: singular
/// and eigen vectors are unique up to sign, and torchfn makes that entry positive, so that a
/// small change of the input gives a small change of the vectors (which finite differences and
/// users comparing runs need).
fn negative_lead<T: Real>(a: MatRef<'_, T>, j: usize) -> bool {
    let mut lead = 0.0f64;
    for i in 0..a.nrows() {
        let v: f64 = a[(i, j)].into();
        if v.abs() > lead.abs() {
            lead = v;
        }
    }
    lead < 0.0
}

/// Negates column `j` of `a`.
fn negate<T: Real>(a: &mut Mat<T>, j: usize) {
    a.col_mut(j).iter_mut().for_each(|x| *x = -*x);
}

/// Checks a decomposition's input: float32 or float64 matrices `[..., m, n]`, square when
/// `square`; the errors name `func` as PyTorch's do.
pub(crate) fn check_matrices(func: &str, dtype: DType, shape: &[usize], square: bool) -> Result<()> {
    if !matches!(dtype, DType::Float32 | DType::Float64) {
        return Err(Error::runtime_error(format!(
            "{func}: Expected a floating point tensor as input (float32 or float64). Got {dtype}"
        )));
    }
    if shape.len() < 2 {
        return Err(Error::runtime_error(format!("{func}: The input tensor A must have at least 2 dimensions.")));
    }
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if square && m != n {
        return Err(Error::runtime_error(format!(
            "{func}: A must be batches of square matrices, but they are {m} by {n} matrices"
        )));
    }
    Ok(())
}

/// The sign of a permutation given as where each row went.
fn parity(forward: &[usize]) -> f64 {
    let mut seen = vec![false; forward.len()];
    let mut sign = 1.0;
    for start in 0..forward.len() {
        let mut length = 0;
        let mut at = start;
        while !seen[at] {
            seen[at] = true;
            at = forward[at];
            length += 1;
        }
        if length > 0 && length % 2 == 0 {
            sign = -sign;
        }
    }
    sign
}

/// The kernel: checks the inputs' shapes and dtypes, then decomposes each matrix.
pub(super) fn run(op: Decomposition, inputs: &[&Dense], flag: bool) -> Result<Vec<Array>> {
    let name = operator(op).name();
    let a = inputs[0];
    let shape = &a.layout.shape;
    let square = !matches!(op, Decomposition::Qr | Decomposition::Svd);
    check_matrices(name, a.dtype, shape, square)?;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let batch = &shape[..shape.len() - 2];
    let square = !matches!(op, Decomposition::Qr | Decomposition::Svd);
    if square && m != n {
        return Err(Error::runtime_error(format!(
            "{name}: A must be batches of square matrices, but they are {m} by {n} matrices"
        )));
    }
    let b_tail: Vec<usize> = match (op, inputs.get(1)) {
        (Decomposition::Solve, Some(b)) => {
            let bs = &b.layout.shape;
            let fits =
                b.dtype == a.dtype && bs.len() == shape.len() && bs[..batch.len()] == *batch && bs[bs.len() - 2] == n;
            if !fits {
                return Err(Error::runtime_error(format!(
                    "{name}: B must be {} with A's batch dimensions {batch:?} and {n} rows, got {} {:?}",
                    a.dtype,
                    b.dtype,
                    &bs[..]
                )));
            }
            bs[bs.len() - 2..].to_vec()
        }
        (Decomposition::Solve, None) => return Err(Error::value_error(format!("{name}(): B is missing"))),
        _ => Vec::new(),
    };
    let shapes = result_shapes(op, batch, m, n, &b_tail, flag);
    let device = a.device();
    if device.is_meta() {
        let backend = device.backend();
        return shapes.iter().map(|s| backend.fill(device, s, Scalar::Int(0), a.dtype)).collect();
    }
    if m == 0 || n == 0 {
        return empty_matrices(op, a, &shapes);
    }
    let b = inputs.get(1).copied().filter(|_| op == Decomposition::Solve);
    match a.dtype {
        DType::Float32 => uploaded(device, compute::<f32>(op, name, a, b, flag, shapes.len())?, shapes),
        _ => uploaded(device, compute::<f64>(op, name, a, b, flag, shapes.len())?, shapes),
    }
}

/// The results for matrices without elements, without the decomposition (whose workspace
/// follows the other side's size): determinants 1 (log 0), the square factors of
/// `mode='complete'` and `full_matrices` identities, everything else empty or zeros.
fn empty_matrices(op: Decomposition, a: &Dense, shapes: &[Shape]) -> Result<Vec<Array>> {
    let device = a.device();
    let backend = device.backend();
    let identity = |shape: &Shape| -> Result<Array> {
        let k = shape[shape.len() - 1];
        let numel = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let numel =
            numel.ok_or_else(|| Error::runtime_error(format!("{}: the result is too large", operator(op).name())))?;
        let mut data = crate::backend::host::alloc::<f64>(operator(op).name(), numel)?;
        data.extend((0..numel).map(|i| if k > 0 && (i % (k * k)).is_multiple_of(k + 1) { 1.0 } else { 0.0 }));
        let buffer = match a.dtype {
            DType::Float32 => Buffer::from_vec(data.into_iter().map(|v| v as f32).collect::<Vec<f32>>()),
            _ => Buffer::from_vec(data),
        };
        backend.upload(device, buffer, shape.clone())
    };
    let square = |s: &Shape| s.len() >= 2 && s[s.len() - 1] == s[s.len() - 2];
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| match (op, i) {
            (Decomposition::Det, _) | (Decomposition::Slogdet, 0) => {
                backend.fill(device, shape, Scalar::Int(1), a.dtype)
            }
            (Decomposition::Qr, 0) | (Decomposition::Svd, 0 | 2) if square(shape) => identity(shape),
            _ => backend.fill(device, shape, Scalar::Int(0), a.dtype),
        })
        .collect()
}

/// Each result's elements uploaded to `device` as its shape.
fn uploaded<T: Real>(device: Device, outs: Vec<Vec<T>>, shapes: Vec<Shape>) -> Result<Vec<Array>> {
    outs.into_iter()
        .zip(shapes)
        .map(|(values, shape)| device.backend().upload(device, Buffer::from_vec(values), shape))
        .collect()
}

/// Decomposes each matrix of `a` (solving against `b`'s) in `T`: each result's elements,
/// row-major, in the operator's order.
fn compute<T: Real>(
    op: Decomposition,
    name: &str,
    a: &Dense,
    b: Option<&Dense>,
    flag: bool,
    results: usize,
) -> Result<Vec<Vec<T>>> {
    let shape = &a.layout.shape;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let mats = matrices::<T>(a)?;
    let rhs = b.map(matrices::<T>).transpose()?;
    let zero = T::from_f64(0.0);
    let mut outs: Vec<Vec<T>> = vec![Vec::new(); results];
    let count = mats.len();
    for (index, a) in mats.iter().enumerate() {
        match op {
            Decomposition::Det | Decomposition::Slogdet => {
                let (sign, log) = log_determinant(a.as_ref());
                if op == Decomposition::Det {
                    outs[0].push(T::from_f64(sign * log.exp()));
                } else {
                    outs[0].push(T::from_f64(sign));
                    outs[1].push(T::from_f64(log));
                }
            }
            Decomposition::Inv | Decomposition::Solve => {
                let lu = a.partial_piv_lu();
                if let Some(pivot) = (0..n).find(|&i| lu.U()[(i, i)].into() == 0.0) {
                    return Err(singular(op, index, count, pivot + 1));
                }
                match &rhs {
                    Some(rhs) => push(&mut outs[0], lu.solve(&rhs[index]).as_ref()),
                    None => push(&mut outs[0], lu.inverse().as_ref()),
                }
            }
            Decomposition::Cholesky => {
                // The triangle the factor is asked of is the one read, as LAPACK's potrf.
                let llt = a.llt(if flag { Side::Upper } else { Side::Lower }).map_err(|e| {
                    let order = match e {
                        faer::linalg::solvers::LltError::NonPositivePivot { index } => index + 1,
                    };
                    let which = if count > 1 { format!("(Batch element {index}): ") } else { String::new() };
                    Error::runtime_error(format!(
                        "linalg.cholesky: {which}The factorization could not be completed because the input is not \
                         positive-definite (the leading minor of order {order} is not positive-definite)."
                    ))
                })?;
                let l = llt.L();
                push(&mut outs[0], if flag { l.transpose() } else { l });
            }
            Decomposition::Qr => {
                let qr = a.qr();
                let k = m.min(n);
                if flag {
                    push(&mut outs[0], qr.compute_Q().as_ref());
                    let r = qr.R();
                    for i in 0..m {
                        for j in 0..n {
                            outs[1].push(if i < k && j >= i { r[(i, j)] } else { zero });
                        }
                    }
                } else {
                    push(&mut outs[0], qr.compute_thin_Q().as_ref());
                    let r = qr.R();
                    for i in 0..k {
                        for j in 0..n {
                            outs[1].push(if j >= i { r[(i, j)] } else { zero });
                        }
                    }
                }
            }
            Decomposition::Svd => {
                let svd = if flag { a.svd() } else { a.thin_svd() }
                    .map_err(|_| Error::runtime_error(format!("{name}: The algorithm failed to converge")))?;
                let (mut u, mut v) = (svd.U().to_owned(), svd.V().to_owned());
                let k = m.min(n);
                // Each pair's sign from U's column; the columns past the k pairs (full_matrices)
                // on their own.
                for i in 0..u.ncols().max(v.ncols()) {
                    let (in_u, in_v) = (i < u.ncols(), i < v.ncols());
                    if in_u && negative_lead(u.as_ref(), i) {
                        negate(&mut u, i);
                        if i < k {
                            negate(&mut v, i);
                        }
                    }
                    if i >= k && in_v && negative_lead(v.as_ref(), i) {
                        negate(&mut v, i);
                    }
                }
                push(&mut outs[0], u.as_ref());
                outs[1].extend(svd.S().column_vector().iter().copied());
                push(&mut outs[2], v.transpose());
            }
            Decomposition::Eigh => {
                let side = if flag { Side::Upper } else { Side::Lower };
                let evd = a
                    .self_adjoint_eigen(side)
                    .map_err(|_| Error::runtime_error(format!("{name}: The algorithm failed to converge")))?;
                outs[0].extend(evd.S().column_vector().iter().copied());
                let mut u = evd.U().to_owned();
                for i in 0..n {
                    if negative_lead(u.as_ref(), i) {
                        negate(&mut u, i);
                    }
                }
                push(&mut outs[1], u.as_ref());
            }
        }
    }
    Ok(outs)
}
