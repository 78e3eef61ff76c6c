//! Override coverage: every operation of torchfn has samples, and a duck in any tensor position
//! of any sample sees exactly that operation, as PyTorch's `test_overrides` checks.

use std::cell::RefCell;

use torchfn::overrides::get_overridable_functions;
use torchfn::prelude::*;
use torchfn::testing::{Sample, samples};

thread_local! {
    static SEEN: RefCell<Vec<&'static Func>> = const { RefCell::new(Vec::new()) };
}

/// Records the functions it is asked about, and handles none of them.
#[derive(Debug, DuckTensor)]
struct Spy;

impl TorchFunction for Spy {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        SEEN.with(|s| s.borrow_mut().push(func));
        Ok(Value::NotImplemented)
    }
}

/// torchfn's own operations (this test binary registers functions of its own too).
pub(crate) fn operations() -> Vec<&'static Func> {
    get_overridable_functions()
        .into_iter()
        .filter(|(ns, _)| *ns == "Tensor" || *ns == "torchfn" || ns.starts_with("torchfn."))
        .flat_map(|(_, funcs)| funcs)
        .collect()
}

/// The operations whose samples compute values that another device, a wrapper, a transform or
/// a trace must reproduce: all but printing (`Tensor.__repr__`, `Tensor.__format__`), whose
/// text describes the tensor it prints (its device, whether it holds data, its wrapper).
pub(crate) fn computing_operations() -> Vec<&'static Func> {
    operations().into_iter().filter(|f| !is_printing(f)).collect()
}

/// Whether `func` prints its tensor.
pub(crate) fn is_printing(func: &'static Func) -> bool {
    func == Tensor::__REPR__ || func == Tensor::__FORMAT__
}

/// How many tensors `value` holds, at any depth of lists and tuples.
fn tensors_in(value: &Value) -> usize {
    match value {
        Value::Tensor(_) => 1,
        Value::List(items) | Value::Tuple(items) => items.iter().map(tensors_in).sum(),
        _ => 0,
    }
}

/// `value` with its `n`-th tensor (counting from `*seen`) replaced by the spy.
fn with_spy(value: &Value, n: usize, seen: &mut usize) -> Value {
    match value {
        Value::Tensor(_) => {
            *seen += 1;
            if *seen - 1 == n { Tensor::from_duck(Spy).into() } else { value.clone() }
        }
        Value::List(items) => Value::List(items.iter().map(|v| with_spy(v, n, seen)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| with_spy(v, n, seen)).collect()),
        other => other.clone(),
    }
}

/// Every variant of `sample` with one tensor position replaced by the spy.
fn spied(sample: &Sample) -> Vec<Sample> {
    let total: usize = sample.args.iter().chain(sample.kwargs.iter().map(|(_, v)| v)).map(tensors_in).sum();
    (0..total)
        .map(|n| {
            let mut seen = 0;
            let args = sample.args.iter().map(|v| with_spy(v, n, &mut seen)).collect();
            let kwargs = sample.kwargs.iter().map(|(k, v)| (k.to_string(), with_spy(v, n, &mut seen))).collect();
            Sample { args, kwargs }
        })
        .collect()
}

#[test]
fn every_operation_has_samples_that_run() {
    let mut missing = Vec::new();
    for func in operations() {
        let set = samples(func);
        if set.is_empty() {
            missing.push(func.qualified_name());
        }
        for s in set {
            if let Err(e) = func.call(&s.args, &s.kwargs) {
                panic!("a sample of {func} fails on plain tensors: {e:?}\nargs: {:?}", s.args);
            }
        }
    }
    assert!(missing.is_empty(), "operations without samples:\n{}", missing.join("\n"));
}

#[test]
fn a_duck_in_any_tensor_position_sees_exactly_the_operation() {
    let mut checked = 0;
    for func in operations() {
        for s in samples(func) {
            for variant in spied(&s) {
                SEEN.with(|seen| seen.borrow_mut().clear());
                let _ = func.call(&variant.args, &variant.kwargs);
                let seen = SEEN.with(|seen| seen.take());
                assert!(seen.len() == 1 && seen[0] == func, "{func} with {:?}: the duck saw {seen:?}", variant.args);
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} calls checked");
}
