//! Public function handles: identity, signature, implementation and the by-name call.

use std::fmt;
use std::hash::{Hash, Hasher};

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::bind::bind;
use crate::protocol::dispatch;
use crate::protocol::rerun::rerun_current;
use crate::protocol::state::{self, Enabled};
use crate::value::{Kwargs, Value};

/// What kind of public function a handle is (docs/protocol.md section 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FuncKind {
    /// A free function such as `torchfn.add`.
    Function,
    /// A tensor method such as `Tensor.add`.
    Method,
    /// An operator or indexing such as `Tensor.__add__` or `Tensor.__getitem__`.
    Operator,
    /// A property getter such as `Tensor.shape.__get__`.
    Property,
}

/// One parameter of a signature.
#[derive(Debug)]
pub struct Param {
    name: &'static str,
    type_name: fn() -> String,
    default: Option<ParamDefault>,
    variadic: bool,
    keyword_only: bool,
}

/// A parameter's default: its source text and its value.
#[derive(Debug)]
pub struct ParamDefault {
    text: &'static str,
    value: fn() -> Value,
}

impl ParamDefault {
    /// A default with its source text. Used by the macro.
    #[doc(hidden)]
    pub const fn __new(text: &'static str, value: fn() -> Value) -> Self {
        ParamDefault { text, value }
    }

    /// The default as written in the source (`1`, `None`, `"floor"`).
    pub fn text(&self) -> &'static str {
        self.text
    }

    /// The default as a value.
    pub fn value(&self) -> Value {
        (self.value)()
    }
}

impl Param {
    /// A parameter. Used by the macro and by hand-written handles.
    pub const fn new(
        name: &'static str,
        type_name: fn() -> String,
        default: Option<ParamDefault>,
        variadic: bool,
    ) -> Self {
        Param { name, type_name, default, variadic, keyword_only: false }
    }

    /// The same parameter, keyword-only: it comes after Python's bare `*` (or after a variadic
    /// parameter), so a caller can pass it only by name.
    pub const fn keyword_only(self) -> Self {
        Param { keyword_only: true, ..self }
    }

    /// The parameter name (`self` for a method's receiver).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Python-style name of the accepted type.
    pub fn type_name(&self) -> String {
        (self.type_name)()
    }

    /// The default, if the parameter has one.
    pub fn default(&self) -> Option<&ParamDefault> {
        self.default.as_ref()
    }

    /// True for a variadic parameter (Python's `*args`): it takes the remaining positional
    /// arguments, and the parameters after it are keyword-only.
    pub fn is_variadic(&self) -> bool {
        self.variadic
    }

    /// True for a keyword-only parameter (after Python's bare `*`, or after a variadic one).
    pub fn is_keyword_only(&self) -> bool {
        self.keyword_only
    }
}

/// A signature: the parameters in order. Prints like Python's `inspect.signature`.
#[derive(Clone, Copy, Debug)]
pub struct Signature(&'static [Param]);

impl Signature {
    /// The parameters, in order.
    pub fn params(&self) -> &'static [Param] {
        self.0
    }
}

/// `(input, other, *, alpha=1)`, `(*tensors, dim=0)`.
impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        let mut starred = false;
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if p.keyword_only && !starred {
                f.write_str("*, ")?;
            }
            starred |= p.variadic || p.keyword_only;
            if p.variadic {
                f.write_str("*")?;
            }
            f.write_str(p.name)?;
            if let Some(d) = &p.default {
                write!(f, "={}", d.text)?;
            }
        }
        f.write_str(")")
    }
}

/// Which body a generated entry point runs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The public function: the protocol, then the implementation.
    Public,
    /// The implementation alone.
    Implementation,
    /// Only bind the arguments, to see whether this signature fits them; `strict` refuses
    /// numbers where a tensor is expected (see [`FromValue::from_value_strict`]).
    Bind {
        /// Whether to convert strictly.
        strict: bool,
    },
}

impl Route {
    /// Whether binding converts strictly.
    pub fn strict(self) -> bool {
        matches!(self, Route::Bind { strict: true })
    }
}

/// How a handle reaches its code.
#[derive(Clone, Copy)]
enum Entry {
    /// Written by `#[torch_function]`: binds arguments, then runs the typed public function or
    /// the typed implementation.
    Generated(fn(&[Value], &Kwargs, Route) -> Result<Value>),
    /// Written by hand: a dynamic implementation; the protocol runs on every argument.
    Handwritten(fn(&[Value], &Kwargs) -> Result<Value>),
}

/// The handle of an overridable public function (`func` in a hook).
///
/// Handles are statics compared by identity: a hook asks `func == torchfn::ADD` (or
/// `func == Tensor::ADD` for the method). Each exposes its qualified name, kind, signature and
/// documentation, its implementation, and a by-name [`call`](Func::call) that binds arguments
/// as Python does.
pub struct Func {
    namespace: &'static str,
    name: &'static str,
    kind: FuncKind,
    params: &'static [Param],
    doc: &'static str,
    entry: Entry,
    nowrap: bool,
    ignored: Option<&'static str>,
}

impl Func {
    /// A handle written by `#[torch_function]`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn __generated(
        namespace: &'static str,
        name: &'static str,
        kind: FuncKind,
        params: &'static [Param],
        doc: &'static str,
        nowrap: bool,
        ignored: Option<&'static str>,
        entry: fn(&[Value], &Kwargs, Route) -> Result<Value>,
    ) -> Func {
        Func { namespace, name, kind, params, doc, entry: Entry::Generated(entry), nowrap, ignored }
    }

    /// A handle for a function written by hand, without the macro: `implementation` receives
    /// the arguments as given. Register it with [`register_function!`](crate::register_function)
    /// and dispatch with [`handle_torch_function`](crate::overrides::handle_torch_function).
    pub const fn new(
        namespace: &'static str,
        name: &'static str,
        params: &'static [Param],
        doc: &'static str,
        implementation: fn(&[Value], &Kwargs) -> Result<Value>,
    ) -> Func {
        Func {
            namespace,
            name,
            kind: FuncKind::Function,
            params,
            doc,
            entry: Entry::Handwritten(implementation),
            nowrap: false,
            ignored: None,
        }
    }

    /// The name within its namespace: `add`, `__add__`, `shape.__get__`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The namespace: `torchfn`, `torchfn.nn.functional`, `Tensor`, or a user's module.
    pub fn namespace(&self) -> &'static str {
        self.namespace
    }

    /// The qualified name, as in error messages and the registry: `torchfn.add`, `Tensor.add`.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// What kind of function this is.
    pub fn kind(&self) -> FuncKind {
        self.kind
    }

    /// The parameters: names, defaults, variadic marks.
    pub fn signature(&self) -> Signature {
        Signature(self.params)
    }

    /// The documentation of the public function.
    pub fn doc(&self) -> &'static str {
        self.doc
    }

    /// Why this function takes part in no dispatch, when it is one of the ignored functions
    /// that still have a handle to call them by name (the constructors).
    pub fn ignored(&self) -> Option<&'static str> {
        self.ignored
    }

    /// True for accessors whose result must stay the very same object (the default hook does
    /// not convert their results to the subclass).
    pub fn returns_identity(&self) -> bool {
        self.nowrap
    }

    /// Calls the public function by name, binding positional and keyword arguments like
    /// Python, then dispatching as a typed call would. A function with overloads (`sum(input)`,
    /// `sum(input, dim, keepdim)`) takes the first signature the arguments fit, as PyTorch's
    /// argument parser does.
    ///
    /// ```
    /// use torchfn::{Kwargs, Value, tensor};
    /// let a = tensor([1.0f32, 2.0])?;
    /// let out = torchfn::ADD.call(&[a.clone().into(), a.into()], &Kwargs::from([("alpha", 2)]))?;
    /// assert_eq!(out.as_tensor().unwrap().to_vec::<f32>()?, [3.0, 6.0]);
    ///
    /// let err = torchfn::NEG.call(&[], &Kwargs::new()).unwrap_err();
    /// assert_eq!(err.to_string(), "neg() missing 1 required positional argument: 'input'");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    ///
    /// This is the dynamic path, values in and value out: whatever a hook or mode returns (a
    /// number, a string, a tuple, a duck) comes back unchanged, and hooks and modes see the
    /// arguments as given here. Arguments that fit no signature still reach an active mode,
    /// which may answer them; the binding error is the error otherwise. A binary operator
    /// (`Tensor.__add__`) returns `NotImplemented` instead of a `TypeError`, as PyTorch's do,
    /// so that the caller can try the reflected operator.
    pub fn call(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let result = match self.entry {
            Entry::Generated(_) => {
                rerun_current(self, args, kwargs, Route::Public).unwrap_or_else(|| self.call_by_name(args, kwargs))
            }
            Entry::Handwritten(_) => {
                self.resolve(args, kwargs, Route::Bind { strict: false })?;
                let relevant = (args, kwargs.iter().map(|(_, v)| v).collect::<Vec<_>>());
                dispatch::handle_torch_function(self, &relevant, args, kwargs)
            }
        };
        match result {
            Err(e) if e.kind() == ErrorKind::Type && self.is_binary_operator() => Ok(Value::NotImplemented),
            result => result,
        }
    }

    /// The by-name call of a generated function: bound and dispatched by its entry point, or,
    /// when the arguments fit no signature, handed as given to the active modes.
    fn call_by_name(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        if state::modes_active()
            && state::enabled() != Enabled::Nothing
            && let Err(unbound) = self.fits(args, kwargs)
        {
            let relevant = (args, kwargs.iter().map(|(_, v)| v).collect::<Vec<_>>());
            return match dispatch::dispatch(self, &relevant, args, kwargs, None) {
                Ok(Some(value)) => Ok(value),
                Err(e) if !e.is_declined() => Err(e),
                _ => Err(unbound),
            };
        }
        self.resolve(args, kwargs, Route::Public)
    }

    /// True for an operator method of two operands (`Tensor.__add__`, `Tensor.__rmul__`,
    /// `Tensor.__iadd__`), whose `TypeError` Python turns into `NotImplemented`.
    fn is_binary_operator(&self) -> bool {
        self.kind == FuncKind::Operator
            && self.params.len() == 2
            && !matches!(self.name, "__getitem__" | "__setitem__" | "__contains__")
    }

    /// Calls the implementation directly, without the protocol (`public_api._implementation`).
    pub fn implementation(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        match self.entry {
            Entry::Generated(_) => rerun_current(self, args, kwargs, Route::Implementation)
                .unwrap_or_else(|| self.resolve(args, kwargs, Route::Implementation)),
            Entry::Handwritten(implementation) => {
                self.resolve(args, kwargs, Route::Bind { strict: false })?;
                implementation(args, kwargs)
            }
        }
    }

    /// Whether `args` and `kwargs` fit one of this function's signatures; the binding error
    /// otherwise.
    pub fn fits(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<()> {
        self.resolve(args, kwargs, Route::Bind { strict: false }).map(|_| ())
    }

    /// Every signature this function accepts: its own, then its overloads'.
    pub fn signatures(&'static self) -> Vec<Signature> {
        self.candidates().map(|(params, _)| Signature(params)).collect()
    }

    /// The signatures, with how to bind and run each.
    fn candidates(&'static self) -> impl Iterator<Item = (&'static [Param], Option<EntryPoint>)> + Clone {
        let own = match self.entry {
            Entry::Generated(entry) => Some(entry),
            Entry::Handwritten(_) => None,
        };
        std::iter::once((self.params, own)).chain(overloads_of(self).iter().map(|o| (o.params, Some(o.entry))))
    }

    /// Runs `route` with the first signature `args` and `kwargs` fit: strictly first (no
    /// number where a tensor is expected), then leniently. With one signature, its binding
    /// error is the error; with several, the error lists them.
    fn resolve(&'static self, args: &[Value], kwargs: &Kwargs, route: Route) -> Result<Value> {
        let mut candidates = self.candidates();
        let Some((params, entry)) = candidates.next() else { return Ok(Value::None) };
        if overloads_of(self).is_empty() {
            return match entry {
                Some(entry) => entry(args, kwargs, route),
                None => bind(self, params, args, kwargs, false).map(|_| Value::None),
            };
        }
        for strict in [true, false] {
            for (params, entry) in self.candidates() {
                let fits = match entry {
                    Some(entry) => entry(args, kwargs, Route::Bind { strict }).is_ok(),
                    None => bind(self, params, args, kwargs, strict).is_ok(),
                };
                if fits {
                    return match (entry, route) {
                        (_, Route::Bind { .. }) | (None, _) => Ok(Value::None),
                        (Some(entry), route) => entry(args, kwargs, route),
                    };
                }
            }
        }
        Err(invalid_combination(self, args, kwargs))
    }
}

/// A generated entry point: binds arguments to one signature and runs a route.
type EntryPoint = fn(&[Value], &Kwargs, Route) -> Result<Value>;

/// PyTorch's error when no signature fits, listing them all.
fn invalid_combination(func: &'static Func, args: &[Value], kwargs: &Kwargs) -> Error {
    let given: Vec<String> = args
        .iter()
        .map(|a| a.type_name().to_string())
        .chain(kwargs.iter().map(|(k, v)| format!("{k}={}", v.type_name())))
        .collect();
    let expected: Vec<String> = func.signatures().iter().map(|s| format!(" * {s}")).collect();
    Error::type_error(format!(
        "{}() received an invalid combination of arguments - got ({}), but expected one of:\n{}",
        func.name(),
        given.join(", "),
        expected.join("\n")
    ))
}

/// Another signature of an overridable function (`sum(input, dim, keepdim)` of `torchfn.sum`),
/// written by `#[torch_function(overload_of = ..)]`: calls through it dispatch as the function.
#[doc(hidden)]
pub struct Overload {
    of: &'static Func,
    order: &'static str,
    params: &'static [Param],
    entry: EntryPoint,
}

impl Overload {
    /// An overload of `of`; `order` (the Rust name) orders the overloads.
    pub const fn __new(of: &'static Func, order: &'static str, params: &'static [Param], entry: EntryPoint) -> Self {
        Overload { of, order, params, entry }
    }
}

/// A registered overload.
#[doc(hidden)]
pub struct RegisteredOverload(pub &'static Overload);

inventory::collect!(RegisteredOverload);

/// The overloads of `func`, in the order of their Rust names.
fn overloads_of(func: &'static Func) -> &'static [&'static Overload] {
    static BY_FUNC: OnceLock<HashMap<usize, Vec<&'static Overload>>> = OnceLock::new();
    let by_func = BY_FUNC.get_or_init(|| {
        let mut map: HashMap<usize, Vec<&'static Overload>> = HashMap::new();
        for RegisteredOverload(o) in inventory::iter::<RegisteredOverload> {
            map.entry(std::ptr::from_ref(o.of) as usize).or_default().push(o);
        }
        map.values_mut().for_each(|v| v.sort_by_key(|o| o.order));
        map
    });
    by_func.get(&(std::ptr::from_ref(func) as usize)).map_or(&[], Vec::as_slice)
}

impl PartialEq for Func {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Func {}

impl Hash for Func {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self, state)
    }
}

/// `<function torchfn.add(input, other, *, alpha=1)>`
impl fmt::Debug for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<function {}{}>", self.qualified_name(), self.signature())
    }
}

/// The qualified name.
impl fmt::Display for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}
