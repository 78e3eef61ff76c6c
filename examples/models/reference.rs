//! PyTorch's training references (a folder of `tests/golden/workloads`, or any folder of that
//! format, see the README there) and the checks a port runs against them: the module tree and
//! state_dict keys, the logits, loss and every gradient of one training step, and three AdamW
//! steps, within `meta.json`'s tolerances; [`Reference::check`] runs them all in order, and
//! [`main`] is an example's command line around it. Each check returns what it measured, or a
//! message saying what differs and where; none panics on a folder it cannot use.

use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value as Json;
use torchfn::Device;
use torchfn::nn::{Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

/// One model's reference: `meta.json` and the three safetensors files.
pub struct Reference {
    /// The folder's name (`llama_tiny`).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
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

impl fmt::Display for FirstStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (grad, name) = &self.worst_grad;
        write!(f, "logits {:.1e}, loss {:.1e}, gradients {grad:.1e} ({name})", self.logits, self.loss)
    }
}

/// What three AdamW steps gave against PyTorch's.
#[derive(Debug)]
pub struct Training {
    /// The three losses, largest relative error over the tolerance.
    pub losses: f64,
    /// After steps 1 and 3: the worst parameter's error over its tolerance, and where.
    pub parameters: Vec<(usize, (f64, String))>,
    /// The time of one training step (zero_grad, forward, loss, backward, AdamW step) in
    /// milliseconds: the faster of steps 2 and 3 (step 1 warms up).
    pub step_ms: f64,
    /// PyTorch's, from `meta.json`'s `step_time` (its median on the CPU), where it has one.
    pub pytorch_step_ms: Option<f64>,
}

impl fmt::Display for Training {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "losses {:.1e}", self.losses)?;
        for (step, (error, name)) in &self.parameters {
            write!(f, ", parameters after step {step} {error:.1e} ({name})")?;
        }
        write!(f, "; a step {:.1} ms", self.step_ms)?;
        if cfg!(debug_assertions) {
            // Unoptimized: not to be set beside PyTorch's.
            return write!(f, " (a debug build: time it with --release)");
        }
        match self.pytorch_step_ms {
            Some(ms) => write!(f, " (PyTorch's: {ms} ms, from its reference's machine)"),
            None => Ok(()),
        }
    }
}

/// The batch of a reference on one device (`inputs.safetensors`, int64 tensors as the device's
/// index dtype), as a port's forward reads it.
pub struct Batch {
    name: String,
    inputs: StateDict,
}

impl Batch {
    /// The input `key` (`input_ids`), or an error naming it.
    pub fn get(&self, key: &str) -> torchfn::Result<&Tensor> {
        self.inputs
            .get(key)
            .ok_or_else(|| Error::value_error(format!("{}: inputs.safetensors has no {key}", self.name)))
    }
}

fn text(e: impl fmt::Display) -> String {
    e.to_string()
}

/// `t`'s values as float64 on the CPU.
fn values(t: &Tensor) -> Result<Vec<f64>, String> {
    let host = t.detach().and_then(|t| t.to_device(Device::CPU, Some(DType::Float64), false, false));
    host.and_then(|t| t.contiguous()?.to_vec::<f64>()).map_err(text)
}

/// The values of `got` and `want`, which must have the same shape (`what` names the tensor
/// when they do not).
fn pair(got: &Tensor, want: &Tensor, what: &str) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (gs, ws) = (got.shape().map_err(text)?, want.shape().map_err(text)?);
    if gs[..] != ws[..] {
        return Err(format!("{what}: shape {:?}, PyTorch's is {:?}", &gs[..], &ws[..]));
    }
    Ok((values(got)?, values(want)?))
}

/// `||got - want|| / max(||want||, floor)`.
fn rel_l2_floored(got: &[f64], want: &[f64], floor: f64) -> f64 {
    let diff = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    let norm = want.iter().map(|w| w * w).sum::<f64>().sqrt().max(floor);
    if norm == 0.0 { diff } else { diff / norm }
}

/// `||got - want|| / ||want||` (`||got - want||` when `want` is zero), or an error naming `what`
/// when the shapes differ.
pub fn rel_l2(got: &Tensor, want: &Tensor, what: &str) -> Result<f64, String> {
    let (g, w) = pair(got, want, what)?;
    Ok(rel_l2_floored(&g, &w, 0.0))
}

/// The larger of `worst` and `(error, name)`.
fn worse(worst: (f64, String), error: f64, name: impl FnOnce() -> String) -> (f64, String) {
    if error > worst.0 { (error, name()) } else { worst }
}

impl Reference {
    /// The folder of `workload`: `tests/golden/workloads/<workload>` of this repository when
    /// there is one, else `workload` as a path.
    pub fn dir(workload: &str) -> PathBuf {
        let ours = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/workloads").join(workload);
        if ours.is_dir() { ours } else { PathBuf::from(workload) }
    }

    /// Reads the folder of `workload` (a folder name under `tests/golden/workloads`, or a path
    /// to a folder of the same format); an error names what is missing or unreadable.
    pub fn load(workload: &str) -> Result<Reference, String> {
        let dir = Reference::dir(workload);
        if !dir.is_dir() {
            return Err(format!(
                "no reference {workload:?}: neither a folder of tests/golden/workloads nor a path to a folder"
            ));
        }
        let name = dir.file_name().map_or_else(|| workload.to_string(), |n| n.to_string_lossy().into_owned());
        let read = |file: &str| dir.join(file);
        let meta_path = read("meta.json");
        let text = std::fs::read_to_string(&meta_path).map_err(|e| format!("{}: {e}", meta_path.display()))?;
        let meta: Json = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", meta_path.display()))?;
        let file = |which: &str| {
            let path = read(&format!("{which}.safetensors"));
            torchfn::safetensors::load_file(&path).map_err(|e| format!("{}: {e}", path.display()))
        };
        Ok(Reference { init: file("init")?, inputs: file("inputs")?, expect: file("expect")?, name, dir, meta })
    }

    /// `meta.json`'s `config`.
    pub fn config(&self) -> &Json {
        &self.meta["config"]
    }

    /// One tensor of the batch, or an error naming it.
    pub fn input(&self, key: &str) -> Result<&Tensor, String> {
        self.inputs.get(key).ok_or_else(|| format!("{}: inputs.safetensors has no {key}", self.name))
    }

    /// One tensor of the batch on `device`: an int64 one as the device's index dtype (wgpu has no
    /// int64).
    pub fn input_on(&self, key: &str, device: Device) -> Result<Tensor, String> {
        let t = self.input(key)?;
        let dtype = (t.dtype().map_err(text)? == DType::Int64).then(|| device.index_dtype());
        t.to_device(device, dtype, false, false).map_err(|e| format!("{}: {key} to {device}: {e}", self.name))
    }

    /// The whole batch on `device` (each input as [`input_on`](Reference::input_on) moves it).
    pub fn batch_on(&self, device: Device) -> Result<Batch, String> {
        let mut inputs = StateDict::new();
        for key in self.inputs.keys() {
            inputs.insert(key, self.input_on(key, device)?);
        }
        Ok(Batch { name: self.name.clone(), inputs })
    }

    /// `expect.safetensors`'s `key`, or an error naming it.
    fn expected(&self, key: &str) -> Result<&Tensor, String> {
        self.expect.get(key).ok_or_else(|| format!("{}: expect.safetensors has no {key}", self.name))
    }

    /// `meta.json`'s value at `path`, a number.
    fn number(&self, path: &[&str]) -> Result<f64, String> {
        let value = path.iter().fold(&self.meta, |j, k| &j[*k]);
        value.as_f64().ok_or_else(|| format!("{}: meta.json has no number at {}", self.name, path.join(".")))
    }

    /// A tolerance of `suggested_tolerances`.
    fn tolerance(&self, path: &[&str]) -> Result<f64, String> {
        let path: Vec<&str> = std::iter::once("suggested_tolerances").chain(path.iter().copied()).collect();
        self.number(&path)
    }

    /// `meta.json`'s list `key` of names (or of `[name, shape]` pairs, `first`).
    fn names(&self, key: &str, first: bool) -> Result<Vec<String>, String> {
        let bad = || format!("{}: meta.json's {key} is not a list of names", self.name);
        let list = self.meta[key].as_array().ok_or_else(bad)?;
        list.iter().map(|k| if first { &k[0] } else { k }.as_str().map(String::from).ok_or_else(bad)).collect()
    }

    /// PyTorch's module tree (`print(model)`), state_dict keys and parameter names (tied ones
    /// listed once); then loads `init` strictly.
    pub fn check_structure_and_load(&self, model: &dyn Module) -> Result<(), String> {
        let tree = self.meta["module_tree"].as_str().ok_or(format!("{}: meta.json has no module_tree", self.name))?;
        if model.to_string() != tree {
            return Err(format!("{}: module tree differs:\n{model}\nPyTorch's:\n{tree}", self.name));
        }
        let keys: Vec<String> = model.state_dict().keys().map(String::from).collect();
        let want = self.names("state_dict_keys", false)?;
        if keys != want {
            return Err(format!("{}: state_dict keys differ: {keys:?}, PyTorch's {want:?}", self.name));
        }
        let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
        let want = self.names("parameters", true)?;
        if names != want {
            return Err(format!("{}: parameter names differ: {names:?}, PyTorch's {want:?}", self.name));
        }
        let report = model.load_state_dict(&self.init, true).map_err(|e| format!("{}: {e}", self.name))?;
        if !report.missing_keys.is_empty() || !report.unexpected_keys.is_empty() {
            return Err(format!("{}: init.safetensors does not fit: {report:?}", self.name));
        }
        Ok(())
    }

    /// One training step's forward and backward against PyTorch's: the logits per element, the
    /// loss, and every parameter's gradient (relative L2). A parameter PyTorch gave no gradient
    /// (no `grad/<name>`: it takes no part in the loss) must have none here either.
    pub fn check_first_step(&self, model: &dyn Module, logits: &Tensor, loss: Tensor) -> Result<FirstStep, String> {
        let (got, want) = pair(logits, self.expected("logits")?, "logits")?;
        let (rtol, atol) = (self.tolerance(&["logits", "rtol"])?, self.tolerance(&["logits", "atol"])?);
        let logits_error =
            got.iter().zip(&want).map(|(g, w)| (g - w).abs() - rtol * w.abs()).fold(0.0, f64::max) / atol;
        let loss_error = rel_l2(&loss, self.expected("loss")?, "loss")? / self.tolerance(&["loss", "rtol"])?;
        loss.backward().map_err(text)?;
        // A gradient that is zero in exact arithmetic (BERT's key biases: softmax ignores a
        // constant added to a row of scores) is float32 rounding noise in PyTorch's reference
        // (~1e-12): its norm is floored at `tiny_grad` per element, as the parameter checks do.
        let tiny = self.tolerance(&["step1", "tiny_grad"])?;
        let device = logits.device().map_err(text)?;
        let mut worst_grad = (0.0f64, String::new());
        for (name, p) in model.named_parameters() {
            let grad = p.grad().map_err(text)?;
            let (grad, want) = match (grad, self.expect.get(&format!("grad/{name}"))) {
                (None, None) => continue,
                (Some(grad), Some(want)) => (grad, want),
                (None, Some(_)) => return Err(format!("{}: {name} has no gradient", self.name)),
                (Some(_), None) => return Err(format!("{}: {name} has a gradient, PyTorch's has none", self.name)),
            };
            if grad.device().map_err(text)? != device {
                return Err(format!("{}: {name}'s gradient is on another device than the logits", self.name));
            }
            let (got, want) = pair(&grad, want, &format!("grad/{name}"))?;
            let floor = tiny * (want.len() as f64).sqrt();
            worst_grad = worse(worst_grad, rel_l2_floored(&got, &want, floor), || name);
        }
        worst_grad.0 /= self.tolerance(&["grads", "rel_l2"])?;
        let step = FirstStep { logits: logits_error, loss: loss_error, worst_grad };
        if step.logits > 1.0 || step.loss > 1.0 || step.worst_grad.0 > 1.0 {
            return Err(format!("{}: beyond the tolerances (fractions of them): {step}", self.name));
        }
        Ok(step)
    }

    /// `meta.json`'s optimizer, as torchfn's AdamW.
    pub fn adamw(&self, params: Vec<Tensor>) -> Result<AdamW, String> {
        let n = |key: &str| self.number(&["optimizer", key]);
        let beta = |i: usize| {
            let value = self.meta["optimizer"]["betas"][i].as_f64();
            value.ok_or_else(|| format!("{}: meta.json's optimizer has no betas[{i}]", self.name))
        };
        let options =
            AdamWOptions::new(n("lr")?).betas((beta(0)?, beta(1)?)).eps(n("eps")?).weight_decay(n("weight_decay")?);
        AdamW::new(params, options).map_err(text)
    }

    /// Every parameter after a step against `expect`'s `{stage}/<name>`: per element within
    /// `atol` (the looser `atol_where_tiny_grad` where the step-1 gradient is tiny or absent,
    /// see the README), and, when the stage has one, the update's relative L2. The largest error
    /// over its tolerance, and where.
    fn check_parameters(&self, model: &dyn Module, stage: &str) -> Result<(f64, String), String> {
        let atol = self.tolerance(&[stage, "atol"])?;
        let tiny = self.tolerance(&[stage, "tiny_grad"])?;
        let loose = self.tolerance(&[stage, "atol_where_tiny_grad"])?;
        let update_rel_l2 = self.meta["suggested_tolerances"][stage]["update_rel_l2"].as_f64();
        let mut worst = (0.0f64, String::new());
        for (name, p) in model.named_parameters() {
            let after = self.expected(&format!("{stage}/{name}"))?;
            let (got, want) = pair(&p, after, &format!("{stage}/{name}"))?;
            let grad = match self.expect.get(&format!("grad/{name}")) {
                Some(grad) => pair(grad, after, &format!("grad/{name}"))?.0,
                None => vec![0.0; want.len()],
            };
            let ordinary: Vec<bool> = grad.iter().map(|dg| dg.abs() >= tiny).collect();
            for ((g, w), &ordinary) in got.iter().zip(&want).zip(&ordinary) {
                let allowed = if ordinary { atol } else { loose };
                worst = worse(worst, (g - w).abs() / allowed, || name.clone());
            }
            if let Some(rel) = update_rel_l2 {
                let init = self.init.get(&name).ok_or(format!("{}: init.safetensors has no {name}", self.name))?;
                let start = pair(init, after, &name)?.0;
                // Over the elements with ordinary gradients only: where the step-1 gradient is
                // tiny, the update is rounding noise (those elements get `atol_where_tiny_grad`).
                let (mut num, mut den) = (0.0, 0.0);
                for (((g, w), s), _) in got.iter().zip(&want).zip(&start).zip(&ordinary).filter(|(_, o)| **o) {
                    num += ((g - s) - (w - s)).powi(2);
                    den += (w - s).powi(2);
                }
                let e = num.sqrt() / f64::sqrt(den).max(f64::MIN_POSITIVE) / rel;
                worst = worse(worst, e, || format!("{name} (update)"));
            }
        }
        Ok(worst)
    }

    /// Three AdamW steps of `forward_loss` on `model` (loaded with `init`): the losses, the
    /// parameters after steps 1 and 3, and the time of a step. An error of `forward_loss` ends
    /// the training and is returned, naming the step.
    pub fn train_three_steps(
        &self,
        model: &dyn Module,
        forward_loss: &dyn Fn() -> torchfn::Result<Tensor>,
    ) -> Result<Training, String> {
        let mut optimizer = self.adamw(model.parameters())?;
        let (mut losses, mut parameters, mut times) = (Vec::new(), Vec::new(), Vec::new());
        for step in 1..=3 {
            let start = Instant::now();
            optimizer.zero_grad(true).map_err(text)?;
            let loss = forward_loss().map_err(|e| format!("{}: step {step}: {e}", self.name))?;
            loss.backward().map_err(text)?;
            optimizer.step().map_err(text)?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
            losses.push(loss.item().map_err(text)?.to_f64());
            if step == 1 || step == 3 {
                parameters.push((step, self.check_parameters(model, &format!("step{step}"))?));
            }
        }
        let want = values(self.expected("losses")?)?;
        if want.len() != losses.len() {
            return Err(format!("{}: expect.safetensors has {} losses, not one per step (3)", self.name, want.len()));
        }
        let rtol = self.tolerance(&["losses", "rtol"])?;
        let loss_error = losses.iter().zip(&want).map(|(g, w)| (g - w).abs() / w.abs() / rtol).fold(0.0, f64::max);
        let training = Training {
            losses: loss_error,
            parameters,
            step_ms: times[1].min(times[2]),
            pytorch_step_ms: self.meta["step_time"]["median_ms"].as_f64(),
        };
        if training.losses > 1.0 || training.parameters.iter().any(|(_, (e, _))| *e > 1.0) {
            return Err(format!(
                "{}: beyond the tolerances (fractions of them): {training}; losses {losses:?}, PyTorch's {want:?}",
                self.name
            ));
        }
        Ok(training)
    }

    /// Every buffer against `expect`'s `buffers_{stage}/<name>` (relative L2); the worst over its
    /// tolerance.
    pub fn check_buffers(&self, model: &dyn Module, stage: &str) -> Result<(f64, String), String> {
        let rel = self.tolerance(&[&format!("buffers_{stage}"), "rel_l2"])?;
        let mut worst = (0.0f64, String::new());
        for (name, b) in model.named_buffers() {
            let key = format!("buffers_{stage}/{name}");
            worst = worse(worst, rel_l2(&b, self.expected(&key)?, &key)? / rel, || name);
        }
        if worst.0 > 1.0 {
            return Err(format!("{}: buffer {} differs: {:.1e} of the tolerance", self.name, worst.1, worst.0));
        }
        Ok(worst)
    }

    /// The whole check of a port: builds the model from the reference's config (`build`),
    /// checks its module tree, state_dict keys and parameter names and loads `init`; in training
    /// mode, moved to `device` with the batch, one step of `forward_loss` (the logits, or the
    /// output, and the loss) against PyTorch's logits, loss and gradients; with `train`, three
    /// AdamW steps of a fresh model on the CPU. A short report of the worst errors (fractions of
    /// their tolerances, ≤ 1 passes), or what differs.
    pub fn check<M: Module>(
        &self,
        device: Device,
        train: bool,
        build: impl Fn(&Json) -> torchfn::Result<M>,
        forward_loss: impl Fn(&M, &Batch) -> torchfn::Result<(Tensor, Tensor)>,
    ) -> Result<String, String> {
        let loaded = || -> Result<M, String> {
            let model = build(self.config()).map_err(|e| format!("{}: {e}", self.name))?;
            self.check_structure_and_load(&model)?;
            model.train(true);
            Ok(model)
        };
        let mut model = loaded()?;
        model.to_device(device).map_err(|e| format!("{}: the model to {device}: {e}", self.name))?;
        let batch = self.batch_on(device)?;
        let (logits, loss) = forward_loss(&model, &batch).map_err(|e| format!("{}: {e}", self.name))?;
        if logits.device().map_err(text)? != device {
            return Err(format!("{}: the logits are not on {device}", self.name));
        }
        let step = self.check_first_step(&model, &logits, loss)?;
        let on = if device.is_cpu() { device.to_string() } else { format!("{device} ({})", device.describe()) };
        let mut report = format!(
            "{} on {on}: module tree, state_dict keys and parameter names as PyTorch's; init loaded\n  first \
             step, worst errors as fractions of the tolerances: {step}",
            self.name
        );
        if train {
            let model = loaded()?;
            let batch = self.batch_on(Device::CPU)?;
            let training = self.train_three_steps(&model, &|| Ok(forward_loss(&model, &batch)?.1))?;
            report +=
                &format!("\n  three AdamW steps on the CPU, worst errors as fractions of the tolerances: {training}");
        }
        Ok(report)
    }
}

/// An example's `main`: checks the port with `check(workload, device, train)` on the CPU with
/// training, then, with `--device wgpu`, the first step on the GPU; `--workload NAME_OR_PATH`
/// names the reference (`default` otherwise). Prints each report, or the error and exits
/// non-zero (2 for arguments it does not take).
pub fn main(default: &str, check: fn(&str, Device, bool) -> Result<String, String>) {
    let usage = "usage: [--workload NAME_OR_PATH] [--device cpu|wgpu]";
    let (mut workload, mut gpu) = (default.to_string(), false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg, None),
        };
        let Some(value) = inline.or_else(|| args.next()) else { exit(2, format!("{flag} needs a value; {usage}")) };
        match (flag.as_str(), value.as_str()) {
            ("--workload", _) => workload = value,
            ("--device", "cpu") => gpu = false,
            ("--device", "wgpu") => gpu = true,
            ("--device", other) => exit(2, format!("--device {other:?}: expected cpu or wgpu")),
            _ => exit(2, format!("unknown argument {flag:?}; {usage}")),
        }
    }
    let mut runs = vec![(Ok(Device::CPU), true)];
    if gpu {
        runs.push((Device::wgpu().map_err(|e| format!("no wgpu device: {e}")), false));
    }
    for (device, train) in runs {
        match device.and_then(|device| check(&workload, device, train)) {
            Ok(report) => println!("{report}"),
            Err(e) => exit(1, e),
        }
    }
}

/// An example's entry points for its port, from the `WORKLOAD`, `model` and `forward_loss` it
/// declares: `check` (the default reference), `check_workload` (any reference folder) and
/// `main` (the command line of [`main`]).
macro_rules! entry_points {
    () => {
        /// [`check_workload`] of [`WORKLOAD`].
        pub fn check(device: torchfn::Device, train: bool) -> std::result::Result<String, String> {
            check_workload(WORKLOAD, device, train)
        }

        /// Checks the port against `workload` (a folder of `tests/golden/workloads` or a path)
        /// on `device`, with three AdamW steps on the CPU when `train` (`Reference::check`).
        pub fn check_workload(
            workload: &str,
            device: torchfn::Device,
            train: bool,
        ) -> std::result::Result<String, String> {
            reference::Reference::load(workload)?.check(device, train, model, forward_loss)
        }

        fn main() {
            reference::main(WORKLOAD, check_workload);
        }
    };
}
pub(crate) use entry_points;

/// Prints `message` and ends the process with `code`.
fn exit(code: i32, message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(code)
}
