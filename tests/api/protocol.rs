//! docs/protocol.md sections 2 and 4-6: gathering, precedence, results, errors, the fast path,
//! and the helpers for functions written by hand.

use std::cell::RefCell;

use torchfn::overrides::{handle_torch_function, has_torch_function, is_tensor_like};
use torchfn::prelude::*;
use torchfn::{ErrorKind, Param};

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn log(entry: String) {
    LOG.with(|l| l.borrow_mut().push(entry));
}

fn take_log() -> Vec<String> {
    LOG.with(|l| l.take())
}

fn names(types: &Types) -> String {
    types.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

/// A hook that records its class and the `types` it saw, then declines.
fn declining(cls: &'static Class, func: &'static Func, types: &Types, _: &[Value], _: &Kwargs) -> Outcome {
    log(format!("{cls} on {func}: [{}]", names(types)));
    Ok(Value::NotImplemented)
}

macro_rules! declining_class {
    ($name:ident $(, $parent:ident)?) => {
        #[derive(TensorSubclass)]
        #[torchfn(hook)]
        $(#[torchfn(parent = $parent)])?
        struct $name;
        impl TorchFunction for $name {
            fn torch_function(cls: &'static Class, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
                declining(cls, func, types, args, kwargs)
            }
        }
    };
}

declining_class!(A);
declining_class!(B, A);
declining_class!(C, A);

/// Answers every call with its own name.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Answering;
impl TorchFunction for Answering {
    fn torch_function(cls: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        log(format!("{cls} answered"));
        Ok(Value::Str(cls.name().into()))
    }
}

#[derive(Debug, PartialEq)]
struct Boom(u32);
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "boom {}", self.0)
    }
}
impl std::error::Error for Boom {}

/// Fails every call with a user error.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Failing;
impl TorchFunction for Failing {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Err(Error::user(Boom(3)))
    }
}

/// A duck with a duck parent, both declining.
#[derive(Debug, DuckTensor)]
struct Duck;
impl TorchFunction for Duck {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        declining(cls, func, types, args, kwargs)
    }
}

#[derive(Debug, DuckTensor)]
#[torchfn(parent = Duck)]
struct Duckling;
impl TorchFunction for Duckling {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        declining(cls, func, types, args, kwargs)
    }
}

/// Three relevant tensors; answers `"implementation"` when nothing overrides it.
#[torch_function(module = "tests")]
fn three(x: &Tensor, y: &Tensor, z: &Tensor) -> Result<Value> {
    let _ = (x, y, z);
    Ok(Value::Str("implementation".into()))
}

fn base() -> Tensor {
    torchfn::tensor([1.0f32, 2.0]).unwrap()
}

#[test]
fn a_subclass_goes_before_the_first_collected_class_it_descends_from() {
    let (a, b, c) = (base().as_subclass(A).unwrap(), base().as_subclass(B).unwrap(), base().as_subclass(C).unwrap());
    let err = three(&a, &b, &c).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert_eq!(
        err.to_string(),
        "no implementation found for 'tests.three' on types that implement __torch_function__: [B, C, A]"
    );
    assert_eq!(
        take_log(),
        ["B on tests.three: [B, C, A]", "C on tests.three: [B, C, A]", "A on tests.three: [B, C, A]"]
    );

    let err = three(&a, &c, &b).unwrap_err();
    assert!(err.to_string().ends_with("[C, B, A]"), "{err}");
    take_log();
}

#[test]
fn each_class_is_gathered_once_and_plain_tensors_never() {
    let (b1, b2) = (base().as_subclass(B).unwrap(), base().as_subclass(B).unwrap());
    let err = three(&base(), &b1, &b2).unwrap_err();
    assert!(err.to_string().ends_with(": [B]"), "{err}");
    assert_eq!(take_log(), ["B on tests.three: [B]"]);
}

#[test]
fn unrelated_classes_keep_argument_order_and_ducks_follow_their_parents() {
    let (duck, duckling) = (Tensor::from_duck(Duck), Tensor::from_duck(Duckling));
    let err = three(&duck, &base().as_subclass(A).unwrap(), &duckling).unwrap_err();
    assert!(err.to_string().ends_with(": [Duckling, Duck, A]"), "{err}");
    take_log();
}

#[test]
fn the_first_result_that_is_not_not_implemented_wins() {
    let (b, answering) = (base().as_subclass(B).unwrap(), base().as_subclass(Answering).unwrap());
    let out = three(&b, &answering, &base().as_subclass(A).unwrap()).unwrap();
    assert_eq!(out.as_str(), Some("Answering"));
    // B declined, Answering answered, A was never asked.
    assert_eq!(take_log(), ["B on tests.three: [B, Answering, A]", "Answering answered"]);
}

#[test]
fn hook_errors_propagate_unchanged_and_stop_dispatch() {
    let (failing, answering) = (base().as_subclass(Failing).unwrap(), base().as_subclass(Answering).unwrap());
    let err = three(&failing, &answering, &base()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::User);
    assert_eq!(err.downcast_ref::<Boom>(), Some(&Boom(3)));
    assert_eq!(err.to_string(), "boom 3");
    assert!(take_log().is_empty(), "Answering must not run after an error");
}

#[test]
fn plain_tensors_take_the_fast_path_without_allocating() {
    let x = base();
    let n = crate::allocations(|| {
        for _ in 0..100 {
            x.ndim().unwrap();
            x.shape().unwrap();
            x.dtype().unwrap();
            x.data_ptr().unwrap();
        }
    });
    assert_eq!(n, 0);
    // The counter does see the slow path.
    let s = base().as_subclass(Answering).unwrap();
    assert!(crate::allocations(|| drop(s.ndim())) > 0);
    take_log();
}

#[test]
fn has_torch_function_tells_whether_dispatch_leaves_the_fast_path() {
    let x = base();
    assert!(!has_torch_function(&[&x, &x]));
    assert!(has_torch_function(&[&x, &base().as_subclass(A).unwrap()]));
    assert!(has_torch_function(&Tensor::from_duck(Duck)));
    assert!(!has_torch_function(&(Some(&x), 3i64)));
}

#[test]
fn is_tensor_like_accepts_tensors_subclasses_and_ducks_only() {
    assert!(is_tensor_like(&Value::from(&base())));
    assert!(is_tensor_like(&base().as_subclass(A).unwrap().into()));
    assert!(is_tensor_like(&Tensor::from_duck(Duck).into()));
    for v in [Value::Int(1), Value::Float(2.0), Value::Str("x".into()), Value::None, Value::List(vec![])] {
        assert!(!is_tensor_like(&v), "{v}");
    }
}

/// A function written by hand, without the macro: its implementation and its handle.
fn norm1_implementation(args: &[Value], _: &Kwargs) -> Result<Value> {
    let t = args[0].to::<Tensor>()?;
    let total = (&t * &t)?.sum()?;
    Ok(total.into())
}

static NORM1: Func = Func::new(
    "tests",
    "norm1",
    &[Param::new("input", || "Tensor".into(), None, false)],
    "Sum of squares, written without the macro.",
    norm1_implementation,
);
torchfn::register_function!(NORM1);

fn norm1(input: &Tensor) -> Result<Tensor> {
    let args = [Value::from(input)];
    if has_torch_function(input) {
        return handle_torch_function(&NORM1, input, &args, &Kwargs::new())?.to::<Tensor>();
    }
    norm1_implementation(&args, &Kwargs::new())?.to::<Tensor>()
}

#[test]
fn handle_torch_function_runs_the_protocol_for_hand_written_functions() {
    assert_eq!(norm1(&base()).unwrap().item().unwrap(), Scalar::Float(5.0));
    let answered = handle_torch_function(&NORM1, &base().as_subclass(Answering).unwrap(), &[], &Kwargs::new());
    assert_eq!(answered.unwrap().as_str(), Some("Answering"));
    take_log();
    let err = norm1(&base().as_subclass(B).unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no implementation found for 'tests.norm1' on types that implement __torch_function__: [B]"
    );
    take_log();
    // The by-name call of a hand-written handle binds and dispatches too.
    assert!(
        NORM1
            .call(&[], &Kwargs::new())
            .unwrap_err()
            .to_string()
            .contains("missing 1 required positional argument: 'input'")
    );
    let sub = base().as_subclass(Answering).unwrap();
    assert_eq!(NORM1.call(&[sub.into()], &Kwargs::new()).unwrap().as_str(), Some("Answering"));
    take_log();
    assert!(torchfn::overrides::find_function("tests.norm1").is_some_and(|f| f == &NORM1));
}
