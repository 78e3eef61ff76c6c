//! Adam and AdamW, as PyTorch's `torch.optim.Adam` and `torch.optim.AdamW`: one
//! implementation, the weight decay added to the gradient (Adam) or decoupled from it (AdamW).

use crate::{Algorithm, Optim, ParamState, check_lr, check_weight_decay};
use torchfn_runtime::Result;
use torchfn_runtime::Tensor;
use torchfn_types::bail;

/// Adam (`torch.optim.Adam`): adaptive moment estimation, weight decay as an L2 penalty
/// added to the gradient. Options: [`AdamOptions`].
pub type Adam = Optim<AdamOptions>;

/// AdamW (`torch.optim.AdamW`): Adam with decoupled weight decay, the parameters shrunk by
/// `lr * weight_decay` before each update. Options: [`AdamWOptions`].
///
/// ```
/// use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
/// let w = torchfn::tensor([1.0f32])?.requires_grad_(true)?;
/// let mut opt = AdamW::new(vec![w.clone()], AdamWOptions::new(0.1))?;
/// (&w * 3.0)?.sum()?.backward()?;
/// opt.step()?;
/// // decayed by 1 - 0.1 * 0.01, then one Adam step of size lr against the gradient's sign
/// assert!((w.to_vec::<f32>()?[0] - (0.999 - 0.1)).abs() < 1e-6);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub type AdamW = Optim<AdamWOptions>;

/// The options of [`Adam`]: PyTorch's defaults (betas (0.9, 0.999), eps 1e-8, no weight decay).
pub type AdamOptions = AdamConfig<false>;

/// The options of [`AdamW`]: PyTorch's defaults (betas (0.9, 0.999), eps 1e-8, weight decay 0.01).
pub type AdamWOptions = AdamConfig<true>;

/// The options of Adam (`DECOUPLED = false`, [`AdamOptions`]) and AdamW (`DECOUPLED = true`,
/// [`AdamWOptions`]); use those names.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamConfig<const DECOUPLED: bool> {
    /// The learning rate.
    pub lr: f64,
    /// The decay rates of the running averages of the gradient and of its square.
    pub betas: (f64, f64),
    /// Added to the denominator for numerical stability.
    pub eps: f64,
    /// Weight decay: an L2 penalty for Adam, a decoupled decay for AdamW.
    pub weight_decay: f64,
    /// The AMSGrad variant: normalize by the largest second moment seen so far.
    pub amsgrad: bool,
    /// Maximize the objective rather than minimize it.
    pub maximize: bool,
    /// PyTorch's `fused=True`: each parameter's step in one pass over its memory
    /// ([`_fused_adam_`](torchfn_runtime::_fused_adam_)), CPU float tensors only (half precision
    /// computed in float32), in the order of operations of PyTorch's fused kernel (within a few
    /// ulp of the default's).
    pub fused: bool,
}

impl AdamOptions {
    /// Adam with learning rate `lr` (PyTorch's default is 1e-3) and PyTorch's other defaults.
    pub fn new(lr: f64) -> Self {
        AdamConfig::defaults(lr, 0.0)
    }
}

impl AdamWOptions {
    /// AdamW with learning rate `lr` (PyTorch's default is 1e-3) and PyTorch's other defaults,
    /// weight decay 0.01 among them.
    pub fn new(lr: f64) -> Self {
        AdamConfig::defaults(lr, 1e-2)
    }
}

impl<const DECOUPLED: bool> AdamConfig<DECOUPLED> {
    fn defaults(lr: f64, weight_decay: f64) -> Self {
        AdamConfig { lr, betas: (0.9, 0.999), eps: 1e-8, weight_decay, amsgrad: false, maximize: false, fused: false }
    }

    /// With learning rate `lr`.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }

    /// With decay rates `betas`, each in [0, 1).
    pub fn betas(mut self, betas: (f64, f64)) -> Self {
        self.betas = betas;
        self
    }

    /// With `eps` added to the denominator.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// With weight decay `weight_decay`.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// With the AMSGrad variant or not.
    pub fn amsgrad(mut self, amsgrad: bool) -> Self {
        self.amsgrad = amsgrad;
        self
    }

    /// Maximizing or not.
    pub fn maximize(mut self, maximize: bool) -> Self {
        self.maximize = maximize;
        self
    }

    /// The fused step or the default one (see [`fused`](AdamConfig::fused)).
    pub fn fused(mut self, fused: bool) -> Self {
        self.fused = fused;
        self
    }
}

/// The state of one parameter under [`Adam`] or [`AdamW`].
#[derive(Clone, Debug)]
pub struct AdamState {
    /// How many updates the parameter has had (PyTorch's `step`).
    pub step: u64,
    /// The running average of the gradient (`exp_avg`).
    pub exp_avg: Tensor,
    /// The running average of the squared gradient (`exp_avg_sq`).
    pub exp_avg_sq: Tensor,
    /// The largest `exp_avg_sq` so far, with AMSGrad (`max_exp_avg_sq`).
    pub max_exp_avg_sq: Option<Tensor>,
}

impl ParamState for AdamState {
    fn tensors(&self) -> Vec<(&'static str, &Tensor)> {
        let mut tensors = vec![("exp_avg", &self.exp_avg), ("exp_avg_sq", &self.exp_avg_sq)];
        tensors.extend(self.max_exp_avg_sq.iter().map(|t| ("max_exp_avg_sq", t)));
        tensors
    }

    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        Ok(AdamState {
            step: self.step,
            exp_avg: f(&self.exp_avg)?,
            exp_avg_sq: f(&self.exp_avg_sq)?,
            max_exp_avg_sq: self.max_exp_avg_sq.as_ref().map(f).transpose()?,
        })
    }
}

impl<const DECOUPLED: bool> Algorithm for AdamConfig<DECOUPLED> {
    type State = AdamState;
    const NAME: &'static str = if DECOUPLED { "AdamW" } else { "Adam" };

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn validate(&self) -> Result<()> {
        check_lr(self.lr)?;
        if self.eps.is_nan() || self.eps < 0.0 {
            bail!(Value, "Invalid epsilon value: {:?}", self.eps);
        }
        for (i, beta) in [self.betas.0, self.betas.1].into_iter().enumerate() {
            if !(0.0..1.0).contains(&beta) {
                bail!(Value, "Invalid beta parameter at index {i}: {beta:?} (betas must lie in [0, 1))");
            }
        }
        check_weight_decay(self.weight_decay)
    }

    fn init_state(&self, param: &Tensor) -> Result<AdamState> {
        let zeros = || torchfn_runtime::zeros_like(param, None);
        let max_exp_avg_sq = if self.amsgrad { Some(zeros()?) } else { None };
        Ok(AdamState { step: 0, exp_avg: zeros()?, exp_avg_sq: zeros()?, max_exp_avg_sq })
    }

    /// PyTorch's `_single_tensor_adam` (which AdamW runs with decoupled weight decay),
    /// operation by operation; the scalar coefficients are computed in f64, as Python does.
    fn update(&self, param: &Tensor, grad: &Tensor, state: &mut AdamState) -> Result<()> {
        if self.fused {
            return self.fused_update(param, grad, state);
        }
        let (beta1, beta2) = self.betas;
        let mut grad = if self.maximize { grad.neg()? } else { grad.clone() };
        state.step += 1;
        if self.weight_decay != 0.0 {
            if DECOUPLED {
                param.mul_(&(1.0 - self.lr * self.weight_decay).into())?;
            } else {
                grad = grad.add(param, self.weight_decay)?;
            }
        }
        state.exp_avg.lerp_(&grad, &(1.0 - beta1).into())?;
        state.exp_avg_sq.mul_(&beta2.into())?.addcmul_(&grad, &grad, 1.0 - beta2)?;

        let step = state.step as f64;
        let bias_correction1 = 1.0 - beta1.powf(step);
        let bias_correction2 = 1.0 - beta2.powf(step);
        let step_size = self.lr / bias_correction1;
        let bias_correction2_sqrt = bias_correction2.powf(0.5); // Python's `** 0.5`

        let second_moment = if self.amsgrad {
            let max = match &state.max_exp_avg_sq {
                Some(max) => max.clone(),
                None => state.max_exp_avg_sq.insert(torchfn_runtime::zeros_like(param, None)?).clone(),
            };
            max.copy_(&max.maximum(&state.exp_avg_sq)?)?
        } else {
            state.exp_avg_sq.clone()
        };
        let denom = second_moment.sqrt()?.div(&bias_correction2_sqrt.into(), None)?.add_(&self.eps.into(), 1)?;
        param.addcdiv_(&state.exp_avg, &denom, -step_size)?;
        Ok(())
    }
}

impl<const DECOUPLED: bool> AdamConfig<DECOUPLED> {
    /// [`update`](Algorithm::update) by the fused kernel (`_fused_adam_` or `_fused_adamw_`).
    fn fused_update(&self, param: &Tensor, grad: &Tensor, state: &mut AdamState) -> Result<()> {
        // PyTorch keeps a fused optimizer's step count as a float32 tensor; it counts once the
        // step is taken.
        let step = torchfn_runtime::tensor([(state.step + 1) as f32])?;
        let hyper = torchfn_runtime::AdamHyperparameters {
            lr: self.lr,
            beta1: self.betas.0,
            beta2: self.betas.1,
            weight_decay: self.weight_decay,
            eps: self.eps,
            amsgrad: self.amsgrad,
            maximize: self.maximize,
        };
        let options = torchfn_runtime::FusedAdamOptions { hyper, grad_scale: None, found_inf: None };
        let max_exp_avg_sq = match (&state.max_exp_avg_sq, self.amsgrad) {
            (Some(max), true) => vec![max.clone()],
            (None, true) => vec![state.max_exp_avg_sq.insert(torchfn_runtime::zeros_like(param, None)?).clone()],
            (_, false) => Vec::new(),
        };
        let step_of = if DECOUPLED { torchfn_runtime::_fused_adamw_ } else { torchfn_runtime::_fused_adam_ };
        let (exp_avg, exp_avg_sq) = (state.exp_avg.clone(), state.exp_avg_sq.clone());
        step_of(
            std::slice::from_ref(param),
            &[grad.contiguous()?],
            &[exp_avg],
            &[exp_avg_sq],
            &max_exp_avg_sq,
            &[step],
            &options,
        )?;
        state.step += 1;
        Ok(())
    }
}
