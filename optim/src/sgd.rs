//! Stochastic gradient descent, with momentum, as PyTorch's `torch.optim.SGD`.

use crate::{Algorithm, Optim, ParamState, check_lr, check_weight_decay};
use torchfn_runtime::Result;
use torchfn_runtime::Tensor;
use torchfn_types::bail;

/// Stochastic gradient descent (`torch.optim.SGD`), optionally with momentum, dampening,
/// Nesterov momentum, weight decay, maximizing. Options: [`SgdOptions`].
///
/// ```
/// use torchfn::optim::{Optimizer, SGD, SgdOptions};
/// let w = torchfn::tensor([1.0f64, -2.0])?.requires_grad_(true)?;
/// let mut sgd = SGD::new(vec![w.clone()], SgdOptions::new(0.5))?;
/// (&w * &w)?.sum()?.backward()?; // grad = 2w
/// sgd.step()?;
/// assert_eq!(w.to_vec::<f64>()?, [0.0, 0.0]); // w - 0.5 * 2w
/// # Ok::<(), torchfn::Error>(())
/// ```
pub type SGD = Optim<SgdOptions>;

/// The options of [`SGD`], PyTorch's defaults but the learning rate, which is required.
#[derive(Clone, Debug, PartialEq)]
pub struct SgdOptions {
    /// The learning rate.
    pub lr: f64,
    /// The momentum factor (0: none).
    pub momentum: f64,
    /// The dampening of momentum: new gradients enter the buffer scaled by `1 - dampening`.
    pub dampening: f64,
    /// L2 penalty: `weight_decay * param` is added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum (needs a momentum and no dampening).
    pub nesterov: bool,
    /// Maximize the objective rather than minimize it.
    pub maximize: bool,
    /// PyTorch's `fused=True`: each parameter's step in one pass over its memory
    /// ([`_fused_sgd_`](torchfn_runtime::_fused_sgd_)), CPU float tensors only (half precision
    /// computed in float32), in the order of operations of PyTorch's fused kernel (within a few
    /// ulp of the default's).
    pub fused: bool,
}

impl SgdOptions {
    /// SGD with learning rate `lr`, no momentum, no weight decay.
    pub fn new(lr: f64) -> Self {
        SgdOptions {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
            fused: false,
        }
    }

    /// With learning rate `lr`.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }

    /// With momentum factor `momentum`.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// With dampening `dampening`.
    pub fn dampening(mut self, dampening: f64) -> Self {
        self.dampening = dampening;
        self
    }

    /// With weight decay (L2 penalty) `weight_decay`.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// With Nesterov momentum or not.
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }

    /// Maximizing or not.
    pub fn maximize(mut self, maximize: bool) -> Self {
        self.maximize = maximize;
        self
    }

    /// The fused step or the default one (see [`fused`](SgdOptions::fused)).
    pub fn fused(mut self, fused: bool) -> Self {
        self.fused = fused;
        self
    }
}

/// The state of one parameter under [`SGD`]: its momentum buffer, made at its first step
/// with momentum (`None` before; PyTorch has no state entry for the parameter then).
#[derive(Clone, Debug, Default)]
pub struct SgdState {
    /// The momentum buffer (PyTorch's `momentum_buffer`).
    pub momentum_buffer: Option<Tensor>,
}

impl ParamState for SgdState {
    fn tensors(&self) -> Vec<(&'static str, &Tensor)> {
        self.momentum_buffer.iter().map(|t| ("momentum_buffer", t)).collect()
    }

    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        Ok(SgdState { momentum_buffer: self.momentum_buffer.as_ref().map(f).transpose()? })
    }
}

impl Algorithm for SgdOptions {
    type State = SgdState;
    const NAME: &'static str = "SGD";

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        check_lr(self.lr)?;
        if self.momentum.is_nan() || self.momentum < 0.0 {
            bail!(Value, "Invalid momentum value: {:?}", self.momentum);
        }
        check_weight_decay(self.weight_decay)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            bail!(
                Value,
                "Nesterov momentum requires a momentum and zero dampening (momentum {:?}, dampening {:?})",
                self.momentum,
                self.dampening
            );
        }
        Ok(())
    }

    fn init_state(&self, _param: &Tensor) -> Result<SgdState> {
        Ok(SgdState::default())
    }

    /// PyTorch's `_single_tensor_sgd`, operation by operation.
    fn update(&self, param: &Tensor, grad: &Tensor, state: &mut SgdState) -> Result<()> {
        if self.fused {
            return self.fused_update(param, grad, state);
        }
        let mut grad = if self.maximize { grad.neg()? } else { grad.clone() };
        if self.weight_decay != 0.0 {
            grad = grad.add(param, self.weight_decay)?;
        }
        if self.momentum != 0.0 {
            let buf = match &state.momentum_buffer {
                None => state.momentum_buffer.insert(grad.detach()?.copy()?).clone(),
                Some(buf) => buf.mul_(&self.momentum.into())?.add_(&grad, 1.0 - self.dampening)?,
            };
            grad = if self.nesterov { grad.add(&buf, self.momentum)? } else { buf };
        }
        param.add_(&grad, -self.lr)?;
        Ok(())
    }
}

impl SgdOptions {
    /// [`update`](Algorithm::update) by the fused kernel (`_fused_sgd_`); the momentum buffer is
    /// made on the first step, as PyTorch's fused SGD makes it.
    fn fused_update(&self, param: &Tensor, grad: &Tensor, state: &mut SgdState) -> Result<()> {
        let is_first_step = self.momentum != 0.0 && state.momentum_buffer.is_none();
        let buffers = match (&state.momentum_buffer, self.momentum != 0.0) {
            (_, false) => Vec::new(),
            (Some(buf), true) => vec![buf.clone()],
            (None, true) => vec![torchfn_runtime::zeros_like(param, None)?],
        };
        let hyper = torchfn_runtime::SgdHyperparameters {
            lr: self.lr,
            momentum: self.momentum,
            dampening: self.dampening,
            weight_decay: self.weight_decay,
            nesterov: self.nesterov,
            maximize: self.maximize,
            is_first_step,
        };
        let options = torchfn_runtime::FusedSgdOptions { hyper, grad_scale: None, found_inf: None };
        torchfn_runtime::_fused_sgd_(std::slice::from_ref(param), &[grad.contiguous()?], &buffers, &options)?;
        // The buffer is kept once the step that fills it is taken.
        if is_first_step {
            state.momentum_buffer = buffers.into_iter().next();
        }
        Ok(())
    }
}
