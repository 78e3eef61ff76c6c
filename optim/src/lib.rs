//! Optimizers and learning-rate schedulers, as PyTorch's `torch.optim`: [`SGD`], [`Adam`] and
//! [`AdamW`], the schedulers of [`lr_scheduler`], and the loss scaling of float16 training,
//! [`GradScaler`] (PyTorch's `torch.amp.GradScaler`, also at `torchfn::amp`).
//!
//! ```
//! use torchfn::optim::{AdamW, AdamWOptions, Optimizer, ParamGroup, SGD, SgdOptions};
//!
//! // Fit w so that w * x ≈ y (y = 3x): the loss falls step by step.
//! let x = torchfn::tensor([1.0f32, 2.0, 3.0, 4.0])?;
//! let y = torchfn::tensor([3.0f32, 6.0, 9.0, 12.0])?;
//! let loss_of = |w: &torchfn::Tensor| -> torchfn::Result<torchfn::Tensor> {
//!     let err = (&(w * &x)? - &y)?;
//!     (&err * &err)?.mean()
//! };
//!
//! let w = torchfn::tensor([0.0f32])?.requires_grad_(true)?;
//! let mut sgd = SGD::new(vec![w.clone()], SgdOptions::new(0.01).momentum(0.9))?;
//! let mut last = f32::INFINITY;
//! for _ in 0..5 {
//!     sgd.zero_grad(true)?;
//!     let loss = loss_of(&w)?;
//!     loss.backward()?;
//!     sgd.step()?; // updates `w` in place
//!     let now = loss.item()?.to_f64() as f32;
//!     assert!(now < last);
//!     last = now;
//! }
//!
//! // AdamW with per-group options: a second group with its own learning rate.
//! let b = torchfn::tensor([1.0f32])?.requires_grad_(true)?;
//! let options = AdamWOptions::new(1e-3).weight_decay(0.01);
//! let mut adamw = AdamW::with_groups(vec![
//!     ParamGroup::new(vec![w.clone()], options.clone()),
//!     ParamGroup::new(vec![b.clone()], options.lr(0.1)),
//! ])?;
//! adamw.zero_grad(true)?;
//! (&loss_of(&w)? + &(&b * &b)?.sum()?)?.backward()?;
//! adamw.step()?;
//! assert!(b.to_vec::<f32>()?[0] < 1.0);
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! Parameters are tensors: leaves (usually requiring grad), given as one list or as several
//! [`ParamGroup`]s, each with its own options (learning rate, momentum...). Every optimizer is
//! an [`Optim`] over its options type (which implements [`Algorithm`]), so they share one
//! implementation of the [`Optimizer`] trait: `step` updates each parameter that has a gradient,
//! in place and without recording; state (momentum buffers, moment estimates) is kept per
//! parameter, keyed by the parameter's identity; `state_dict`/`load_state_dict` save and
//! restore it in PyTorch's structure. The update of each optimizer follows PyTorch's
//! single-tensor implementation (`foreach=False`, its CPU default) operation by operation;
//! Adam, AdamW and SGD also have PyTorch's `fused=True` ([`AdamConfig::fused`],
//! [`SgdOptions::fused`]): one pass over each parameter's memory per step (the `_fused_adam_`,
//! `_fused_adamw_` and `_fused_sgd_` operators), 8 and 2 times faster than the default on
//! resnet18's parameters, in the order of operations of PyTorch's fused kernels.

#![warn(missing_docs)]

mod adam;
mod grad_scaler;
pub mod lr_scheduler;
mod sgd;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

pub use adam::{Adam, AdamConfig, AdamOptions, AdamState, AdamW, AdamWOptions};
pub use grad_scaler::{GradScaler, GradScalerState};
pub use sgd::{SGD, SgdOptions, SgdState};

use torchfn_runtime::Tensor;
use torchfn_runtime::autograd::no_grad;
use torchfn_runtime::{Error, Result};
use torchfn_types::bail;

/// What every optimizer does, as PyTorch's `torch.optim.Optimizer`.
pub trait Optimizer {
    /// The per-group options (hyper-parameters) of this optimizer.
    type Options: Algorithm;

    /// Updates every parameter that has a gradient, in place, without recording a graph
    /// (`Optimizer.step`). Parameters without a gradient are skipped. The gradients are
    /// checked (shape, dtype, device) before any parameter changes.
    fn step(&mut self) -> Result<()>;

    /// Clears the parameters' gradients (`Optimizer.zero_grad`): `set_to_none` (PyTorch's
    /// default) drops them; otherwise they are detached and zeroed in place.
    fn zero_grad(&mut self, set_to_none: bool) -> Result<()>;

    /// The parameter groups, each with its parameters and options (`Optimizer.param_groups`).
    fn param_groups(&self) -> &[ParamGroup<Self::Options>];

    /// The parameter groups, to change their options (a learning rate, as schedulers do).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup<Self::Options>];

    /// Adds a group of parameters with its own options (`Optimizer.add_param_group`); the
    /// same checks as at construction.
    fn add_param_group(&mut self, group: ParamGroup<Self::Options>) -> Result<()>;

    /// A snapshot of the optimizer's state (`Optimizer.state_dict`): per-parameter state by
    /// parameter index, and each group's options and parameter indices. The tensors are
    /// copies, so training on does not change a saved snapshot.
    fn state_dict(&self) -> Result<OptimizerStateDict<Self::Options>>;

    /// Restores a snapshot taken by [`state_dict`](Optimizer::state_dict), from this or another
    /// optimizer with groups of the same sizes (`Optimizer.load_state_dict`): the groups take
    /// the saved options, the parameters copies of the saved state, converted to their dtype
    /// and device. A snapshot that does not fit (other group sizes, state of another shape)
    /// is an error and changes nothing.
    fn load_state_dict(&mut self, state: &OptimizerStateDict<Self::Options>) -> Result<()>;
}

/// The options of an optimizer and the update they define: what sets [`SGD`] apart from
/// [`Adam`]. Implement it to write an optimizer of your own; [`Optim`] does the rest.
pub trait Algorithm: Clone + fmt::Debug {
    /// The state kept per parameter (a momentum buffer, moment estimates).
    type State: ParamState;

    /// PyTorch's name of the optimizer, for messages (`"SGD"`).
    const NAME: &'static str;

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Sets the learning rate (schedulers call it).
    fn set_lr(&mut self, lr: f64);

    /// Checks the options, with PyTorch's messages (`Invalid learning rate: -1.0`).
    fn validate(&self) -> Result<()>;

    /// The state of `param` before its first update.
    fn init_state(&self, param: &Tensor) -> Result<Self::State>;

    /// Updates `param` in place from its gradient `grad` (of the same shape, dtype and device)
    /// and its state. Runs without recording.
    fn update(&self, param: &Tensor, grad: &Tensor, state: &mut Self::State) -> Result<()>;
}

/// The per-parameter state of an optimizer: named tensors of the parameter's shape, and
/// whatever numbers it counts.
pub trait ParamState: Clone + fmt::Debug {
    /// The state's tensors, by PyTorch's names (`"exp_avg"`, `"momentum_buffer"`).
    fn tensors(&self) -> Vec<(&'static str, &Tensor)>;

    /// The same state with each tensor replaced by `f` of it (copies, conversions).
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self>;
}

/// A group of parameters and the options they are optimized with (one entry of PyTorch's
/// `param_groups`).
///
/// Several groups let parts of a model train with their own options; build each from a
/// shared options value:
///
/// ```
/// use torchfn::optim::{Optimizer, ParamGroup, SGD, SgdOptions};
/// let (a, b) = (torchfn::zeros([3], None, None)?, torchfn::zeros([2], None, None)?);
/// let base = SgdOptions::new(0.1).momentum(0.9);
/// let sgd = SGD::with_groups(vec![ParamGroup::new(vec![a], base.clone().lr(0.01)), ParamGroup::new(vec![b], base)])?;
/// assert_eq!(sgd.param_groups()[0].options.lr, 0.01);
/// assert_eq!(sgd.param_groups()[1].options.momentum, 0.9);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ParamGroup<O> {
    /// The parameters: leaf tensors, updated in place.
    pub params: Vec<Tensor>,
    /// Their options.
    pub options: O,
}

impl<O> ParamGroup<O> {
    /// A group of `params` optimized with `options`.
    pub fn new(params: Vec<Tensor>, options: O) -> Self {
        ParamGroup { params, options }
    }
}

/// A snapshot of an optimizer's state, in PyTorch's structure: parameters are named by their
/// index, counting through the groups in order.
#[derive(Clone, Debug)]
pub struct OptimizerStateDict<O: Algorithm> {
    /// The state of each parameter that has one (it had a gradient at some step), by index.
    pub state: BTreeMap<usize, O::State>,
    /// Each group's options and the indices of its parameters.
    pub param_groups: Vec<GroupState<O>>,
}

/// One group of an [`OptimizerStateDict`]: its options and its parameters' indices.
#[derive(Clone, Debug)]
pub struct GroupState<O> {
    /// The group's options.
    pub options: O,
    /// The indices of the group's parameters.
    pub params: Vec<usize>,
}

/// An optimizer: parameter groups with options of type `O`, and per-parameter state. [`SGD`],
/// [`Adam`] and [`AdamW`] are this type with their options; construct them with
/// [`new`](Optim::new) (one group) or [`with_groups`](Optim::with_groups), and drive them
/// through the [`Optimizer`] trait.
pub struct Optim<O: Algorithm> {
    groups: Vec<ParamGroup<O>>,
    /// State by parameter identity (the data a parameter's handles share: a subclass view of a
    /// parameter is the same parameter); the handle kept beside it keeps the identity from
    /// being reused by another tensor.
    state: HashMap<usize, (Tensor, O::State)>,
}

impl<O: Algorithm> fmt::Debug for Optim<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(O::NAME).field("param_groups", &self.groups).finish_non_exhaustive()
    }
}

impl<O: Algorithm> Optim<O> {
    /// An optimizer of `params`, one group, with `options` (`SGD(params, lr=...)`). An empty
    /// list, a parameter given twice, a non-leaf tensor or invalid options are errors.
    pub fn new(params: Vec<Tensor>, options: O) -> Result<Self> {
        Self::with_groups(vec![ParamGroup::new(params, options)])
    }

    /// An optimizer of several groups, each with its own options (`SGD([{"params": ...,
    /// "lr": ...}, ...])`). A parameter may appear in one group only.
    pub fn with_groups(groups: Vec<ParamGroup<O>>) -> Result<Self> {
        if groups.iter().all(|g| g.params.is_empty()) {
            return Err(Error::value_error("optimizer got an empty parameter list"));
        }
        let mut optim = Optim { groups: Vec::with_capacity(groups.len()), state: HashMap::new() };
        for group in groups {
            optim.add_param_group(group)?;
        }
        Ok(optim)
    }
}

/// Every parameter of `groups` with its index (as in the state dict) and its group's options.
fn indexed_params<O>(groups: &[ParamGroup<O>]) -> impl Iterator<Item = (usize, &Tensor, &O)> {
    groups.iter().flat_map(|g| g.params.iter().map(move |p| (p, &g.options))).enumerate().map(|(i, (p, o))| (i, p, o))
}

/// The gradient of parameter `index`, when it has one, checked against the parameter.
fn checked_grad(name: &str, index: usize, param: &Tensor) -> Result<Option<Tensor>> {
    if let Some(device) = param.__moved_to() {
        bail!(
            Runtime,
            "{name}.step(): parameter {index} was moved to {device} by the module's to_device() after this \
             optimizer was built, so the optimizer holds the tensor left behind; move the module first, then \
             build the optimizer over its parameters()"
        );
    }
    let Some(grad) = param.grad()? else { return Ok(None) };
    let (pshape, gshape) = (param.shape()?, grad.shape()?);
    if pshape != gshape {
        bail!(
            Runtime,
            "{name}.step(): the gradient of parameter {index} has shape {:?}, but the parameter has shape {:?}",
            gshape.as_ref(),
            pshape.as_ref()
        );
    }
    let (pdev, gdev) = (param.device()?, grad.device()?);
    if pdev != gdev {
        bail!(
            Runtime,
            "{name}.step(): the gradient of parameter {index} is on {gdev}, but the parameter is on {pdev}; move \
             one of them"
        );
    }
    let (pdtype, gdtype) = (param.dtype()?, grad.dtype()?);
    if pdtype != gdtype {
        bail!(
            Runtime,
            "{name}.step(): the gradient of parameter {index} is {gdtype}, but the parameter is {pdtype}; convert \
             the gradient"
        );
    }
    Ok(Some(grad))
}

impl<O: Algorithm> Optimizer for Optim<O> {
    type Options = O;

    fn step(&mut self) -> Result<()> {
        let _guard = no_grad();
        for group in &self.groups {
            group.options.validate()?;
        }
        let mut work = Vec::new();
        for (index, param, options) in indexed_params(&self.groups) {
            if let Some(grad) = checked_grad(O::NAME, index, param)? {
                work.push((param, grad, options));
            }
        }
        for (param, grad, options) in work {
            let state = match self.state.entry(param.__identity()) {
                std::collections::hash_map::Entry::Occupied(e) => &mut e.into_mut().1,
                std::collections::hash_map::Entry::Vacant(e) => {
                    &mut e.insert((param.clone(), options.init_state(param)?)).1
                }
            };
            options.update(param, &grad, state)?;
        }
        Ok(())
    }

    fn zero_grad(&mut self, set_to_none: bool) -> Result<()> {
        let _guard = no_grad();
        for group in &self.groups {
            for param in &group.params {
                let Some(grad) = param.grad()? else { continue };
                if set_to_none {
                    param.set_grad(None)?;
                } else {
                    if grad.grad_fn()?.is_some() {
                        grad.detach_()?;
                    } else {
                        grad.requires_grad_(false)?;
                    }
                    grad.zero_()?;
                }
            }
        }
        Ok(())
    }

    fn param_groups(&self) -> &[ParamGroup<O>] {
        &self.groups
    }

    fn param_groups_mut(&mut self) -> &mut [ParamGroup<O>] {
        &mut self.groups
    }

    fn add_param_group(&mut self, group: ParamGroup<O>) -> Result<()> {
        group.options.validate()?;
        let existing: HashSet<usize> = self.groups.iter().flat_map(|g| &g.params).map(Tensor::__identity).collect();
        let mut seen = HashSet::new();
        for param in &group.params {
            if param.is_duck() {
                return Err(Error::type_error(format!(
                    "optimizer can only optimize Tensors, but one of the params is a duck {}",
                    torchfn_runtime::Class::of(param).name()
                )));
            }
            if !param.is_leaf()? && !param.retains_grad()? {
                return Err(Error::value_error("can't optimize a non-leaf Tensor"));
            }
            if !seen.insert(param.__identity()) {
                return Err(Error::value_error(
                    "optimizer contains a parameter group with duplicate parameters: give each parameter once",
                ));
            }
            if existing.contains(&param.__identity()) {
                return Err(Error::value_error("some parameters appear in more than one parameter group"));
            }
        }
        self.groups.push(group);
        Ok(())
    }

    fn state_dict(&self) -> Result<OptimizerStateDict<O>> {
        let mut state = BTreeMap::new();
        for (index, param, _) in indexed_params(&self.groups) {
            if let Some((_, s)) = self.state.get(&param.__identity()) {
                state.insert(index, s.map_tensors(&mut |t| t.copy())?);
            }
        }
        let mut next = 0;
        let param_groups = self
            .groups
            .iter()
            .map(|g| {
                let params = (next..next + g.params.len()).collect();
                next += g.params.len();
                GroupState { options: g.options.clone(), params }
            })
            .collect();
        Ok(OptimizerStateDict { state, param_groups })
    }

    fn load_state_dict(&mut self, saved: &OptimizerStateDict<O>) -> Result<()> {
        if saved.param_groups.len() != self.groups.len() {
            bail!(
                Value,
                "loaded state dict has a different number of parameter groups: {} saved, {} in the optimizer",
                saved.param_groups.len(),
                self.groups.len()
            );
        }
        // The saved index of each parameter, group by group.
        let mut param_of = HashMap::new();
        for (i, (mine, theirs)) in self.groups.iter().zip(&saved.param_groups).enumerate() {
            if mine.params.len() != theirs.params.len() {
                bail!(
                    Value,
                    "loaded state dict contains a parameter group that doesn't match the size of optimizer's group: \
                     group {i} has {} parameters saved and {} in the optimizer",
                    theirs.params.len(),
                    mine.params.len()
                );
            }
            theirs.options.validate()?;
            for (param, &index) in mine.params.iter().zip(&theirs.params) {
                if param_of.insert(index, param).is_some() {
                    bail!(Value, "loaded state dict lists parameter index {index} in more than one place");
                }
            }
        }
        let mut state = HashMap::new();
        for (&index, saved_state) in &saved.state {
            let Some(&param) = param_of.get(&index) else {
                bail!(Value, "loaded state dict has state for parameter {index}, which no parameter group lists");
            };
            let (shape, dtype, device) = (param.shape()?, param.dtype()?, param.device()?);
            for (name, t) in saved_state.tensors() {
                if t.shape()? != shape {
                    bail!(
                        Value,
                        "loaded state dict's {name} of parameter {index} has shape {:?}, but the parameter has shape \
                         {:?}",
                        t.shape()?.as_ref(),
                        shape.as_ref()
                    );
                }
            }
            let copied = saved_state.map_tensors(&mut |t| t.to_device(device, Some(dtype), false, true))?;
            state.insert(param.__identity(), (param.clone(), copied));
        }
        for (group, theirs) in self.groups.iter_mut().zip(&saved.param_groups) {
            group.options = theirs.options.clone();
        }
        self.state = state;
        Ok(())
    }
}

/// PyTorch's check of a learning rate (NaN is refused too).
fn check_lr(lr: f64) -> Result<()> {
    if lr.is_nan() || lr < 0.0 {
        bail!(Value, "Invalid learning rate: {lr:?}");
    }
    Ok(())
}

/// PyTorch's check of a weight decay.
fn check_weight_decay(weight_decay: f64) -> Result<()> {
    if weight_decay.is_nan() || weight_decay < 0.0 {
        bail!(Value, "Invalid weight_decay value: {weight_decay:?}");
    }
    Ok(())
}
