//! Wrapper subclasses (`_make_wrapper_subclass` with `__torch_dispatch__`): autograd above them
//! unchanged, the backward pass's operators reaching the hook, the device they stand for, and
//! bad hooks as errors.

use std::cell::RefCell;

use torchfn::dispatch::{Operator, WrapperSubclass, WrapperTensor};
use torchfn::prelude::*;
use torchfn::{Device, ErrorKind};

thread_local! {
    /// The operators the `Boxed` hook saw on this thread.
    static SEEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Holds its values in an inner tensor and logs every operator it sees.
struct Boxed(Tensor);

fn unwrap(t: &Tensor) -> Result<Tensor> {
    Ok(t.wrapper::<Boxed>().map_or_else(|| t.clone(), |b| b.0.clone()))
}

fn boxed(inner: Tensor) -> Result<Tensor> {
    let (shape, dtype, device) = (inner.shape()?, inner.dtype()?, inner.device()?);
    Tensor::make_wrapper_subclass(Boxed(inner), &shape, None, dtype, device, false)
}

impl WrapperSubclass for Boxed {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        SEEN.with(|s| s.borrow_mut().push(func.to_string()));
        let args: Vec<Value> = args.iter().map(|a| a.map_tensors(&unwrap)).collect::<Result<_>>()?;
        let out = func.call(&args, kwargs)?;
        out.map_tensors(&|t| boxed(t.clone()))
    }
}

/// A small network's loss and its inputs' gradients, from whatever `wrap` makes of the inputs.
fn mlp(wrap: impl Fn(Tensor) -> Result<Tensor>) -> (Vec<f32>, Vec<Vec<f32>>) {
    let g = Generator::new().manual_seed(3);
    let x = wrap(torchfn::randn([4, 5], g.clone(), None, None).unwrap()).unwrap();
    let w = wrap(torchfn::randn([5, 3], g.clone(), None, None).unwrap()).unwrap().requires_grad_(true).unwrap();
    let b = wrap(torchfn::randn([3], g.clone(), None, None).unwrap()).unwrap().requires_grad_(true).unwrap();
    let h = (&x.matmul(&w).unwrap() + &b).unwrap().tanh().unwrap();
    let loss = h.softmax(-1, None).unwrap().log().unwrap().mean().unwrap();
    loss.backward().unwrap();
    let read = |t: &Tensor| unwrap(t).unwrap().to_vec::<f32>().unwrap();
    (read(&loss), [w, b].iter().map(|p| read(&p.grad().unwrap().unwrap())).collect())
}

#[test]
fn autograd_runs_above_a_wrapper_and_its_backward_reaches_the_hook() {
    SEEN.with(|s| s.borrow_mut().clear());
    let plain = mlp(Ok);
    let wrapped = mlp(boxed);
    assert_eq!(plain, wrapped);
    let seen = SEEN.with(|s| s.borrow().clone());
    // The forward's product and the backward's (the weight's gradient is a product too).
    assert!(seen.iter().filter(|op| *op == "aten.matmul.default").count() >= 2, "{seen:?}");
    assert!(seen.iter().any(|op| op == "aten.tanh.default"), "{seen:?}");
}

#[test]
fn a_call_with_the_wrapper_as_a_keyword_argument_is_rewrapped() {
    let x = PassThrough(torchfn::tensor([0.0f32, 1.0]).unwrap()).wrap().unwrap();
    let kwargs = Kwargs::from([("self", Value::Tensor(x))]);
    let out = torchfn::dispatch::aten::EXP.call(&[], &kwargs).unwrap();
    let out = out.as_tensor().unwrap();
    assert_eq!(out.wrapper::<PassThrough>().unwrap().0.to_vec::<f32>().unwrap(), [1.0, std::f32::consts::E]);
}

/// A wrapper around a view that starts inside its memory (a storage offset) keeps the offset,
/// so a view of the wrapper addresses the inner memory where the inner view does (the
/// backward of `conv_transpose2d` narrows a gradient that is such a view).
#[test]
fn a_wrapper_of_an_offset_view_makes_views_of_the_right_elements() {
    let base = torchfn::arange(12.0, None, None).unwrap();
    let inner = base.narrow(0, 4, 6).unwrap(); // 4..10
    let w = PassThrough(inner.clone()).wrap().unwrap();
    let view = w.narrow(0, 1, 3).unwrap();
    assert_eq!(view.wrapper::<PassThrough>().unwrap().0.to_vec::<f32>().unwrap(), [5.0, 6.0, 7.0]);
    let every_other = w.unflatten(0, vec![3, 2]).unwrap().select(1, 0).unwrap();
    assert_eq!(every_other.wrapper::<PassThrough>().unwrap().0.to_vec::<f32>().unwrap(), [4.0, 6.0, 8.0]);
}

#[test]
fn a_wrapper_has_its_own_metadata_and_the_device_it_stands_for() {
    let inner = torchfn::zeros([2, 3], None, None).unwrap();
    let t =
        Tensor::make_wrapper_subclass(Boxed(inner), &[2, 3], Some(&[1, 2]), DType::Float64, Device::CPU, true).unwrap();
    assert_eq!(t.shape().unwrap(), [2, 3]);
    assert_eq!(t.stride().unwrap(), [1, 2]);
    assert_eq!(t.dtype().unwrap(), DType::Float64);
    assert_eq!(t.device().unwrap(), Device::CPU);
    assert!(t.requires_grad().unwrap() && t.is_wrapper());
    assert_eq!(t.to_string(), "tensor(..., size=(2, 3), dtype=torch.float64)");
    let err = t.to_vec::<f64>().unwrap_err();
    assert!(err.to_string().contains("has no data of its own"), "{err}");
    let err = Tensor::make_wrapper_subclass(
        Boxed(torchfn::zeros([1], None, None).unwrap()),
        &[2],
        Some(&[1, 1]),
        DType::Float32,
        Device::CPU,
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("strides has 2 entries for a shape of 1 dimensions"), "{err}");
}

/// Declines every call.
struct Declines;

impl WrapperSubclass for Declines {
    fn torch_dispatch(_: &'static Operator, _: &[Value], _: &Kwargs) -> Result<Value> {
        Ok(Value::NotImplemented)
    }
}

/// Hands the wrapper itself back to the operator.
struct Recurses;

impl WrapperSubclass for Recurses {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        func.call(args, kwargs)
    }
}

/// Returns a tensor of the wrong shape.
struct WrongShape;

impl WrapperSubclass for WrongShape {
    fn torch_dispatch(_: &'static Operator, _: &[Value], _: &Kwargs) -> Result<Value> {
        Ok(Value::Tensor(torchfn::zeros([7], None, None)?))
    }
}

#[test]
fn bad_hooks_are_errors_naming_the_operator() {
    let wrap = |w: Box<dyn Fn() -> Result<Tensor>>| w().unwrap();
    let declines =
        wrap(Box::new(|| Tensor::make_wrapper_subclass(Declines, &[2], None, DType::Float32, Device::CPU, false)));
    let err = declines.exp().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert!(err.to_string().starts_with("Multiple dispatch failed for 'aten::exp'"), "{err}");

    let recurses =
        wrap(Box::new(|| Tensor::make_wrapper_subclass(Recurses, &[2], None, DType::Float32, Device::CPU, false)));
    let err = recurses.exp().unwrap_err();
    assert!(err.to_string().starts_with("maximum recursion depth"), "{err}");

    let wrong =
        wrap(Box::new(|| Tensor::make_wrapper_subclass(WrongShape, &[2], None, DType::Float32, Device::CPU, false)));
    let err = wrong.exp().unwrap_err();
    assert!(err.to_string().contains("aten.exp.default"), "{err}");
}

/// A wrapper that changes nothing.
#[derive(WrapperTensor)]
struct PassThrough(Tensor);

impl WrapperSubclass for PassThrough {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        Self::dispatch_inner(func, args, kwargs)
    }
}

thread_local! {
    /// The operators the `Logged` hook saw on this thread.
    static LOGGED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// A wrapper that logs the operators it sees and otherwise changes nothing.
#[derive(WrapperTensor)]
struct Logged(Tensor);

impl WrapperSubclass for Logged {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        LOGGED.with(|s| s.borrow_mut().push(func.to_string()));
        Self::dispatch_inner(func, args, kwargs)
    }
}

/// An in-place operator on a wrapper reaches its hook once and writes the inner tensor: the
/// default hook gives back the wrapper it wrote, so nothing is copied back into it.
#[test]
fn an_in_place_operator_on_a_wrapper_writes_its_inner_tensor_once() {
    let inner = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let x = Logged(inner.clone()).wrap().unwrap();
    LOGGED.with(|s| s.borrow_mut().clear());
    x.add_(&torchfn::tensor(1.0f32).unwrap(), 2).unwrap().neg_().unwrap();
    let seen: Vec<String> = LOGGED.with(|s| s.borrow().clone()).into_iter().filter(|n| !n.contains("lift")).collect();
    assert_eq!(seen, ["aten.add_.Tensor", "aten.neg_.default"]);
    assert_eq!(inner.to_vec::<f32>().unwrap(), [-3.0, -4.0]);
    assert!(x.wrapper::<Logged>().is_some());
}

/// `value` with its plain dense tensors wrapped (a leaf's wrapper requires grad as the leaf
/// does, and holds its gradient wrapped).
fn wrapped(value: &Value) -> Value {
    fn wrap(t: &Tensor) -> Result<Tensor> {
        if t.is_duck() || t.is_wrapper() {
            return Ok(t.clone());
        }
        let w = PassThrough(t.detach()?).wrap()?.requires_grad_(t.requires_grad()?)?;
        if let Some(g) = t.grad()? {
            w.set_grad(Some(&wrap(&g)?))?;
        }
        Ok(w)
    }
    value.map_tensors(&wrap).unwrap()
}

/// `value` with its wrappers unwrapped.
fn unwrapped(value: &Value) -> Value {
    PassThrough::unwrap(value).unwrap()
}

#[test]
fn every_sample_on_pass_through_wrappers_gives_the_same_result_and_gradient() {
    // `run` reseeds the default generator: the tests that hold its lock do not draw meanwhile.
    let _seeded = crate::seeded();
    let (mut compared, mut differences) = (0, Vec::new());
    for func in crate::coverage::computing_operations() {
        if crate::dispatch::INCOMPARABLE.contains(&func.qualified_name().as_str()) {
            continue;
        }
        for k in 0..torchfn::testing::samples(func).len() {
            for grad in [false, true] {
                // A difference is run again, twice at most: tests that do not hold the default
                // generator's lock may draw from it between `run`'s reseeding and a draw.
                let mut found = None;
                for _attempt in 0..3 {
                    let plain = Value::List(crate::dispatch::run(func, k, &Value::clone, grad));
                    let runs = crate::dispatch::run(func, k, &wrapped, grad);
                    let on_wrappers = Value::List(runs.iter().map(unwrapped).collect());
                    found = crate::dispatch::identical(&plain, &on_wrappers).err();
                    if found.is_none() {
                        break;
                    }
                }
                if let Some(e) = found {
                    differences.push(format!("{func} sample {k} (grad: {grad}): {e}"));
                }
                compared += 1;
            }
        }
    }
    println!("{compared} runs compared");
    let shown: Vec<String> = differences.iter().map(|d| d.chars().take(300).collect()).collect();
    assert!(differences.is_empty(), "{} of {compared} runs differ:\n\n{}", differences.len(), shown.join("\n"));
    assert!(compared > 900, "only {compared} runs compared");
}
