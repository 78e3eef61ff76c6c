//! `torchfn::optim`: PyTorch's optimizer steps and learning-rate schedules replayed from
//! `tests/golden/optim.json` (written by `bench/golden/gen_optim.py`), and the optimizers'
//! behaviour: gradients cleared both ways, state by parameter identity, per-group options,
//! state dicts, errors for bad input, training that converges.

use serde_json::Value as Json;
use torchfn::optim::lr_scheduler::{CosineAnnealingLR, StepLR};
use torchfn::optim::{
    Adam, AdamOptions, AdamW, AdamWOptions, Algorithm, Optim, Optimizer, ParamGroup, SGD, SgdOptions,
};
use torchfn::prelude::*;
use torchfn::{ErrorKind, Shape};

fn golden() -> Json {
    let path = format!("{}/tests/golden/optim.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tensor(spec: &Json, dtype: DType) -> Tensor {
    let shape: Vec<usize> = spec["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = spec["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let t = Tensor::from_vec(data, Shape::from(shape)).unwrap();
    t.to(dtype, false, false).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
}

/// float64 to ~1e-12 relative, float32 to ~1e-6.
fn assert_close(got: &[f64], want: &[f64], dtype: DType, what: &str) {
    let (rtol, atol) = if dtype == DType::Float64 { (1e-12, 1e-14) } else { (1e-6, 1e-6) };
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}[{k}]: got {g}, PyTorch {w}");
    }
}

fn f64_of(options: &Json, key: &str) -> Option<f64> {
    options.get(key).map(|v| v.as_f64().unwrap())
}

fn bool_of(options: &Json, key: &str) -> Option<bool> {
    options.get(key).map(|v| v.as_bool().unwrap())
}

fn sgd_options(defaults: &Json, group: &Json) -> SgdOptions {
    let get = |k| f64_of(group, k).or(f64_of(defaults, k));
    let flag = |k| bool_of(group, k).or(bool_of(defaults, k)).unwrap_or(false);
    SgdOptions::new(get("lr").unwrap())
        .momentum(get("momentum").unwrap_or(0.0))
        .dampening(get("dampening").unwrap_or(0.0))
        .weight_decay(get("weight_decay").unwrap_or(0.0))
        .nesterov(flag("nesterov"))
        .maximize(flag("maximize"))
}

fn adam_options<const D: bool>(
    base: torchfn::optim::AdamConfig<D>,
    defaults: &Json,
    group: &Json,
) -> torchfn::optim::AdamConfig<D> {
    let get = |k| f64_of(group, k).or(f64_of(defaults, k));
    let flag = |k| bool_of(group, k).or(bool_of(defaults, k)).unwrap_or(false);
    let betas = group.get("betas").or(defaults.get("betas")).map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()));
    let weight_decay = get("weight_decay").unwrap_or(base.weight_decay);
    base.lr(get("lr").unwrap_or(1e-3))
        .betas(betas.unwrap_or((0.9, 0.999)))
        .eps(get("eps").unwrap_or(1e-8))
        .weight_decay(weight_decay)
        .amsgrad(flag("amsgrad"))
        .maximize(flag("maximize"))
}

/// Replays one optimizer case: the same gradients, step by step, and PyTorch's parameters.
fn replay<O: Algorithm>(case: &Json, options: impl Fn(&Json, &Json) -> O) -> Optim<O> {
    let id = case["id"].as_str().unwrap();
    let dtype = DType::from_name(case["dtype"].as_str().unwrap()).unwrap();
    let params: Vec<Tensor> =
        case["params"].as_array().unwrap().iter().map(|p| tensor(p, dtype).requires_grad_(true).unwrap()).collect();
    let groups = case["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let ps = g["params"].as_array().unwrap().iter().map(|i| params[i.as_u64().unwrap() as usize].clone());
            ParamGroup::new(ps.collect(), options(&case["defaults"], &g["options"]))
        })
        .collect();
    let mut opt = Optim::with_groups(groups).unwrap();
    let steps = case["grads"].as_array().unwrap().iter().zip(case["expect"].as_array().unwrap());
    for (step, (grads, expect)) in steps.enumerate() {
        for (p, g) in params.iter().zip(grads.as_array().unwrap()) {
            let grad = (!g.is_null()).then(|| tensor(g, dtype));
            p.set_grad(grad.as_ref()).unwrap();
        }
        opt.step().unwrap();
        for (i, (p, want)) in params.iter().zip(expect.as_array().unwrap()).enumerate() {
            let want = tensor(want, DType::Float64).to_vec::<f64>().unwrap();
            assert_close(&values(p), &want, dtype, &format!("{id}: parameter {i} after step {}", step + 1));
        }
    }
    opt
}

/// Indices in the state dict follow the groups' order, not the case's parameter numbering.
fn state_index(case: &Json, param: usize) -> usize {
    let order: Vec<u64> = case["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["params"].as_array().unwrap())
        .map(|i| i.as_u64().unwrap())
        .collect();
    order.iter().position(|&i| i as usize == param).unwrap()
}

#[test]
fn optimizers_match_pytorch_step_by_step() {
    let golden = golden();
    let cases = golden["optimizers"].as_array().unwrap();
    assert!(cases.len() >= 30);
    for case in cases {
        let steps = case["steps"].as_object().unwrap();
        match case["optimizer"].as_str().unwrap() {
            "SGD" => {
                replay(case, sgd_options);
            }
            "Adam" => {
                let opt = replay(case, |d, g| adam_options(AdamOptions::new(1e-3), d, g));
                let state = opt.state_dict().unwrap().state;
                // PyTorch's per-parameter step counts (a skipped parameter's lags).
                for (param, want) in steps {
                    let index = state_index(case, param.parse().unwrap());
                    assert_eq!(state[&index].step as f64, want.as_f64().unwrap(), "{}: step of {param}", case["id"]);
                }
            }
            "AdamW" => {
                replay(case, |d, g| adam_options(AdamWOptions::new(1e-3), d, g));
            }
            other => panic!("unknown optimizer {other}"),
        }
    }
}

#[test]
fn schedulers_match_pytorch() {
    let golden = golden();
    for case in golden["schedulers"].as_array().unwrap() {
        let lrs: Vec<f64> = case["lrs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let groups = lrs
            .iter()
            .map(|&lr| ParamGroup::new(vec![torchfn::zeros([1], None, None).unwrap()], SgdOptions::new(lr)))
            .collect();
        let mut opt = SGD::with_groups(groups).unwrap();
        let kw = &case["kwargs"];
        let seq = case["last_lr"].as_array().unwrap();
        let mut got = Vec::new();
        match case["scheduler"].as_str().unwrap() {
            "StepLR" => {
                let gamma = kw.get("gamma").map_or(0.1, |g| g.as_f64().unwrap());
                let mut s = StepLR::new(&opt, kw["step_size"].as_u64().unwrap() as usize, gamma).unwrap();
                got.push(s.get_last_lr().to_vec());
                for _ in 1..seq.len() {
                    opt.step().unwrap();
                    s.step(&mut opt).unwrap();
                    got.push(s.get_last_lr().to_vec());
                }
                assert_eq!(s.last_epoch() as usize, seq.len() - 1);
            }
            "CosineAnnealingLR" => {
                let eta_min = kw.get("eta_min").map_or(0.0, |g| g.as_f64().unwrap());
                let mut s = CosineAnnealingLR::new(&opt, kw["T_max"].as_u64().unwrap() as usize, eta_min).unwrap();
                got.push(s.get_last_lr().to_vec());
                for _ in 1..seq.len() {
                    opt.step().unwrap();
                    s.step(&mut opt).unwrap();
                    got.push(s.get_last_lr().to_vec());
                }
            }
            other => panic!("unknown scheduler {other}"),
        }
        for (epoch, (g, w)) in got.iter().zip(seq).enumerate() {
            let want: Vec<f64> = w.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_close(g, &want, DType::Float64, &format!("{} epoch {epoch}", case["id"]));
        }
        // The scheduler drives the groups' learning rates.
        assert_eq!(lrs_of(&opt), *got.last().unwrap());
    }
}

fn lrs_of(opt: &impl Optimizer) -> Vec<f64> {
    opt.param_groups().iter().map(|g| g.options.lr()).collect()
}

fn leaf(values: &[f64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap().requires_grad_(true).unwrap()
}

fn set_grad(p: &Tensor, values: &[f64]) {
    p.set_grad(Some(&torchfn::tensor(values.to_vec()).unwrap())).unwrap();
}

#[test]
fn zero_grad_sets_none_or_zeroes_in_place() {
    let p = leaf(&[1.0, 2.0]);
    let mut opt = SGD::new(vec![p.clone()], SgdOptions::new(0.1)).unwrap();
    (&p * &p).unwrap().sum().unwrap().backward().unwrap();
    let grad = p.grad().unwrap().unwrap();
    opt.zero_grad(false).unwrap();
    assert!(p.grad().unwrap().unwrap().is(&grad), "the same gradient tensor, zeroed in place");
    assert_eq!(grad.to_vec::<f64>().unwrap(), [0.0, 0.0]);
    opt.zero_grad(true).unwrap();
    assert!(p.grad().unwrap().is_none());
    opt.zero_grad(true).unwrap(); // nothing to clear is fine
    opt.step().unwrap(); // no gradient: nothing moves
    assert_eq!(p.to_vec::<f64>().unwrap(), [1.0, 2.0]);
}

#[test]
fn step_updates_in_place_without_recording() {
    let p = leaf(&[1.0, 2.0]);
    let view = p.clone();
    let ptr = p.data_ptr().unwrap();
    let mut opt = Adam::new(vec![p.clone()], AdamOptions::new(0.1)).unwrap();
    set_grad(&p, &[1.0, -1.0]);
    opt.step().unwrap();
    assert_eq!(p.data_ptr().unwrap(), ptr);
    assert!(p.is_leaf().unwrap() && p.requires_grad().unwrap() && p.grad_fn().unwrap().is_none());
    let moved = view.to_vec::<f64>().unwrap();
    assert!((moved[0] - 0.9).abs() < 1e-8 && (moved[1] - 2.1).abs() < 1e-8, "{moved:?}"); // lr, less eps's share
}

/// Trains `opt` over `params` for `steps` steps of fixed gradients (a function of the step).
fn train(opt: &mut impl Optimizer, params: &[Tensor], steps: std::ops::Range<usize>) {
    for step in steps {
        for (i, p) in params.iter().enumerate() {
            let n = p.shape().unwrap()[0];
            let g: Vec<f64> = (0..n).map(|k| ((step * 7 + i * 3 + k) as f64 * 0.37).sin()).collect();
            set_grad(p, &g);
        }
        opt.step().unwrap();
    }
}

#[test]
fn state_is_keyed_by_parameter_identity() {
    let (a1, b1) = (leaf(&[1.0, 2.0, 3.0]), leaf(&[-1.0, 0.5]));
    let (a2, b2) = (leaf(&[1.0, 2.0, 3.0]), leaf(&[-1.0, 0.5]));
    let mut first = Adam::new(vec![a1.clone(), b1.clone()], AdamOptions::new(0.05).amsgrad(true)).unwrap();
    let mut second = Adam::new(vec![b2.clone(), a2.clone()], AdamOptions::new(0.05).amsgrad(true)).unwrap();
    train(&mut first, &[a1.clone(), b1.clone()], 0..3);
    train(&mut second, &[a2.clone(), b2.clone()], 0..3);
    // Reordering the parameters keeps each one's state.
    second.param_groups_mut()[0].params.reverse();
    train(&mut first, &[a1.clone(), b1.clone()], 3..6);
    train(&mut second, &[a2.clone(), b2.clone()], 3..6);
    assert_eq!(a1.to_vec::<f64>().unwrap(), a2.to_vec::<f64>().unwrap());
    assert_eq!(b1.to_vec::<f64>().unwrap(), b2.to_vec::<f64>().unwrap());

    // A subclass view of a parameter is the same parameter.
    #[derive(TensorSubclass)]
    struct Tagged;
    let p = leaf(&[1.0]);
    let tagged = p.as_subclass(Tagged).unwrap();
    assert!(SGD::with_groups(vec![ParamGroup::new(vec![p.clone(), tagged.clone()], SgdOptions::new(0.1))]).is_err());
    let mut opt = SGD::new(vec![tagged], SgdOptions::new(0.5)).unwrap();
    set_grad(&p, &[1.0]);
    opt.step().unwrap();
    assert_eq!(p.to_vec::<f64>().unwrap(), [0.5]);
}

#[test]
fn groups_have_their_own_options() {
    let (a, b) = (leaf(&[1.0, 1.0]), leaf(&[1.0]));
    let base = SgdOptions::new(0.1);
    let mut opt = SGD::with_groups(vec![
        ParamGroup::new(vec![a.clone()], base.clone()),
        ParamGroup::new(vec![b.clone()], base.lr(0.01)),
    ])
    .unwrap();
    set_grad(&a, &[1.0, 2.0]);
    set_grad(&b, &[1.0]);
    opt.step().unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), [0.9, 0.8]);
    assert_eq!(b.to_vec::<f64>().unwrap(), [0.99]);
    // A group added later, with momentum of its own.
    let c = leaf(&[0.0]);
    opt.add_param_group(ParamGroup::new(vec![c.clone()], SgdOptions::new(1.0).momentum(0.5))).unwrap();
    assert_eq!(opt.param_groups().len(), 3);
    set_grad(&c, &[1.0]);
    opt.step().unwrap();
    opt.step().unwrap();
    assert_eq!(c.to_vec::<f64>().unwrap(), [-2.5]); // -1, then buffer 0.5 + 1
    let err = opt.add_param_group(ParamGroup::new(vec![a.clone()], SgdOptions::new(0.1))).unwrap_err();
    assert_eq!(err.to_string(), "some parameters appear in more than one parameter group");
}

fn adamw_pair() -> (Vec<Tensor>, AdamW) {
    let params = vec![leaf(&[1.0, -2.0, 0.5]), leaf(&[3.0])];
    let opt = AdamW::with_groups(vec![
        ParamGroup::new(vec![params[0].clone()], AdamWOptions::new(0.01).amsgrad(true)),
        ParamGroup::new(vec![params[1].clone()], AdamWOptions::new(0.1)),
    ])
    .unwrap();
    (params, opt)
}

#[test]
fn state_dict_round_trip_continues_training_identically() {
    let (params, mut opt) = adamw_pair();
    train(&mut opt, &params, 0..3);
    let saved = opt.state_dict().unwrap();
    assert_eq!(saved.param_groups.iter().map(|g| g.params.clone()).collect::<Vec<_>>(), [vec![0], vec![1]]);
    assert_eq!(saved.state[&0].step, 3);
    assert!(saved.state[&0].max_exp_avg_sq.is_some() && saved.state[&1].max_exp_avg_sq.is_none());
    let snapshot: Vec<Vec<f64>> = params.iter().map(|p| p.to_vec::<f64>().unwrap()).collect();
    train(&mut opt, &params, 3..6);

    // A fresh optimizer over copies of the parameters at step 3, loaded, continues the same way.
    let (copies, mut restored) = adamw_pair();
    for (c, s) in copies.iter().zip(&snapshot) {
        let _guard = torchfn::autograd::no_grad();
        c.copy_(&torchfn::tensor(s.clone()).unwrap()).unwrap();
    }
    restored.param_groups_mut()[1].options.lr = 5.0; // the saved options come back
    restored.load_state_dict(&saved).unwrap();
    assert_eq!(restored.param_groups()[1].options.lr, 0.1);
    train(&mut restored, &copies, 3..6);
    for (p, c) in params.iter().zip(&copies) {
        assert_eq!(p.to_vec::<f64>().unwrap(), c.to_vec::<f64>().unwrap());
    }
    // The snapshot did not follow the training after it.
    assert_eq!(saved.state[&0].step, 3);

    // SGD's momentum buffers too.
    let p = leaf(&[1.0, 2.0]);
    let mut sgd = SGD::new(vec![p.clone()], SgdOptions::new(0.1).momentum(0.9)).unwrap();
    train(&mut sgd, std::slice::from_ref(&p), 0..2);
    let saved = sgd.state_dict().unwrap();
    assert!(saved.state[&0].momentum_buffer.is_some());
    let q = torchfn::tensor(p.to_vec::<f64>().unwrap()).unwrap().requires_grad_(true).unwrap();
    let mut other = SGD::new(vec![q.clone()], SgdOptions::new(0.1).momentum(0.9)).unwrap();
    other.load_state_dict(&saved).unwrap();
    train(&mut sgd, std::slice::from_ref(&p), 2..4);
    train(&mut other, std::slice::from_ref(&q), 2..4);
    assert_eq!(p.to_vec::<f64>().unwrap(), q.to_vec::<f64>().unwrap());
}

#[test]
fn mismatched_state_dicts_are_refused() {
    let (params, mut opt) = adamw_pair();
    train(&mut opt, &params, 0..1);
    let saved = opt.state_dict().unwrap();

    let mut one_group = AdamW::new(vec![leaf(&[1.0, 2.0, 3.0])], AdamWOptions::new(0.1)).unwrap();
    let err = one_group.load_state_dict(&saved).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().starts_with("loaded state dict has a different number of parameter groups"), "{err}");

    let mut sizes = AdamW::with_groups(vec![
        ParamGroup::new(vec![leaf(&[1.0, 2.0, 3.0]), leaf(&[1.0])], AdamWOptions::new(0.1)),
        ParamGroup::new(vec![leaf(&[1.0])], AdamWOptions::new(0.1)),
    ])
    .unwrap();
    let err = sizes.load_state_dict(&saved).unwrap_err();
    assert!(err.to_string().contains("doesn't match the size of optimizer's group"), "{err}");

    let (_, mut shapes) = {
        let params = vec![leaf(&[1.0, 2.0]), leaf(&[3.0])];
        let opt = AdamW::with_groups(vec![
            ParamGroup::new(vec![params[0].clone()], AdamWOptions::new(0.01)),
            ParamGroup::new(vec![params[1].clone()], AdamWOptions::new(0.1)),
        ])
        .unwrap();
        (params, opt)
    };
    let err = shapes.load_state_dict(&saved).unwrap_err();
    assert!(err.to_string().contains("has shape [3], but the parameter has shape [2]"), "{err}");
    assert!(shapes.state_dict().unwrap().state.is_empty(), "a refused load changes nothing");

    let mut bad = saved.clone();
    bad.param_groups[0].options.lr = -1.0;
    assert_eq!(opt.load_state_dict(&bad).unwrap_err().to_string(), "Invalid learning rate: -1.0");
    let mut bad = saved.clone();
    let entry = bad.state[&0].clone();
    bad.state.insert(7, entry);
    assert!(opt.load_state_dict(&bad).unwrap_err().to_string().contains("parameter 7"));
}

fn message<T: std::fmt::Debug>(result: torchfn::Result<T>) -> (ErrorKind, String) {
    let err = result.unwrap_err();
    (err.kind(), err.to_string())
}

#[test]
fn bad_input_is_an_error() {
    let p = leaf(&[1.0]);
    let value = |s: &str| (ErrorKind::Value, s.to_string());
    assert_eq!(message(SGD::new(vec![], SgdOptions::new(0.1))), value("optimizer got an empty parameter list"));
    assert_eq!(message(AdamW::with_groups(vec![])), value("optimizer got an empty parameter list"));
    let (kind, msg) = message(SGD::new(vec![p.clone(), p.clone()], SgdOptions::new(0.1)));
    assert!(kind == ErrorKind::Value && msg.contains("duplicate parameters"), "{msg}");
    assert_eq!(
        message(SGD::with_groups(vec![
            ParamGroup::new(vec![p.clone()], SgdOptions::new(0.1)),
            ParamGroup::new(vec![p.clone()], SgdOptions::new(0.1)),
        ])),
        value("some parameters appear in more than one parameter group")
    );
    let non_leaf = (&p * 2.0).unwrap();
    assert_eq!(message(Adam::new(vec![non_leaf], AdamOptions::new(0.1))), value("can't optimize a non-leaf Tensor"));
    assert_eq!(message(SGD::new(vec![p.clone()], SgdOptions::new(-0.1))), value("Invalid learning rate: -0.1"));
    assert_eq!(message(AdamW::new(vec![p.clone()], AdamWOptions::new(f64::NAN))), value("Invalid learning rate: NaN"));
    let (_, msg) = message(Adam::new(vec![p.clone()], AdamOptions::new(0.1).betas((1.0, 0.999))));
    assert!(msg.starts_with("Invalid beta parameter at index 0: 1.0"), "{msg}");
    let (_, msg) = message(AdamW::new(vec![p.clone()], AdamWOptions::new(0.1).betas((0.9, -0.5))));
    assert!(msg.starts_with("Invalid beta parameter at index 1: -0.5"), "{msg}");
    assert_eq!(
        message(Adam::new(vec![p.clone()], AdamOptions::new(0.1).eps(-1.0))),
        value("Invalid epsilon value: -1.0")
    );
    assert_eq!(
        message(SGD::new(vec![p.clone()], SgdOptions::new(0.1).weight_decay(-1.0))),
        value("Invalid weight_decay value: -1.0")
    );
    assert_eq!(
        message(SGD::new(vec![p.clone()], SgdOptions::new(0.1).momentum(-0.5))),
        value("Invalid momentum value: -0.5")
    );
    for options in
        [SgdOptions::new(0.1).nesterov(true), SgdOptions::new(0.1).momentum(0.9).dampening(0.1).nesterov(true)]
    {
        let (_, msg) = message(SGD::new(vec![p.clone()], options));
        assert!(msg.starts_with("Nesterov momentum requires a momentum and zero dampening"), "{msg}");
    }

    #[derive(Debug, DuckTensor)]
    struct Duck;
    impl TorchFunction for Duck {
        fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
            Ok(Value::NotImplemented)
        }
    }
    let (kind, msg) = message(SGD::new(vec![Tensor::from_duck(Duck)], SgdOptions::new(0.1)));
    assert!(kind == ErrorKind::Type && msg.starts_with("optimizer can only optimize Tensors"), "{msg}");

    // At step(): a gradient of another dtype (another shape cannot be assigned), options made
    // invalid through param_groups_mut. Nothing moves.
    let mut opt = SGD::new(vec![p.clone()], SgdOptions::new(0.1)).unwrap();
    p.set_grad(Some(&torchfn::tensor([1.0f32]).unwrap())).unwrap();
    let (kind, msg) = message(opt.step());
    assert_eq!(kind, ErrorKind::Runtime);
    assert_eq!(
        msg,
        "SGD.step(): the gradient of parameter 0 is torch.float32, but the parameter is torch.float64; convert the \
         gradient"
    );
    assert!(p.set_grad(Some(&torchfn::tensor([1.0f64, 2.0]).unwrap())).is_err());
    set_grad(&p, &[1.0]);
    opt.param_groups_mut()[0].options.lr = f64::NAN;
    assert_eq!(message(opt.step()), value("Invalid learning rate: NaN"));
    assert_eq!(p.to_vec::<f64>().unwrap(), [1.0]);
    if let Ok(gpu) = torchfn::Device::wgpu() {
        let q = torchfn::tensor([1.0f32]).unwrap().requires_grad_(true).unwrap();
        let mut opt = SGD::new(vec![q.clone()], SgdOptions::new(0.1)).unwrap();
        q.set_grad(Some(&torchfn::tensor([1.0f32]).unwrap().to_device(gpu, None, false, false).unwrap())).unwrap();
        let (_, msg) = message(opt.step());
        assert!(msg.contains("the gradient of parameter 0 is on"), "{msg}");
    }

    // Schedulers.
    let mut opt = SGD::new(vec![p.clone()], SgdOptions::new(0.1)).unwrap();
    assert_eq!(message(StepLR::new(&opt, 0, 0.1)).0, ErrorKind::Value);
    assert_eq!(message(CosineAnnealingLR::new(&opt, 0, 0.0)).0, ErrorKind::Value);
    let mut sched = StepLR::new(&opt, 1, 0.5).unwrap();
    opt.add_param_group(ParamGroup::new(vec![leaf(&[0.0])], SgdOptions::new(0.1))).unwrap();
    let (_, msg) = message(sched.step(&mut opt));
    assert!(msg.contains("the optimizer has 2 parameter groups, but the scheduler was made for 1"), "{msg}");
}

/// Fits y = 2 x0 - 3 x1 + 0.5 with `make`'s optimizer; returns the first and last losses.
fn fit(make: impl Fn(Vec<Tensor>) -> Box<dyn FnMut() -> torchfn::Result<()>>) -> (f32, f32) {
    let xs: Vec<f32> = (0..32).flat_map(|i| [(i as f32 * 0.37).sin(), (i as f32 * 0.91).cos()]).collect();
    let x = Tensor::from_vec(xs, [32, 2]).unwrap();
    let y = (&x.matmul(&torchfn::tensor([[2.0f32], [-3.0]]).unwrap()).unwrap() + 0.5).unwrap();
    let w = torchfn::zeros([2, 1], None, None).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::zeros([1], None, None).unwrap().requires_grad_(true).unwrap();
    let mut step = make(vec![w.clone(), b.clone()]);
    let mut losses = Vec::new();
    for _ in 0..300 {
        for p in [&w, &b] {
            p.set_grad(None).unwrap();
        }
        let err = (&(&x.matmul(&w).unwrap() + &b).unwrap() - &y).unwrap();
        let loss = (&err * &err).unwrap().mean().unwrap();
        loss.backward().unwrap();
        step().unwrap();
        losses.push(loss.item().unwrap().to_f64() as f32);
    }
    (losses[0], *losses.last().unwrap())
}

#[test]
fn linear_regression_converges() {
    let (first, last) = fit(|params| {
        let mut opt = SGD::new(params, SgdOptions::new(0.1).momentum(0.9)).unwrap();
        Box::new(move || opt.step())
    });
    assert!(last < 1e-6 && first > 1.0, "SGD: {first} -> {last}");
    let (first, last) = fit(|params| {
        let mut opt = AdamW::new(params, AdamWOptions::new(0.05).weight_decay(0.0)).unwrap();
        Box::new(move || opt.step())
    });
    assert!(last < 1e-4 && first > 1.0, "AdamW: {first} -> {last}");
}

/// `fused(true)` replays PyTorch's `fused=True` (and the default its default) from
/// `tests/golden/fused_optim.json` (written by `bench/golden/gen_fused_optim.py`): Adam and
/// AdamW with weight decay, amsgrad and maximize, SGD with momentum, dampening, Nesterov and
/// maximize, on parameters of 37 and 5 × 7 elements.
#[test]
fn fused_adam_adamw_and_sgd_match_pytorch_s_fused_step() {
    let path = format!("{}/tests/golden/fused_optim.json", env!("CARGO_MANIFEST_DIR"));
    let golden: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let floats = |v: &Json| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    let shapes: Vec<Vec<usize>> = golden["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect())
        .collect();
    for case in golden["cases"].as_array().unwrap() {
        let dtype = DType::from_name(case["dtype"].as_str().unwrap()).unwrap();
        for fused in [true, false] {
            let params: Vec<Tensor> = golden["init"]
                .as_array()
                .unwrap()
                .iter()
                .zip(&shapes)
                .map(|(v, s)| {
                    let t = Tensor::from_vec(floats(v), s.as_slice()).unwrap().to(dtype, false, false).unwrap();
                    t.requires_grad_(true).unwrap()
                })
                .collect();
            let options = &case["options"];
            let mut step_all: Box<dyn FnMut()> = match case["optimizer"].as_str().unwrap() {
                "Adam" => {
                    let o = adam_options(AdamOptions::new(1e-3), options, &Json::Null).fused(fused);
                    let mut opt = Adam::new(params.clone(), o).unwrap();
                    Box::new(move || opt.step().unwrap())
                }
                "AdamW" => {
                    let o = adam_options(AdamWOptions::new(1e-3), options, &Json::Null).fused(fused);
                    let mut opt = AdamW::new(params.clone(), o).unwrap();
                    Box::new(move || opt.step().unwrap())
                }
                _ => {
                    let mut opt = SGD::new(params.clone(), sgd_options(options, &Json::Null).fused(fused)).unwrap();
                    Box::new(move || opt.step().unwrap())
                }
            };
            let expected = &case[if fused { "fused" } else { "default" }];
            for (step, grads) in golden["grads"].as_array().unwrap().iter().enumerate() {
                for ((p, g), s) in params.iter().zip(grads.as_array().unwrap()).zip(&shapes) {
                    let grad = Tensor::from_vec(floats(g), s.as_slice()).unwrap();
                    p.set_grad(Some(&grad.to(dtype, false, false).unwrap())).unwrap();
                }
                step_all();
                for (i, p) in params.iter().enumerate() {
                    let what = format!("{} {options} fused={fused} step {} param {i}", case["optimizer"], step + 1);
                    let (got, want) = (values(p), floats(&expected[step][i]));
                    if dtype == DType::Float32 {
                        assert_close(&got, &want, dtype, &what);
                    } else {
                        // The fused step rounds each result once: one unit in the last place of
                        // the half type. The default step rounds after each operation, and its
                        // small results come from cancellations of values near 1: two units of
                        // the type at 1.
                        let ulp = if dtype == DType::BFloat16 { 1.0 / 128.0 } else { 1.0 / 1024.0 };
                        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                            let bound =
                                if fused { ulp * w.abs().max(1.0 / 64.0) } else { 2.0 * ulp * w.abs().max(1.0) };
                            assert!((g - w).abs() <= bound, "{what}[{k}]: got {g}, PyTorch {w}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_fused_step_refuses_what_it_cannot_do() {
    let p = torchfn::tensor([1.0f32, 2.0]).unwrap().requires_grad_(true).unwrap();
    let (g, m, v) = (
        torchfn::ones([2], None, None).unwrap(),
        torchfn::zeros([2], None, None).unwrap(),
        torchfn::zeros([2], None, None).unwrap(),
    );
    let step = torchfn::tensor([1.0f32]).unwrap();
    let hyper = torchfn::AdamHyperparameters {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        weight_decay: 0.0,
        eps: 1e-8,
        amsgrad: false,
        maximize: false,
    };
    let options = torchfn::FusedAdamOptions { hyper, grad_scale: None, found_inf: None };
    let call = |p: &Tensor, steps: &[Tensor], options: &torchfn::FusedAdamOptions| {
        torchfn::_fused_adamw_(
            std::slice::from_ref(p),
            std::slice::from_ref(&g),
            std::slice::from_ref(&m),
            std::slice::from_ref(&v),
            &[],
            steps,
            options,
        )
    };
    // A leaf that requires grad, outside no_grad, as any in-place write.
    let err = call(&p, std::slice::from_ref(&step), &options).unwrap_err();
    assert!(err.to_string().contains("a leaf Variable that requires grad"), "{err}");
    // A graph that saved the parameter before the step can tell it was written.
    let saved = (&p * &p).unwrap().sum().unwrap();
    let no_grad = torchfn::autograd::no_grad();
    let err = call(&p, &[], &options).unwrap_err();
    assert_eq!(err.to_string(), "_fused_adamw_(): state_steps has 0 tensors, but there are 1 parameters");
    // found_inf set: nothing is written.
    let skip = torchfn::FusedAdamOptions { found_inf: Some(torchfn::tensor([1.0f32]).unwrap()), ..options.clone() };
    call(&p, std::slice::from_ref(&step), &skip).unwrap();
    assert_eq!(values(&p), [1.0, 2.0]);
    call(&p, std::slice::from_ref(&step), &options).unwrap();
    assert!(values(&p).iter().zip([0.9, 1.9]).all(|(a, b)| (a - b).abs() < 1e-6), "{:?}", values(&p));
    let err = torchfn::_fused_adam_(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        std::slice::from_ref(&m),
        std::slice::from_ref(&p),
        &[],
        std::slice::from_ref(&step),
        &options,
    )
    .unwrap_err();
    assert!(err.to_string().contains("_fused_adam_(): param and exp_avg_sq share memory"), "{err}");
    let wide = torchfn::zeros([2], DType::Float64, None).unwrap();
    let err = torchfn::_fused_adamw_(
        std::slice::from_ref(&p),
        &[wide],
        std::slice::from_ref(&m),
        std::slice::from_ref(&v),
        &[],
        std::slice::from_ref(&step),
        &options,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "_fused_adamw_(): grad must be a contiguous torch.float32 tensor of 2 elements, like the parameter"
    );
    // With a loss scale the gradients are divided by it, and stored so.
    let (q, scaled_grad) = (torchfn::tensor([1.0f32, 2.0]).unwrap(), torchfn::tensor([1.0f32, -3.0]).unwrap());
    let two = torchfn::FusedAdamOptions { grad_scale: Some(torchfn::tensor([2.0f32]).unwrap()), ..options.clone() };
    let (m2, v2) = (torchfn::zeros([2], None, None).unwrap(), torchfn::zeros([2], None, None).unwrap());
    torchfn::_fused_adam_(
        &[q],
        std::slice::from_ref(&scaled_grad),
        std::slice::from_ref(&m2),
        &[v2],
        &[],
        std::slice::from_ref(&step),
        &two,
    )
    .unwrap();
    assert_eq!(values(&scaled_grad), [0.5, -1.5]);
    assert!(values(&m2).iter().zip([0.05, -0.15]).all(|(a, b)| (a - b).abs() < 1e-7), "{:?}", values(&m2));
    // The loss scale is on the parameters' device.
    let meta = torchfn::ones([1], None, torchfn::Device::META).unwrap();
    let scaled = torchfn::FusedAdamOptions { grad_scale: Some(meta), ..options.clone() };
    let err = call(&p, std::slice::from_ref(&step), &scaled).unwrap_err();
    assert_eq!(err.to_string(), "_fused_adamw_(): grad_scale is on meta, the parameters on cpu");
    // Every parameter is checked before any is written.
    let (a, b) = (torchfn::tensor([1.0f32, 2.0]).unwrap(), torchfn::tensor([3.0f32, 4.0]).unwrap());
    let state = |n: usize| (0..n).map(|_| torchfn::zeros([2], None, None).unwrap()).collect::<Vec<_>>();
    let grads = [g.clone(), torchfn::ones([2], DType::Float64, None).unwrap()];
    let steps = [step.clone(), step.clone()];
    let err = torchfn::_fused_adam_(&[a.clone(), b], &grads, &state(2), &state(2), &[], &steps, &options).unwrap_err();
    assert!(err.to_string().contains("grad must be a contiguous torch.float32"), "{err}");
    assert_eq!(values(&a), [1.0, 2.0]);
    drop(no_grad);
    let err = saved.backward().unwrap_err();
    assert!(err.to_string().contains("modified by an inplace operation"), "{err}");
}
