//! The protocol at PyTorch 2.15's edges: modes that see constructors (and the default device
//! and dtype built on them), by-name calls that return what an override returned, reflected
//! operators, and the inspectable mode stack.

use std::cell::RefCell;
use std::rc::Rc;

use torchfn::prelude::*;
use torchfn::{DType, Device, ErrorKind, current_mode, mode_stack, mode_stack_len};

/// Records every call it sees, with its arguments as given, then runs it.
#[derive(Default)]
struct Log(RefCell<Vec<String>>);

impl Log {
    fn take(&self) -> Vec<String> {
        self.0.take()
    }
    fn names(&self) -> Vec<String> {
        self.take().iter().map(|c| c.split('(').next().unwrap_or_default().to_string()).collect()
    }
}

impl TorchFunctionMode for Log {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let shown: Vec<String> = args.iter().map(Value::to_string).collect();
        let kw = if kwargs.is_empty() { String::new() } else { format!(" {kwargs}") };
        self.0.borrow_mut().push(format!("{func}({}){kw}", shown.join(", ")));
        func.call(args, kwargs)
    }
}

/// A tensor made without a constructor call.
fn plain() -> Tensor {
    Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap()
}

#[derive(TensorSubclass)]
struct Sub;

// 1. Modes see constructors; subclasses and ducks do not (no tensor to dispatch on).

#[test]
fn modes_see_every_constructor() {
    let g = Generator::new();
    let log = push_mode(Log::default());
    torchfn::zeros([2], None, None).unwrap();
    torchfn::ones([2], None, None).unwrap();
    torchfn::full([2], 3, None, None).unwrap();
    torchfn::eye(2, None, None, None).unwrap();
    torchfn::arange(3, None, None).unwrap();
    torchfn::arange_range(1, 3, 1, None, None).unwrap();
    torchfn::linspace(0, 1, 3, None, None).unwrap();
    torchfn::rand([2], &g, None, None).unwrap();
    torchfn::randn([2], &g, None, None).unwrap();
    torchfn::randint(5, [2], &g, None, None).unwrap();
    torchfn::randint_range(1, 5, [2], &g, None, None).unwrap();
    torchfn::tensor([[1i64, 2], [3, 4]]).unwrap();
    torchfn::as_tensor(2.5, None, None).unwrap();
    let x = plain();
    torchfn::zeros_like(&x, None).unwrap();
    let names = log.names();
    assert_eq!(
        names,
        [
            "torchfn.zeros",
            "torchfn.ones",
            "torchfn.full",
            "torchfn.eye",
            "torchfn.arange",
            "torchfn.arange",
            "torchfn.linspace",
            "torchfn.rand",
            "torchfn.randn",
            "torchfn.randint",
            "torchfn.randint",
            "torchfn.tensor",
            "torchfn.as_tensor",
            "torchfn.zeros_like",
        ]
    );
    // `tensor` shows its data as nested lists, and the dtype its Rust element type chose.
    torchfn::tensor([[1i64, 2], [3, 4]]).unwrap();
    assert_eq!(log.take(), ["torchfn.tensor([[1, 2], [3, 4]]) {'dtype': torch.int64}"]);
}

#[test]
fn constructors_stay_ignored_for_subclasses_and_listed_as_ignored() {
    let ignored: Vec<&str> = torchfn::overrides::get_ignored_functions().iter().map(|f| f.qualified_name()).collect();
    for name in ["torchfn.zeros", "torchfn.tensor", "torchfn.as_tensor", "torchfn.rand", "torchfn.arange"] {
        assert!(ignored.contains(&name), "{name} should be listed as ignored");
    }
    let overridable = torchfn::overrides::get_overridable_functions();
    assert!(!overridable["torchfn"].iter().any(|f| f.name() == "as_tensor" || f.name() == "tensor"));
    // `as_tensor` of a subclass instance is not dispatched: the instance itself comes back.
    let s = plain().as_subclass(Sub).unwrap();
    assert!(torchfn::as_tensor(&s, None, None).unwrap().is(&s));
}

/// Answers `zeros` itself.
struct Sevens;
impl TorchFunctionMode for Sevens {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        if func == torchfn::ZEROS { Ok(Value::Tuple(vec![Value::Int(7)])) } else { func.call(args, kwargs) }
    }
}

#[test]
fn a_mode_answers_a_constructor() {
    let _mode = push_mode(Sevens);
    let by_name = torchfn::ZEROS.call(&[Value::List(vec![Value::Int(2)])], &Kwargs::new()).unwrap();
    assert_eq!(by_name.to_string(), "(7,)");
    let err = torchfn::zeros([2], None, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert_eq!(err.to_string(), "'torchfn.zeros' returned tuple from an override, but its callers expect Tensor");
}

#[test]
fn the_default_device_is_a_mode_that_fills_in_device() {
    assert_eq!(torchfn::get_default_device(), Device::CPU);
    let log = push_mode(Log::default());
    torchfn::set_default_device(Device::CPU);
    assert_eq!(mode_stack_len(), 2);
    assert_eq!(torchfn::get_default_device(), Device::CPU);
    // The device mode is above the log: the log sees the calls it makes with `device=`.
    torchfn::zeros([2], None, None).unwrap();
    torchfn::zeros([2], DType::Int64, Device::CPU).unwrap();
    torchfn::tensor([1.5f64]).unwrap();
    torchfn::neg(&plain()).unwrap();
    assert_eq!(
        log.take(),
        [
            "torchfn.zeros((2,)) {'device': device(type='cpu')}",
            "torchfn.zeros((2,), torch.int64, device(type='cpu'))",
            "torchfn.tensor([1.5]) {'dtype': torch.float64, 'device': device(type='cpu')}",
            "torchfn.neg(tensor([1., 2.]))",
        ]
    );
    // Setting it again replaces the mode; `None` removes it.
    torchfn::set_default_device(Device::CPU);
    assert_eq!(mode_stack_len(), 2);
    torchfn::set_default_device(None);
    assert_eq!(mode_stack_len(), 1);
    {
        let _scoped = torchfn::default_device(Device::CPU);
        assert_eq!(mode_stack_len(), 2);
    }
    assert_eq!(mode_stack_len(), 1);
}

#[cfg(feature = "wgpu")]
#[test]
fn the_default_device_reaches_the_gpu() {
    // It draws from the default generator (`rand`), which seeded tests share.
    let _seeded = crate::seeded();
    let Some(gpu) = crate::gpu::gpu() else { return };
    {
        let _on_gpu = torchfn::default_device(gpu);
        assert_eq!(torchfn::get_default_device(), gpu);
        for t in [
            torchfn::zeros([2], None, None).unwrap(),
            torchfn::tensor([1.0f32, 2.0]).unwrap(),
            torchfn::arange(4, None, None).unwrap(),
            torchfn::rand([3], None, None, None).unwrap(),
            torchfn::as_tensor(plain(), None, None).unwrap(),
        ] {
            assert_eq!(t.device().unwrap(), gpu, "{t}");
        }
        assert_eq!(torchfn::arange(4, None, None).unwrap().dtype().unwrap(), DType::Int32);
        // An explicit device wins.
        assert_eq!(torchfn::zeros([2], None, Device::CPU).unwrap().device().unwrap(), Device::CPU);
    }
    assert_eq!(torchfn::zeros([2], None, None).unwrap().device().unwrap(), Device::CPU);
}

#[test]
fn the_default_dtype_applies_to_constructors_promotion_and_printing() {
    {
        let _f64 = torchfn::default_dtype(DType::Float64).unwrap();
        assert_eq!(torchfn::get_default_dtype(), DType::Float64);
        assert_eq!(torchfn::zeros([2], None, None).unwrap().dtype().unwrap(), DType::Float64);
        assert_eq!(torchfn::arange(0.5, None, None).unwrap().dtype().unwrap(), DType::Float64);
        assert_eq!(torchfn::arange(3, None, None).unwrap().dtype().unwrap(), DType::Int64);
        let scaled = (&torchfn::arange(3, None, None).unwrap() * 1.5).unwrap();
        assert_eq!(scaled.dtype().unwrap(), DType::Float64);
        assert_eq!(scaled.to_string(), "tensor([0.0000, 1.5000, 3.0000])");
        let by_name = torchfn::TENSOR.call(&[Value::List(vec![Value::Float(1.0)])], &Kwargs::new()).unwrap();
        assert_eq!(by_name.as_tensor().unwrap().dtype().unwrap(), DType::Float64);
        // Another thread keeps its own default.
        std::thread::spawn(|| assert_eq!(torchfn::get_default_dtype(), DType::Float32)).join().unwrap();
    }
    assert_eq!(torchfn::get_default_dtype(), DType::Float32);
    let err = torchfn::set_default_dtype(DType::Int32).unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        (ErrorKind::Type, "only floating-point types are supported as the default type")
    );
}

#[test]
fn tensor_by_name_and_as_tensor_follow_torch_tensor() {
    let call = |func: &'static Func, data: Value, kwargs: Kwargs| func.call(&[data], &kwargs);
    let list = |items: Vec<Value>| Value::List(items);
    let made = call(torchfn::TENSOR, list(vec![list(vec![Value::Int(1), Value::Bool(true)])]), Kwargs::new()).unwrap();
    assert_eq!(made.to_string(), "tensor([[1, 1]])");
    let made = call(torchfn::TENSOR, list(vec![Value::Int(1), Value::Float(2.5)]), Kwargs::new()).unwrap();
    assert_eq!(made.to_string(), "tensor([1.0000, 2.5000])");
    let empty = call(torchfn::TENSOR, list(vec![list(vec![])]), Kwargs::new()).unwrap();
    assert_eq!(empty.as_tensor().unwrap().shape().unwrap().as_ref(), [1, 0]);
    assert_eq!(empty.as_tensor().unwrap().dtype().unwrap(), DType::Float32);
    let typed = call(torchfn::TENSOR, list(vec![Value::Int(1)]), Kwargs::from([("dtype", DType::Float64)])).unwrap();
    assert_eq!(typed.to_string(), "tensor([1.], dtype=torch.float64)");
    let grad = call(torchfn::TENSOR, Value::Float(1.0), Kwargs::from([("requires_grad", true)])).unwrap();
    assert!(grad.as_tensor().unwrap().requires_grad().unwrap());

    let errors = [
        (
            list(vec![list(vec![Value::Int(1), Value::Int(2)]), list(vec![Value::Int(3)])]),
            ErrorKind::Value,
            "tensor(): expected sequence of length 2 at dim 1 (got 1)",
        ),
        (Value::None, ErrorKind::Runtime, "Could not infer dtype of NoneType"),
        (list(vec![Value::from("a")]), ErrorKind::Type, "tensor(): invalid data type 'str'"),
    ];
    for (data, kind, message) in errors {
        let err = call(torchfn::TENSOR, data, Kwargs::new()).unwrap_err();
        assert_eq!((err.kind(), err.to_string().as_str()), (kind, message));
    }

    // `tensor` copies a tensor without its history; `as_tensor` keeps it and copies only to
    // convert.
    let x = torchfn::tensor([1.0f32, 2.0]).unwrap().requires_grad_(true).unwrap();
    let copied = call(torchfn::TENSOR, x.clone().into(), Kwargs::new()).unwrap();
    let copied = copied.as_tensor().unwrap();
    assert!(!copied.is(&x) && !copied.requires_grad().unwrap());
    assert!(torchfn::as_tensor(&x, DType::Float32, Device::CPU).unwrap().is(&x));
    let widened = torchfn::as_tensor(&x, DType::Float64, None).unwrap();
    widened.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [1.0, 1.0]);
}

// 2. By-name calls return what the override returned; modes see the arguments as given.

/// A duck whose `mean` is a sentence.
#[derive(Debug, DuckTensor)]
struct Talker;
impl TorchFunction for Talker {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        if func == torchfn::MEAN { Ok(Value::from("the mean of a talker")) } else { Ok(Value::NotImplemented) }
    }
}

#[test]
fn by_name_calls_return_the_override_value_unchanged() {
    let duck = Tensor::from_duck(Talker);
    let value = torchfn::MEAN.call(&[duck.clone().into()], &Kwargs::new()).unwrap();
    assert_eq!(value.as_str(), Some("the mean of a talker"));
    // The typed call converts to its Rust type, with the error it always gave.
    let err = torchfn::mean(&duck).unwrap_err();
    assert_eq!(err.to_string(), "'torchfn.mean' returned str from an override, but its callers expect Tensor");
}

/// Answers `split(None, ..)`, which `split` itself refuses, and records what it was given.
#[derive(Default)]
struct LenientSplit(RefCell<Vec<String>>);
impl TorchFunctionMode for LenientSplit {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.borrow_mut().push(format!("{} positional, {kwargs}", args.len()));
        if func == torchfn::SPLIT && args.first().is_some_and(Value::is_none) {
            return Ok(Value::Tuple(vec![]));
        }
        func.call(args, kwargs)
    }
}

#[test]
fn modes_see_by_name_arguments_as_given_before_binding() {
    let sections = Value::List(vec![Value::Int(2)]);
    let unbound = torchfn::SPLIT.call(&[Value::None, sections.clone()], &Kwargs::new()).unwrap_err();
    assert_eq!(unbound.kind(), ErrorKind::Type);
    let mode = push_mode(LenientSplit::default());
    let answered = torchfn::SPLIT.call(&[Value::None, sections], &Kwargs::new()).unwrap();
    assert!(matches!(answered, Value::Tuple(ref t) if t.is_empty()), "{answered}");
    // Keywords stay keywords; defaults are not filled in.
    let (a, b) = (plain(), plain());
    torchfn::ADD.call(&[a.into(), b.into()], &Kwargs::from([("alpha", 2)])).unwrap();
    assert_eq!(mode.0.take(), ["2 positional, {}", "2 positional, {'alpha': 2}"]);
}

// 3. Reflected operators.

/// A duck that knows only the reflected `Tensor.__radd__` and `Tensor.__rmod__`: a sum or a
/// remainder with it is 42, whatever side it is on.
#[derive(Debug, DuckTensor)]
struct RightAdder;
impl TorchFunction for RightAdder {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        if func == Tensor::__RADD__ || func == Tensor::__RMOD__ {
            return Ok(Tensor::from_vec(vec![42.0f32], [1])?.into());
        }
        Ok(Value::NotImplemented)
    }
}

#[test]
fn a_duck_with_only_the_reflected_operator_works_on_either_side() {
    let duck = Tensor::from_duck(RightAdder);
    for sum in [(&duck + &plain()).unwrap(), (&plain() + &duck).unwrap()] {
        assert_eq!(sum.to_vec::<f32>().unwrap(), [42.0]);
    }
    // `-` has no reflected form the duck knows: Python's error, naming both operand types.
    let err = (&plain() - &duck).unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        (ErrorKind::Type, "unsupported operand type(s) for -: 'Tensor' and 'RightAdder'")
    );
    // By name, a binary operator's TypeError is NotImplemented, as in PyTorch.
    let declined = Tensor::__ADD__.call(&[duck.clone().into(), plain().into()], &Kwargs::new()).unwrap();
    assert!(declined.is_not_implemented());
    let wrong = Tensor::__MUL__.call(&[plain().into(), Value::from("a")], &Kwargs::new()).unwrap();
    assert!(wrong.is_not_implemented());
    // Other functions keep their TypeError.
    assert!(torchfn::ADD.call(&[duck.into(), plain().into()], &Kwargs::new()).is_err());
}

/// A duck that knows only `Tensor.__gt__`: `plain < duck` reaches it reflected.
#[derive(Debug, DuckTensor)]
struct Greater;
impl TorchFunction for Greater {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        if func == Tensor::__GT__ {
            return Ok(Tensor::from_vec(vec![true], [1])?.into());
        }
        Ok(Value::NotImplemented)
    }
}

#[test]
fn comparisons_are_dispatched_methods_and_python_s_operator_reflects_them() {
    use torchfn::operator;
    let (a, b) = (torchfn::tensor([1i64, 5]).unwrap(), torchfn::tensor([3i64, 3]).unwrap());
    assert_eq!(a.__lt__(&b).unwrap().to_vec::<bool>().unwrap(), [true, false]);
    assert_eq!(a.__ge__(&b).unwrap().to_vec::<bool>().unwrap(), [false, true]);
    assert_eq!(a.__eq__(&Tensor::scalar(5)).unwrap().to_vec::<bool>().unwrap(), [false, true]);
    assert_eq!(operator::gt(&a, &b).unwrap().to_vec::<bool>().unwrap(), [false, true]);
    // `plain < duck`: the duck declines `__lt__`, and answers the reflected `duck > plain`.
    let duck = Tensor::from_duck(Greater);
    assert_eq!(operator::lt(&plain(), &duck).unwrap().to_vec::<bool>().unwrap(), [true]);
    // `<=` reflects to `__ge__`, which it does not know either: Python's TypeError.
    let err = operator::le(&plain(), &duck).unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        (ErrorKind::Type, "'<=' not supported between instances of 'Tensor' and 'Greater'")
    );
    // `==` and `!=` fall back to identity, as Python's do.
    assert_eq!(operator::eq(&plain(), &duck).unwrap().to_vec::<bool>().unwrap(), [false]);
    assert_eq!(operator::ne(&duck, &duck).unwrap().to_vec::<bool>().unwrap(), [false]);
    // By name a comparison's TypeError is NotImplemented, as PyTorch's are.
    let declined = Tensor::__LT__.call(&[plain().into(), Value::from("a")], &Kwargs::new()).unwrap();
    assert!(declined.is_not_implemented());
}

#[test]
fn every_binary_operator_has_its_reflected_form() {
    let duck = Tensor::from_duck(RightAdder);
    for rem in [(&duck % &plain()).unwrap(), (&plain() % &duck).unwrap()] {
        assert_eq!(rem.to_vec::<f32>().unwrap(), [42.0]);
    }
    // `%` is Python's: the remainder takes the divisor's sign, numbers on either side.
    let t = torchfn::tensor([-7i64, 7]).unwrap();
    assert_eq!((&t % 3).unwrap().to_vec::<i64>().unwrap(), [2, 1]);
    assert_eq!((7 % &torchfn::tensor([-3i64, 3]).unwrap()).unwrap().to_vec::<i64>().unwrap(), [-2, 1]);
    // The operators Rust has no symbol for are methods, each with its reflected form.
    let (a, b) = (torchfn::tensor([7.0f32, -7.0]).unwrap(), torchfn::tensor([2.0f32, 2.0]).unwrap());
    assert_eq!(a.__floordiv__(&b).unwrap().to_vec::<f32>().unwrap(), [3.0, -4.0]);
    assert_eq!(b.__rfloordiv__(&a).unwrap().to_vec::<f32>().unwrap(), [3.0, -4.0]);
    assert_eq!(b.__pow__(&Tensor::scalar(3)).unwrap().to_vec::<f32>().unwrap(), [8.0, 8.0]);
    assert_eq!(b.__rpow__(&Tensor::scalar(3)).unwrap().to_vec::<f32>().unwrap(), [9.0, 9.0]);
    let (m, v) = (torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap(), torchfn::tensor([1.0f32, 1.0]).unwrap());
    assert_eq!(m.__rmatmul__(&v).unwrap().to_vec::<f32>().unwrap(), [4.0, 6.0]);
    // By name, each is a binary operator: a TypeError is NotImplemented.
    for func in [Tensor::__MOD__, Tensor::__RMOD__, Tensor::__POW__, Tensor::__RPOW__, Tensor::__FLOORDIV__] {
        let declined = func.call(&[plain().into(), Value::from("a")], &Kwargs::new()).unwrap();
        assert!(declined.is_not_implemented(), "{func}");
    }
}

// 4. The mode stack.

struct Named(&'static str, RefCell<usize>);
impl TorchFunctionMode for Named {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        *self.1.borrow_mut() += 1;
        func.call(args, kwargs)
    }
}

fn names() -> Vec<&'static str> {
    mode_stack().iter().map(|m| m.downcast_ref::<Named>().map_or("?", |n| n.0)).collect()
}

#[test]
fn the_mode_stack_is_inspectable_and_its_primitives_behave_as_pytorchs() {
    assert!(current_mode().is_none());
    // A popped mode prints its name, so `unwrap_err` works on the result as on any other.
    let err = pop_mode().unwrap_err();
    assert_eq!((err.kind(), err.to_string().as_str()), (ErrorKind::Runtime, "trying to pop from empty mode stack"));

    let a = Rc::new(Named("a", RefCell::new(0)));
    let _a = push_mode(a.clone());
    let _b = push_mode(Named("b", RefCell::new(0)));
    assert_eq!(names(), ["a", "b"]);
    assert_eq!(format!("{:?}", mode_stack()), "[Named, Named]");
    assert_eq!(current_mode().and_then(|m| m.downcast_ref::<Named>().map(|n| n.0)), Some("b"));

    // A popped mode can be pushed again, without a guard (the primitive) or with one.
    let b = pop_mode().unwrap();
    assert_eq!(names(), ["a"]);
    push_mode(b.clone()).keep();
    assert_eq!(names(), ["a", "b"]);
    assert!(Rc::ptr_eq(&pop_mode().unwrap(), &b));

    // The same mode object twice on the stack sees each call twice.
    {
        let _again = push_mode(a.clone());
        assert_eq!(names(), ["a", "a"]);
        plain().neg().unwrap();
        assert_eq!(*a.1.borrow(), 2);
        assert_eq!(mode_stack_len(), 2);
    }
    assert_eq!(names(), ["a"]);
    plain().neg().unwrap();
    assert_eq!(*a.1.borrow(), 3);
}

/// Reports the mode below it while its hook runs.
#[derive(Default)]
struct LooksDown(RefCell<Vec<String>>);
impl TorchFunctionMode for LooksDown {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let below = current_mode().map(|m| m.downcast_ref::<Named>().map_or("?", |n| n.0).to_string());
        self.0.borrow_mut().push(format!("{below:?} of {}", mode_stack_len()));
        func.call(args, kwargs)
    }
}

#[test]
fn inside_a_hook_the_running_mode_is_off_the_stack() {
    let _a = push_mode(Named("a", RefCell::new(0)));
    let looks = push_mode(LooksDown::default());
    plain().neg().unwrap();
    assert_eq!(looks.0.take(), ["Some(\"a\") of 1"]);
    assert_eq!(mode_stack_len(), 2);
}

/// A length in meters, with methods of its own.
#[derive(TensorSubclass)]
struct Meters;

/// Meters' own methods (RFC-0001: a subclass's methods go through the protocol too).
trait MetersMethods {
    /// The length in feet.
    fn to_feet(&self) -> Result<Tensor>;
    /// The length plus `extra` meters, scaled by `scale`.
    fn stretched(&self, extra: f64, scale: f64) -> Result<Tensor>;
}

#[torch_function(class = Meters)]
impl MetersMethods for Tensor {
    fn to_feet(&self) -> Result<Tensor> {
        self * 3.28084
    }

    #[torch_function(name = "stretch")]
    fn stretched(
        &self,
        extra: f64,
        #[keyword_only]
        #[default(1.0)]
        scale: f64,
    ) -> Result<Tensor> {
        &(self + extra)? * scale
    }
}

/// A duck that answers Meters' `to_feet` with a constant.
#[derive(Debug, DuckTensor)]
struct Ruler;

impl TorchFunction for Ruler {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(if func == Meters::TO_FEET { Value::Float(12.0) } else { Value::NotImplemented })
    }
}

#[test]
fn a_subclass_s_own_methods_go_through_the_protocol() {
    let m = torchfn::tensor([1.0f32, 2.0]).unwrap().as_subclass(Meters).unwrap();
    // The method keeps the subclass through the default hook, and has a handle of its class.
    let feet = m.to_feet().unwrap();
    assert!(feet.is_instance::<Meters>());
    assert_eq!(feet.to_vec::<f32>().unwrap(), [3.28084, 6.56168]);
    assert_eq!(Meters::TO_FEET.qualified_name(), "Meters.to_feet");
    assert_eq!(Meters::TO_FEET.kind(), torchfn::FuncKind::Method);
    assert_eq!(Meters::STRETCHED.qualified_name(), "Meters.stretch");
    assert_eq!(Meters::STRETCHED.signature().to_string(), "(self, extra, *, scale=1.0)");
    assert!(torchfn::overrides::is_tensor_method_or_property(Meters::TO_FEET));
    let listed = torchfn::overrides::get_overridable_functions();
    assert!(listed["Meters"].contains(&Meters::STRETCHED), "{:?}", listed.get("Meters"));
    // The associated function is the same call (Python's `Meters.to_feet(t)`).
    assert_eq!(Meters::to_feet(&m).unwrap().to_vec::<f32>().unwrap(), [3.28084, 6.56168]);
    // Modes see it as the method, with the instance as `self`.
    let plain = torchfn::tensor([1.0f32]).unwrap();
    let log = push_mode(Log::default());
    plain.stretched(1.0, 2.0).unwrap();
    plain.stretched(1.0, 1.0).unwrap();
    assert_eq!(log.take(), ["Meters.stretch(tensor([1.]), 1.0) {'scale': 2.0}", "Meters.stretch(tensor([1.]), 1.0)"]);
    drop(log);
    // By name, with Python's binding; a duck answers it.
    let by_name = Meters::STRETCHED.call(&[(&plain).into(), 1.into()], &Kwargs::from([("scale", 3.0)])).unwrap();
    assert_eq!(by_name.to::<Tensor>().unwrap().to_vec::<f32>().unwrap(), [6.0]);
    let err = Meters::STRETCHED.call(&[(&plain).into(), 1.into(), 3.into()], &Kwargs::new()).unwrap_err();
    assert_eq!(err.to_string(), "stretch() takes 2 positional arguments but 3 were given");
    let ruler = Tensor::from_duck(Ruler);
    assert_eq!(Meters::TO_FEET.call(&[(&ruler).into()], &Kwargs::new()).unwrap().to_string(), "12.0");
    assert_eq!(ruler.to_feet().unwrap().item().unwrap(), Scalar::Float(12.0));
}

/// A subclass that prints differently, through `Tensor.__repr__`.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Terse;

impl TorchFunction for Terse {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if func == Tensor::__REPR__ {
            let t = args[0].to::<Tensor>()?;
            return Ok(Value::Str(format!("Terse{:?}", t.shape()?.as_ref())));
        }
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

thread_local! {
    /// How many times a printing hook below was asked for `__repr__`.
    static REPRS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Seed 001's LoggingTensor: it prints its arguments for every call but `__repr__` (the guard).
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Guarded;

impl TorchFunction for Guarded {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if func == Tensor::__REPR__ {
            REPRS.set(REPRS.get() + 1);
        } else {
            let _logged = Value::Tuple(args.to_vec()).to_string();
        }
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

/// The same without the guard: printing an argument calls `__repr__`, whose hook prints the
/// arguments again...
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Unguarded;

impl TorchFunction for Unguarded {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if func == Tensor::__REPR__ {
            REPRS.set(REPRS.get() + 1);
        }
        let _logged = Value::Tuple(args.to_vec()).to_string();
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

#[test]
fn printing_goes_through_the_protocol() {
    let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    // PyTorch 2.15: repr(t) of a 2-d tensor; f"{torch.tensor(1.23456):.3f}" -> 1.235
    assert_eq!(t.__repr__().unwrap(), "tensor([[1., 2.],\n        [3., 4.]])");
    assert_eq!(format!("{:.3}", torchfn::tensor(1.23456f64).unwrap()), "1.235");
    assert_eq!(
        Tensor::__FORMAT__
            .call(&[torchfn::tensor(2.5f32).unwrap().into(), ".2f".into()], &Kwargs::new())
            .unwrap()
            .to_string(),
        "'2.50'"
    );
    assert_eq!(format!("{:+08.2}", torchfn::tensor(-2.5f32).unwrap()), "-0002.50");
    assert_eq!(format!("{:*^7}", torchfn::tensor(7i64).unwrap()), "***7***");
    assert_eq!(format!("{:.1}", torchfn::tensor([0.25f32, 1.0]).unwrap()), "tensor([0.2, 1.0])");
    let err = t.__format__("q").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    // A subclass changes how its instances print; `{}`, `{:?}` and values all show it.
    let terse = t.as_subclass(Terse).unwrap();
    assert_eq!(terse.to_string(), "Terse[2, 2]");
    assert_eq!(format!("{terse:?}"), "Terse[2, 2]");
    assert_eq!(Value::Tuple(vec![(&terse).into(), 1.into()]).to_string(), "(Terse[2, 2], 1)");
    // Modes see printing.
    let log = push_mode(Log::default());
    let _ = format!("{t} {t:.2}");
    assert_eq!(log.names(), ["Tensor.__repr__", "Tensor.__format__"]);
    drop(log);
    // The seed's case. With the guard, printing asks the hook once.
    let guarded = t.as_subclass(Guarded).unwrap();
    REPRS.set(0);
    assert_eq!(guarded.to_string(), "Guarded([[1., 2.],\n         [3., 4.]])");
    assert_eq!(REPRS.get(), 1);
    // Without it, each print prints again, until the recursion limit ends the loop (with an
    // error the innermost print shows instead of its tensor, not a stack overflow); printing
    // never panics, and the outermost print still shows the tensor.
    let unguarded = t.as_subclass(Unguarded).unwrap();
    REPRS.set(0);
    assert_eq!(unguarded.to_string(), "Unguarded([[1., 2.],\n           [3., 4.]])");
    assert_eq!(REPRS.get(), torchfn::recursion_limit() as usize);
}

/// A subclass that doubles every gradient hook registered on it, by wrapping the hook it is
/// given before handing it on.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct LoudHooks;

impl TorchFunction for LoudHooks {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if func == Tensor::REGISTER_HOOK_WITH {
            let hook = args[1].to::<torchfn::autograd::GradHook>()?;
            let doubled = torchfn::autograd::GradHook::new(move |g| {
                Ok(Some((&hook.call(g)?.unwrap_or_else(|| g.clone()) * 2.0)?))
            });
            let args = [args[0].clone(), doubled.into()];
            return Tensor::torch_function(cls, func, types, &args, kwargs);
        }
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

#[test]
fn grad_fn_and_register_hook_are_dispatched() {
    let x = torchfn::tensor([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let y = (&x * 3.0).unwrap();
    // A mode sees both, with the node and the hook as objects (PyTorch: Tensor.grad_fn.__get__,
    // Tensor.register_hook).
    let log = push_mode(Log::default());
    let node = y.grad_fn().unwrap().unwrap();
    x.register_hook(|g| Ok(Some((g + 1.0)?))).unwrap();
    let seen = log.take();
    drop(log);
    assert_eq!(
        seen,
        [
            "Tensor.grad_fn.__get__(tensor([3., 6.], dtype=torch.float64))",
            "Tensor.register_hook(tensor([1., 2.], dtype=torch.float64), <function>)"
        ]
    );
    assert_eq!(node.name(), "MulBackward0");
    let by_name = Tensor::GRAD_FN.call(&[(&y).into()], &Kwargs::new()).unwrap();
    assert_eq!(
        (by_name.type_name(), by_name.to_string()),
        ("torch.autograd.graph.Node", "<MulBackward0 object>".to_string())
    );
    assert!(Tensor::GRAD_FN.call(&[(&x).into()], &Kwargs::new()).unwrap().is_none());
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [4.0, 4.0]);
    // A subclass changes the hook it is given.
    let z = torchfn::tensor([1.0f64]).unwrap().requires_grad_(true).unwrap().as_subclass(LoudHooks).unwrap();
    z.register_hook(|g| Ok(Some((g + 1.0)?))).unwrap();
    (&z * 5.0).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(z.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [12.0]);
}

/// A duck that knows only the reflected `&` (`Tensor.__rand__`): it answers `t & duck` too.
#[derive(Debug, DuckTensor)]
struct Mask;

impl TorchFunction for Mask {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], _: &Kwargs) -> Outcome {
        if func == Tensor::__RAND__ {
            // `x & mask` is `x`.
            return Ok(args.iter().find(|a| a.duck::<Mask>().is_none()).cloned().unwrap_or_default());
        }
        Ok(Value::NotImplemented)
    }
}

#[test]
fn bitwise_operators_are_dispatched_with_pytorch_s_values() {
    let ints = |v: Vec<i64>| Tensor::from_vec(v, [3]).unwrap();
    let (a, b) = (ints(vec![5, -6, 7]), ints(vec![3, 1, 64]));
    let values = |t: Result<Tensor>| t.unwrap().to_vec::<i64>().unwrap();
    // PyTorch 2.15, a = [5, -6, 7], b = [3, 1, 64]
    assert_eq!(values(&a & &b), [1, 0, 0]);
    assert_eq!(values(&a | &b), [7, -5, 71]);
    assert_eq!(values(&a ^ &b), [6, -5, 71]);
    assert_eq!(values(!&a), [-6, 5, -8]);
    assert_eq!(values(&a << &b), [40, -12, 0]);
    assert_eq!(values(&a >> &b), [0, -3, 0]);
    let far = ints(vec![63, 62, -1]);
    assert_eq!(values(&a << &far), [i64::MIN, i64::MIN, 0]);
    assert_eq!(values(&a >> &far), [0, -1, 0]);
    assert_eq!(values(3 & &a), [1, 2, 3]);
    assert_eq!(values(&a & 3), [1, 2, 3]);
    assert_eq!(values(torchfn::bitwise_left_shift(&a, &Tensor::scalar(2))), [20, -24, 28]);
    let int32 = Tensor::from_vec(vec![1i32, 2], [2]).unwrap();
    let shifts = Tensor::from_vec(vec![31i32, 32], [2]).unwrap();
    assert_eq!((&int32 << &shifts).unwrap().to_vec::<i32>().unwrap(), [i32::MIN, 0]);
    let m = Tensor::from_vec(vec![true, false], [2]).unwrap();
    assert_eq!(
        (&m & &Tensor::from_vec(vec![true, true], [2]).unwrap()).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
    assert_eq!((!&m).unwrap().to_vec::<bool>().unwrap(), [false, true]);
    let mut t = ints(vec![1, 2, 3]);
    t &= &ints(vec![3, 0, 1]);
    assert_eq!(t.to_vec::<i64>().unwrap(), [1, 0, 1]);
    t |= 4;
    assert_eq!(t.to_vec::<i64>().unwrap(), [5, 4, 5]);
    // PyTorch's errors: NotImplementedError "bitwise_and_cpu" not implemented for 'Float';
    // TypeError ~ (operator.invert) is only implemented on integer and Boolean-type tensors
    let f = torchfn::tensor([1.0f32]).unwrap();
    let err = (&f & &f).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotImplemented);
    assert!(err.to_string().contains("\"bitwise_and_cpu\" not implemented for 'Float'"), "{err}");
    assert_eq!((!&f).unwrap_err().kind(), ErrorKind::Type);
    assert!((&f << 1).unwrap_err().to_string().contains("\"lshift_cpu\" not implemented for 'Float'"));
    // Modes see each operator as its dunder.
    let log = push_mode(Log::default());
    let _ = (&a & &b, &a | 1, !&a, &a >> 1, 2 << &a);
    assert_eq!(
        log.names(),
        ["Tensor.__and__", "Tensor.__or__", "Tensor.__invert__", "Tensor.__rshift__", "Tensor.__rlshift__"]
    );
    drop(log);
    // Python's reflection: a duck that only knows __rand__ answers either side.
    let duck = Tensor::from_duck(Mask);
    assert_eq!(values(&a & &duck), [5, -6, 7]);
    assert_eq!(values(&duck & &a), [5, -6, 7]);
    let err = (&duck | &a).unwrap_err();
    assert_eq!(err.to_string(), "unsupported operand type(s) for |: 'Mask' and 'Tensor'");
}

#[test]
fn a_fake_scalar_formats_as_its_repr_not_a_number() {
    let mode = torchfn::fake_tensor::FakeTensorMode::new();
    let fake = mode.from_tensor(&torchfn::tensor(2.5f32).unwrap()).unwrap();
    let shown = format!("{fake:.2}");
    assert!(shown.starts_with("FakeTensor(..."), "{shown}");
}
