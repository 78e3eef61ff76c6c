//! The dispatch layer below autograd (`torchfn::dispatch`): the operator registry, dispatch
//! modes (stack, guards, recursion, errors), and the conformance property: under a
//! pass-through dispatch mode every sample of every operation gives the same result, gradients
//! and error as without it, bit for bit, on the CPU and the GPU.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use torchfn::dispatch::{
    self, Operator, Tag, TorchDispatchMode, aten, current_dispatch_mode, dispatch_mode_stack, no_dispatch,
    pop_dispatch_mode, push_dispatch_mode,
};
use torchfn::prelude::*;
use torchfn::testing::samples;

/// Hands every call on unchanged, counting them.
#[derive(Default)]
struct PassThrough(Cell<usize>);

impl TorchDispatchMode for PassThrough {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.set(self.0.get() + 1);
        func.call(args, kwargs)
    }
}

/// Hands every call on with copies of its arguments, so the operator binds them to its schema
/// again (the path a mode that changes arguments takes).
#[derive(Default)]
struct Rebinding(Cell<usize>);

impl TorchDispatchMode for Rebinding {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.set(self.0.get() + 1);
        let copied: Vec<Value> = args.to_vec(); // another address: no rerun
        func.call(&copied, &kwargs.clone())
    }
}

/// Records the operators it sees, by name, and hands them on.
#[derive(Default)]
struct Names(RefCell<Vec<String>>);

impl TorchDispatchMode for Names {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.borrow_mut().push(func.to_string());
        func.call(args, kwargs)
    }
}

fn names(mode: &Names) -> Vec<String> {
    mode.0.borrow().clone()
}

#[test]
fn the_registry_lists_operators_with_schemas_and_tags() {
    let all = dispatch::operators();
    assert!(all.len() >= 70, "{} operators", all.len());
    let mut sorted: Vec<&str> = all.iter().map(|op| op.name()).collect();
    sorted.sort_unstable();
    assert_eq!(sorted, all.iter().map(|op| op.name()).collect::<Vec<_>>(), "listed by name");

    let mul = dispatch::operator("aten::mul.Tensor").unwrap();
    assert_eq!(mul, &aten::MUL_TENSOR);
    assert_eq!((mul.name(), mul.to_string()), ("aten::mul.Tensor", "aten.mul.Tensor".to_string()));
    assert_eq!(format!("{mul:?}"), "<OpOverload(op='aten.mul', overload='Tensor')>");
    assert_eq!(dispatch::operator("aten.exp.default"), Some(&aten::EXP));
    assert_eq!(dispatch::operator("aten::exp"), Some(&aten::EXP));
    assert_eq!(dispatch::operator("aten::nope"), None);

    let copy = &aten::COPY_;
    assert!(copy.has_tag(Tag::Inplace) && copy.schema().is_mutable());
    assert!(copy.schema().arguments()[0].is_write());
    assert_eq!(copy.schema().aliased_argument(0), Some(0));
    let view = &aten::AS_STRIDED;
    assert!(view.has_tag(Tag::View) && !view.schema().is_mutable());
    assert_eq!(view.schema().aliased_argument(0), Some(0));
    assert!(aten::SUM_DIM_INTLIST.has_tag(Tag::Reduction));
    assert!(aten::FULL.has_tag(Tag::Factory));
    assert_eq!(all.iter().filter(|op| op.has_tag(Tag::Pointwise)).count(), 88);
}

#[test]
fn a_dispatch_mode_sees_forward_and_backward_operators_below_autograd() {
    let x = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap().requires_grad_(true).unwrap();
    let mode = push_dispatch_mode(Names::default());
    let y = (&x * &x).unwrap().sum().unwrap();
    // Autograd recorded the calls above the mode: the result has its history.
    assert!(y.grad_fn().unwrap().is_some());
    let forward = names(&mode);
    assert_eq!(forward, ["aten.mul.Tensor", "aten.sum.dim_IntList"]);
    y.backward().unwrap();
    drop(mode);
    // The gradient is right, and no mode is left behind.
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    assert!(dispatch_mode_stack().is_empty());
}

#[test]
fn the_backward_pass_reaches_the_mode() {
    let x = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap().requires_grad_(true).unwrap();
    let y = (&x * &x).unwrap().sum().unwrap();
    let mode = push_dispatch_mode(Names::default());
    y.backward().unwrap();
    let backward = names(&mode);
    assert!(backward.iter().any(|n| n == "aten.mul.Tensor"), "{backward:?}");
    assert!(!backward.is_empty());
}

/// Records where the results of products live.
#[derive(Default)]
struct Products(RefCell<Vec<usize>>);

impl TorchDispatchMode for Products {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let out = func.call(args, kwargs)?;
        if std::ptr::eq(func, &aten::MUL_TENSOR) {
            self.0.borrow_mut().push(out.as_tensor().unwrap().data_ptr()?);
        }
        Ok(out)
    }
}

/// As PyTorch's `InputBuffer::accumulate`: the gradients of a tensor used twice are added into
/// the memory of the first one to arrive when nothing else holds it, except under
/// `create_graph`, which makes a new tensor.
#[test]
fn gradients_of_a_tensor_used_twice_add_in_place_except_under_create_graph() {
    for create_graph in [false, true] {
        let x = torchfn::tensor([0.5f64, 1.0, 2.0]).unwrap().requires_grad_(true).unwrap();
        let a = (&x * 3.0).unwrap();
        let y = (&a.sin().unwrap() + &a.cos().unwrap()).unwrap().sum().unwrap();
        let summed = std::sync::Arc::new(std::sync::Mutex::new(0usize));
        let seen = summed.clone();
        a.register_hook(move |g| {
            *seen.lock().unwrap() = g.data_ptr()?;
            Ok(None)
        })
        .unwrap();
        let mode = push_dispatch_mode(Products::default());
        y.backward_with(None, None, create_graph, None).unwrap();
        let products = mode.0.borrow().clone();
        drop(mode);
        // The two branches' gradients are the first products of the backward pass.
        let in_place = products[..2].contains(&*summed.lock().unwrap());
        assert_eq!(in_place, !create_graph, "{products:?}");
        let want: Vec<f64> = [0.5f64, 1.0, 2.0].iter().map(|v| 3.0 * ((3.0 * v).cos() - (3.0 * v).sin())).collect();
        let got = x.grad().unwrap().unwrap().to_vec::<f64>().unwrap();
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-12), "{got:?} against {want:?}");
    }
}

/// As in PyTorch, an in-place operation reaches the modes as its in-place operator, which
/// writes into `self` and returns it: `add_`, `sub_`, `mul_`, `div_`, and the backward pass's
/// accumulation of a gradient used twice.
#[test]
fn in_place_arithmetic_reaches_the_modes_as_the_in_place_operator() {
    let x = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap();
    let address = x.data_ptr().unwrap();
    let ten = torchfn::tensor([10.0f32]).unwrap();
    let mode = push_dispatch_mode(Names::default());
    x.add_(&ten, 2).unwrap();
    x.sub_(&ten, 1).unwrap();
    x.mul_(&torchfn::tensor([2.0f32, 2.0, 2.0]).unwrap()).unwrap();
    x.div_(&torchfn::tensor(4.0f32).unwrap(), Some("floor")).unwrap();
    x.div_(&torchfn::tensor(0.5f32).unwrap(), None).unwrap();
    x.neg_().unwrap().relu_().unwrap().exp_().unwrap();
    let seen: Vec<String> = names(&mode).into_iter().filter(|n| n != "aten.lift_fresh.default").collect();
    assert_eq!(
        seen,
        [
            "aten.add_.Tensor",
            "aten.sub_.Tensor",
            "aten.mul_.Tensor",
            "aten.div_.Tensor_mode",
            "aten.div_.Tensor",
            "aten.neg_.default",
            "aten.relu_.default",
            "aten.exp_.default"
        ]
    );
    drop(mode);
    // exp(relu(-(((1 + 20 - 10) * 2) // 4 / 0.5))) = exp(0), in x's own memory.
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0, 1.0, 1.0]);
    assert_eq!(x.data_ptr().unwrap(), address);

    // An int64 tensor cannot take a float result: refused before anything is written.
    let ints = torchfn::tensor([1i64, 2]).unwrap();
    let mode = push_dispatch_mode(Names::default());
    let err = ints.add_(&torchfn::tensor([0.5f32, 0.5]).unwrap(), 1).unwrap_err().to_string();
    assert!(err.contains("result type torch.float32 can't be cast to the desired output type torch.int64"), "{err}");
    let err = ints.exp_().unwrap_err().to_string();
    assert!(err.contains("result type torch.float32 can't be cast to the desired output type torch.int64"), "{err}");
    // Refused writes reach the modes as the operator into a fresh result, as without them.
    assert_eq!(names(&mode).iter().filter(|n| n.contains('_') && !n.contains("lift")).count(), 0, "{:?}", names(&mode));
    drop(mode);
    assert_eq!(ints.to_vec::<i64>().unwrap(), [1, 2]);

    // The backward pass adds the second gradient of a tensor used twice into the first.
    let leaf = torchfn::tensor([0.5f64, 1.0]).unwrap().requires_grad_(true).unwrap();
    let a = (&leaf * 3.0).unwrap();
    let y = (&a.sin().unwrap() + &a.cos().unwrap()).unwrap().sum().unwrap();
    let mode = push_dispatch_mode(Names::default());
    y.backward().unwrap();
    let backward = names(&mode);
    assert!(backward.iter().any(|n| n == "aten.add_.Tensor"), "{backward:?}");
    assert!(!backward.iter().any(|n| n == "aten.copy_.default"), "{backward:?}");
}

/// While recording, an in-place operation that is one kernel writes into `self` as its in-place
/// operator, as PyTorch's modes see it (after a copy of `self` only where the backward reads
/// its old value, `mul_`), and differentiates as its out-of-place form.
#[test]
fn recorded_in_place_operations_reach_the_modes_as_in_place_operators() {
    let leaf = torchfn::tensor([-1.0f64, 0.5, 2.0]).unwrap().requires_grad_(true).unwrap();
    let other = torchfn::tensor([0.25f64, -3.0, 1.5]).unwrap().requires_grad_(true).unwrap();
    let h = (&leaf * 2.0).unwrap();
    let address = h.data_ptr().unwrap();
    let mode = push_dispatch_mode(Names::default());
    for written in [h.add_(&other, 1), h.mul_(&other), h.neg_(), h.sigmoid_()] {
        assert!(written.unwrap().is(&h));
    }
    let seen: Vec<String> = names(&mode).into_iter().filter(|n| n != "aten.lift_fresh.default").collect();
    drop(mode);
    assert_eq!(
        seen,
        ["aten.add_.Tensor", "aten.clone.default", "aten.mul_.Tensor", "aten.neg_.default", "aten.sigmoid_.default"]
    );
    assert_eq!(h.data_ptr().unwrap(), address);
    assert_eq!(h.grad_fn().unwrap().unwrap().name(), "SigmoidBackward0");
    h.sum().unwrap().backward().unwrap();

    let (l, o) =
        (leaf.detach().unwrap().requires_grad_(true).unwrap(), other.detach().unwrap().requires_grad_(true).unwrap());
    let f = (&(&(&l * 2.0).unwrap() + &o).unwrap() * &o).unwrap().neg().unwrap().sigmoid().unwrap();
    assert_eq!(h.to_vec::<f64>().unwrap(), f.to_vec::<f64>().unwrap());
    f.sum().unwrap().backward().unwrap();
    for (written, functional) in [(&leaf, &l), (&other, &o)] {
        let (a, b) = (
            written.grad().unwrap().unwrap().to_vec::<f64>().unwrap(),
            functional.grad().unwrap().unwrap().to_vec::<f64>().unwrap(),
        );
        assert_eq!(a, b);
    }

    // A saved output is `self` at the version the write left: a later write is caught.
    let g = (&leaf * 1.0).unwrap();
    g.exp_().unwrap().add_(&torchfn::tensor(1.0f64).unwrap(), 1).unwrap();
    let err = g.sum().unwrap().backward().unwrap_err().to_string();
    assert!(err.contains("modified by an inplace operation") && err.contains("ExpBackward0"), "{err}");

    // Through a view, the base takes the write into its history.
    let v = torchfn::tensor([-1.0f64, 0.5, 2.0]).unwrap().requires_grad_(true).unwrap();
    let g = (&v * 3.0).unwrap();
    let mode = push_dispatch_mode(Names::default());
    g.narrow(0, 0, 2).unwrap().relu_().unwrap();
    assert!(names(&mode).contains(&"aten.relu_.default".to_string()), "{:?}", names(&mode));
    drop(mode);
    g.sum().unwrap().backward().unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), [0.0, 1.5, 6.0]);
    assert_eq!(v.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [0.0, 3.0, 3.0]);

    // A leaf that requires grad is refused before anything is written.
    let err = leaf.relu_().unwrap_err().to_string();
    assert!(err.contains("a leaf Variable that requires grad is being used in an in-place operation"), "{err}");
    assert_eq!(leaf.to_vec::<f64>().unwrap(), [-1.0, 0.5, 2.0]);
}

/// The in-place operators called directly: the write lands in `self`, which is returned; what
/// cannot be written is an error naming the operator.
#[test]
fn in_place_operators_write_into_self_and_check_what_they_write() {
    let x = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let kwargs = Kwargs::from([("alpha", Value::Int(3))]);
    let out = aten::ADD__TENSOR.call(&[x.clone().into(), torchfn::tensor(1.0f32).unwrap().into()], &kwargs).unwrap();
    assert_eq!(out.as_tensor().unwrap().data_ptr().unwrap(), x.data_ptr().unwrap());
    assert_eq!(x.to_vec::<f32>().unwrap(), [4.0, 5.0]);
    let wide = torchfn::zeros([2, 2], None, None).unwrap();
    let err = aten::MUL__TENSOR.call(&[x.clone().into(), wide.into()], &Kwargs::new()).unwrap_err().to_string();
    let ints = torchfn::tensor([1i64, -2]).unwrap();
    assert_eq!(
        aten::ABS_.call(&[ints.clone().into()], &Kwargs::new()).unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap(),
        [1, 2]
    );
    let refused = aten::SQRT_.call(&[ints.into()], &Kwargs::new()).unwrap_err().to_string();
    assert!(refused.starts_with("aten::sqrt_(): result type torch.float32 can't be cast"), "{refused}");
    assert!(
        err.contains("aten::mul_.Tensor(): output with shape [2] doesn't match the broadcast shape [2, 2]"),
        "{err}"
    );
    let expanded = torchfn::tensor([1.0f32]).unwrap().expand([3]).unwrap();
    let err = aten::MUL__TENSOR.call(&[expanded.into(), x.sum().unwrap().into()], &Kwargs::new()).unwrap_err();
    assert!(err.to_string().contains("more than one element of the written-to tensor"), "{err}");
    assert!(aten::DIV__TENSOR_MODE.has_tag(Tag::Inplace) && aten::DIV__TENSOR_MODE.schema().is_mutable());

    // A value saved for backward and then written in place under a mode: backward refuses, as
    // without the mode (the write counted in the version).
    let leaf = torchfn::tensor([0.5f32, 1.0]).unwrap().requires_grad_(true).unwrap();
    let e = leaf.exp().unwrap();
    {
        let _no_grad = torchfn::autograd::no_grad();
        let _mode = push_dispatch_mode(PassThrough::default());
        e.mul_(&torchfn::tensor(2.0f32).unwrap()).unwrap();
    }
    let err = e.sum().unwrap().backward().unwrap_err().to_string();
    assert!(err.contains("modified by an inplace operation"), "{err}");
}

#[test]
fn the_dispatch_mode_stack_behaves_as_pytorchs() {
    assert!(current_dispatch_mode().is_none());
    let x = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let outer = push_dispatch_mode(PassThrough::default());
    let inner = push_dispatch_mode(Names::default());
    assert_eq!(dispatch_mode_stack().len(), 2);
    assert!(current_dispatch_mode().unwrap().downcast_ref::<Names>().is_some());
    let _ = x.exp().unwrap();
    // The inner mode saw the call first and passed it down to the outer one.
    assert_eq!(names(&inner), ["aten.exp.default"]);
    assert_eq!(outer.0.get(), 1);
    // A tensor made from data under the modes reaches them as `lift_fresh`, as in PyTorch.
    let _ = torchfn::tensor([3.0f32]).unwrap();
    assert_eq!(names(&inner), ["aten.exp.default", "aten.lift_fresh.default"]);
    drop(inner);
    let popped = pop_dispatch_mode().unwrap();
    assert!(popped.downcast_ref::<PassThrough>().is_some());
    let empty = pop_dispatch_mode().unwrap_err();
    assert_eq!(empty.to_string(), "trying to pop from empty mode stack");
    drop(outer); // already popped: dropping the guard changes nothing
    assert!(dispatch_mode_stack().is_empty());
}

#[test]
fn reading_a_value_is_a_data_dependent_operator() {
    let x = torchfn::tensor([2.5f32]).unwrap();
    let mode = push_dispatch_mode(Names::default());
    assert_eq!(x.item().unwrap(), Scalar::Float(2.5));
    assert_eq!(names(&mode), ["aten._local_scalar_dense.default"]);
    assert!(aten::LOCAL_SCALAR_DENSE.has_tag(Tag::DataDependent));
    drop(mode);
    // A mode may answer it, and must answer with a number.
    let _answer = push_dispatch_mode(Wrong(Value::Float(7.0)));
    assert_eq!(x.item().unwrap(), Scalar::Float(7.0));
    let _wrong = push_dispatch_mode(Wrong(Value::Tensor(x.clone())));
    let err = x.item().unwrap_err();
    assert!(
        err.to_string().starts_with("aten._local_scalar_dense.default: the __torch_dispatch__ hook returned Tensor"),
        "{err}"
    );
}

/// Looks at the stack from inside its hook.
struct Inspecting(RefCell<Vec<usize>>);

impl TorchDispatchMode for Inspecting {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.borrow_mut().push(dispatch_mode_stack().len());
        func.call(args, kwargs)
    }
}

#[test]
fn inside_its_hook_a_mode_is_off_the_stack() {
    let x = torchfn::tensor([1.0f32]).unwrap();
    let mode = push_dispatch_mode(Inspecting(RefCell::new(Vec::new())));
    let _ = x.neg().unwrap();
    assert_eq!(*mode.0.borrow(), [0]);
    assert_eq!(dispatch_mode_stack().len(), 1, "pushed back after the hook");
}

#[test]
fn no_dispatch_sends_calls_straight_to_the_backend() {
    let x = torchfn::tensor([1.0f32]).unwrap();
    let mode = push_dispatch_mode(PassThrough::default());
    {
        let _off = no_dispatch();
        let _ = x.exp().unwrap();
    }
    assert_eq!(mode.0.get(), 0);
    let _ = x.exp().unwrap();
    assert_eq!(mode.0.get(), 1);
}

/// Computes `exp` itself (as `2` everywhere) and hands everything else on.
struct Answering;

impl TorchDispatchMode for Answering {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        if func == &aten::EXP {
            let x = args[0].as_tensor().unwrap();
            return Ok(torchfn::full_like(x, 2.0, None)?.into());
        }
        func.call(args, kwargs)
    }
}

#[test]
fn a_mode_may_compute_an_operator_itself_and_autograd_uses_its_result() {
    let x = torchfn::tensor([0.0f32, 1.0]).unwrap().requires_grad_(true).unwrap();
    let _mode = push_dispatch_mode(Answering);
    let y = x.exp().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 2.0]);
    // exp's backward multiplies by the saved output, which is the mode's.
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [2.0, 2.0]);
}

/// Pushes itself back inside its hook, then calls the operator: it sees itself again.
struct Recursing(Rc<Cell<usize>>);

impl TorchDispatchMode for Recursing {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.set(self.0.get() + 1);
        let _again = push_dispatch_mode(Recursing(self.0.clone()));
        func.call(args, kwargs)
    }
}

#[test]
fn a_hook_that_recurses_without_end_is_an_error_naming_the_operator() {
    let calls = Rc::new(Cell::new(0));
    let x = torchfn::tensor([1.0f32]).unwrap();
    let mode = push_dispatch_mode(Recursing(calls.clone()));
    let err = x.exp().unwrap_err();
    assert!(err.to_string().starts_with("maximum recursion depth"), "{err}");
    assert!(err.to_string().contains("'aten.exp.default'"), "{err}");
    assert_eq!(calls.get() as u32, torchfn::recursion_limit());
    drop(mode);
    assert!(dispatch_mode_stack().is_empty());
}

/// Returns the wrong kinds of things.
struct Wrong(Value);

impl TorchDispatchMode for Wrong {
    fn torch_dispatch(&self, _: &'static Operator, _: &Types, _: &[Value], _: &Kwargs) -> Result<Value> {
        Ok(self.0.clone())
    }
}

#[test]
fn a_hook_returning_the_wrong_kind_is_an_error_naming_the_operator() {
    let x = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let cases = [
        (
            Value::Int(3),
            "aten.exp.default: the __torch_dispatch__ hook returned int, but the operator returns (Tensor)",
        ),
        (
            Value::NotImplemented,
            "Multiple dispatch failed for 'aten::exp'; all __torch_dispatch__ handlers returned NotImplemented",
        ),
    ];
    for (value, message) in cases {
        let _mode = push_dispatch_mode(Wrong(value));
        let err = x.exp().unwrap_err();
        assert!(err.to_string().starts_with(message), "{err}");
    }
    let planes = torchfn::ones([1, 1, 2], None, None).unwrap();
    let _mode = push_dispatch_mode(Wrong(Value::Tensor(x.clone())));
    let err = torchfn::nn::functional::max_pool2d(&planes, [1, 1], None, 0, 1, false, false).unwrap_err();
    assert!(err.to_string().contains("aten.max_pool2d_with_indices.default: the __torch_dispatch__ hook returned Tensor, but the operator returns (Tensor, Tensor)"), "{err}");
}

#[test]
fn a_hook_returning_the_wrong_shape_or_dtype_is_an_error_naming_the_operator() {
    let x = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap();
    let short = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let ints = torchfn::tensor([1i64, 2, 3]).unwrap();
    let _mode = push_dispatch_mode(Wrong(Value::Tensor(short)));
    let err = (&x * &x).unwrap_err();
    assert_eq!(
        err.to_string(),
        "aten.mul.Tensor: the __torch_dispatch__ hook returned torch.float32[2], but the operator gives \
         torch.float32[3]"
    );
    let _mode = push_dispatch_mode(Wrong(Value::Tensor(ints)));
    let err = x.exp().unwrap_err();
    assert!(err.to_string().ends_with("returned torch.int64[3], but the operator gives torch.float32[3]"), "{err}");
}

#[test]
fn calling_an_operator_checks_its_arguments() {
    let x = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    let call =
        |op: &'static Operator, args: Vec<Value>, kwargs: Kwargs| op.call(&args, &kwargs).unwrap_err().to_string();
    assert_eq!(
        call(&aten::EXP, vec!["x".into()], Kwargs::new()),
        "aten::exp() expected a value of type 'Tensor' for argument 'self' but instead found type 'str'"
    );
    assert_eq!(
        call(&aten::MUL_TENSOR, vec![x.clone().into()], Kwargs::new()),
        "aten::mul.Tensor() missing required argument 'other'"
    );
    let index = torchfn::tensor([0i64, 2]).unwrap();
    let err = call(&aten::INDEX_SELECT, vec![x.clone().into(), 0i64.into(), index.into()], Kwargs::new());
    assert_eq!(err, "aten::index_select(): index 2 is out of bounds for dimension with size 2");
    let err = call(
        &aten::AS_STRIDED,
        vec![x.clone().into(), Value::from(&[3i64][..]), Value::from(&[2i64][..])],
        Kwargs::new(),
    );
    assert!(err.contains("reach memory outside self's elements"), "{err}");
    let err =
        call(&aten::MATMUL, vec![x.clone().into(), torchfn::ones([3, 1], None, None).unwrap().into()], Kwargs::new());
    assert!(err.contains("cannot be multiplied"), "{err}");
    let err = call(&aten::SUM_DIM_INTLIST, vec![x.clone().into(), Value::from(&[5i64][..])], Kwargs::new());
    assert!(err.contains("dimension out of range"), "{err}");

    // And computes when they are right: keepdim, the default dtype, views.
    let kept =
        aten::SUM_DIM_INTLIST.call(&[x.clone().into(), Value::from(&[1i64][..]), true.into()], &Kwargs::new()).unwrap();
    assert_eq!(kept.as_tensor().unwrap().shape().unwrap(), [2, 1]);
    assert_eq!(kept.as_tensor().unwrap().to_vec::<f32>().unwrap(), [3.0, 7.0]);
    let column = aten::AS_STRIDED
        .call(&[x.clone().into(), Value::from(&[2i64][..]), Value::from(&[2i64][..]), 1i64.into()], &Kwargs::new())
        .unwrap();
    assert_eq!(column.as_tensor().unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert!(column.as_tensor().unwrap().base().unwrap().is_some());
}

// ---------------------------------------------------------------------------------------------
// Conformance: a pass-through mode changes nothing.

/// Results that differ between two runs whatever the mode: addresses.
pub(crate) const INCOMPARABLE: &[&str] = &["Tensor.data_ptr"];

fn is_float(t: &Tensor) -> bool {
    !t.is_duck() && t.dtype().unwrap().is_floating_point()
}

/// `value` with its float tensors replaced by leaves that require grad (collected in `leaves`).
fn leafed(value: &Value, leaves: &mut Vec<Tensor>) -> Value {
    match value {
        Value::Tensor(t) if is_float(t) && !t.requires_grad().unwrap() => {
            let leaf = t.detach().unwrap().requires_grad_(true).unwrap();
            leaves.push(leaf.clone());
            Value::Tensor(leaf)
        }
        Value::List(items) => Value::List(items.iter().map(|v| leafed(v, leaves)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| leafed(v, leaves)).collect()),
        other => other.clone(),
    }
}

/// The float tensors of `value` that have history.
fn differentiable(value: &Value, out: &mut Vec<Tensor>) {
    match value {
        Value::Tensor(t) if is_float(t) && t.requires_grad().unwrap() => out.push(t.clone()),
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| differentiable(v, out)),
        _ => {}
    }
}

/// What one run of a sample gives: its result (or error) and, with `grad`, the gradients of
/// the sum of its differentiable outputs at the sample's float inputs (or the error).
pub(crate) fn run(func: &'static Func, k: usize, prepare: &dyn Fn(&Value) -> Value, grad: bool) -> Vec<Value> {
    torchfn::manual_seed(0);
    let sample = &samples(func)[k];
    let mut args: Vec<Value> = sample.args.iter().map(prepare).collect();
    let mut kwargs: Kwargs = sample.kwargs.iter().map(|(k, v)| (k.to_string(), prepare(v))).collect();
    let mut leaves = Vec::new();
    if grad {
        args = args.iter().map(|v| leafed(v, &mut leaves)).collect();
        kwargs = kwargs.iter().map(|(k, v)| (k.to_string(), leafed(v, &mut leaves))).collect();
    }
    let result = match func.call(&args, &kwargs) {
        Ok(v) => v,
        Err(e) => return vec![Value::Str(format!("error: {e}"))],
    };
    let mut outputs = Vec::new();
    differentiable(&result, &mut outputs);
    let mut runs = vec![result];
    if grad && !outputs.is_empty() {
        let total = outputs.iter().try_fold(None::<Tensor>, |acc, o| {
            let s = o.sum()?;
            Ok::<_, torchfn::Error>(Some(match acc {
                None => s,
                Some(a) => (&a + &s)?,
            }))
        });
        match total.and_then(|t| t.map_or(Ok(()), |t| t.backward())) {
            Ok(()) => runs.extend(leaves.iter().map(|l| l.grad().unwrap().map_or(Value::None, Value::Tensor))),
            Err(e) => runs.push(Value::Str(format!("backward error: {e}"))),
        }
    }
    runs
}

/// The elements of `t` as float64 bits (exact for every dtype torchfn holds; NaNs as one).
fn bits(t: &Tensor) -> Vec<u64> {
    let values = t.detach().unwrap().cpu().unwrap().to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap();
    values.into_iter().map(|v| if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }).collect()
}

/// Where `a` and `b` differ, bit for bit.
pub(crate) fn identical(a: &Value, b: &Value) -> Result<(), String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) if !x.is_duck() && !y.is_duck() => {
            let describe = |t: &Tensor| (t.dtype().unwrap(), t.shape().unwrap().to_vec(), t.device().unwrap());
            if describe(x) != describe(y) {
                return Err(format!("{:?} under the mode, {:?} without", describe(y), describe(x)));
            }
            if bits(x) != bits(y) {
                return Err(format!("{y} under the mode, {x} without"));
            }
            Ok(())
        }
        (Value::List(p) | Value::Tuple(p), Value::List(q) | Value::Tuple(q)) if p.len() == q.len() => {
            p.iter().zip(q).try_for_each(|(p, q)| identical(p, q))
        }
        (a, b) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!("{b} under the mode, {a} without")),
    }
}

/// Every sample of every operation, its arguments passed through `prepare` (moved to a
/// device), without a mode and under each pass-through mode: the number compared, the operator
/// calls the modes saw, and the differences.
fn conformance(prepare: &dyn Fn(&Value) -> Value) -> (usize, usize, Vec<String>) {
    let (mut compared, mut seen, mut differences) = (0, 0, Vec::new());
    for func in crate::coverage::operations() {
        if INCOMPARABLE.contains(&func.qualified_name().as_str()) {
            continue;
        }
        for k in 0..samples(func).len() {
            for grad in [false, true] {
                // `run` reseeds the default generator, but tests that do not hold its lock may
                // draw from it in between: a difference is run again, twice at most (as the fx
                // conformance does), before it counts.
                let mut found = Vec::new();
                for _attempt in 0..3 {
                    let plain = Value::List(run(func, k, prepare, grad));
                    let mode = push_dispatch_mode(PassThrough::default());
                    let under = Value::List(run(func, k, prepare, grad));
                    seen += mode.0.get();
                    drop(mode);
                    let mode = push_dispatch_mode(Rebinding::default());
                    let rebound = Value::List(run(func, k, prepare, grad));
                    seen += mode.0.get();
                    drop(mode);
                    found = [("handed on", under), ("bound again", rebound)]
                        .into_iter()
                        .filter_map(|(how, result)| {
                            identical(&plain, &result)
                                .err()
                                .map(|e| format!("{func} sample {k} (grad: {grad}, {how}): {e}"))
                        })
                        .collect();
                    if found.is_empty() {
                        break;
                    }
                }
                differences.extend(found);
                compared += 2;
            }
        }
    }
    (compared, seen, differences)
}

#[test]
fn a_pass_through_dispatch_mode_changes_no_result_gradient_or_error() {
    // `run` reseeds the default generator: the tests that hold its lock do not draw meanwhile.
    let _seeded = crate::seeded();
    let (compared, seen, differences) = conformance(&Value::clone);
    println!("{compared} runs compared, {seen} operator calls seen");
    let shown: Vec<String> = differences.iter().map(|d| d.chars().take(400).collect()).collect();
    assert!(differences.is_empty(), "{} of {compared} runs differ:\n\n{}", differences.len(), shown.join("\n"));
    assert!(compared > 1800, "only {compared} runs compared");
    assert!(seen > 10000, "the modes saw only {seen} operator calls");
}

#[cfg(feature = "wgpu")]
#[test]
fn a_pass_through_dispatch_mode_changes_nothing_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let _seeded = crate::seeded();
    let (compared, seen, differences) = conformance(&|v| crate::gpu::prepared(v, device));
    let shown: Vec<String> = differences.iter().map(|d| d.chars().take(400).collect()).collect();
    assert!(differences.is_empty(), "{} of {compared} runs differ:\n\n{}", differences.len(), shown.join("\n"));
    assert!(compared > 1800, "only {compared} runs compared");
    assert!(seen > 10000, "the modes saw only {seen} operator calls");
}

#[test]
fn random_draws_are_operators_and_fake_ones_draw_nothing() {
    let g = torchfn::Generator::new().manual_seed(7);
    let w = torchfn::zeros([2, 2], None, None).unwrap();
    let mode = push_dispatch_mode(Names::default());
    torchfn::randn([3], g.clone(), None, None).unwrap();
    torchfn::randint(5, [2], g.clone(), None, None).unwrap();
    w.uniform_(-1.0, 1.0, g.clone()).unwrap();
    torchfn::nn::functional::dropout(&w, 0.5, true, false).unwrap();
    let seen = names(&mode);
    drop(mode);
    assert_eq!(seen[0], "aten.randn.generator");
    assert_eq!(seen[1], "aten.randint.low_generator");
    assert!(seen.contains(&"aten.uniform.default".to_string()), "{seen:?}");
    // Dropout's mask, as PyTorch's: a Bernoulli draw of the kept elements.
    assert!(seen.contains(&"aten.bernoulli.p".to_string()), "{seen:?}");
    assert!(aten::RANDN.has_tag(Tag::Random) && aten::RANDN.has_tag(Tag::Factory));
    // Under FakeTensorMode a draw is a shape: no number is taken from the generator.
    let before = g.get_state().to_vec::<i64>().unwrap();
    let fake = push_dispatch_mode(torchfn::fake_tensor::FakeTensorMode::new());
    let x = torchfn::randn([1000, 1000], g.clone(), None, None).unwrap();
    assert_eq!(
        (x.device().unwrap(), x.to_string()),
        (torchfn::Device::CPU, "FakeTensor(..., size=(1000, 1000))".to_string())
    );
    drop(fake);
    assert_eq!(g.get_state().to_vec::<i64>().unwrap(), before);
}

#[test]
fn a_fused_adamw_step_reaches_a_mode_as_one_operator_and_runs_by_name() {
    use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
    let step = |mode: bool| {
        let p = torchfn::tensor([[1.0f32, -2.0], [0.5, 3.0]]).unwrap().requires_grad_(true).unwrap();
        let mut opt = AdamW::new(vec![p.clone()], AdamWOptions::new(0.1).fused(true).amsgrad(true)).unwrap();
        p.set_grad(Some(&torchfn::tensor([[0.5f32, -1.0], [2.0, 0.25]]).unwrap())).unwrap();
        let names = mode.then(|| push_dispatch_mode(Names::default()));
        opt.step().unwrap();
        let seen = names.map(|n| self::names(&n.mode())).unwrap_or_default();
        (p.detach().unwrap().to_vec::<f32>().unwrap(), seen)
    };
    let (direct, _) = step(false);
    // The mode hands the call on by name: the operator binds its lists and keywords again.
    let (through_mode, seen) = step(true);
    assert_eq!(direct, through_mode);
    assert!(seen.contains(&"aten._fused_adamw_.default".to_string()), "{seen:?}");
    assert!(!seen.iter().any(|n| n.contains("lerp") || n.contains("addcdiv")), "{seen:?}");
}

#[test]
fn a_fused_sgd_step_reaches_a_mode_as_one_operator_and_runs_by_name() {
    use torchfn::optim::{Optimizer, SGD, SgdOptions};
    let steps = |mode: bool| {
        let p = torchfn::tensor([1.0f32, -2.0, 0.5]).unwrap().requires_grad_(true).unwrap();
        let options = SgdOptions::new(0.1).momentum(0.9).weight_decay(0.01).nesterov(true).fused(true);
        let mut opt = SGD::new(vec![p.clone()], options).unwrap();
        let names = mode.then(|| push_dispatch_mode(Names::default()));
        // Two steps: the first makes the momentum buffer the gradient, the second blends.
        for g in [[0.5f32, -1.0, 2.0], [1.0, 0.25, -0.5]] {
            p.set_grad(Some(&torchfn::tensor(g).unwrap())).unwrap();
            opt.step().unwrap();
        }
        let seen = names.map(|n| self::names(&n.mode())).unwrap_or_default();
        (p.detach().unwrap().to_vec::<f32>().unwrap(), seen)
    };
    let (direct, _) = steps(false);
    let (through_mode, seen) = steps(true);
    assert_eq!(direct, through_mode);
    assert_eq!(seen.iter().filter(|n| *n == "aten._fused_sgd_.default").count(), 2, "{seen:?}");
}

/// A float32 LSTM on the CPU reaches a mode as one fused operator per layer and direction,
/// forward and backward, with the same values as without the mode; float64 composes the layer
/// (as PyTorch's does) and never calls it. By name, the operator checks its arguments.
#[test]
fn a_float32_lstm_layer_reaches_a_mode_as_one_fused_operator() {
    let run = |dtype: DType, mode: bool| {
        let g = Generator::new().manual_seed(3);
        let r = |shape: &[usize]| {
            let x = torchfn::randn(shape.to_vec(), g.clone(), None, None).unwrap().to(dtype, false, false).unwrap();
            x.requires_grad_(true).unwrap()
        };
        let (x, state) = (r(&[5, 2, 3]), [r(&[2, 2, 4]), r(&[2, 2, 4])]);
        let params = [r(&[16, 3]), r(&[16, 4]), r(&[16, 3]), r(&[16, 4])];
        let names = mode.then(|| push_dispatch_mode(Names::default()));
        let (out, _, _) = torchfn::lstm(&x, &state, &params, false, 1, 0.0, false, true, false).unwrap();
        out.sum().unwrap().backward().unwrap();
        let seen = names.map(|n| self::names(&n.mode())).unwrap_or_default();
        (out.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap(), seen)
    };
    let (direct, _) = run(DType::Float32, false);
    let (through_mode, seen) = run(DType::Float32, true);
    assert_eq!(direct, through_mode);
    let count = |name: &str| seen.iter().filter(|n| *n == name).count();
    // Two directions.
    assert_eq!(count("aten._lstm_layer.default"), 2, "{seen:?}");
    assert_eq!(count("aten._lstm_layer_backward.default"), 2, "{seen:?}");
    assert!(!seen.iter().any(|n| n.contains("sigmoid")), "{seen:?}");
    let (_, composed) = run(DType::Float64, true);
    assert!(!composed.iter().any(|n| n.contains("lstm")), "{composed:?}");
    assert!(composed.iter().any(|n| n.contains("sigmoid")), "{composed:?}");

    let op = dispatch::operator("aten::_lstm_layer").unwrap();
    let t = |shape: &[usize]| Value::from(torchfn::zeros(shape.to_vec(), None, None).unwrap());
    let err = op.call(&[t(&[5, 2, 12]), t(&[2, 3]), t(&[2, 3]), t(&[12, 4]), false.into()], &Kwargs::new());
    assert!(err.unwrap_err().to_string().contains("weight_hh"));
    let ok = op.call(&[t(&[5, 2, 12]), t(&[2, 3]), t(&[2, 3]), t(&[12, 3]), true.into()], &Kwargs::new()).unwrap();
    let shapes: Vec<Vec<usize>> =
        ok.as_slice().unwrap().iter().map(|v| v.as_tensor().unwrap().shape().unwrap().to_vec()).collect();
    assert_eq!(shapes, [vec![5, 2, 3], vec![5, 2, 3], vec![5, 2, 12]]);
}
