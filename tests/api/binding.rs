//! The by-name call: arguments bound like Python's, with Python's error messages.

use std::cell::RefCell;

use torchfn::ErrorKind;
use torchfn::prelude::*;

fn t(values: &[f32]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn values(v: Value) -> Vec<f32> {
    v.to::<Tensor>().unwrap().to_vec::<f32>().unwrap()
}

fn error(func: &'static Func, args: Vec<Value>, kwargs: Kwargs) -> String {
    let err = func.call(&args, &kwargs).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type, "{err}");
    err.to_string()
}

/// Takes any number of tensors, then keyword-only arguments, one of them required.
#[torch_function(module = "tests.binding")]
fn combine(#[variadic] tensors: &[Tensor], #[default(1.0)] scale: f64, label: &str) -> Result<Value> {
    let mut total = 0.0;
    for t in tensors {
        total += t.sum()?.item()?.to_f64();
    }
    Ok(Value::Str(format!("{label}={}", total * scale)))
}

/// `input + alpha * other` under one signature (`torchfn.add` also has an `out=` overload, which
/// turns binding errors into PyTorch's "invalid combination" message).
#[torch_function(module = "tests.binding")]
fn axpy(input: &Tensor, other: &Tensor, #[default(1)] alpha: impl Into<Scalar>) -> Result<Tensor> {
    torchfn::add(input, other, alpha)
}

#[test]
fn positional_keyword_and_default_arguments_bind_like_python() {
    let (a, b) = (t(&[1.0, 2.0]), t(&[10.0, 20.0]));
    assert_eq!(values(torchfn::ADD.call(&[(&a).into(), (&b).into()], &Kwargs::new()).unwrap()), [11.0, 22.0]);
    let kwargs = Kwargs::from([("other", Value::from(&b)), ("alpha", Value::Int(2))]);
    assert_eq!(values(torchfn::ADD.call(&[(&a).into()], &kwargs).unwrap()), [21.0, 42.0]);
    let kwargs = Kwargs::from([("input", Value::from(&a)), ("other", Value::from(&b)), ("alpha", Value::Float(0.5))]);
    assert_eq!(values(torchfn::ADD.call(&[], &kwargs).unwrap()), [6.0, 12.0]);
    // A method's receiver is its first positional argument.
    assert_eq!(values(Tensor::ADD.call(&[(&a).into(), 1.into()], &Kwargs::new()).unwrap()), [2.0, 3.0]);
    // Python numbers are accepted where a tensor is expected.
    assert_eq!(values(Tensor::__RADD__.call(&[(&a).into(), 1.5.into()], &Kwargs::new()).unwrap()), [2.5, 3.5]);
}

#[test]
fn missing_extra_unknown_and_repeated_arguments_read_like_python() {
    let a = || Value::from(&t(&[1.0]));
    assert_eq!(error(AXPY, vec![a()], Kwargs::new()), "axpy() missing 1 required positional argument: 'other'");
    assert_eq!(
        error(AXPY, vec![], Kwargs::new()),
        "axpy() missing 2 required positional arguments: 'input' and 'other'"
    );
    assert_eq!(
        error(AXPY, vec![a(), a(), a(), a()], Kwargs::new()),
        "axpy() takes from 2 to 3 positional arguments but 4 were given"
    );
    assert_eq!(
        error(torchfn::NEG, vec![a(), a()], Kwargs::new()),
        "neg() takes 1 positional argument but 2 were given"
    );
    assert_eq!(
        error(AXPY, vec![a(), a()], Kwargs::from([("beta", 1)])),
        "axpy() got an unexpected keyword argument 'beta'"
    );
    assert_eq!(
        error(AXPY, vec![a(), a()], Kwargs::from([("input", a())])),
        "axpy() got multiple values for argument 'input'"
    );
    // A function with overloads reports every signature it tried, as PyTorch does.
    assert_eq!(
        error(torchfn::ADD, vec![a()], Kwargs::new()),
        "add() received an invalid combination of arguments - got (Tensor), but expected one of:\n \
         * (input, other, alpha=1)\n * (input, other, out, alpha=1)"
    );
}

#[test]
fn wrongly_typed_arguments_name_the_argument_and_both_types() {
    let a = || Value::from(&t(&[1.0]));
    assert_eq!(
        error(AXPY, vec![a(), Value::Str("x".into())], Kwargs::new()),
        "axpy(): argument 'other' (position 2) must be Tensor, not str"
    );
    assert_eq!(
        error(AXPY, vec![a(), a()], Kwargs::from([("alpha", "two")])),
        "axpy(): argument 'alpha' must be Number, not str"
    );
    assert_eq!(
        error(torchfn::RESHAPE, vec![a(), Value::Float(2.0)], Kwargs::new()),
        "reshape(): argument 'shape' (position 2) must be tuple of ints, not float"
    );
    assert_eq!(
        error(Tensor::DIV, vec![a(), a(), Value::Int(3)], Kwargs::new()),
        "div(): argument 'rounding_mode' (position 3) must be str, not int"
    );
}

#[test]
fn variadic_parameters_take_the_remaining_positionals() {
    let (a, b) = (t(&[1.0, 2.0]), t(&[3.0]));
    assert_eq!(COMBINE.signature().to_string(), "(*tensors, scale=1.0, label)");
    let kwargs = Kwargs::from([("label", "total")]);
    let out = COMBINE.call(&[(&a).into(), (&b).into(), (&b).into()], &kwargs).unwrap();
    assert_eq!(out.as_str(), Some("total=9"));
    let kwargs = Kwargs::from([("label", Value::from("half")), ("scale", Value::Float(0.5))]);
    assert_eq!(COMBINE.call(&[(&a).into()], &kwargs).unwrap().as_str(), Some("half=1.5"));
    assert_eq!(
        error(COMBINE, vec![(&a).into()], Kwargs::new()),
        "combine() missing 1 required keyword-only argument: 'label'"
    );
    // The typed call hands hooks one positional argument per tensor, as Python would.
    struct Args(RefCell<Vec<String>>);
    impl TorchFunctionMode for Args {
        fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
            self.0.borrow_mut().push(format!("{} positional, {kwargs}", args.len()));
            func.call(args, kwargs)
        }
    }
    let mode = push_mode(Args(RefCell::default()));
    assert_eq!(combine(&[a.clone(), b.clone(), b], 2.0, "x").unwrap().as_str(), Some("x=18"));
    assert_eq!(mode.0.take(), ["3 positional, {'scale': 2.0, 'label': 'x'}"]);
}

#[test]
fn the_implementation_is_callable_without_the_protocol() {
    #[derive(TensorSubclass)]
    struct Sub;
    let s = t(&[1.0]).as_subclass(Sub).unwrap();
    let through_protocol = torchfn::NEG.call(&[(&s).into()], &Kwargs::new()).unwrap();
    assert!(through_protocol.to::<Tensor>().unwrap().is_instance::<Sub>());
    let direct = torchfn::NEG.implementation(&[(&s).into()], &Kwargs::new()).unwrap();
    assert!(!direct.to::<Tensor>().unwrap().is_instance::<Sub>());
    assert_eq!(values(direct), [-1.0]);
}
