//! `torch.linalg`'s decompositions and the functions built on them: `det`, `slogdet`, `inv`,
//! `solve`, `cholesky`, `qr`, `svd`, `svdvals`, `eigh`, `eigvalsh`, `lstsq`. Each decomposition is one
//! operator (computed on the host with `faer` for every device, see `dispatch/linalg.rs`) and
//! one autograd node whose backward and forward derivatives are PyTorch's formulas written with
//! differentiable operations, so they differentiate again.
//!
//! Singular and eigen vectors are unique up to sign only: torchfn's signs can differ from
//! PyTorch's (LAPACK's), as PyTorch's own differ between devices. QR's signs are LAPACK's.

use super::results;
use crate::autograd::{Ctx, Function};
use crate::dispatch::linalg::Decomposition;
use crate::error::{Result, bail};
use crate::primitive;
use crate::tensor::{DType, Tensor};
use crate::testing::sample;
use crate::torch_function;
use crate::value::Value;

// ---- the formulas' vocabulary ---------------------------------------------------------------

/// The transpose of the last two dimensions.
fn mt(x: &Tensor) -> Result<Tensor> {
    x.transpose(-2, -1)
}

/// The `n`×`n` identity in `like`'s dtype and device.
fn eye(n: usize, like: &Tensor) -> Result<Tensor> {
    crate::eye(n, None, like.dtype()?, like.device()?)
}

/// The diagonals of a batch of square matrices.
fn diagonal(x: &Tensor) -> Result<Tensor> {
    let n = x.shape()?[x.shape()?.len() - 1];
    (x * &eye(n, x)?)?.sum_dim(-1, false)
}

/// Square matrices with `v` on their diagonals.
fn diag_embed(v: &Tensor) -> Result<Tensor> {
    let n = v.shape()?[v.shape()?.len() - 1];
    &v.unsqueeze(-1)? * &eye(n, v)?
}

/// `x / e` off the diagonal, the diagonal replaced by `d`'s (the eigen and singular value
/// formulas divide by differences that are zero on the diagonal).
fn off_diagonal_div(x: &Tensor, e: &Tensor, d: Option<&Tensor>) -> Result<Tensor> {
    let n = x.shape()?[x.shape()?.len() - 1];
    let i = eye(n, x)?;
    let off = (&(x / &(e + &i)?)? * &(1.0 - &i)?)?;
    match d {
        Some(d) => &off + &diag_embed(d)?,
        None => Ok(off),
    }
}

/// `x` with its batch of matrices' trace `tr(x y)` for each pair: `sum(xᵀ ∘ y)`.
fn trace_of_product(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    (&mt(x)? * y)?.sum_dim(vec![-2, -1], false)
}

/// `x[..., None, None]`.
fn as_matrix(x: &Tensor) -> Result<Tensor> {
    x.unsqueeze(-1)?.unsqueeze(-1)
}

/// The lower triangle with its diagonal halved (`Φ` of the Cholesky formulas).
fn phi(x: &Tensor) -> Result<Tensor> {
    let n = x.shape()?[x.shape()?.len() - 1];
    &x.tril(0)? * &(1.0 - &(&eye(n, x)? * 0.5)?)?
}

/// `(x + xᵀ) / 2`.
fn sym(x: &Tensor) -> Result<Tensor> {
    &(x + &mt(x)?)? * 0.5
}

/// `x - xᵀ`.
fn skew(x: &Tensor) -> Result<Tensor> {
    x - &mt(x)?
}

// ---- one node per decomposition --------------------------------------------------------------

/// A decomposition as an autograd Function: forward runs the operator; backward and jvp are
/// the decomposition's formulas ([`gradients`], [`tangents`]).
macro_rules! decompositions {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Default)]
        struct $name {
            flag: bool,
        }

        impl Function for $name {
            type Inputs = (Tensor, Option<Tensor>, bool);
            type Output = Vec<Tensor>;
            type GradOutputs = Vec<Option<Tensor>>;

            fn forward_with_ctx(ctx: &mut Ctx<Self>, (a, b, flag): &Self::Inputs) -> Result<Vec<Tensor>> {
                let inputs: Vec<&Tensor> = std::iter::once(a).chain(b.as_ref()).collect();
                let outputs = primitive::decompose(Decomposition::$op, &inputs, *flag)?;
                ctx.flag = *flag;
                let saved = (a.clone(), b.clone(), outputs.first().cloned(), outputs.get(1).cloned(), outputs.get(2).cloned());
                ctx.save_for_backward(saved.clone());
                ctx.save_for_forward(saved);
                Ok(outputs)
            }

            fn backward(ctx: &mut Ctx<Self>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
                let saved: (Tensor, Option<Tensor>, Option<Tensor>, Option<Tensor>, Option<Tensor>) =
                    ctx.saved_tensors()?;
                gradients(Decomposition::$op, ctx.flag, saved, grads)
            }

            fn jvp(ctx: &mut Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
                let saved: (Tensor, Option<Tensor>, Option<Tensor>, Option<Tensor>, Option<Tensor>) =
                    ctx.saved_tensors()?;
                tangents_of(Decomposition::$op, ctx.flag, saved, tangents)
            }
        }
    )*};
}

decompositions! {
    /// `linalg_det`'s node.
    LinalgDet => Det;
    /// `linalg_slogdet`'s node.
    LinalgSlogdet => Slogdet;
    /// `linalg_inv`'s node.
    LinalgInv => Inv;
    /// `linalg_solve`'s node.
    LinalgSolve => Solve;
    /// `linalg_cholesky`'s node.
    LinalgCholesky => Cholesky;
    /// `linalg_qr`'s node.
    LinalgQr => Qr;
    /// `_linalg_svd`'s node.
    LinalgSvd => Svd;
    /// `_linalg_eigh`'s node.
    LinalgEigh => Eigh;
}

type Saved = (Tensor, Option<Tensor>, Option<Tensor>, Option<Tensor>, Option<Tensor>);

fn out(t: &Option<Tensor>) -> Result<&Tensor> {
    t.as_ref().ok_or_else(|| crate::error::Error::runtime_error("linalg backward: a result was not saved"))
}

/// The gradients of `A` (and `B`) from the results' gradients (PyTorch's formulas; a missing
/// gradient counts as zero).
fn gradients(op: Decomposition, flag: bool, saved: Saved, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    let (a, _, o0, o1, o2) = saved;
    let g = |i: usize| grads.get(i).cloned().flatten();
    let none = |ga: Option<Tensor>| Ok(vec![ga, None, None]);
    match op {
        // gA = g · cofactors(A) (= g det A⁻ᵀ where A is invertible).
        Decomposition::Det => {
            let Some(g) = g(0) else { return none(None) };
            none(Some((&as_matrix(&g)? * &cofactors(&a)?)?))
        }
        // gA = g_logabsdet A⁻ᵀ (the sign has no gradient).
        Decomposition::Slogdet => {
            let Some(g) = g(1) else { return none(None) };
            none(Some((&as_matrix(&g)? * &mt(&inv(&a)?)?)?))
        }
        // gA = -Xᵀ g Xᵀ.
        Decomposition::Inv => {
            let Some(g) = g(0) else { return none(None) };
            let xt = mt(out(&o0)?)?;
            none(Some(xt.matmul(&g)?.matmul(&xt)?.neg()?))
        }
        // gB = A⁻ᵀ g; gA = -gB Xᵀ.
        Decomposition::Solve => {
            let Some(g) = g(0) else { return Ok(vec![None, None, None]) };
            let gb = solve(&mt(&a)?, &g, true)?;
            let ga = gb.matmul(&mt(out(&o0)?)?)?.neg()?;
            Ok(vec![Some(ga), Some(gb), None])
        }
        // gA = L⁻ᵀ sym(Φ(Lᵀ gL)) L⁻¹.
        Decomposition::Cholesky => {
            let Some(g) = g(0) else { return none(None) };
            let (l, gl) = if flag { (mt(out(&o0)?)?, mt(&g)?) } else { (out(&o0)?.clone(), g) };
            let li = inv(&l)?;
            let p = sym(&phi(&mt(&l)?.matmul(&gl)?)?)?;
            none(Some(mt(&li)?.matmul(&p)?.matmul(&li)?))
        }
        // gA = (gQ + Q Z) R⁻ᵀ, Z = triu(W) + triu(W, 1)ᵀ, W = gR Rᵀ - Qᵀ gQ.
        // A wide `A = [X | Y]` (m < n) is `Q [U | V]`: the square case for `X` with `gQ + Y gVᵀ`
        // and `gU`, and `gY = Q gV` (PyTorch's).
        Decomposition::Qr => {
            let (q, r) = (out(&o0)?, out(&o1)?);
            let (m, n) = qr_sizes(&a, flag)?;
            if g(0).is_none() && g(1).is_none() {
                return none(None);
            }
            let gq = match g(0) {
                Some(gq) => gq,
                None => crate::zeros_like(q, None)?,
            };
            if m >= n {
                return none(Some(qr_backward(q, r, &gq, g(1).as_ref())?));
            }
            let (mi, wide) = (m as i64, (n - m) as i64);
            let (y, u) = (a.narrow(-1, mi, wide)?, r.narrow(-1, 0, mi)?);
            let (gq, gu, gy) = match g(1) {
                Some(gr) => {
                    let gv = gr.narrow(-1, mi, wide)?;
                    ((&gq + &y.matmul(&mt(&gv)?)?)?, Some(gr.narrow(-1, 0, mi)?), q.matmul(&gv)?)
                }
                None => (gq, None, crate::zeros_like(&y, None)?),
            };
            let gx = qr_backward(q, &u, &gq, gu.as_ref())?;
            none(Some(crate::cat(&[gx, gy], -1)?))
        }
        Decomposition::Svd => {
            let (u, s, vh) = (out(&o0)?, out(&o1)?, out(&o2)?);
            let k = s.shape()?[s.shape()?.len() - 1] as i64;
            // Only the first k columns of U and rows of Vh (full_matrices) are determined.
            let (u, vh) = (u.narrow(-1, 0, k)?, vh.narrow(-2, 0, k)?);
            let gu = g(0).map(|t| t.narrow(-1, 0, k)).transpose()?;
            let gvh = g(2).map(|t| t.narrow(-2, 0, k)).transpose()?;
            none(Some(svd_backward(&u, s, &vh, gu, g(1), gvh)?))
        }
        // gA = V (diag(gλ) + skew(Vᵀ gV) / 2 / E) Vᵀ, E_ij = λ_j - λ_i.
        Decomposition::Eigh => {
            let (l, v) = (out(&o0)?, out(&o1)?);
            if g(0).is_none() && g(1).is_none() {
                return none(None);
            }
            let inner = match g(1) {
                Some(gv) => {
                    let e = (&l.unsqueeze(-2)? - &l.unsqueeze(-1)?)?;
                    let k = (&skew(&mt(v)?.matmul(&gv)?)? * 0.5)?;
                    match g(0) {
                        Some(gl) => off_diagonal_div(&k, &e, Some(&gl))?,
                        None => off_diagonal_div(&k, &e, None)?,
                    }
                }
                None => diag_embed(&g(0).unwrap_or(crate::zeros_like(l, None)?))?,
            };
            none(Some(v.matmul(&inner)?.matmul(&mt(v)?)?))
        }
    }
}

/// The matrix of cofactors of each square matrix, `det's` gradient (`det · A⁻ᵀ` where `A` is
/// invertible), from the SVD so that it holds at singular matrices too, as PyTorch's:
/// `det(U) det(Vh) U diag(∏_{j≠i} s_j) Vh`, the products of the other singular values taken
/// from both ends (no division by a zero one).
fn cofactors(a: &Tensor) -> Result<Tensor> {
    let n = a.shape()?[a.shape()?.len() - 1] as i64;
    if n == 0 {
        return crate::zeros_like(a, None);
    }
    let (u, s, vh) = svd(a, false)?;
    // det(U) det(Vh) is ±1, constant where the vectors are.
    let sign = (&det(&u.detach()?)? * &det(&vh.detach()?)?)?;
    let ones = crate::ones_like(&s.narrow(-1, 0, 1)?, None)?;
    let exclusive = |t: &Tensor| crate::cat(&[ones.clone(), crate::cumprod(&t.narrow(-1, 0, n - 1)?, -1, None)?], -1);
    let left = exclusive(&s)?;
    let right = exclusive(&s.flip(vec![-1])?)?.flip(vec![-1])?;
    let others = (&(&left * &right)? * &sign.unsqueeze(-1)?)?;
    u.matmul(&diag_embed(&others)?)?.matmul(&vh)
}

/// `A`'s rows and columns, for QR's derivatives: every shape but `mode='complete'` with more
/// rows than columns, whose extra columns of `Q` are not determined (PyTorch's error).
fn qr_sizes(a: &Tensor, complete: bool) -> Result<(usize, usize)> {
    let shape = a.shape()?;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if complete && m > n {
        bail!(
            Runtime,
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols (got {m} by {n})."
        );
    }
    Ok((m, n))
}

/// QR's backward for `m ≥ n`: `gA = (gQ + Q Z) R⁻ᵀ`, `Z = triu(W) + triu(W, 1)ᵀ`,
/// `W = gR Rᵀ - Qᵀ gQ`.
fn qr_backward(q: &Tensor, r: &Tensor, gq: &Tensor, gr: Option<&Tensor>) -> Result<Tensor> {
    let mut w = mt(q)?.matmul(gq)?.neg()?;
    if let Some(gr) = gr {
        w = (&w + &gr.matmul(&mt(r)?)?)?;
    }
    let z = (&w.triu(0)? + &mt(&w.triu(1)?)?)?;
    (gq + &q.matmul(&z)?)?.matmul(&mt(&inv(r)?)?)
}

/// QR's tangents for `m ≥ n`: with `C = Qᵀ dA R⁻¹` and `Ω = tril(C, -1) - tril(C, -1)ᵀ`,
/// `dQ = dA R⁻¹ - Q (C - Ω)` and `dR = (C - Ω) R`.
fn qr_tangents(q: &Tensor, r: &Tensor, da: &Tensor) -> Result<(Tensor, Tensor)> {
    let da_ri = da.matmul(&inv(r)?)?;
    let c = mt(q)?.matmul(&da_ri)?;
    let c_minus = (&c - &skew(&c.tril(-1)?)?)?;
    Ok(((&da_ri - &q.matmul(&c_minus)?)?, c_minus.matmul(r)?))
}

/// The SVD's backward (PyTorch's `svd_backward` for real matrices, `U` `m`×`k`, `Vh` `k`×`n`).
fn svd_backward(
    u: &Tensor,
    s: &Tensor,
    vh: &Tensor,
    gu: Option<Tensor>,
    gs: Option<Tensor>,
    gvh: Option<Tensor>,
) -> Result<Tensor> {
    let (m, n) = (u.shape()?[u.shape()?.len() - 2], vh.shape()?[vh.shape()?.len() - 1]);
    let k = s.shape()?[s.shape()?.len() - 1];
    if gu.is_none() && gvh.is_none() {
        let gs = gs.unwrap_or(crate::zeros_like(s, None)?);
        return u.matmul(&diag_embed(&gs)?)?.matmul(vh);
    }
    let v = mt(vh)?;
    let gv = gvh.as_ref().map(mt).transpose()?;
    let s2 = (s * s)?;
    let e = (&s2.unsqueeze(-2)? - &s2.unsqueeze(-1)?)?;
    let (s_row, s_col) = (s.unsqueeze(-2)?, s.unsqueeze(-1)?);
    // (skew(Uᵀ gU) S + S skew(Vᵀ gV)) / E, each term where its gradient is given.
    let from_u = gu.as_ref().map(|gu| &skew(&mt(u)?.matmul(gu)?)? * &s_row).transpose()?;
    let from_v = gv.as_ref().map(|gv| &s_col * &skew(&vh.matmul(gv)?)?).transpose()?;
    let sum = match (from_u, from_v) {
        (Some(a), Some(b)) => (&a + &b)?,
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => crate::zeros_like(&e, None)?,
    };
    let inner = off_diagonal_div(&sum, &e, gs.as_ref())?;
    if m > k && gu.is_some() {
        let gu = gu.unwrap_or(crate::zeros_like(u, None)?);
        let mut ga = u.matmul(&inner)?;
        let gu_sinv = (&gu / &s_row)?;
        ga = (&(&ga + &gu_sinv)? - &u.matmul(&mt(u)?.matmul(&gu_sinv)?)?)?;
        ga.matmul(vh)
    } else if n > k && gv.is_some() {
        let gv = gv.unwrap_or(crate::zeros_like(&v, None)?);
        let mut ga = inner.matmul(vh)?;
        let gv_sinv = (&gv / &s_row)?;
        ga = (&(&ga + &mt(&gv_sinv)?)? - &mt(&gv_sinv)?.matmul(&v)?.matmul(vh)?)?;
        u.matmul(&ga)
    } else {
        u.matmul(&inner)?.matmul(vh)
    }
}

/// The results' tangents from the inputs' (forward-mode AD).
fn tangents_of(
    op: Decomposition,
    flag: bool,
    saved: Saved,
    tangents: Vec<Option<Tensor>>,
) -> Result<Vec<Option<Tensor>>> {
    let (a, b, o0, o1, o2) = saved;
    let zeros = |t: &Tensor| crate::zeros_like(t, None);
    let da = match tangents.first().cloned().flatten() {
        Some(t) => t,
        None => zeros(&a)?,
    };
    Ok(match op {
        Decomposition::Det => vec![Some((&cofactors(&a)? * &da)?.sum_dim(vec![-2, -1], false)?)],
        Decomposition::Slogdet => {
            let sign = out(&o0)?;
            vec![Some(zeros(sign)?), Some(trace_of_product(&inv(&a)?, &da)?)]
        }
        Decomposition::Inv => {
            let x = out(&o0)?;
            vec![Some(x.matmul(&da)?.matmul(x)?.neg()?)]
        }
        Decomposition::Solve => {
            let x = out(&o0)?;
            let db = match tangents.get(1).cloned().flatten() {
                Some(t) => t,
                None => zeros(b.as_ref().unwrap_or(x))?,
            };
            vec![Some(solve(&a, &(&db - &da.matmul(x)?)?, true)?)]
        }
        // dL = L Φ(L⁻¹ dA L⁻ᵀ).
        Decomposition::Cholesky => {
            let l = if flag { mt(out(&o0)?)? } else { out(&o0)?.clone() };
            let li = inv(&l)?;
            let dl = l.matmul(&phi(&li.matmul(&da)?.matmul(&mt(&li)?)?)?)?;
            vec![Some(if flag { mt(&dl)? } else { dl })]
        }
        // C = Qᵀ dA R⁻¹, Ω = tril(C, -1) - tril(C, -1)ᵀ; dR = (C - Ω) R; dQ = dA R⁻¹ - Q (C - Ω).
        // Wide: the square case's for `X`, and `dV = Qᵀ (dY - dQ V)`.
        Decomposition::Qr => {
            let (q, r) = (out(&o0)?, out(&o1)?);
            let (m, n) = qr_sizes(&a, flag)?;
            if m >= n {
                let (dq, dr) = qr_tangents(q, r, &da)?;
                vec![Some(dq), Some(dr)]
            } else {
                let (mi, wide) = (m as i64, (n - m) as i64);
                let (u, v) = (r.narrow(-1, 0, mi)?, r.narrow(-1, mi, wide)?);
                let (dq, du) = qr_tangents(q, &u, &da.narrow(-1, 0, mi)?)?;
                let dv = mt(q)?.matmul(&(&da.narrow(-1, mi, wide)? - &dq.matmul(&v)?)?)?;
                vec![Some(dq), Some(crate::cat(&[du, dv], -1)?)]
            }
        }
        // dP = Uᵀ dA V; dS = diag(dP); dU = U ((dP S + S dPᵀ) / E) + (I - U Uᵀ) dA V S⁻¹; dV likewise.
        Decomposition::Svd => {
            let (u, s, vh) = (out(&o0)?, out(&o1)?, out(&o2)?);
            let k = s.shape()?[s.shape()?.len() - 1] as i64;
            if flag {
                let shape = a.shape()?;
                if shape[shape.len() - 2] != shape[shape.len() - 1] {
                    bail!(
                        NotImplemented,
                        "The forward derivative of linalg.svd needs full_matrices=False for non-square inputs"
                    );
                }
            }
            let (u, vh) = (u.narrow(-1, 0, k)?, vh.narrow(-2, 0, k)?);
            let v = mt(&vh)?;
            let dp = mt(&u)?.matmul(&da)?.matmul(&v)?;
            let ds = diagonal(&dp)?;
            let s2 = (s * s)?;
            let e = (&s2.unsqueeze(-2)? - &s2.unsqueeze(-1)?)?;
            let (s_row, s_col) = (s.unsqueeze(-2)?, s.unsqueeze(-1)?);
            let omega_u = off_diagonal_div(&(&(&dp * &s_row)? + &(&s_col * &mt(&dp)?)?)?, &e, None)?;
            let omega_v = off_diagonal_div(&(&(&s_col * &dp)? + &(&mt(&dp)? * &s_row)?)?, &e, None)?;
            let (m, n) = (u.shape()?[u.shape()?.len() - 2], v.shape()?[v.shape()?.len() - 2]);
            let mut du = u.matmul(&omega_u)?;
            if m > k as usize {
                let rest = (&da.matmul(&v)? / &s_row)?;
                du = (&(&du + &rest)? - &u.matmul(&mt(&u)?.matmul(&rest)?)?)?;
            }
            let mut dv = v.matmul(&omega_v)?;
            if n > k as usize {
                let rest = (&mt(&da)?.matmul(&u)? / &s_row)?;
                dv = (&(&dv + &rest)? - &v.matmul(&vh.matmul(&rest)?)?)?;
            }
            vec![Some(du), Some(ds), Some(mt(&dv)?)]
        }
        // M = Vᵀ dA V: dλ = diag(M), dV = V (M / E) (zero on the diagonal).
        Decomposition::Eigh => {
            let (l, v) = (out(&o0)?, out(&o1)?);
            let mm = mt(v)?.matmul(&da)?.matmul(v)?;
            let e = (&l.unsqueeze(-2)? - &l.unsqueeze(-1)?)?;
            vec![Some(diagonal(&mm)?), Some(v.matmul(&off_diagonal_div(&mm, &e, None)?)?)]
        }
    })
}

// ---- the public functions ---------------------------------------------------------------------

/// Checks `a` is a float32 or float64 batch of matrices (square when `square`).
fn matrices(func: &str, a: &Tensor, square: bool) -> Result<()> {
    crate::dispatch::linalg::check_matrices(func, a.dtype()?, &a.shape()?, square)
}

/// Runs decomposition `op`'s node.
fn node(op: Decomposition, a: &Tensor, b: Option<&Tensor>, flag: bool) -> Result<Vec<Tensor>> {
    let inputs = (a.clone(), b.cloned(), flag);
    match op {
        Decomposition::Det => LinalgDet::apply(inputs),
        Decomposition::Slogdet => LinalgSlogdet::apply(inputs),
        Decomposition::Inv => LinalgInv::apply(inputs),
        Decomposition::Solve => LinalgSolve::apply(inputs),
        Decomposition::Cholesky => LinalgCholesky::apply(inputs),
        Decomposition::Qr => LinalgQr::apply(inputs),
        Decomposition::Svd => LinalgSvd::apply(inputs),
        Decomposition::Eigh => LinalgEigh::apply(inputs),
    }
}

/// The determinant of each square matrix of `A` (`[..., n, n]`, float32 or float64)
/// (`torch.linalg.det`). Its gradient is the matrix of cofactors (`det · A⁻ᵀ` where `A` is
/// invertible), computed from the SVD so that a singular `A` has one too, as in PyTorch.
///
/// ```
/// let a = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0]])?;
/// assert!((torchfn::linalg::det(&a)?.item()?.to_f64() + 2.0).abs() < 1e-12);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn det(a: &Tensor) -> Result<Tensor> {
    matrices("linalg.det", a, true)?;
    let [det] = results("linalg.det", node(Decomposition::Det, a, None, false)?)?;
    Ok(det)
}

/// The sign and the natural log of the absolute value of each determinant
/// (`torch.linalg.slogdet`): `det = sign · exp(logabsdet)`, without overflow. A singular
/// matrix gives sign 0 and `-inf`.
///
/// ```
/// let a = torchfn::tensor([[0.0f64, 2.0], [3.0, 0.0]])?;
/// let (sign, logabsdet) = torchfn::linalg::slogdet(&a)?;
/// assert_eq!(sign.item()?.to_f64(), -1.0);
/// assert!((logabsdet.item()?.to_f64() - 6f64.ln()).abs() < 1e-12);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn slogdet(a: &Tensor) -> Result<(Tensor, Tensor)> {
    matrices("linalg.slogdet", a, true)?;
    let [sign, logabsdet] = results("linalg.slogdet", node(Decomposition::Slogdet, a, None, false)?)?;
    Ok((sign, logabsdet))
}

/// The inverse of each square matrix (`torch.linalg.inv`); a singular matrix is an error
/// naming the zero pivot, as PyTorch's `LinAlgError`.
///
/// ```
/// let a = torchfn::tensor([[2.0f64, 0.0], [0.0, 4.0]])?;
/// assert_eq!(torchfn::linalg::inv(&a)?.to_vec::<f64>()?, [0.5, 0.0, 0.0, 0.25]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn inv(a: &Tensor) -> Result<Tensor> {
    matrices("linalg.inv", a, true)?;
    let [inv] = results("linalg.inv", node(Decomposition::Inv, a, None, false)?)?;
    Ok(inv)
}

/// `X` with `A X = B` (`torch.linalg.solve`), or `X A = B` with `left=false`. `B` is a batch of
/// matrices `[..., n, k]` or of vectors `[..., n]`; the batch dimensions broadcast.
///
/// ```
/// let a = torchfn::tensor([[3.0f64, 1.0], [1.0, 2.0]])?;
/// let b = torchfn::tensor([9.0f64, 8.0])?;
/// let x = torchfn::linalg::solve(&a, &b, true)?;
/// assert!(x.to_vec::<f64>()?.iter().zip([2.0, 3.0]).all(|(g, w)| (g - w).abs() < 1e-12));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn solve(
    a: &Tensor,
    b: &Tensor,
    #[keyword_only]
    #[default(true)]
    left: bool,
) -> Result<Tensor> {
    const FUNC: &str = "linalg.solve";
    matrices(FUNC, a, true)?;
    if b.dtype()? != a.dtype()? {
        bail!(
            Runtime,
            "{FUNC}: Expected A and B to have the same dtype, but found A of type {} and B of type {} instead",
            a.dtype()?,
            b.dtype()?
        );
    }
    let (ashape, bshape) = (a.shape()?, b.shape()?);
    let n = ashape[ashape.len() - 1];
    // B is a batch of vectors when it has one dimension less than A (PyTorch's rule).
    let vector = bshape.len() == 1 || (bshape.len() + 1 == ashape.len() && bshape[..] == ashape[..ashape.len() - 1]);
    if !left {
        if vector {
            bail!(
                Runtime,
                "{FUNC}: Vector broadcasting of the left hand side is not supported for left=False. In this case \
                 linalg.solve is equivalent to B / A.squeeze(-1)"
            );
        }
        // X A = B  ⇔  Aᵀ Xᵀ = Bᵀ.
        return mt(&solve(&mt(a)?, &mt(b)?, true)?);
    }
    let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
    let b2shape = b2.shape()?;
    if b2shape.len() < 2 || b2shape[b2shape.len() - 2] != n {
        bail!(
            Runtime,
            "{FUNC}: Incompatible shapes of A and B for the equation AX = B ({:?} and {:?})",
            &ashape[..],
            &bshape[..]
        );
    }
    let batch = crate::tensor::broadcast_shapes(
        &crate::tensor::Shape::new(&ashape[..ashape.len() - 2]),
        &crate::tensor::Shape::new(&b2shape[..b2shape.len() - 2]),
        FUNC,
    )?;
    let expand = |t: &Tensor, tail: &[usize]| -> Result<Tensor> {
        let target: Vec<i64> = batch.iter().chain(tail).map(|&d| d as i64).collect();
        t.broadcast_to(target)
    };
    let a2 = expand(a, &ashape[ashape.len() - 2..])?;
    let b2 = expand(&b2, &b2shape[b2shape.len() - 2..])?;
    let [x] = results(FUNC, node(Decomposition::Solve, &a2, Some(&b2), false)?)?;
    if vector { x.squeeze_dim(vec![-1]) } else { Ok(x) }
}

/// The Cholesky factor of each symmetric positive-definite matrix (`torch.linalg.cholesky`):
/// `L` lower triangular with `A = L Lᵀ` from `A`'s lower triangle, or `U` with `A = Uᵀ U` from
/// its upper one with `upper=true`; the gradient is PyTorch's symmetric one. Not positive-definite is an error
/// naming the leading minor.
///
/// ```
/// let a = torchfn::tensor([[4.0f64, 2.0], [2.0, 5.0]])?;
/// assert_eq!(torchfn::linalg::cholesky(&a, false)?.to_vec::<f64>()?, [2.0, 0.0, 1.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn cholesky(
    a: &Tensor,
    #[keyword_only]
    #[default(false)]
    upper: bool,
) -> Result<Tensor> {
    matrices("linalg.cholesky", a, true)?;
    let [factor] = results("linalg.cholesky", node(Decomposition::Cholesky, a, None, upper)?)?;
    Ok(factor)
}

/// The QR decomposition (`torch.linalg.qr`): `Q` with orthonormal columns and `R` upper
/// triangular, `A = Q R`. `mode` is `"reduced"` (`Q` `m`×`k`, `R` `k`×`n`, `k = min(m, n)`),
/// `"complete"` (`Q` `m`×`m`, `R` `m`×`n`) or `"r"` (`R` only; `Q` empty). Householder
/// reflections as LAPACK's, so the signs are PyTorch's.
///
/// ```
/// let a = torchfn::tensor([[3.0f64, 1.0], [4.0, 2.0]])?;
/// let (q, r) = torchfn::linalg::qr(&a, "reduced")?;
/// let back = q.matmul(&r)?.to_vec::<f64>()?;
/// assert!(back.iter().zip([3.0, 1.0, 4.0, 2.0]).all(|(g, w)| (g - w).abs() < 1e-12));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn qr(a: &Tensor, #[default("reduced")] mode: &str) -> Result<(Tensor, Tensor)> {
    matrices("linalg.qr", a, false)?;
    let complete = match mode {
        "reduced" | "r" => false,
        "complete" => true,
        other => bail!(
            Runtime,
            "qr received unrecognized mode '{other}' but expected one of 'reduced' (default), 'r', or 'complete'"
        ),
    };
    let [q, r] = results("linalg.qr", node(Decomposition::Qr, a, None, complete)?)?;
    if mode == "r" {
        return Ok((crate::zeros([0], a.dtype()?, a.device()?)?, r));
    }
    Ok((q, r))
}

/// The singular value decomposition (`torch.linalg.svd`): `U`, `S` (descending, non-negative)
/// and `Vh` with `A = U diag(S) Vh`; `full_matrices` gives square `U` and `Vh`. The vectors'
/// signs may differ from PyTorch's. The gradient through `U` and `Vh` needs distinct nonzero
/// singular values, as PyTorch's.
///
/// ```
/// let a = torchfn::tensor([[3.0f64, 0.0], [0.0, -4.0]])?;
/// let (_, s, _) = torchfn::linalg::svd(&a, true)?;
/// assert_eq!(s.to_vec::<f64>()?, [4.0, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn svd(a: &Tensor, #[default(true)] full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
    matrices("linalg.svd", a, false)?;
    let [u, s, vh] = results("linalg.svd", node(Decomposition::Svd, a, None, full_matrices)?)?;
    Ok((u, s, vh))
}

/// The singular values, descending (`torch.linalg.svdvals`); differentiable everywhere the
/// values are distinct.
///
/// ```
/// let a = torchfn::tensor([[0.0f32, 2.0], [1.0, 0.0]])?;
/// assert_eq!(torchfn::linalg::svdvals(&a)?.to_vec::<f32>()?, [2.0, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn svdvals(a: &Tensor) -> Result<Tensor> {
    matrices("linalg.svdvals", a, false)?;
    let [_, s, _] = results("linalg.svdvals", node(Decomposition::Svd, a, None, false)?)?;
    Ok(s)
}

/// The eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix
/// (`torch.linalg.eigh`), reading its lower triangle (`UPLO="L"`) or upper (`"U"`). The
/// vectors' signs may differ from PyTorch's; the gradient is PyTorch's symmetric one and needs
/// distinct eigenvalues when the vectors are differentiated.
///
/// ```
/// let a = torchfn::tensor([[2.0f64, 1.0], [1.0, 2.0]])?;
/// let (values, _) = torchfn::linalg::eigh(&a, "L")?;
/// let v = values.to_vec::<f64>()?;
/// assert!((v[0] - 1.0).abs() < 1e-12 && (v[1] - 3.0).abs() < 1e-12);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(non_snake_case)]
#[torch_function(module = "torchfn.linalg")]
pub fn eigh(a: &Tensor, #[default("L")] UPLO: &str) -> Result<(Tensor, Tensor)> {
    matrices("linalg.eigh", a, true)?;
    let upper = match UPLO {
        "L" | "l" => false,
        "U" | "u" => true,
        other => bail!(Runtime, "Expected UPLO argument to be 'L' or 'U', but got {other}"),
    };
    let [values, vectors] = results("linalg.eigh", node(Decomposition::Eigh, a, None, upper)?)?;
    Ok((values, vectors))
}

/// The eigenvalues of each symmetric matrix, ascending (`torch.linalg.eigvalsh`).
///
/// ```
/// let a = torchfn::tensor([[2.0f64, 0.0], [0.0, -1.0]])?;
/// assert_eq!(torchfn::linalg::eigvalsh(&a, "L")?.to_vec::<f64>()?, [-1.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(non_snake_case)]
#[torch_function(module = "torchfn.linalg")]
pub fn eigvalsh(a: &Tensor, #[default("L")] UPLO: &str) -> Result<Tensor> {
    Ok(eigh(a, UPLO)?.0)
}

/// `lstsq`'s solution `X = A⁺ B` and the singular values of `A`, as one node: computed
/// through the SVD, cut at `rcond` times the largest singular value, and differentiated with
/// the pseudo-inverse's formulas (PyTorch's), which stay finite where singular values repeat.
#[derive(Default)]
struct LinalgLstsq {
    rcond: f64,
}

/// Which singular values (`[..., k]`, descending) are above `rcond` times the largest.
fn above_cutoff(s: &Tensor, rcond: f64) -> Result<Tensor> {
    let largest = if s.numel()? == 0 { s.clone() } else { crate::amax(s, -1, true)? };
    s.gt(&(&largest * rcond)?)
}

/// `A⁺`: `V diag(1/s) Uᵀ` over the singular values above `rcond` times the largest, and `s`.
fn pseudo_inverse(a: &Tensor, rcond: f64) -> Result<(Tensor, Tensor)> {
    let shape = a.shape()?;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if m == 0 || n == 0 {
        let mut empty: Vec<usize> = shape[..shape.len() - 2].to_vec();
        let s = crate::zeros([&empty[..], &[0]].concat(), a.dtype()?, a.device()?)?;
        empty.extend([n, m]);
        return Ok((crate::zeros(empty, a.dtype()?, a.device()?)?, s));
    }
    let (u, s, vh) = svd(a, false)?;
    let kept = above_cutoff(&s, rcond)?;
    let safe = crate::r#where(&kept, &s, &crate::ones_like(&s, None)?)?;
    let inverse = crate::r#where(&kept, &safe.reciprocal()?, &crate::zeros_like(&s, None)?)?;
    Ok((mt(&vh)?.matmul(&(&inverse.unsqueeze(-1)? * &mt(&u)?)?)?, s))
}

/// `dA⁺` for a change `da` of `a`: `-P dA P + P Pᵀ dAᵀ (I - A P) + (I - P A) dAᵀ Pᵀ P`.
fn pseudo_inverse_tangent(a: &Tensor, p: &Tensor, da: &Tensor) -> Result<Tensor> {
    let shape = a.shape()?;
    let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let (im, in_) = (eye(m, a)?, eye(n, a)?);
    let (pt, dat) = (mt(p)?, mt(da)?);
    let first = p.matmul(da)?.matmul(p)?.neg()?;
    let second = p.matmul(&pt)?.matmul(&dat)?.matmul(&(&im - &a.matmul(p)?)?)?;
    let third = (&in_ - &p.matmul(a)?)?.matmul(&dat)?.matmul(&pt)?.matmul(p)?;
    &(&first + &second)? + &third
}

impl Function for LinalgLstsq {
    type Inputs = (Tensor, Tensor, f64);
    type Output = Vec<Tensor>;
    type GradOutputs = Vec<Option<Tensor>>;

    fn forward_with_ctx(ctx: &mut Ctx<Self>, (a, b, rcond): &Self::Inputs) -> Result<Vec<Tensor>> {
        let (p, s) = pseudo_inverse(a, *rcond)?;
        let x = p.matmul(b)?;
        ctx.mark_non_differentiable(&[&s]);
        ctx.rcond = *rcond;
        ctx.save_for_backward((a.clone(), b.clone()));
        ctx.save_for_forward((a.clone(), b.clone(), p));
        Ok(vec![x, s])
    }

    /// `gB = Pᵀ gX`; with `H = gX Bᵀ`, `gA = -Pᵀ H Pᵀ + (I - A P) Hᵀ P Pᵀ + Pᵀ P Hᵀ (I - P A)`.
    /// `P` is computed again from `A` here, so that with `create_graph` it differentiates too.
    fn backward(ctx: &mut Ctx<Self>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (a, b): (Tensor, Tensor) = ctx.saved_tensors()?;
        let Some(gx) = grads.into_iter().next().flatten() else { return Ok(vec![None, None, None]) };
        let (p, _) = pseudo_inverse(&a, ctx.rcond)?;
        let shape = a.shape()?;
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let pt = mt(&p)?;
        let h = gx.matmul(&mt(&b)?)?;
        let ht = mt(&h)?;
        let first = pt.matmul(&h)?.matmul(&pt)?.neg()?;
        let second = (&eye(m, &a)? - &a.matmul(&p)?)?.matmul(&ht)?.matmul(&p)?.matmul(&pt)?;
        let third = pt.matmul(&p)?.matmul(&ht)?.matmul(&(&eye(n, &a)? - &p.matmul(&a)?)?)?;
        let ga = (&(&first + &second)? + &third)?;
        Ok(vec![Some(ga), Some(pt.matmul(&gx)?), None])
    }

    /// `dX = dP B + P dB`.
    fn jvp(ctx: &mut Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (a, b, p): (Tensor, Tensor, Tensor) = ctx.saved_tensors()?;
        let mut dx = match tangents.first().cloned().flatten() {
            Some(da) => Some(pseudo_inverse_tangent(&a, &p, &da)?.matmul(&b)?),
            None => None,
        };
        if let Some(db) = tangents.get(1).cloned().flatten() {
            let term = p.matmul(&db)?;
            dx = Some(match dx {
                Some(dx) => (&dx + &term)?,
                None => term,
            });
        }
        Ok(vec![dx, None])
    }
}

/// The least-squares solution of `A X = B` (`torch.linalg.lstsq`): `X` minimizing `‖A X - B‖`,
/// the one of least norm where several do (an `A` of deficient rank or wide), with `A`
/// `[..., m, n]` and `B` `[..., m, k]` (or a batch of vectors `[..., m]`). Returns
/// `(solution, residuals, rank, singular_values)` as PyTorch's named tuple, by `driver`:
///
/// - `"gelsy"` (the default, as PyTorch's on the CPU) gives `rank`; `"gels"` (which assumes full
///   rank) gives `residuals`; `"gelsd"` and `"gelss"` give `rank`, the `singular_values` and
///   `residuals`. What a driver does not give is an empty tensor, as in PyTorch.
/// - `residuals` (the squared norms of each column of `A X - B`) are computed when `m > n` and
///   every matrix has full rank.
/// - `rank` counts the singular values above `rcond` times the largest (`rcond` defaults to the
///   dtype's machine epsilon times `max(m, n)`).
///
/// Every driver computes through the singular value decomposition (the answer LAPACK's drivers
/// agree on); the gradient is the pseudo-inverse's, as PyTorch's.
///
/// ```
/// let a = torchfn::tensor([[1.0f64, 0.0], [0.0, 1.0], [1.0, 1.0]])?;
/// let b = torchfn::tensor([[1.0f64], [2.0], [3.0]])?;
/// let (x, _, rank, _) = torchfn::linalg::lstsq(&a, &b, None, None)?;
/// let x = x.to_vec::<f64>()?;
/// assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 2.0).abs() < 1e-12);
/// assert_eq!(rank.item()?.to_i64(), 2);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.linalg")]
pub fn lstsq(
    a: &Tensor,
    b: &Tensor,
    #[default(None)] rcond: Option<f64>,
    #[keyword_only]
    #[default(None)]
    driver: Option<&str>,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    const FUNC: &str = "torch.linalg.lstsq";
    matrices("linalg.lstsq", a, false)?;
    let driver = driver.unwrap_or("gelsy");
    if !["gels", "gelsy", "gelsd", "gelss"].contains(&driver) {
        bail!(Runtime, "{FUNC}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
    }
    let dtype = a.dtype()?;
    if b.dtype()? != dtype {
        bail!(
            Runtime,
            "{FUNC}: Expected input and other to have the same dtype, but got input's dtype {dtype} and other's dtype {}",
            b.dtype()?
        );
    }
    let (ashape, bshape) = (a.shape()?, b.shape()?);
    let (m, n) = (ashape[ashape.len() - 2], ashape[ashape.len() - 1]);
    if bshape.len() > ashape.len() || ashape.len() - bshape.len() > 1 {
        bail!(
            Runtime,
            "{FUNC}: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1"
        );
    }
    let vector = bshape.len() + 1 == ashape.len();
    let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
    let b2shape = b2.shape()?;
    if b2shape[b2shape.len() - 2] != m {
        bail!(Runtime, "{FUNC}: input.size(-2) should match other.size(-2) ({:?} and {:?})", &ashape[..], &bshape[..]);
    }
    // LAPACK's rule: a negative rcond is the machine precision; none is it times max(m, n).
    let eps = if dtype == DType::Float32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    let rcond = match rcond {
        Some(r) if r < 0.0 => eps,
        Some(r) => r,
        None => eps * m.max(n) as f64,
    };
    let [x, s] = results(FUNC, LinalgLstsq::apply((a.clone(), b2.clone(), rcond))?)?;
    let kept = above_cutoff(&s, rcond)?;
    // Counts in the device's index dtype (int64; int32 on wgpu, which has no 64-bit integers).
    let device = a.device()?;
    let rank = kept.sum_dim(-1, false)?.to(device.index_dtype(), false, false)?;
    let empty = |dtype: DType| crate::zeros([0], dtype, device);
    let full_rank =
        || -> Result<bool> { Ok(crate::all(&rank.eq(&Tensor::scalar(m.min(n) as i64))?)?.item()?.to_i64() == 1) };
    let residuals = if m > n && driver != "gelsy" && (driver == "gels" || full_rank()?) {
        let r = (&a.matmul(&x)? - &b2)?;
        (&r * &r)?.sum_dim(-2, false)?
    } else {
        empty(dtype)?
    };
    let x = if vector { x.squeeze_dim(vec![-1])? } else { x };
    let rank = if driver == "gels" { empty(device.index_dtype())? } else { rank };
    // As PyTorch's, the singular values here are not differentiated (the solution and the
    // residuals are).
    let singular_values = if matches!(driver, "gelsd" | "gelss") { s } else { empty(dtype)? };
    Ok((x, residuals, rank, singular_values))
}

// ---- samples -----------------------------------------------------------------------------

/// A well-conditioned `[batch..., n, n]` float64 matrix (diagonally dominant).
fn square(batch: &[usize], n: usize) -> Tensor {
    let shape: Vec<usize> = batch.iter().copied().chain([n, n]).collect();
    let count: usize = shape.iter().product();
    let data: Vec<f64> = (0..count)
        .map(|i| {
            let (row, col) = ((i / n) % n, i % n);
            let v = (((i * 7 + 3) % 11) as f64 - 5.0) / 4.0;
            if row == col { v + 4.0 + row as f64 } else { v }
        })
        .collect();
    Tensor::from_dense(crate::tensor::Dense::from_vec(data, crate::tensor::Shape::new(&shape)))
}

/// A symmetric positive-definite matrix with distinct eigenvalues: `M Mᵀ + n I`.
fn spd(batch: &[usize], n: usize) -> Tensor {
    let m = square(batch, n);
    let product = m.matmul(&m.transpose(-2, -1).expect("a matrix")).expect("matching shapes");
    (&product + &(&crate::eye(n, None, DType::Float64, None).expect("an identity") * (n as f64)).expect("scaled"))
        .expect("same shapes")
}

/// A `[m, n]` float64 matrix of full rank with distinct singular values.
fn rectangular(m: usize, n: usize) -> Tensor {
    let data: Vec<f64> = (0..m * n)
        .map(|i| {
            let (row, col) = (i / n, i % n);
            (((i * 7 + 3) % 11) as f64 - 5.0) / 3.0 + if row == col { 2.0 + row as f64 } else { 0.0 }
        })
        .collect();
    Tensor::from_dense(crate::tensor::Dense::from_vec(data, crate::tensor::Shape::new(&[m, n])))
}

fn t(x: Tensor) -> Value {
    Value::Tensor(x)
}

crate::samples! {
    DET => [sample([t(square(&[], 3))]), sample([t(square(&[2], 2))])],
    SLOGDET => [sample([t(square(&[], 3))]), sample([t(square(&[2], 3))])],
    INV => [sample([t(square(&[], 3))]), sample([t(square(&[2], 2))])],
    SOLVE => [
        sample([t(square(&[], 3)), t(rectangular(3, 2))]),
        sample([t(square(&[2], 3)), t(rectangular(3, 1).squeeze_dim(vec![-1]).expect("a vector"))]),
        sample([t(square(&[], 2)), t(rectangular(3, 2))]).kw("left", false),
    ],
    CHOLESKY => [sample([t(spd(&[], 3))]), sample([t(spd(&[2], 2))]).kw("upper", true)],
    QR => [
        sample([t(rectangular(4, 3))]),
        sample([t(square(&[], 3))]).kw("mode", "complete"),
        sample([t(rectangular(2, 4))]),
    ],
    SVD => [sample([t(rectangular(4, 3)), Value::Bool(false)]), sample([t(rectangular(2, 3)), Value::Bool(false)])],
    SVDVALS => [sample([t(rectangular(4, 3))]), sample([t(square(&[2], 3))])],
    EIGH => [sample([t(spd(&[], 3))]), sample([t(spd(&[2], 2))]).kw("UPLO", "U")],
    EIGVALSH => [sample([t(spd(&[], 4))])],
    LSTSQ => [
        sample([t(rectangular(4, 3)), t(rectangular(4, 2))]),
        sample([t(rectangular(2, 3)), t(rectangular(2, 1).squeeze_dim(vec![-1]).expect("a vector"))]),
        sample([t(rectangular(4, 2)), t(rectangular(4, 1))]).kw("driver", "gelsd"),
    ],
}
