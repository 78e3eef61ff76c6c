//! The registry and the protocol's helpers, as PyTorch's `torch.overrides`.
//!
//! Every function written with `#[torch_function]` registers itself at link time, in torchfn
//! and in any crate that uses the macro: listing needs no central table. A crate (or a module in
//! it) that nothing in the program references is not linked, so its functions are not listed.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use crate::error::Result;
use crate::protocol::{Func, FuncKind, Signature};
use crate::value::{Kwargs, Value};

pub use crate::protocol::implements::HandledFunctions;
pub use crate::protocol::{handle_torch_function, has_torch_function, is_tensor_like};

/// A registered handle (written by `#[torch_function]` and [`register_function!`]).
#[doc(hidden)]
pub struct Registered(pub &'static Func);

inventory::collect!(Registered);

/// Registers a hand-written handle ([`Func::new`]) so the registry lists it.
///
/// ```
/// use torchfn::{Func, Kwargs, Param, Result, Value};
///
/// fn describe(args: &[Value], _: &Kwargs) -> Result<Value> {
///     Ok(Value::Str(format!("{} arguments", args.len())))
/// }
/// static DESCRIBE: Func = Func::new("mylib", "describe", &[Param::new("x", || "object".into(), None, false)], "", describe);
/// torchfn::register_function!(DESCRIBE);
///
/// assert!(torchfn::overrides::find_function("mylib.describe").is_some());
/// ```
#[macro_export]
macro_rules! register_function {
    ($func:path) => {
        $crate::__private::inventory::submit! { $crate::__private::Registered(&$func) }
    };
}

/// A public function that deliberately takes part in no dispatch, with the reason.
#[derive(Debug)]
pub struct IgnoredFunction {
    qualified_name: &'static str,
    reason: &'static str,
}

impl IgnoredFunction {
    /// The qualified name, as `torchfn.zeros`.
    pub fn qualified_name(&self) -> &'static str {
        self.qualified_name
    }

    /// Why it is not overridable.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

inventory::collect!(IgnoredFunction);

/// Lists functions of this crate as ignored, next to their definitions.
macro_rules! ignored {
    ($($name:literal: $reason:literal),* $(,)?) => {$(
        inventory::submit! { $crate::overrides::IgnoredFunction::__new($name, $reason) }
    )*};
}
pub(crate) use ignored;

impl IgnoredFunction {
    #[doc(hidden)]
    pub const fn __new(qualified_name: &'static str, reason: &'static str) -> Self {
        IgnoredFunction { qualified_name, reason }
    }
}

ignored! {
    "torchfn.overrides.get_overridable_functions": "a helper of the protocol itself",
    "torchfn.overrides.get_testing_overrides": "a helper of the protocol itself",
    "torchfn.overrides.get_ignored_functions": "a helper of the protocol itself",
    "torchfn.overrides.has_torch_function": "a helper of the protocol itself",
    "torchfn.overrides.handle_torch_function": "a helper of the protocol itself",
    "torchfn.overrides.is_tensor_like": "a helper of the protocol itself",
    "torchfn.overrides.is_tensor_method_or_property": "a helper of the protocol itself",
    "torchfn.overrides.resolve_name": "a helper of the protocol itself",
    "torchfn.overrides.find_function": "a helper of the protocol itself",
    "torchfn.overrides.registry_conflicts": "a helper of the protocol itself",
    "torchfn.push_mode": "a helper of the protocol itself",
    "torchfn.pop_mode": "a helper of the protocol itself",
    "torchfn.current_mode": "a helper of the protocol itself",
    "torchfn.mode_stack": "a helper of the protocol itself",
    "torchfn.set_default_device": "a setting, not an operation",
    "torchfn.get_default_device": "a setting, not an operation",
    "torchfn.set_default_dtype": "a setting, not an operation",
    "torchfn.get_default_dtype": "a setting, not an operation",
}

/// Every registered handle, overridable or ignored.
fn all() -> impl Iterator<Item = &'static Func> {
    inventory::iter::<Registered>.into_iter().map(|r| r.0)
}

/// The overridable ones.
fn overridable() -> impl Iterator<Item = &'static Func> {
    all().filter(|f| f.ignored().is_none())
}

/// Every overridable function, by namespace (`torchfn`, `Tensor`, a user's module), each
/// list sorted by name: the same answer on every call and every run.
///
/// ```
/// let funcs = torchfn::overrides::get_overridable_functions();
/// let names: Vec<_> = funcs["torchfn"].iter().map(|f| f.name()).collect();
/// assert!(names.contains(&"add") && names.windows(2).all(|w| w[0] <= w[1]));
/// assert!(funcs["Tensor"].iter().any(|f| f.name() == "__add__"));
/// ```
pub fn get_overridable_functions() -> BTreeMap<&'static str, Vec<&'static Func>> {
    let mut by_namespace: BTreeMap<&'static str, Vec<&'static Func>> = BTreeMap::new();
    for func in overridable() {
        by_namespace.entry(func.namespace()).or_default().push(func);
    }
    for funcs in by_namespace.values_mut() {
        funcs.sort_by(|a, b| a.name().cmp(b.name()));
    }
    by_namespace
}

/// A dummy with the signature of an overridable function: it binds arguments exactly as the
/// function does (names, order, defaults, variadic) and returns `-1`.
#[derive(Clone, Copy, Debug)]
pub struct TestingOverride {
    func: &'static Func,
}

impl TestingOverride {
    /// The signature, the same as the function's.
    pub fn signature(&self) -> Signature {
        self.func.signature()
    }

    /// Binds `args` and `kwargs` as the function would (to one of its signatures), then
    /// returns `Value::Int(-1)`.
    pub fn call(&self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.func.fits(args, kwargs)?;
        Ok(Value::Int(-1))
    }
}

/// Every overridable function mapped to a [`TestingOverride`] with its signature
/// (`torch.overrides.get_testing_overrides`).
///
/// ```
/// use torchfn::{Kwargs, Value};
/// let dummies = torchfn::overrides::get_testing_overrides();
/// let add = &dummies[torchfn::ADD];
/// assert_eq!(add.signature().to_string(), "(input, other, *, alpha=1)");
/// assert_eq!(add.call(&[Value::Int(1), Value::Int(2)], &Kwargs::new())?.as_int(), Some(-1));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn get_testing_overrides() -> HashMap<&'static Func, TestingOverride> {
    overridable().map(|func| (func, TestingOverride { func })).collect()
}

/// The public functions that take part in no dispatch: constructors with no tensor argument,
/// conversions such as `as_subclass`, and the protocol's own helpers. None of them is also in
/// [`get_overridable_functions`].
pub fn get_ignored_functions() -> Vec<&'static IgnoredFunction> {
    let mut ignored: Vec<_> = inventory::iter::<IgnoredFunction>.into_iter().collect();
    ignored.sort_by_key(|f| f.qualified_name);
    ignored
}

/// True for tensor methods, operators and property getters; false for free functions.
pub fn is_tensor_method_or_property(func: &Func) -> bool {
    func.kind() != FuncKind::Function
}

/// The qualified name of `func` (`torchfn.add`, `Tensor.add`, `Tensor.shape.__get__`);
/// [`find_function`] gives the function back from it.
pub fn resolve_name(func: &Func) -> String {
    func.qualified_name()
}

/// The function with this qualified name, overridable or an ignored one with a handle (the
/// constructors, callable by name too); `None` also when two functions are registered under it
/// (see [`registry_conflicts`]).
///
/// ```
/// let add = torchfn::overrides::find_function("torchfn.add").unwrap();
/// assert!(add == torchfn::ADD);
/// assert_eq!(torchfn::overrides::resolve_name(add), "torchfn.add");
/// ```
pub fn find_function(qualified_name: &str) -> Option<&'static Func> {
    by_name().get(qualified_name).copied().flatten()
}

/// The qualified names under which more than one function is registered, sorted. Two crates
/// that register the same `module` and `name` make lookups by that name ambiguous; a correct
/// program has none, which a test can check.
pub fn registry_conflicts() -> Vec<String> {
    let mut names: Vec<String> = by_name().iter().filter(|(_, f)| f.is_none()).map(|(n, _)| n.clone()).collect();
    names.sort();
    names
}

/// Every qualified name, with its function, or `None` when several share it.
fn by_name() -> &'static HashMap<String, Option<&'static Func>> {
    static BY_NAME: OnceLock<HashMap<String, Option<&'static Func>>> = OnceLock::new();
    BY_NAME.get_or_init(|| {
        let mut map: HashMap<String, Option<&'static Func>> = HashMap::new();
        for func in all() {
            map.entry(func.qualified_name()).and_modify(|f| *f = None).or_insert(Some(func));
        }
        map
    })
}
