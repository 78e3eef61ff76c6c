//! `#[torch_function]` as a user writes it: dispatchers here, in another module and in another
//! crate; the options; relevance decided by the dispatcher.

use torchfn::prelude::*;

mod dispatchers {
    use torchfn::prelude::*;

    /// Only the first argument is relevant.
    #[dispatcher]
    pub fn first_only(input: &Tensor, other: &Tensor) -> impl Relevant {
        let _ = other;
        [input]
    }
}

/// Declines everything, so a call that gathers it fails.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Declining;
impl TorchFunction for Declining {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::NotImplemented)
    }
}

#[derive(TensorSubclass)]
struct Sub;

/// Answers `"implementation"`; only `input` is relevant.
#[torch_function(dispatcher = dispatchers::first_only, module = "tests.macros")]
fn pick(input: &Tensor, other: &Tensor) -> Result<Value> {
    let _ = (input, other);
    Ok(Value::Str("implementation".into()))
}

/// A dispatcher written without `#[dispatcher]`, so it cannot be checked: `verify = false`.
fn loose(input: &Tensor, _factor: f64) -> impl Relevant + '_ {
    [input]
}

#[torch_function(dispatcher = loose, verify = false, module = "tests.macros")]
fn unverified(input: &Tensor, factor: f64) -> Result<Tensor> {
    input * factor
}

/// Scales by `factor`, which converts from any number.
#[torch_function(name = "renamed")]
fn original(input: &Tensor, factor: impl Into<Scalar>) -> Result<Tensor> {
    input * factor.into()
}

#[derive(Debug, PartialEq)]
struct Invalid(&'static str);
impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid: {}", self.0)
    }
}
impl std::error::Error for Invalid {}

/// Fails with the user's own error type.
#[torch_function(module = "tests.macros")]
fn validate(input: &Tensor) -> Result<Tensor> {
    let _ = input;
    Err(Error::user(Invalid("always")))
}

fn x() -> Tensor {
    torchfn::tensor([1.0f32, 2.0]).unwrap()
}

#[test]
fn the_dispatcher_decides_which_arguments_are_relevant() {
    let declining = x().as_subclass(Declining).unwrap();
    // `other` is not relevant: the subclass there is never asked.
    assert_eq!(pick(&x(), &declining).unwrap().as_str(), Some("implementation"));
    // `input` is: the subclass there declines, and nobody else handles the call.
    let err = pick(&declining, &x()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no implementation found for 'tests.macros.pick' on types that implement __torch_function__: [Declining]"
    );
}

#[test]
fn dispatchers_from_another_crate_work_and_their_functions_are_listed() {
    let s = x().as_subclass(Sub).unwrap();
    let r = torchfn_macro_tests::axpy(&x(), &s, 2.0).unwrap();
    assert!(r.is_instance::<Sub>());
    assert_eq!(r.to_vec::<f32>().unwrap(), [3.0, 6.0]);
    assert_eq!(torchfn_macro_tests::AXPY.qualified_name(), "xcrate.axpy");
}

#[test]
fn options_name_the_function_and_default_the_namespace_to_the_crate() {
    assert_eq!(ORIGINAL.qualified_name(), "api.renamed");
    assert_eq!(ORIGINAL.doc(), "Scales by `factor`, which converts from any number.");
    assert_eq!(original(&x(), 3).unwrap().to_vec::<f32>().unwrap(), [3.0, 6.0]);
    assert_eq!(original(&x(), 0.5f32).unwrap().to_vec::<f32>().unwrap(), [0.5, 1.0]);
    assert_eq!(unverified(&x(), 2.0).unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert_eq!(UNVERIFIED.signature().to_string(), "(input, factor)");
}

#[test]
fn user_errors_come_out_of_functions_unchanged() {
    let err = validate(&x()).unwrap_err();
    assert_eq!(err.downcast_ref::<Invalid>(), Some(&Invalid("always")));
    let err = VALIDATE.call(&[x().into()], &Kwargs::new()).unwrap_err();
    assert_eq!(err.downcast_ref::<Invalid>(), Some(&Invalid("always")));
}
