//! Classes: the runtime identity of tensor-like types, their parents and their hooks.

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::Result;
use crate::protocol::Func;
use crate::tensor::Tensor;
use crate::value::{Kwargs, Value};

/// How many ancestors `is_subclass_of` follows.
const MAX_ANCESTRY: usize = 256;

/// The classes gathered for one call, in precedence order (PyTorch's `types`).
pub type Types = [&'static Class];

/// What a hook returns: a result, [`Value::NotImplemented`] to let the next one try, or an error.
pub type Outcome = Result<Value>;

/// An override hook (`__torch_function__`), called as a classmethod with the class it runs for.
pub type Hook = fn(cls: &'static Class, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome;

/// The runtime identity of a tensor-like type, as Python's `type(x)`.
///
/// `Tensor` is the base class. A tensor subclass (`#[derive(TensorSubclass)]`) descends from
/// it; a duck type (`#[derive(DuckTensor)]`) does not, but may have duck parents. Classes are
/// compared by identity.
pub struct Class {
    name: &'static str,
    parent: Option<fn() -> &'static Class>,
    hook: Option<Hook>,
    is_tensor: bool,
    dispatches: bool,
    default_hook: bool,
}

impl Class {
    /// A tensor subclass of `parent`. Used by `#[derive(TensorSubclass)]`; `hook` is `None` when
    /// the class disables the protocol (PyTorch's `_disabled_torch_function_impl`), and
    /// `default_hook` says that `hook` is the base `Tensor`'s.
    #[doc(hidden)]
    pub const fn __subclass(
        name: &'static str,
        parent: fn() -> &'static Class,
        hook: Option<Hook>,
        default_hook: bool,
    ) -> Class {
        Class { name, parent: Some(parent), hook, is_tensor: true, dispatches: hook.is_some(), default_hook }
    }

    /// A duck class, optionally with a duck parent. Used by `#[derive(DuckTensor)]`.
    #[doc(hidden)]
    pub const fn __duck(name: &'static str, parent: Option<fn() -> &'static Class>, hook: Option<Hook>) -> Class {
        Class { name, parent, hook, is_tensor: false, dispatches: hook.is_some(), default_hook: false }
    }

    /// The base class, `Tensor`: it has the default hook but is never gathered.
    pub(crate) const fn base(hook: Hook) -> Class {
        Class { name: "Tensor", parent: None, hook: Some(hook), is_tensor: true, dispatches: false, default_hook: true }
    }

    /// The class of a tensor-like, as `type(t)`.
    pub fn of(tensor: &Tensor) -> &'static Class {
        tensor.class_of()
    }

    /// The class name, as `type(t).__name__`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parent class, `None` for `Tensor` and for ducks without a parent.
    pub fn parent(&self) -> Option<&'static Class> {
        self.parent.map(|p| p())
    }

    /// `issubclass(self, other)`: true when `other` is this class or one of its ancestors.
    pub fn is_subclass_of(&self, other: &Class) -> bool {
        let mut class = self;
        // The derives cannot see a cycle of parents across types; stop after a depth no real
        // hierarchy reaches rather than loop forever.
        for _ in 0..MAX_ANCESTRY {
            if std::ptr::eq(class, other) {
                return true;
            }
            match class.parent {
                Some(parent) => class = parent(),
                None => return false,
            }
        }
        false
    }

    /// True for `Tensor` and its subclasses, false for ducks.
    pub fn is_tensor_class(&self) -> bool {
        self.is_tensor
    }

    /// The hook, `None` when this class disables the protocol.
    pub fn hook(&self) -> Option<Hook> {
        self.hook
    }

    /// True when this class's hook is the base `Tensor`'s default hook.
    pub fn uses_default_hook(&self) -> bool {
        self.default_hook
    }

    /// True when dispatch gathers instances of this class: any class with an enabled hook other
    /// than the base `Tensor`.
    #[inline(always)]
    pub fn dispatches(&self) -> bool {
        self.dispatches
    }
}

impl PartialEq for Class {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Class {}

impl Hash for Class {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self, state)
    }
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The override hook of a type (`__torch_function__`).
///
/// The default body is the base `Tensor`'s hook, which runs the function with subclass dispatch
/// disabled and converts tensors in the result to `cls`. `#[derive(TensorSubclass)]` gives a
/// subclass this default; with `#[torchfn(hook)]` the subclass implements this trait itself,
/// and calls `Tensor::torch_function(cls, func, types, args, kwargs)` as its `super()`. Duck
/// types always implement it.
pub trait TorchFunction {
    /// Handles `func` for instances of `cls`, or returns [`Value::NotImplemented`].
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        <Tensor as TorchFunction>::torch_function(cls, func, types, args, kwargs)
    }
}

/// A type with a [`Class`]: `Tensor`, tensor subclasses and duck types. Implemented by the
/// derives.
pub trait TensorLike: 'static {
    /// The hook instances of this class dispatch to (`None`: the protocol is disabled for it).
    /// A subclass without a hook of its own inherits its parent's, as in Python.
    #[doc(hidden)]
    const __HOOK: Option<Hook>;
    /// True when [`Self::__HOOK`] is the base `Tensor`'s default hook.
    #[doc(hidden)]
    const __DEFAULT_HOOK: bool;

    /// The class of this type.
    fn class() -> &'static Class;
}

/// A tensor class that a subclass may name as its parent: `Tensor` or a tensor subclass.
#[doc(hidden)]
pub trait TensorParent: TensorLike {}

/// A tensor subclass: its values are the per-instance attributes a tensor carries
/// (`#[derive(TensorSubclass)]`).
pub trait TensorSubclass: TensorParent + Send + Sync {}

/// A duck tensor: any type that takes part in the protocol without being a tensor
/// (`#[derive(DuckTensor)]`).
pub trait DuckTensor: TensorLike + fmt::Debug + Send + Sync {
    /// The error of code that needs this duck's data where it has none to give (`what` names the
    /// call, such as "item() reads the data of its argument 'self'"). `None`, the default, gives
    /// the protocol's `TypeError` (`must be Tensor, not Duck`); `#[torchfn(data_error = f)]` on
    /// the derive answers with `f(self, what)` (fx's `Proxy` says that a traced value cannot be
    /// read while tracing).
    fn data_error(&self, what: &str) -> Option<crate::error::Error> {
        let _ = what;
        None
    }
}
