//! PyTorch's training references (`tests/golden/workloads/<name>`, format in the README there) and
//! the checks a port runs against them: the module tree and state_dict keys, the logits, loss and
//! every gradient of one training step, and three AdamW steps, within `meta.json`'s tolerances.
//! Each check returns what it measured, or a message saying what differs and where.

use std::path::PathBuf;

use serde_json::Value as Json;
use torchfn::nn::{Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

/// One model's reference: `meta.json` and the three safetensors files.
pub struct Reference {
    /// The folder's name (`llama_tiny`).
    pub name: String,
    /// `meta.json`.
    pub meta: Json,
    /// The initial state_dict.
    pub init: StateDict,
    /// The batch.
    pub inputs: StateDict,
    /// What PyTorch computed: `logits`, `loss`, `grad/*`, `step1/*`, `step3/*`, `losses`.
    pub expect: StateDict,
}

/// The largest errors of one training step, each as a fraction of its tolerance (≤ 1 passes).
#[derive(Debug)]
pub struct FirstStep {
    /// Logits, per element.
    pub logits: f64,
    /// The loss, relative.
    pub loss: f64,
    /// The worst gradient's relative L2 over the tolerance, and its parameter.
    pub worst_grad: (f64, String),
}

/// What three AdamW steps gave against PyTorch's.
#[derive(Debug)]
pub struct Training {
    /// The three losses, largest relative error over the tolerance.
    pub losses: f64,
    /// After steps 1 and 3: the worst parameter's error over its tolerance, and where.
    pub parameters: Vec<(usize, (f64, String))>,
}

fn values(t: &Tensor) -> Vec<f64> {
    let host = t.detach().unwrap().to_device(torchfn::Device::CPU, Some(DType::Float64), false, false).unwrap();
    host.contiguous().unwrap().to_vec::<f64>().unwrap()
}

/// The largest `|got - want| - rtol |want|` over `atol`, per element.
fn elementwise(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> f64 {
    let (g, w) = (values(got), values(want));
    assert_eq!(g.len(), w.len(), "element counts differ");
    g.iter().zip(&w).map(|(g, w)| (g - w).abs() - rtol * w.abs()).fold(0.0, f64::max) / atol
}

/// `||got - want|| / ||want||`.
pub fn rel_l2(got: &Tensor, want: &Tensor) -> f64 {
    let (g, w) = (values(got), values(want));
    let diff: f64 = g.iter().zip(&w).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = w.iter().map(|w| w * w).sum::<f64>().sqrt();
    if norm == 0.0 { diff } else { diff / norm }
}

impl Reference {
    /// The folder `tests/golden/workloads/<name>` of this repository.
    pub fn dir(name: &str) -> PathBuf {
        PathBuf::from(format!("{}/tests/golden/workloads/{name}", env!("CARGO_MANIFEST_DIR")))
    }

    /// Reads the folder.
    pub fn load(name: &str) -> Reference {
        let dir = Reference::dir(name);
        let text = std::fs::read_to_string(dir.join("meta.json")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let file = |which: &str| torchfn::safetensors::load_file(dir.join(format!("{which}.safetensors"))).unwrap();
        Reference {
            name: name.into(),
            meta: serde_json::from_str(&text).unwrap(),
            init: file("init"),
            inputs: file("inputs"),
            expect: file("expect"),
        }
    }

    /// `meta.json`'s `config`.
    pub fn config(&self) -> &Json {
        &self.meta["config"]
    }

    /// A whole number from the config.
    pub fn usize(&self, key: &str) -> usize {
        self.config()[key].as_u64().unwrap_or_else(|| panic!("{}: config has no integer {key}", self.name)) as usize
    }

    /// A number from the config.
    pub fn f64(&self, key: &str) -> f64 {
        self.config()[key].as_f64().unwrap_or_else(|| panic!("{}: config has no number {key}", self.name))
    }

    /// One tensor of the batch.
    pub fn input(&self, key: &str) -> &Tensor {
        self.inputs.get(key).unwrap_or_else(|| panic!("{}: no input {key}", self.name))
    }

    fn tolerance(&self, path: &[&str]) -> f64 {
        path.iter().fold(&self.meta["suggested_tolerances"], |j, k| &j[*k]).as_f64().unwrap()
    }

    fn strings(&self, key: &str, first: bool) -> Vec<String> {
        let list = self.meta[key].as_array().unwrap().iter();
        list.map(|k| if first { &k[0] } else { k }.as_str().unwrap().to_string()).collect()
    }

    /// PyTorch's module tree (`print(model)`), state_dict keys and parameter names (tied ones
    /// listed once); then loads `init` strictly.
    pub fn check_structure_and_load(&self, model: &dyn Module) -> Result<(), String> {
        let tree = self.meta["module_tree"].as_str().unwrap();
        if model.to_string() != tree {
            return Err(format!("module tree differs:\n{model}\nPyTorch's:\n{tree}"));
        }
        let keys: Vec<String> = model.state_dict().keys().map(String::from).collect();
        if keys != self.strings("state_dict_keys", false) {
            return Err(format!("state_dict keys differ: {keys:?}"));
        }
        let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
        if names != self.strings("parameters", true) {
            return Err(format!("parameter names differ: {names:?}"));
        }
        let report = model.load_state_dict(&self.init, true).map_err(|e| e.to_string())?;
        if !report.missing_keys.is_empty() || !report.unexpected_keys.is_empty() {
            return Err(format!("{report:?}"));
        }
        Ok(())
    }

    /// One training step's forward and backward against PyTorch's: the logits per element, the
    /// loss, and every parameter's gradient (relative L2).
    pub fn check_first_step(&self, model: &dyn Module, logits: &Tensor, loss: Tensor) -> Result<FirstStep, String> {
        let logits_error = elementwise(
            logits,
            self.expect.get("logits").unwrap(),
            self.tolerance(&["logits", "rtol"]),
            self.tolerance(&["logits", "atol"]),
        );
        let loss_error = rel_l2(&loss, self.expect.get("loss").unwrap()) / self.tolerance(&["loss", "rtol"]);
        loss.backward().map_err(|e| e.to_string())?;
        let mut worst_grad = (0.0f64, String::new());
        // A gradient that is zero in exact arithmetic (BERT's key biases: softmax ignores a
        // constant added to a row of scores) is float32 rounding noise in PyTorch's reference
        // (~1e-12): its norm is floored at `tiny_grad` per element, as the parameter checks do.
        let tiny = self.tolerance(&["step1", "tiny_grad"]);
        for (p_name, p) in model.named_parameters() {
            let g = p.grad().unwrap().ok_or(format!("{p_name} has no gradient"))?;
            if g.device().unwrap() != logits.device().unwrap() {
                return Err(format!("{p_name}'s gradient is on another device"));
            }
            let (got, want) = (values(&g), values(self.expect.get(&format!("grad/{p_name}")).unwrap()));
            let diff = got.iter().zip(&want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
            let norm = want.iter().map(|w| w * w).sum::<f64>().sqrt().max(tiny * (want.len() as f64).sqrt());
            let e = diff / norm;
            if e > worst_grad.0 {
                worst_grad = (e, p_name);
            }
        }
        worst_grad.0 /= self.tolerance(&["grads", "rel_l2"]);
        let step = FirstStep { logits: logits_error, loss: loss_error, worst_grad };
        if step.logits > 1.0 || step.loss > 1.0 || step.worst_grad.0 > 1.0 {
            return Err(format!("{}: beyond the tolerances: {step:?}", self.name));
        }
        Ok(step)
    }

    /// `meta.json`'s optimizer, as torchfn's AdamW.
    pub fn adamw(&self, params: Vec<Tensor>) -> AdamW {
        let o = &self.meta["optimizer"];
        let betas = o["betas"].as_array().unwrap();
        let options = AdamWOptions::new(o["lr"].as_f64().unwrap())
            .betas((betas[0].as_f64().unwrap(), betas[1].as_f64().unwrap()))
            .eps(o["eps"].as_f64().unwrap())
            .weight_decay(o["weight_decay"].as_f64().unwrap());
        AdamW::new(params, options).unwrap()
    }

    /// Every parameter after a step against `expect`'s `{stage}/<name>`: per element within
    /// `atol` (the looser `atol_where_tiny_grad` where the step-1 gradient is tiny, see the
    /// README), and, when the stage has one, the update's relative L2. The largest error over its
    /// tolerance, and where.
    fn check_parameters(&self, model: &dyn Module, stage: &str) -> (f64, String) {
        let tol = &self.meta["suggested_tolerances"][stage];
        let (atol, tiny, loose) = (
            tol["atol"].as_f64().unwrap(),
            tol["tiny_grad"].as_f64().unwrap(),
            tol["atol_where_tiny_grad"].as_f64().unwrap(),
        );
        let mut worst = (0.0f64, String::new());
        for (name, p) in model.named_parameters() {
            let (got, want) = (values(&p), values(self.expect.get(&format!("{stage}/{name}")).unwrap()));
            let grad = values(self.expect.get(&format!("grad/{name}")).unwrap());
            for ((g, w), dg) in got.iter().zip(&want).zip(&grad) {
                let allowed = if dg.abs() < tiny { loose } else { atol };
                let e = (g - w).abs() / allowed;
                if e > worst.0 {
                    worst = (e, name.clone());
                }
            }
            if let Some(rel) = tol["update_rel_l2"].as_f64() {
                let start = values(self.init.get(&name).unwrap());
                // Over the elements with ordinary gradients only: where the step-1 gradient is
                // tiny, the update is rounding noise (those elements get `atol_where_tiny_grad`).
                let ordinary = got.iter().zip(&want).zip(&start).zip(&grad).filter(|(_, dg)| dg.abs() >= tiny);
                let (num, den): (f64, f64) = ordinary.fold((0.0, 0.0), |(n, d), (((g, w), s), _)| {
                    (n + ((g - s) - (w - s)).powi(2), d + (w - s).powi(2))
                });
                let e = (num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE)) / rel;
                if e > worst.0 {
                    worst = (e, format!("{name} (update)"));
                }
            }
        }
        worst
    }

    /// Three AdamW steps of `forward_loss` on `model` (loaded with `init`): the losses, and the
    /// parameters after steps 1 and 3. An error of `forward_loss` ends the training and is
    /// returned, naming the step.
    pub fn train_three_steps(
        &self,
        model: &dyn Module,
        forward_loss: &dyn Fn() -> torchfn::Result<Tensor>,
    ) -> Result<Training, String> {
        let mut optimizer = self.adamw(model.parameters());
        let mut losses = Vec::new();
        let mut parameters = Vec::new();
        for step in 1..=3 {
            optimizer.zero_grad(true).unwrap();
            let loss = forward_loss().map_err(|e| format!("{}: step {step}: {e}", self.name))?;
            losses.push(loss.item().unwrap().to_f64());
            loss.backward().map_err(|e| e.to_string())?;
            optimizer.step().map_err(|e| e.to_string())?;
            if step == 1 || step == 3 {
                parameters.push((step, self.check_parameters(model, &format!("step{step}"))));
            }
        }
        let want = values(self.expect.get("losses").unwrap());
        let rtol = self.tolerance(&["losses", "rtol"]);
        let loss_error = losses.iter().zip(&want).map(|(g, w)| (g - w).abs() / w.abs() / rtol).fold(0.0, f64::max);
        let training = Training { losses: loss_error, parameters };
        if training.losses > 1.0 || training.parameters.iter().any(|(_, (e, _))| *e > 1.0) {
            return Err(format!(
                "{}: beyond the tolerances: losses {losses:?} against {want:?}; {training:?}",
                self.name
            ));
        }
        Ok(training)
    }

    /// Every buffer against `expect`'s `buffers_{stage}/<name>` (relative L2); the worst over its
    /// tolerance.
    pub fn check_buffers(&self, model: &dyn Module, stage: &str) -> Result<(f64, String), String> {
        let rel = self.tolerance(&[&format!("buffers_{stage}"), "rel_l2"]);
        let mut worst = (0.0f64, String::new());
        for (name, b) in model.named_buffers() {
            let e = rel_l2(&b, self.expect.get(&format!("buffers_{stage}/{name}")).unwrap()) / rel;
            if e > worst.0 {
                worst = (e, name);
            }
        }
        if worst.0 > 1.0 {
            return Err(format!("{}: buffer {} differs: {} of the tolerance", self.name, worst.1, worst.0));
        }
        Ok(worst)
    }
}
