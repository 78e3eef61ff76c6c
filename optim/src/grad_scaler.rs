//! Loss scaling for float16 training (`torch.amp.GradScaler`).

use std::collections::HashMap;

use torchfn_runtime::autograd::no_grad;
use torchfn_runtime::{ById, DType, Error, Result, Tensor};

use crate::Optimizer;

/// Where one optimizer is between two [`GradScaler::update`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Unscaled,
    Stepped,
}

/// What the scaler knows of one optimizer since the last update: its stage, and whether its
/// gradients held an infinity or NaN.
#[derive(Clone, Copy, Debug)]
struct Record {
    stage: Stage,
    found_inf: bool,
}

/// The state of a [`GradScaler`], as PyTorch's `GradScaler.state_dict()` holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct GradScalerState {
    /// The current scale.
    pub scale: f64,
    /// What the scale is multiplied by after `growth_interval` steps without an infinity.
    pub growth_factor: f64,
    /// What the scale is multiplied by after a step with an infinity or NaN.
    pub backoff_factor: f64,
    /// How many steps without an infinity the scale waits before growing.
    pub growth_interval: i64,
    /// How many steps without an infinity have passed since the scale last changed.
    pub growth_tracker: i64,
}

/// Scales a float16 loss up so that its small gradients do not flush to zero, then unscales
/// the gradients before the optimizer uses them, skipping the steps whose gradients overflowed
/// and adapting the scale (`torch.amp.GradScaler`): `scale(loss).backward()`, `step(&mut
/// optimizer)`, `update(None)` each iteration.
///
/// The scale starts at `2^16`; a step whose gradients hold an infinity or NaN is skipped and
/// halves it (`backoff_factor`); `growth_interval` (2000) steps in a row without one double it
/// (`growth_factor`). As in PyTorch, the parameters the optimizer updates must not be float16
/// themselves (their gradients could not be unscaled exactly): keep float32 parameters and run
/// the model under [`autocast`](torchfn_runtime::autocast).
///
/// An optimizer is known by its parameters (the first of its first group), so one scaler can
/// serve several optimizers.
///
/// ```
/// use torchfn::amp::GradScaler;
/// use torchfn::optim::{Optimizer, SGD, SgdOptions};
///
/// let w = torchfn::tensor([1.0f32, -2.0])?.requires_grad_(true)?;
/// let mut sgd = SGD::new(vec![w.clone()], SgdOptions::new(0.1))?;
/// let mut scaler = GradScaler::new();
///
/// let loss = (&w * &w)?.sum()?;
/// scaler.scale(&loss)?.backward()?;            // gradients 65536 times too large
/// assert!(scaler.step(&mut sgd)?);             // unscaled, finite: the step is taken
/// scaler.update(None)?;
/// assert_eq!(w.to_vec::<f32>()?, [0.8, -1.6]); // w - 0.1 * 2w
///
/// sgd.zero_grad(true)?;
/// let overflow = (&w * f64::INFINITY)?.sum()?;
/// scaler.scale(&overflow)?.backward()?;
/// assert!(!scaler.step(&mut sgd)?);            // an infinite gradient: skipped
/// scaler.update(None)?;
/// assert_eq!(scaler.get_scale(), 32768.0);     // and the scale backs off
/// assert_eq!(w.to_vec::<f32>()?, [0.8, -1.6]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Debug)]
pub struct GradScaler {
    state: GradScalerState,
    enabled: bool,
    records: HashMap<ById, Record>,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

impl GradScaler {
    /// PyTorch's defaults: scale `2^16`, growth factor 2, backoff factor 0.5, growth interval
    /// 2000, enabled.
    pub fn new() -> GradScaler {
        GradScaler::with_options(65536.0, 2.0, 0.5, 2000, true).expect("the defaults are valid")
    }

    /// A scaler with the given initial scale and factors (`GradScaler(init_scale,
    /// growth_factor, backoff_factor, growth_interval, enabled)`). A disabled scaler passes
    /// everything through: `scale` returns the loss as it is and `step` just steps.
    pub fn with_options(
        init_scale: f64,
        growth_factor: f64,
        backoff_factor: f64,
        growth_interval: i64,
        enabled: bool,
    ) -> Result<GradScaler> {
        if growth_factor <= 1.0 {
            return Err(Error::value_error(format!("GradScaler: growth_factor should be > 1, got {growth_factor}")));
        }
        if !(backoff_factor > 0.0 && backoff_factor < 1.0) {
            return Err(Error::value_error(format!("GradScaler: backoff_factor should be < 1, got {backoff_factor}")));
        }
        if growth_interval <= 0 {
            return Err(Error::value_error(format!(
                "GradScaler: growth_interval should be a positive integer, got {growth_interval}"
            )));
        }
        let state =
            GradScalerState { scale: init_scale, growth_factor, backoff_factor, growth_interval, growth_tracker: 0 };
        Ok(GradScaler { state, enabled, records: HashMap::new() })
    }

    /// Whether the scaler scales (`is_enabled`).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The current scale (`get_scale`); 1 when disabled.
    pub fn get_scale(&self) -> f64 {
        if self.enabled { self.state.scale } else { 1.0 }
    }

    /// `outputs` times the scale (`scale`): a differentiable product, in `outputs`' dtype.
    pub fn scale(&self, outputs: &Tensor) -> Result<Tensor> {
        if !self.enabled {
            return Ok(outputs.clone());
        }
        outputs * self.state.scale
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale, in place, and notes
    /// whether any holds an infinity or NaN (`unscale_`). Call it before changing the
    /// gradients (clipping them); [`step`](GradScaler::step) then does not unscale again. Twice
    /// for one optimizer between two updates is an error, as are float16 gradients.
    pub fn unscale_<O: Optimizer>(&mut self, optimizer: &mut O) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let key = identity(optimizer)?;
        match self.records.get(&key).map(|r| r.stage) {
            Some(Stage::Unscaled) => {
                return Err(Error::runtime_error(
                    "unscale_() has already been called on this optimizer since the last update().",
                ));
            }
            Some(Stage::Stepped) => return Err(Error::runtime_error("unscale_() is being called after step().")),
            None => {}
        }
        // As PyTorch: the reciprocal in float64, then rounded to float32.
        let inv_scale = f64::from((1.0 / self.state.scale) as f32);
        let _no_grad = no_grad();
        let mut grads = Vec::new();
        for p in optimizer.param_groups().iter().flat_map(|g| &g.params) {
            if let Some(grad) = p.grad()? {
                grads.push(grad);
            }
        }
        // Every gradient checked before any is changed, as PyTorch's.
        for grad in &grads {
            if grad.dtype()? == DType::Float16 {
                return Err(Error::value_error("Attempting to unscale FP16 gradients."));
            }
        }
        // Whether any element is infinite or NaN, read once for all the gradients.
        let inv_scale = Tensor::scalar(inv_scale);
        let mut found: Option<Tensor> = None;
        for grad in &grads {
            let bad = torchfn_runtime::logical_or(&torchfn_runtime::isinf(grad)?, &torchfn_runtime::isnan(grad)?)?;
            let bad = torchfn_runtime::any(&bad)?;
            found = Some(match found {
                Some(so_far) => torchfn_runtime::logical_or(&so_far, &bad)?,
                None => bad,
            });
            grad.mul_(&inv_scale)?;
        }
        let found_inf = match found {
            Some(found) => found.item()?.to_f64() != 0.0,
            None => false,
        };
        self.records.insert(key, Record { stage: Stage::Unscaled, found_inf });
        Ok(())
    }

    /// Unscales `optimizer`'s gradients (unless [`unscale_`](GradScaler::unscale_) did) and
    /// steps it when they are all finite (`step`): `true` when it stepped, `false` when the
    /// step was skipped. Twice for one optimizer between two updates is an error.
    pub fn step<O: Optimizer>(&mut self, optimizer: &mut O) -> Result<bool> {
        if !self.enabled {
            optimizer.step()?;
            return Ok(true);
        }
        let key = identity(optimizer)?;
        if self.records.get(&key).is_some_and(|r| r.stage == Stage::Stepped) {
            return Err(Error::runtime_error("step() has already been called since the last update()."));
        }
        if !self.records.contains_key(&key) {
            self.unscale_(optimizer)?;
        }
        let record =
            self.records.get_mut(&key).ok_or_else(|| Error::runtime_error("step(): unscale_ kept no record"))?;
        record.stage = Stage::Stepped;
        if record.found_inf {
            return Ok(false);
        }
        optimizer.step()?;
        Ok(true)
    }

    /// Adapts the scale to the steps since the last update (`update`): halved (times
    /// `backoff_factor`) if any optimizer's gradients held an infinity or NaN, doubled (times
    /// `growth_factor`) after `growth_interval` clean updates in a row; or set to `new_scale`
    /// when given. An error when no optimizer was unscaled or stepped since the last update.
    pub fn update(&mut self, new_scale: Option<f64>) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if let Some(scale) = new_scale {
            self.state.scale = scale;
        } else {
            if self.records.is_empty() {
                return Err(Error::runtime_error("No inf checks were recorded prior to update."));
            }
            let s = &mut self.state;
            if self.records.values().any(|r| r.found_inf) {
                s.scale *= s.backoff_factor;
                s.growth_tracker = 0;
            } else {
                s.growth_tracker += 1;
                if s.growth_tracker == s.growth_interval {
                    s.scale *= s.growth_factor;
                    s.growth_tracker = 0;
                }
            }
            // The scale is a float32 in PyTorch.
            s.scale = f64::from(s.scale as f32);
        }
        self.records.clear();
        Ok(())
    }

    /// The scale, its factors and interval, and the growth tracker (`state_dict`).
    pub fn state_dict(&self) -> GradScalerState {
        self.state.clone()
    }

    /// Restores a [`state_dict`](GradScaler::state_dict) (`load_state_dict`).
    pub fn load_state_dict(&mut self, state: &GradScalerState) -> Result<()> {
        let checked = GradScaler::with_options(
            state.scale,
            state.growth_factor,
            state.backoff_factor,
            state.growth_interval,
            self.enabled,
        )?;
        self.state = GradScalerState { growth_tracker: state.growth_tracker, ..checked.state };
        Ok(())
    }
}

/// How the scaler knows an optimizer: by its first parameter.
fn identity<O: Optimizer>(optimizer: &O) -> Result<ById> {
    optimizer
        .param_groups()
        .iter()
        .flat_map(|g| g.params.first())
        .next()
        .map(ById::new)
        .ok_or_else(|| Error::value_error("GradScaler: the optimizer has no parameters"))
}
