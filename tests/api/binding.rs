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
         * (input, other, *, alpha=1)\n * (input, other, *, out, alpha=1)"
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
        error(Tensor::DIV, vec![a(), a()], Kwargs::from([("rounding_mode", 3)])),
        "div(): argument 'rounding_mode' must be str, not int"
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

/// Python's bare `*`: `scale` and `label` can be passed only by name.
#[torch_function(module = "tests.binding")]
fn scaled(
    input: &Tensor,
    #[keyword_only]
    #[default(2.0)]
    scale: f64,
    #[default("x")] label: &str,
) -> Result<Value> {
    Ok(Value::Str(format!("{label}={}", input.sum()?.item()?.to_f64() * scale)))
}

/// A keyword-only parameter without a default.
#[torch_function(module = "tests.binding")]
fn labelled(input: &Tensor, #[keyword_only] label: &str) -> Result<Value> {
    Ok(Value::Str(format!("{label}: {input}")))
}

/// What the last hook saw of a call: its positional and keyword arguments.
#[derive(Debug)]
struct Seen(RefCell<Vec<String>>);

impl TorchFunctionMode for Seen {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let keywords: Vec<&str> = kwargs.iter().map(|(k, _)| k).collect();
        self.0.borrow_mut().push(format!("{} {} {keywords:?}", func.name(), args.len()));
        func.call(args, kwargs)
    }
}

#[test]
fn keyword_only_parameters_bind_only_by_name() {
    let a = || Value::from(&t(&[1.0, 2.0]));
    assert_eq!(SCALED.signature().to_string(), "(input, *, scale=2.0, label='x')");
    assert_eq!(SCALED.call(&[a()], &Kwargs::from([("scale", 3.0)])).unwrap().to_string(), "'x=9'");
    // As Python: `scaled(t, 3.0)` is one positional argument too many.
    assert_eq!(
        error(SCALED, vec![a(), Value::Float(3.0)], Kwargs::new()),
        "scaled() takes 1 positional argument but 2 were given"
    );
    // PyTorch 2.15: `torch.add(t, t, 2)` -> add() takes 2 positional arguments but 3 were given;
    // torchfn's add has an out= overload, so the error lists both signatures, each with its `*`.
    let err = error(torchfn::ADD, vec![a(), a(), Value::Int(2)], Kwargs::new());
    assert!(err.contains("* (input, other, *, alpha=1)\n * (input, other, *, out, alpha=1)"), "{err}");
    assert_eq!(values(torchfn::ADD.call(&[a(), a()], &Kwargs::from([("alpha", 2)])).unwrap()), [3.0, 6.0]);
    // A keyword-only parameter without a default is required, and named as keyword-only.
    assert_eq!(
        error(LABELLED, vec![a()], Kwargs::new()),
        "labelled() missing 1 required keyword-only argument: 'label'"
    );
    // The typed call passes keyword-only arguments by name, and leaves out those at their
    // default, as a Python caller who does not write them.
    let (x, out) = (t(&[1.0, 2.0]), t(&[0.0, 0.0]));
    let seen = push_mode(Seen(RefCell::new(Vec::new())));
    torchfn::add(&x, &x, 1).unwrap();
    torchfn::add(&x, &x, 2).unwrap();
    scaled(&x, 2.0, "y").unwrap();
    torchfn::exp_out(&x, &out).unwrap();
    let log = seen.0.take();
    assert_eq!(log, ["add 2 []", "add 2 [\"alpha\"]", "scaled 1 [\"label\"]", "exp 1 [\"out\"]"]);
}

#[test]
fn reductions_take_dtype_and_out_as_pytorch_does() {
    let ints = torchfn::tensor([[1i64, 2], [3, 4]]).unwrap();
    let f64_ = Value::DType(DType::Float64);
    // torch.sum(t, dtype=torch.float64) -> tensor(10., dtype=torch.float64)
    let total = torchfn::SUM.call(&[(&ints).into()], &Kwargs::from([("dtype", f64_.clone())])).unwrap();
    assert_eq!(total.to_string(), "tensor(10., dtype=torch.float64)");
    assert_eq!(torchfn::sum_dtype(&ints, DType::Float32).unwrap().to_string(), "tensor(10.)");
    // torch.sum(t, 0, True, torch.float64) -> sum() takes from 2 to 3 positional arguments ...
    assert!(
        error(torchfn::SUM, vec![(&ints).into(), 0.into(), true.into(), f64_.clone()], Kwargs::new())
            .starts_with("sum() received an invalid combination of arguments")
    );
    // torch.mean(t, 0, dtype=torch.float64, out=torch.empty(2, dtype=torch.float64)) -> [2., 3.]
    let out = torchfn::zeros([2], DType::Float64, None).unwrap();
    let kwargs = Kwargs::from([("dtype", f64_.clone()), ("out", Value::from(&out))]);
    let mean = torchfn::MEAN.call(&[(&ints).into(), 0.into()], &kwargs).unwrap();
    assert!(mean.to::<Tensor>().unwrap().is(&out));
    assert_eq!(out.to_vec::<f64>().unwrap(), [2.0, 3.0]);
    // An integer mean without a float dtype is PyTorch's error; with one it computes.
    assert!(torchfn::mean(&ints).is_err());
    assert_eq!(torchfn::mean_dim_dtype(&ints, 1, true, DType::Float64).unwrap().to_vec::<f64>().unwrap(), [1.5, 3.5]);
    let err = torchfn::mean_dtype(&ints, DType::Int32).unwrap_err();
    assert!(err.to_string().contains("Optional dtype must be either a floating point"), "{err}");
    // torch.prod(t, dtype=torch.float64) -> tensor(24., dtype=torch.float64)
    assert_eq!(torchfn::prod_dtype(&ints, DType::Float64).unwrap().to_string(), "tensor(24., dtype=torch.float64)");
    let out = torchfn::zeros([2], DType::Int64, None).unwrap();
    torchfn::prod_out(&ints, 1, false, None, &out).unwrap();
    assert_eq!(out.to_vec::<i64>().unwrap(), [2, 12]);
    torchfn::sum_out(&ints, 0, false, None, &out).unwrap();
    assert_eq!(out.to_vec::<i64>().unwrap(), [4, 6]);
    // cumsum's dtype is keyword-only: torch.cumsum(t, 0, torch.float64) is refused.
    assert_eq!(
        error(torchfn::CUMSUM, vec![(&ints).into(), 0.into(), f64_.clone()], Kwargs::new()).lines().next().unwrap(),
        "cumsum() received an invalid combination of arguments - got (Tensor, int, torch.dtype), but expected one of:"
    );
    let out = torchfn::zeros([2, 2], DType::Float64, None).unwrap();
    torchfn::CUMSUM
        .call(&[(&ints).into(), 1.into()], &Kwargs::from([("dtype", f64_), ("out", Value::from(&out))]))
        .unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [1.0, 3.0, 3.0, 7.0]);
    assert_eq!(
        torchfn::cumprod_out(&ints, 0, None, &torchfn::zeros_like(&ints, None).unwrap())
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [1, 2, 3, 8]
    );
}

#[test]
fn numpy_names_stand_for_pytorch_s_as_its_argument_parser_allows() {
    let m = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    // torch.sum(t, axis=0, keepdims=True) -> tensor([[4., 6.]]); torch.sum(x=t) -> tensor(10.)
    let kwargs = Kwargs::from([("axis", Value::Int(0)), ("keepdims", Value::Bool(true))]);
    assert_eq!(torchfn::SUM.call(&[(&m).into()], &kwargs).unwrap().to_string(), "tensor([[4., 6.]])");
    assert_eq!(torchfn::SUM.call(&[], &Kwargs::from([("x", &m)])).unwrap().to_string(), "tensor(10.)");
    // torch.add(x1=t, x2=t); Tensor.sum(axis=1)
    let doubled = torchfn::ADD.call(&[], &Kwargs::from([("x1", &m), ("x2", &m)])).unwrap();
    assert_eq!(doubled.to::<Tensor>().unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!(Tensor::SUM.call(&[(&m).into()], &Kwargs::from([("axis", 1)])).unwrap().to_string(), "tensor([3., 7.])");
    // A name that is both is refused as a repeated argument, as PyTorch's parser does.
    assert_eq!(
        error(torchfn::EXP, vec![(&m).into()], Kwargs::from([("x", &m)])).lines().next().unwrap(),
        "exp() received an invalid combination of arguments - got (Tensor, x=Tensor), but expected one of:"
    );
}

#[test]
fn a_method_s_self_is_never_a_number_made_a_tensor() {
    // PyTorch 2.15: Tensor.logical_not_(-2) -> TypeError (the descriptor does not apply to an int)
    let err = Tensor::LOGICAL_NOT_.call(&[Value::Int(-2)], &Kwargs::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type, "{err}");
    // A number in another position still becomes a Python-style number tensor.
    let t = torchfn::tensor([1.0f32, 2.0]).unwrap();
    assert_eq!(values(Tensor::__RADD__.call(&[(&t).into(), Value::Int(1)], &Kwargs::new()).unwrap()), [2.0, 3.0]);
}

#[test]
fn products_and_joins_take_out_as_pytorch_does() {
    // torch.matmul(a, b, out=o), torch.mm, torch.bmm and torch.cat(..., out=o) write into o
    let a = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    let out = torchfn::zeros([2, 2], None, None).unwrap();
    let by_name = torchfn::MATMUL.call(&[(&a).into(), (&a).into()], &Kwargs::from([("out", &out)])).unwrap();
    assert!(by_name.to::<Tensor>().unwrap().is(&out));
    assert_eq!(out.to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
    torchfn::mm_out(&a, &torchfn::eye(2, None, None, None).unwrap(), &out).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    let batch = a.unsqueeze(0).unwrap();
    let out3 = torchfn::zeros([1, 2, 2], None, None).unwrap();
    torchfn::bmm_out(&batch, &batch, &out3).unwrap();
    assert_eq!(out3.to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
    let joined = torchfn::zeros([4, 2], None, None).unwrap();
    torchfn::CAT.call(&[Value::List(vec![(&a).into(), (&a).into()])], &Kwargs::from([("out", &joined)])).unwrap();
    assert_eq!(joined.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
    // The wrong shape for out is PyTorch's RuntimeError.
    let err = torchfn::cat_out(std::slice::from_ref(&a), 0, &out3).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime, "{err}");
}
