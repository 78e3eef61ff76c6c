//! The differentiation transforms: [`grad`], [`grad_and_value`], [`jacrev`], [`jacfwd`] and
//! [`hessian`], composable with each other and with [`vmap`](super::vmap) in any order.
//!
//! Each differentiates with respect to the arguments `argnums` picks ([`ARG0`], [`ARG1`]...,
//! or a tuple of them), and returns gradients shaped like those arguments. A function that
//! returns `(output, aux)` instead of a tensor has an auxiliary output (PyTorch's
//! `has_aux=True`): it comes back beside the gradients, untouched.
//!
//! Inside another transform (a `grad` of a `grad`, a `jacfwd` of a `jacrev`), or when an
//! argument already requires grad, the gradients are themselves differentiable; otherwise the
//! graph is freed as soon as they are computed.

use std::cell::Cell;

use super::tree::{Tree, leaves_of, rebuilt};
use super::vmap::{VmapOptions, vmap_with};
use crate::autograd::{self, forward_ad};
use crate::error::{Result, bail};
use crate::primitive;
use crate::tensor::{Shape, Tensor};

/// Which arguments a transform differentiates (PyTorch's `argnums`): [`Argnum<N>`] (the
/// constants [`ARG0`]...[`ARG3`]) picks argument `N` of a tuple of arguments (a lone
/// [`Tensor`] is argument 0); a tuple of them picks several, and the gradients come back as a
/// tuple.
pub trait Argnums<A>: Copy {
    /// The picked arguments (and so the gradients' structure).
    type Grad: Tree;
    /// The picked arguments of `args`.
    fn get(&self, args: &A) -> Self::Grad;
    /// Puts the picked arguments back into `args`.
    fn set(&self, args: &mut A, value: Self::Grad);
}

/// Argument `N` (PyTorch's `argnums=N`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Argnum<const N: usize>;

/// The first argument (`argnums=0`, the default).
pub const ARG0: Argnum<0> = Argnum;
/// The second argument (`argnums=1`).
pub const ARG1: Argnum<1> = Argnum;
/// The third argument (`argnums=2`).
pub const ARG2: Argnum<2> = Argnum;
/// The fourth argument (`argnums=3`).
pub const ARG3: Argnum<3> = Argnum;

impl Argnums<Tensor> for Argnum<0> {
    type Grad = Tensor;
    fn get(&self, args: &Tensor) -> Tensor {
        args.clone()
    }
    fn set(&self, args: &mut Tensor, value: Tensor) {
        *args = value;
    }
}

macro_rules! argnum {
    ($n:tt => $picked:ident; $($t:ident),+) => {
        impl<$($t),+> Argnums<($($t,)+)> for Argnum<$n>
        where
            $picked: Tree + Clone,
        {
            type Grad = $picked;
            fn get(&self, args: &($($t,)+)) -> $picked {
                args.$n.clone()
            }
            fn set(&self, args: &mut ($($t,)+), value: $picked) {
                args.$n = value;
            }
        }
    };
}

argnum!(0 => A; A);
argnum!(0 => A; A, B);
argnum!(1 => B; A, B);
argnum!(0 => A; A, B, C);
argnum!(1 => B; A, B, C);
argnum!(2 => C; A, B, C);
argnum!(0 => A; A, B, C, D);
argnum!(1 => B; A, B, C, D);
argnum!(2 => C; A, B, C, D);
argnum!(3 => D; A, B, C, D);

impl<A, P: Argnums<A>, Q: Argnums<A>> Argnums<A> for (P, Q) {
    type Grad = (P::Grad, Q::Grad);
    fn get(&self, args: &A) -> Self::Grad {
        (self.0.get(args), self.1.get(args))
    }
    fn set(&self, args: &mut A, (p, q): Self::Grad) {
        self.0.set(args, p);
        self.1.set(args, q);
    }
}

impl<A, P: Argnums<A>, Q: Argnums<A>, R: Argnums<A>> Argnums<A> for (P, Q, R) {
    type Grad = (P::Grad, Q::Grad, R::Grad);
    fn get(&self, args: &A) -> Self::Grad {
        (self.0.get(args), self.1.get(args), self.2.get(args))
    }
    fn set(&self, args: &mut A, (p, q, r): Self::Grad) {
        self.0.set(args, p);
        self.1.set(args, q);
        self.2.set(args, r);
    }
}

/// What a differentiated function returns: a tensor, or `(tensor, aux)` with an auxiliary
/// output that is handed back beside the derivatives (PyTorch's `has_aux=True`).
pub trait Objective: Tree {
    /// The auxiliary output (`()` for none).
    type Aux;
    /// The derivatives `D` with the auxiliary output: `D` alone, or `(D, aux)`.
    type With<D>;
    /// The differentiated tensor.
    fn output(&self) -> &Tensor;
    /// The derivatives with this output's auxiliary part.
    fn with<D>(self, derivatives: D) -> Self::With<D>;
}

impl Objective for Tensor {
    type Aux = ();
    type With<D> = D;
    fn output(&self) -> &Tensor {
        self
    }
    fn with<D>(self, derivatives: D) -> D {
        derivatives
    }
}

impl<X: Tree> Objective for (Tensor, X) {
    type Aux = X;
    type With<D> = (D, X);
    fn output(&self) -> &Tensor {
        &self.0
    }
    fn with<D>(self, derivatives: D) -> (D, X) {
        (derivatives, self.1)
    }
}

thread_local! {
    /// How many differentiation transforms are running their function on this thread.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Marks a transform's function as running (its results may be differentiated again).
struct Running;

impl Running {
    fn enter() -> Running {
        DEPTH.with(|d| d.set(d.get() + 1));
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Whether derivatives computed now must themselves be differentiable: inside another
/// transform, under forward AD, or when an input already requires grad.
fn nested(inputs: &[Tensor]) -> bool {
    DEPTH.with(Cell::get) > 0 || forward_ad::level_active() || inputs.iter().any(|t| t.requires_grad().unwrap_or(false))
}

/// An alias of `x` to differentiate with respect to: it requires grad, and stays connected to
/// `x`'s own history and tangent (so an outer transform sees through it).
pub(crate) fn differentiable(x: &Tensor) -> Result<Tensor> {
    let alias = primitive::view(x, |l| Ok(l.clone()))?;
    if alias.requires_grad()? { Ok(alias) } else { alias.requires_grad_(true) }
}

/// The picked arguments replaced by differentiable aliases; the aliases, and whether the
/// derivatives must be differentiable.
fn prepare<A: Tree, N: Argnums<A>>(args: &mut A, argnums: N) -> Result<(N::Grad, Vec<Tensor>, bool)> {
    let picked = argnums.get(args);
    let inputs = leaves_of(&picked);
    if inputs.is_empty() {
        bail!(Runtime, "grad: the arguments argnums picks hold no tensor to differentiate with respect to");
    }
    let create_graph = nested(&inputs);
    let aliases: Vec<Tensor> = inputs.iter().map(differentiable).collect::<Result<_>>()?;
    argnums.set(args, rebuilt(&picked, aliases.clone())?);
    Ok((picked, aliases, create_graph))
}

/// `f` on `args`, recording: the output.
fn record<A, O>(f: &mut impl FnMut(A) -> Result<O>, args: A) -> Result<O> {
    let _record = autograd::enable_grad();
    let _running = Running::enter();
    f(args)
}

/// The gradient of `f`'s output with respect to the arguments `argnums` picks
/// (`torch.func.grad(f, argnums)`); `f` must return a tensor of one element (and no
/// dimension), or `(tensor, aux)`, when the gradients come back as `(gradients, aux)`.
///
/// ```
/// use torchfn::func::{ARG0, grad, vmap};
/// use torchfn::Tensor;
///
/// let x = torchfn::tensor([1.0f64, 2.0, 3.0])?;
/// let df = grad(|x: Tensor| x.square()?.sum(), ARG0)(x.clone())?;
/// assert_eq!(df.to_vec::<f64>()?, [2.0, 4.0, 6.0]);
/// // per-element derivatives of sin, by mapping the gradient of one element
/// let cos = vmap(grad(|x: Tensor| x.sin(), ARG0), 0, 0)(x.clone())?;
/// assert_eq!(cos.to_vec::<f64>()?, x.cos()?.to_vec::<f64>()?);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn grad<A: Tree, O: Objective, N: Argnums<A>>(
    f: impl FnMut(A) -> Result<O>,
    argnums: N,
) -> impl FnMut(A) -> Result<O::With<N::Grad>> {
    let mut f = grad_and_value(f, argnums);
    move |args| {
        let (grads, output) = f(args)?;
        Ok(output.with(grads))
    }
}

/// The gradient and `f`'s output (`torch.func.grad_and_value`): `(gradients, output)`, where
/// the output is what `f` returned (with its auxiliary part).
pub fn grad_and_value<A: Tree, O: Objective, N: Argnums<A>>(
    mut f: impl FnMut(A) -> Result<O>,
    argnums: N,
) -> impl FnMut(A) -> Result<(N::Grad, O)> {
    move |mut args: A| {
        let (picked, aliases, create_graph) = prepare(&mut args, argnums)?;
        let output = record(&mut f, args)?;
        let y = output.output();
        let shape = y.shape()?;
        if !shape.is_empty() {
            bail!(
                Runtime,
                "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with {} dims. Maybe \
                 you wanted to use the vjp or jacrev APIs instead?",
                shape.len()
            );
        }
        let grads = gradients(std::slice::from_ref(y), &aliases, None, create_graph)?;
        let output = if create_graph {
            output
        } else {
            rebuilt(&output, leaves_of(&output).iter().map(Tensor::detach).collect::<Result<_>>()?)?
        };
        Ok((rebuilt(&picked, grads)?, output))
    }
}

/// The gradients of `outputs` (weighted by `cotangents`) with respect to `inputs`, zeros for
/// an input they do not depend on.
fn gradients(
    outputs: &[Tensor],
    inputs: &[Tensor],
    cotangents: Option<&[Tensor]>,
    create_graph: bool,
) -> Result<Vec<Tensor>> {
    let differentiable = outputs.iter().any(|y| y.requires_grad().unwrap_or(false));
    let grads = if differentiable {
        autograd::grad(outputs, inputs, cotangents, Some(true), create_graph, true)?
    } else {
        vec![None; inputs.len()]
    };
    grads
        .into_iter()
        .zip(inputs)
        .map(|(g, x)| match g {
            Some(g) => Ok(g),
            None => crate::zeros_like(x, None),
        })
        .collect()
}

/// The Jacobian of `f` by reverse mode (`torch.func.jacrev(f, argnums)`): for each picked
/// argument, a tensor of shape `output.shape + argument.shape`, computed by mapping the
/// pullback over the rows of the identity with [`vmap`](super::vmap), not row by row.
///
/// ```
/// use torchfn::func::{ARG0, jacfwd, jacrev};
/// use torchfn::Tensor;
///
/// let f = |x: Tensor| &x * &x; // Jacobian: diag(2x)
/// let x = torchfn::tensor([1.0f64, 2.0])?;
/// let j = jacrev(f, ARG0)(x.clone())?;
/// assert_eq!(j.to_vec::<f64>()?, [2.0, 0.0, 0.0, 4.0]);
/// assert_eq!(jacfwd(f, ARG0)(x)?.to_vec::<f64>()?, [2.0, 0.0, 0.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn jacrev<A: Tree, O: Objective, N: Argnums<A>>(
    mut f: impl FnMut(A) -> Result<O>,
    argnums: N,
) -> impl FnMut(A) -> Result<O::With<N::Grad>> {
    move |mut args: A| {
        let (picked, aliases, create_graph) = prepare(&mut args, argnums)?;
        let output = record(&mut f, args)?;
        let y = output.output().clone();
        let out_shape = y.shape()?;
        let m = out_shape.numel();
        let basis = crate::eye(m, None, Some(y.dtype()?), Some(y.device()?))?.reshape(&joined(&[m], &out_shape))?;
        let inputs = aliases.clone();
        let pullback = |cotangent: Tensor| {
            let _running = Running::enter();
            gradients(std::slice::from_ref(&y), &inputs, Some(std::slice::from_ref(&cotangent)), create_graph)
        };
        let rows = vmap_with(pullback, VmapOptions::default())(basis)?;
        let jacobians: Vec<Tensor> = rows
            .iter()
            .zip(&aliases)
            .map(|(r, x)| r.reshape(&joined(&out_shape, &x.shape()?)))
            .collect::<Result<_>>()?;
        let jacobians =
            if create_graph { jacobians } else { jacobians.iter().map(Tensor::detach).collect::<Result<_>>()? };
        Ok(output.with(rebuilt(&picked, jacobians)?))
    }
}

/// The Jacobian of `f` by forward mode (`torch.func.jacfwd(f, argnums)`): the same shapes as
/// [`jacrev`], computed by mapping Jacobian-vector products over the columns of the identity.
/// The auxiliary output, when `f` has one, must not depend on the picked arguments' tangents.
pub fn jacfwd<A: Tree + Clone, O: Objective, N: Argnums<A>>(
    mut f: impl FnMut(A) -> Result<O>,
    argnums: N,
) -> impl FnMut(A) -> Result<O::With<N::Grad>> {
    move |args: A| {
        let picked = argnums.get(&args);
        let primals = leaves_of(&picked);
        if primals.is_empty() {
            bail!(Runtime, "jacfwd: the arguments argnums picks hold no tensor to differentiate with respect to");
        }
        let shapes: Vec<Shape> = primals.iter().map(Tensor::shape).collect::<Result<_>>()?;
        let n: usize = shapes.iter().map(|s| s.numel()).sum();
        let (dtype, device) = (primals[0].dtype()?, primals[0].device()?);
        // Each primal's tangents: its columns of the identity, one tangent per row.
        let basis = split(&crate::eye(n, None, Some(dtype), Some(device))?, 1, &[n], &shapes)?;
        let _level = forward_ad::dual_level()?;
        // One column of the Jacobian per tangent, and f's output beside it: the same for every
        // tangent (out_dims None, so an auxiliary output that depends on them is vmap's error).
        let column = |tangents: Vec<Tensor>| -> Result<(Tensor, O)> {
            let duals: Vec<Tensor> =
                primals.iter().zip(&tangents).map(|(p, t)| forward_ad::make_dual(p, t)).collect::<Result<_>>()?;
            let mut args = args.clone();
            argnums.set(&mut args, rebuilt(&picked, duals)?);
            let output = {
                let _running = Running::enter();
                f(args)?
            };
            let unpacked = forward_ad::unpack_dual(output.output())?;
            let tangent = match unpacked.tangent {
                Some(t) => t,
                None => crate::zeros_like(&unpacked.primal, None)?,
            };
            Ok((tangent, output))
        };
        let options = VmapOptions { out_dims: (0, None::<i64>).into(), ..VmapOptions::default() };
        let (columns, output) = vmap_with(column, options)(basis)?;
        let out_shape = output.output().shape()?;
        let k = out_shape.len();
        // [n, *out] -> [*out, n], split per primal.
        let jacobians = split(&super::batching::movedim(&columns, 0, k)?, k, &out_shape, &shapes)?;
        // The output as seen outside: its primal values.
        let primal: Vec<Tensor> =
            leaves_of(&output).iter().map(|t| forward_ad::unpack_dual(t).map(|u| u.primal)).collect::<Result<_>>()?;
        let output = rebuilt(&output, primal)?;
        Ok(output.with(rebuilt(&picked, jacobians)?))
    }
}

/// The Hessian of `f` with respect to one tensor argument (`torch.func.hessian`): the forward
/// Jacobian of the reverse Jacobian, `jacfwd(jacrev(f, argnums), argnums)`, of shape
/// `output.shape + argument.shape + argument.shape`.
///
/// ```
/// use torchfn::func::{ARG0, hessian};
/// use torchfn::Tensor;
///
/// // f(x) = x0² x1: Hessian [[2 x1, 2 x0], [2 x0, 0]]
/// let f = |x: Tensor| &x.select(0, 0)?.square()? * &x.select(0, 1)?;
/// let h = hessian(f, ARG0)(torchfn::tensor([1.0f64, 3.0])?)?;
/// assert_eq!(h.to_vec::<f64>()?, [6.0, 2.0, 2.0, 0.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn hessian<A: Tree + Clone, N: Argnums<A, Grad = Tensor>>(
    f: impl FnMut(A) -> Result<Tensor>,
    argnums: N,
) -> impl FnMut(A) -> Result<Tensor> {
    jacfwd(jacrev(f, argnums), argnums)
}

/// `t` cut along `dim` into one piece per shape, as many elements wide as it holds, each
/// reshaped to `[*lead, *shape]`.
fn split(t: &Tensor, dim: usize, lead: &[usize], shapes: &[Shape]) -> Result<Vec<Tensor>> {
    let mut start = 0;
    shapes
        .iter()
        .map(|shape| {
            let width = shape.numel();
            let piece = t.narrow(dim as i64, start as i64, width as i64)?.reshape(&joined(lead, shape));
            start += width;
            piece
        })
        .collect()
}

/// `[*a, *b]`.
fn joined(a: &[usize], b: &[usize]) -> Vec<i64> {
    a.iter().chain(b).map(|&d| d as i64).collect()
}
