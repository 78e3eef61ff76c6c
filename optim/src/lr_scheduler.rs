//! Learning-rate schedulers, as PyTorch's `torch.optim.lr_scheduler`: [`StepLR`] and
//! [`CosineAnnealingLR`].
//!
//! A scheduler does not hold its optimizer (which training steps need mutably): it is made
//! from one, and each [`step`](StepLR::step) is given it again, after the optimizer's own step,
//! as in PyTorch. The learning rates are computed as PyTorch computes them (its recursive
//! forms, from each group's current `lr`), so they match PyTorch's to the last bits.
//!
//! ```
//! use torchfn::optim::lr_scheduler::StepLR;
//! use torchfn::optim::{Optimizer, SGD, SgdOptions};
//!
//! let w = torchfn::zeros([2], None, None)?.requires_grad_(true)?;
//! let mut opt = SGD::new(vec![w], SgdOptions::new(0.1))?;
//! let mut sched = StepLR::new(&opt, 2, 0.5)?;
//! let mut lrs = vec![sched.get_last_lr()[0]];
//! for _ in 0..4 {
//!     opt.step()?;
//!     sched.step(&mut opt)?;
//!     lrs.push(sched.get_last_lr()[0]);
//! }
//! assert_eq!(lrs, [0.1, 0.1, 0.05, 0.05, 0.025]);
//! assert_eq!(opt.param_groups()[0].options.lr, 0.025);
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::f64::consts::PI;

use crate::{Algorithm, Optimizer};
use torchfn_runtime::Result;
use torchfn_types::bail;

/// What every scheduler keeps: the groups' initial learning rates, the epoch, the last rates.
#[derive(Clone, Debug)]
struct Schedule {
    base_lrs: Vec<f64>,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

/// The learning rates of `optimizer`'s groups.
fn lrs(optimizer: &impl Optimizer) -> Vec<f64> {
    optimizer.param_groups().iter().map(|g| g.options.lr()).collect()
}

impl Schedule {
    /// A schedule at epoch 0 (PyTorch's state after the constructor's initial step), starting
    /// from the groups' current learning rates.
    fn new(optimizer: &impl Optimizer) -> Self {
        let base_lrs = lrs(optimizer);
        Schedule { last_lr: base_lrs.clone(), base_lrs, last_epoch: 0 }
    }

    /// The next epoch: each group's `lr` becomes `next(epoch, lr, base_lr)`.
    fn advance(
        &mut self,
        name: &str,
        optimizer: &mut impl Optimizer,
        next: impl Fn(i64, f64, f64) -> f64,
    ) -> Result<()> {
        let groups = optimizer.param_groups_mut();
        if groups.len() != self.base_lrs.len() {
            bail!(
                Value,
                "{name}.step(): the optimizer has {} parameter groups, but the scheduler was made for {}; make the \
                 scheduler after adding groups",
                groups.len(),
                self.base_lrs.len()
            );
        }
        self.last_epoch += 1;
        for (group, &base) in groups.iter_mut().zip(&self.base_lrs) {
            let lr = next(self.last_epoch, group.options.lr(), base);
            group.options.set_lr(lr);
        }
        self.last_lr = lrs(optimizer);
        Ok(())
    }
}

/// Decays each group's learning rate by `gamma` every `step_size` epochs
/// (`torch.optim.lr_scheduler.StepLR`).
#[derive(Clone, Debug)]
pub struct StepLR {
    schedule: Schedule,
    step_size: usize,
    gamma: f64,
}

impl StepLR {
    /// A schedule for `optimizer`'s groups from their current learning rates; `step_size`
    /// must be positive (PyTorch's default `gamma` is 0.1).
    pub fn new(optimizer: &impl Optimizer, step_size: usize, gamma: f64) -> Result<Self> {
        if step_size == 0 {
            bail!(Value, "StepLR(): step_size must be a positive number of epochs, got 0");
        }
        Ok(StepLR { schedule: Schedule::new(optimizer), step_size, gamma })
    }

    /// Moves to the next epoch and sets the groups' learning rates
    /// (`StepLR.step()`); call it after `optimizer.step()`.
    pub fn step(&mut self, optimizer: &mut impl Optimizer) -> Result<()> {
        let (step_size, gamma) = (self.step_size as i64, self.gamma);
        self.schedule.advance(
            "StepLR",
            optimizer,
            |epoch, lr, _| {
                if epoch == 0 || epoch % step_size != 0 { lr } else { lr * gamma }
            },
        )
    }

    /// The learning rates it last set, one per group (`get_last_lr()`).
    pub fn get_last_lr(&self) -> &[f64] {
        &self.schedule.last_lr
    }

    /// The current epoch (`last_epoch`): 0 after construction, one more after each step.
    pub fn last_epoch(&self) -> i64 {
        self.schedule.last_epoch
    }
}

/// Anneals each group's learning rate from its initial value down to `eta_min` along a
/// cosine over `t_max` epochs, and back up over the next `t_max`, and so on
/// (`torch.optim.lr_scheduler.CosineAnnealingLR`).
#[derive(Clone, Debug)]
pub struct CosineAnnealingLR {
    schedule: Schedule,
    t_max: usize,
    eta_min: f64,
}

impl CosineAnnealingLR {
    /// A schedule for `optimizer`'s groups from their current learning rates; `t_max` must be
    /// positive (PyTorch's default `eta_min` is 0).
    pub fn new(optimizer: &impl Optimizer, t_max: usize, eta_min: f64) -> Result<Self> {
        if t_max == 0 {
            bail!(Value, "CosineAnnealingLR(): T_max must be a positive number of epochs, got 0");
        }
        Ok(CosineAnnealingLR { schedule: Schedule::new(optimizer), t_max, eta_min })
    }

    /// Moves to the next epoch and sets the groups' learning rates
    /// (`CosineAnnealingLR.step()`); call it after `optimizer.step()`.
    pub fn step(&mut self, optimizer: &mut impl Optimizer) -> Result<()> {
        let (t_max, eta_min) = (self.t_max as i64, self.eta_min);
        let t = t_max as f64;
        self.schedule.advance("CosineAnnealingLR", optimizer, |epoch, lr, base| {
            if (epoch - 1 - t_max).rem_euclid(2 * t_max) == 0 {
                lr + (base - eta_min) * (1.0 - (PI / t).cos()) / 2.0
            } else {
                (1.0 + (PI * epoch as f64 / t).cos()) / (1.0 + (PI * (epoch - 1) as f64 / t).cos()) * (lr - eta_min)
                    + eta_min
            }
        })
    }

    /// The learning rates it last set, one per group (`get_last_lr()`).
    pub fn get_last_lr(&self) -> &[f64] {
        &self.schedule.last_lr
    }

    /// The current epoch (`last_epoch`): 0 after construction, one more after each step.
    pub fn last_epoch(&self) -> i64 {
        self.schedule.last_epoch
    }
}
