//! Function transforms, as PyTorch's `torch.func`: [`vmap`] (a function of one example run on
//! a batch, each operator batched by a rule), [`grad`], [`grad_and_value`], [`vjp`], [`jvp`],
//! [`jacrev`], [`jacfwd`], [`hessian`] (modules as functions of their state, `functional_call`
//! and `stack_module_state`, are the `torchfn-nn` crate's, in the same `torchfn::func`). They compose in any order and depth:
//! `vmap(grad(loss))` gives per-sample gradients, `jacfwd(jacrev(f))` is the Hessian.
//!
//! The transforms take functions of one argument structure (a [`Tree`]: a tensor, a tuple of
//! tensors, a map of named parameters...) and return functions of the same arguments.
//!
//! ```
//! use torchfn::func::{ARG0, grad, vmap};
//! use torchfn::Tensor;
//!
//! // per-sample gradients of a squared error with respect to the weights
//! let loss = |(w, x, y): (Tensor, Tensor, Tensor)| (&(&x * &w)?.sum()? - &y)?.square();
//! let w = torchfn::tensor([1.0f64, -1.0])?;
//! let x = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
//! let y = torchfn::tensor([0.0f64, 1.0, 2.0])?;
//! let per_sample = vmap(grad(loss, ARG0), (None, 0, 0), 0)((w, x, y))?;
//! assert_eq!(per_sample.shape()?, [3, 2]);
//! // example 0: residual 1·1 - 2·1 - 0 = -1, gradient 2 · (-1) · [1, 2]
//! assert_eq!(per_sample.select(0, 0)?.to_vec::<f64>()?, [-2.0, -4.0]);
//!
//! let x = torchfn::tensor([1.0f64, 2.0])?;
//! // f(x) = x², along the direction [1, 0]: 2 x v.
//! let (y, tangent) = torchfn::func::jvp(|x: &[Tensor]| &x[0] * &x[0], &[x.clone()], &[torchfn::tensor([1.0f64, 0.0])?])?;
//! assert_eq!(y.to_vec::<f64>()?, [1.0, 4.0]);
//! assert_eq!(tangent.to_vec::<f64>()?, [2.0, 0.0]);
//!
//! let (y, pullback) = torchfn::func::vjp(|x: &[Tensor]| &x[0] * &x[0], &[x])?;
//! let grads = pullback(torchfn::tensor([1.0f64, 1.0])?)?;
//! assert_eq!(grads[0].to_vec::<f64>()?, [2.0, 4.0]);
//! # let _ = y;
//! # Ok::<(), torchfn::Error>(())
//! ```

mod batching;
mod transforms;
mod tree;
mod vmap;

pub use batching::{Coverage, Randomness, vmap_coverage};
pub(crate) use batching::{Level, is_batched, sum_exited_levels, top_batch, wrap};
pub use transforms::{
    ARG0, ARG1, ARG2, ARG3, Argnum, Argnums, Objective, grad, grad_and_value, hessian, jacfwd, jacrev,
};
pub use tree::{Dims, DynTree, Tree};
pub use vmap::{VmapOptions, vmap, vmap_with};

use crate::autograd::{self, FunctionOutput, forward_ad};
use crate::error::{Result, bail};
use crate::tensor::Tensor;

/// `f(primals)` and its Jacobian-vector product along `tangents` (one per primal, of its shape),
/// by forward-mode AD (`torch.func.jvp`). Both come back shaped like `f`'s output (a tensor or a
/// tuple of them); outputs that do not depend on the primals get zero tangents. Runs in a
/// [`dual_level`](forward_ad::dual_level) of its own, so it cannot be called inside another.
pub fn jvp<O: FunctionOutput>(
    f: impl FnOnce(&[Tensor]) -> Result<O>,
    primals: &[Tensor],
    tangents: &[Tensor],
) -> Result<(O, O)> {
    if primals.len() != tangents.len() {
        bail!(
            Runtime,
            "jvp(f, primals, tangents): Expected primals and tangents to have the same length, but got {} primals \
             and {} tangents",
            primals.len(),
            tangents.len()
        );
    }
    let _level = forward_ad::dual_level()?;
    let duals: Vec<Tensor> =
        primals.iter().zip(tangents).map(|(p, t)| forward_ad::make_dual(p, t)).collect::<Result<_>>()?;
    let outputs = f(&duals)?.into_tensors();
    let (mut values, mut derivatives) = (Vec::new(), Vec::new());
    for out in &outputs {
        let unpacked = forward_ad::unpack_dual(out)?;
        derivatives.push(match unpacked.tangent {
            Some(t) => t,
            None => crate::zeros_like(out, None)?,
        });
        values.push(unpacked.primal);
    }
    Ok((shaped(values)?, shaped(derivatives)?))
}

/// `f(primals)` and its pullback (`torch.func.vjp`): a function from gradients of the outputs
/// (shaped like them) to the gradients of the primals (zeros where an output does not depend on
/// a primal), by reverse-mode AD. The pullback can be called many times; with grad mode on
/// when it is called, its results are differentiable again.
#[allow(clippy::type_complexity)]
pub fn vjp<O: FunctionOutput>(
    f: impl FnOnce(&[Tensor]) -> Result<O>,
    primals: &[Tensor],
) -> Result<(O, Box<dyn Fn(O) -> Result<Vec<Tensor>>>)> {
    let leaves: Vec<Tensor> = primals.iter().map(transforms::differentiable).collect::<Result<_>>()?;
    let outputs = {
        let _record = autograd::enable_grad();
        f(&leaves)?.into_tensors()
    };
    let values: Vec<Tensor> = outputs.iter().map(Tensor::detach).collect::<Result<_>>()?;
    let pullback = move |cotangents: O| -> Result<Vec<Tensor>> {
        let cotangents = cotangents.into_tensors();
        if cotangents.len() != outputs.len() {
            bail!(
                Runtime,
                "vjp: Expected the cotangents to have the outputs' structure: {} outputs, got {} cotangents",
                outputs.len(),
                cotangents.len()
            );
        }
        let differentiable: Vec<usize> =
            (0..outputs.len()).filter(|&i| outputs[i].requires_grad().unwrap_or(false)).collect();
        let grads = if differentiable.is_empty() {
            vec![None; leaves.len()]
        } else {
            let outs: Vec<Tensor> = differentiable.iter().map(|&i| outputs[i].clone()).collect();
            let cots: Vec<Tensor> = differentiable.iter().map(|&i| cotangents[i].clone()).collect();
            let create_graph = autograd::is_grad_enabled();
            autograd::grad(&outs, &leaves, Some(&cots), Some(true), create_graph, true)?
        };
        grads
            .into_iter()
            .zip(&leaves)
            .map(|(g, leaf)| match g {
                Some(g) => Ok(g),
                None => crate::zeros_like(leaf, None),
            })
            .collect()
    };
    Ok((shaped(values)?, Box::new(pullback)))
}

/// Tensors back in the shape of a function's output.
fn shaped<O: FunctionOutput>(tensors: Vec<Tensor>) -> Result<O> {
    O::from_tensors(tensors)
        .ok_or_else(|| crate::Error::runtime_error("func: the function's outputs changed in number"))
}
