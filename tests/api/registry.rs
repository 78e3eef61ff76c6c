//! docs/protocol.md section 6: the registry and its queries.

use std::collections::HashSet;

use torchfn::FuncKind;
use torchfn::overrides::{
    find_function, get_ignored_functions, get_overridable_functions, get_testing_overrides,
    is_tensor_method_or_property, resolve_name,
};
use torchfn::prelude::*;

/// A function of this test crate, registered like torchfn's own.
#[torch_function(module = "tests.registry")]
fn listed(input: &Tensor, #[default(3)] times: i64) -> Result<Tensor> {
    input * times
}

/// Two functions registered under one name, as two crates could: lookups refuse the name.
mod clash {
    use torchfn::prelude::*;

    #[torch_function(module = "tests", name = "clash")]
    pub fn first(input: &Tensor) -> Result<Tensor> {
        Ok(input.clone())
    }

    #[torch_function(module = "tests", name = "clash")]
    pub fn second(input: &Tensor) -> Result<Tensor> {
        Ok(input.clone())
    }
}

fn all_names() -> Vec<String> {
    get_overridable_functions().values().flatten().map(|f| f.qualified_name()).collect()
}

#[test]
fn functions_are_listed_by_namespace_sorted_and_the_same_every_time() {
    let funcs = get_overridable_functions();
    for (namespace, list) in &funcs {
        assert!(list.iter().all(|f| f.namespace() == *namespace));
        assert!(list.windows(2).all(|w| w[0].name() <= w[1].name()), "{namespace} is not sorted");
    }
    let names = all_names();
    for expected in [
        "torchfn.add",
        "torchfn.sum",
        "torchfn.matmul",
        "Tensor.add",
        "Tensor.__add__",
        "Tensor.__getitem__",
        "Tensor.shape.__get__",
        "Tensor._base.__get__",
        "tests.registry.listed",
        "xcrate.axpy",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} is not listed");
    }
    assert_eq!(names, all_names());
    let unique: HashSet<_> = names.iter().collect();
    assert_eq!(unique.len() + 1, names.len(), "only the deliberate clash is registered twice");
}

#[test]
fn names_registered_twice_are_reported_and_resolve_to_nothing() {
    assert_eq!(torchfn::overrides::registry_conflicts(), ["tests.clash"]);
    assert!(find_function("tests.clash").is_none());
    assert_eq!(clash::FIRST.qualified_name(), clash::SECOND.qualified_name());
}

#[test]
fn methods_and_free_functions_are_distinct_handles() {
    assert!(torchfn::ADD != Tensor::ADD && Tensor::ADD != Tensor::__ADD__);
    assert_eq!(torchfn::ADD.kind(), FuncKind::Function);
    assert_eq!(Tensor::ADD.kind(), FuncKind::Method);
    assert_eq!(Tensor::__ADD__.kind(), FuncKind::Operator);
    assert_eq!(Tensor::SHAPE.kind(), FuncKind::Property);
    assert!(!is_tensor_method_or_property(torchfn::ADD));
    for f in [Tensor::ADD, Tensor::__ADD__, Tensor::SHAPE, Tensor::GET] {
        assert!(is_tensor_method_or_property(f), "{f}");
    }
}

#[test]
fn names_resolve_both_ways() {
    for func in get_overridable_functions().values().flatten() {
        let name = resolve_name(func);
        if name != "tests.clash" {
            assert!(find_function(&name).is_some_and(|f| f == *func), "{name} does not resolve back");
        }
    }
    assert_eq!(resolve_name(Tensor::SHAPE), "Tensor.shape.__get__");
    assert_eq!(resolve_name(LISTED), "tests.registry.listed");
    assert!(find_function("torchfn.no_such_function").is_none());
}

#[test]
fn testing_overrides_have_the_same_signatures_and_return_minus_one() {
    let dummies = get_testing_overrides();
    let funcs: Vec<_> = get_overridable_functions().into_values().flatten().collect();
    assert_eq!(dummies.len(), funcs.len());
    for func in funcs {
        assert_eq!(dummies[func].signature().to_string(), func.signature().to_string(), "{func}");
    }
    let add = &dummies[torchfn::ADD];
    assert_eq!(add.signature().to_string(), "(input, other, *, alpha=1)");
    let out = add.call(&[Value::Int(1), Value::Int(2)], &Kwargs::from([("alpha", 5)])).unwrap();
    assert_eq!(out.as_int(), Some(-1));
    let err = add.call(&[Value::Int(1)], &Kwargs::new()).unwrap_err();
    assert!(err.to_string().starts_with("add() received an invalid combination of arguments - got (int)"), "{err}");
    assert_eq!(dummies[LISTED].signature().to_string(), "(input, times=3)");
}

#[test]
fn ignored_functions_are_disjoint_from_overridable_ones() {
    let ignored: Vec<_> = get_ignored_functions().iter().map(|f| f.qualified_name()).collect();
    for expected in
        ["torchfn.tensor", "torchfn.zeros", "torchfn.eye", "Tensor.as_subclass", "torchfn.overrides.has_torch_function"]
    {
        assert!(ignored.contains(&expected), "{expected} is not listed as ignored");
    }
    let overridable: HashSet<String> = all_names().into_iter().collect();
    for name in ignored {
        assert!(!overridable.contains(name), "{name} is both ignored and overridable");
        // Constructors keep a handle, to be called by name; it says that it is ignored.
        assert!(find_function(name).is_none_or(|f| f.ignored().is_some()), "{name}");
    }
    let zeros = find_function("torchfn.zeros").unwrap();
    assert_eq!(zeros.ignored(), Some("a constructor with no tensor argument"));
    assert!(get_ignored_functions().iter().all(|f| !f.reason().is_empty()));
}
