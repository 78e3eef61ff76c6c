//! Module hooks (`register_forward_pre_hook`, `register_forward_hook`,
//! `register_full_backward_pre_hook`, `register_full_backward_hook`, the global forms), the
//! multi-grad hook and the module tracker, with PyTorch 2.15's results on the same programs.

use std::sync::{Arc, Mutex};

use torchfn::autograd::graph::{MultiGradMode, queue_callback, register_multi_grad_hook};
use torchfn::nn::{self, Forward, Layer, Linear, Module, ModuleHooks};
use torchfn::prelude::*;
use torchfn::utils::module_tracker::ModuleTracker;

/// `Linear(3, 2)` with weight `[[1, 2, 3], [4, 5, 6]]` and bias `[0.5, -0.5]`.
fn linear() -> Linear {
    let fc = Linear::new(3, 2, true, &Generator::new().manual_seed(0)).unwrap();
    let _no_grad = torchfn::autograd::no_grad();
    fc.weight.copy_(&torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap()).unwrap();
    fc.bias.as_ref().unwrap().copy_(&torchfn::tensor([0.5f32, -0.5]).unwrap()).unwrap();
    fc
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

#[test]
fn forward_hooks_see_and_replace_inputs_and_outputs_and_go_with_their_handle() {
    let fc = linear();
    let log: Log = Arc::default();
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    let pre = fc.register_forward_pre_hook(move |m, inputs| {
        l1.lock().unwrap().push(format!("pre {} {:?}", m.type_name(), inputs[0].shape()?));
        Ok(Some(vec![(&inputs[0] * 2.0)?]))
    });
    let post = fc.register_forward_hook(move |_, inputs, outputs| {
        l2.lock().unwrap().push(format!("post {:?} {:?}", values(&inputs[0]), values(&outputs[0])));
        Ok(Some(vec![(&outputs[0] + 1.0)?]))
    });
    // Global hooks run before the module's own (on every thread: this one logs its own).
    let thread = std::thread::current().id();
    let global = nn::register_module_forward_pre_hook(move |m, _| {
        if std::thread::current().id() == thread {
            l3.lock().unwrap().push(format!("global {}", m.type_name()));
        }
        Ok(None)
    });
    let x = torchfn::ones([1, 3], None, None).unwrap();
    let y = fc.call(&x).unwrap();
    // (2·x) W^T + b + 1
    assert_eq!(values(&y), [13.5, 30.5]);
    assert_eq!(
        *log.lock().unwrap(),
        ["global Linear", "pre Linear torch.Size([1, 3])", "post [2.0, 2.0, 2.0] [12.5, 29.5]"]
    );
    pre.remove();
    drop(post);
    drop(global);
    // `forward` is the bare function; `call` has no hooks left.
    assert_eq!(values(&fc.call(&x).unwrap()), [6.5, 14.5]);
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[test]
fn full_backward_hooks_see_and_replace_gradients_as_pytorch_s() {
    // PyTorch 2.15: a pre-hook doubling grad_output, then a hook logging what it gets:
    // pre [1, 2]; grad_input [[10, 14, 18]], grad_output [[2, 2]]; x.grad [[10, 14, 18]];
    // weight.grad all 2; the outputs' grad_fn is BackwardHookFunctionBackward.
    let fc = linear();
    let log: Log = Arc::default();
    let (l1, l2) = (log.clone(), log.clone());
    let _pre = fc.register_full_backward_pre_hook(move |grad_outputs| {
        l1.lock().unwrap().push(format!("pre {:?}", grad_outputs[0].as_ref().unwrap().shape()?));
        Ok(Some(vec![Some((grad_outputs[0].as_ref().unwrap() * 2.0)?)]))
    });
    let _hook = fc.register_full_backward_hook(move |grad_inputs, grad_outputs| {
        let show = |g: &Option<Tensor>| g.as_ref().map(values);
        l2.lock().unwrap().push(format!("bw {:?} {:?}", show(&grad_inputs[0]), show(&grad_outputs[0])));
        Ok(None)
    });
    let x = torchfn::ones([1, 3], None, None).unwrap().requires_grad_(true).unwrap();
    let y = fc.call(&x).unwrap();
    assert_eq!(y.grad_fn().unwrap().unwrap().name(), "BackwardHookFunctionBackward");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(*log.lock().unwrap(), ["pre torch.Size([1, 2])", "bw Some([10.0, 14.0, 18.0]) Some([2.0, 2.0])"]);
    assert_eq!(values(&x.grad().unwrap().unwrap()), [10.0, 14.0, 18.0]);
    assert_eq!(values(&fc.weight.grad().unwrap().unwrap()), [2.0; 6]);

    // No input requires grad: the hook runs with the outputs' gradients, and None for the input.
    log.lock().unwrap().clear();
    fc.call(&torchfn::ones([1, 3], None, None).unwrap()).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(*log.lock().unwrap(), ["pre torch.Size([1, 2])", "bw None Some([2.0, 2.0])"]);
}

#[test]
fn a_backward_hook_replaces_the_inputs_gradients() {
    let fc = linear();
    let _hook = fc
        .register_full_backward_hook(|grad_inputs, _| Ok(Some(vec![Some((grad_inputs[0].as_ref().unwrap() * 0.0)?)])));
    let x = torchfn::ones([1, 3], None, None).unwrap().requires_grad_(true).unwrap();
    fc.call(&x).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(values(&x.grad().unwrap().unwrap()), [0.0; 3]);
}

#[test]
fn hooks_that_return_the_wrong_count_are_errors() {
    let fc = linear();
    let x = torchfn::ones([1, 3], None, None).unwrap().requires_grad_(true).unwrap();
    {
        let _bad = fc.register_forward_hook(|_, _, outputs| Ok(Some(vec![outputs[0].clone(), outputs[0].clone()])));
        let err = fc.call(&x).unwrap_err();
        assert_eq!(err.to_string(), "forward hook result: expected 1 tensors, got 2");
    }
    let _bad = fc.register_full_backward_hook(|_, _| Ok(Some(vec![])));
    let err = fc.call(&x).unwrap().sum().unwrap().backward().unwrap_err();
    assert_eq!(err.to_string(), "backward hook returned an invalid number of gradients, got 0, but expected 1");
}

#[test]
fn a_multi_grad_hook_runs_once_per_backward() {
    let a = torchfn::tensor([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let (x, y) = ((&a * 2.0).unwrap(), (&a * 3.0).unwrap());
    let any: Log = Arc::default();
    let log = any.clone();
    register_multi_grad_hook(&[x.clone(), y.clone()], MultiGradMode::Any, move |grads| {
        log.lock().unwrap().push(format!("{:?}", grads.iter().map(Option::is_some).collect::<Vec<_>>()));
        Ok(())
    })
    .unwrap();
    let loss = (&x.sum().unwrap() + &y.sum().unwrap()).unwrap();
    loss.backward_with(None, Some(true), false, None).unwrap();
    loss.backward().unwrap();
    // y was made last, so its gradient comes first; the hook runs once per backward.
    assert_eq!(*any.lock().unwrap(), ["[false, true]", "[false, true]"]);
    let no_grad = torchfn::tensor([1.0f64]).unwrap();
    let err = register_multi_grad_hook(&[no_grad], MultiGradMode::All, |_| Ok(())).unwrap_err();
    assert!(err.to_string().contains("tensor 0 does not require grad"), "{err}");
    assert!(queue_callback(|| Ok(())).is_err());
}

#[test]
fn a_final_callback_error_is_the_backwards_and_every_callback_runs() {
    let a = torchfn::tensor([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let ran: Log = Arc::default();
    let log = ran.clone();
    a.register_hook(move |_| {
        let first = log.clone();
        queue_callback(move || Err(torchfn::Error::value_error(format!("first {}", first.lock().unwrap().len()))))
            .unwrap();
        let second = log.clone();
        queue_callback(move || {
            second.lock().unwrap().push("second".into());
            Ok(())
        })
        .unwrap();
        Ok(None)
    })
    .unwrap();
    let err = (&a * 2.0).unwrap().sum().unwrap().backward().unwrap_err();
    assert_eq!((err.kind(), err.to_string().contains("first 0")), (torchfn::ErrorKind::Value, true), "{err}");
    assert_eq!(*ran.lock().unwrap(), ["second"]);
}

#[test]
fn post_accumulate_grad_hooks_see_the_accumulated_gradient_once_per_backward() {
    let w = torchfn::tensor([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let seen: Log = Arc::default();
    let log = seen.clone();
    w.register_post_accumulate_grad_hook(move |p| {
        log.lock().unwrap().push(format!("{:?}", p.grad()?.unwrap().to_vec::<f64>()?));
        Ok(())
    })
    .unwrap();
    // Used twice in one graph: one accumulation, one call.
    let y = (&(&w * 2.0).unwrap() + &(&w * 3.0).unwrap()).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(*seen.lock().unwrap(), ["[5.0, 5.0]"]);
    let non_leaf = (&w * 1.0).unwrap();
    let err = non_leaf.register_post_accumulate_grad_hook(|_| Ok(())).unwrap_err();
    assert!(err.to_string().contains("non-leaf"), "{err}");
    let plain = torchfn::tensor([1.0f64]).unwrap();
    assert!(plain.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
}

#[derive(Module)]
struct Residual {
    fc1: Linear,
    fc2: Linear,
}

impl Forward for Residual {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        &self.fc2.call(&self.fc1.call(x)?)? + x
    }
}

#[test]
fn the_tracker_follows_modules_forward_and_backward() {
    let g = Generator::new().manual_seed(0);
    let net = Residual { fc1: Linear::new(3, 3, true, &g).unwrap(), fc2: Linear::new(3, 3, true, &g).unwrap() };
    let tracker = Arc::new(ModuleTracker::new());
    let seen: Log = Arc::default();
    for (name, fc) in [("fc1", &net.fc1), ("fc2", &net.fc2)] {
        let (t, log) = (tracker.clone(), seen.clone());
        fc.weight
            .register_hook(move |_| {
                let phase = if t.is_bw() { "bw" } else { "fw" };
                log.lock().unwrap().push(format!("{name} {phase} {:?}", t.parents()));
                Ok(None)
            })
            .unwrap();
    }
    let x = torchfn::ones([2, 3], None, None).unwrap().requires_grad_(true).unwrap();
    net.call(&x).unwrap().sum().unwrap().backward().unwrap();
    // fc1's weight gradient comes while Residual is still waiting for its input's gradient
    // (which the residual branch also feeds); after the backward only Global is left.
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"fc2 bw {"Global", "Residual", "Residual.fc2"}"#, r#"fc1 bw {"Global", "Residual", "Residual.fc1"}"#,]
    );
    assert_eq!(tracker.parents().into_iter().collect::<Vec<_>>(), ["Global"]);
}

#[derive(Module)]
struct Mid {
    fc: Linear,
}

impl Forward for Mid {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.call(x)
    }
}

#[derive(Module)]
struct Outer {
    mid: Mid,
}

impl Forward for Outer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.mid.call(x)
    }
}

#[test]
fn the_tracker_names_modules_as_pytorch_s_does_when_a_submodule_runs_first() {
    // PyTorch 2.15 (`torch.utils.module_tracker`, the same two calls): `mid` alone is `Mid`, its
    // `fc` `Mid.fc`; once `Outer` runs, `mid` is renamed `Outer.mid`, but `fc`, whose parent had
    // already run, keeps `Mid.fc`.
    let outer = Outer { mid: Mid { fc: Linear::new(3, 3, true, &Generator::new().manual_seed(0)).unwrap() } };
    let tracker = Arc::new(ModuleTracker::new());
    let seen: Log = Arc::default();
    let (t, log) = (tracker.clone(), seen.clone());
    let _hook = outer.mid.fc.register_forward_pre_hook(move |_, _| {
        log.lock().unwrap().push(format!("{:?}", t.parents()));
        Ok(None)
    });
    let x = torchfn::ones([1, 3], None, None).unwrap();
    outer.mid.call(&x).unwrap();
    outer.call(&x).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"{"Global", "Mid", "Mid.fc"}"#, r#"{"Global", "Mid.fc", "Outer", "Outer.mid"}"#]
    );
}

#[test]
fn removing_a_hook_that_holds_the_last_tracker_does_not_deadlock() {
    // The hook's captures hold a tracker (whose drop removes its own global hooks): removing
    // the hook drops them once the registry is unlocked.
    let fc = linear();
    let tracker = Arc::new(ModuleTracker::new());
    let held = tracker.clone();
    let hook = fc.register_forward_hook(move |_, _, _| {
        let _ = held.parents();
        Ok(None)
    });
    drop(tracker);
    drop(hook);
    fc.call(&torchfn::ones([1, 3], None, None).unwrap()).unwrap();
}

#[test]
fn a_failed_backward_still_resets_the_tracker() {
    let fc = linear();
    let tracker = ModuleTracker::new();
    let _fails = fc.register_full_backward_pre_hook(|_| Err(torchfn::Error::runtime_error("stop here")));
    let x = torchfn::ones([1, 3], None, None).unwrap().requires_grad_(true).unwrap();
    let err = fc.call(&x).unwrap().sum().unwrap().backward().unwrap_err();
    assert_eq!(err.to_string(), "stop here");
    assert_eq!(tracker.parents().into_iter().collect::<Vec<_>>(), ["Global"]);
}
