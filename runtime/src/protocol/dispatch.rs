//! One call through the protocol: fast path, gathering, modes, overrides (docs/protocol.md
//! sections 2-3).

use std::cell::LazyCell;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::protocol::rerun::{Current, Rerun, with_current};
use crate::protocol::state::{self, Depth, DisableTorchFunctionSubclass, Enabled};
use crate::protocol::{Class, Func, Outcome, Relevant, Route, TensorLike, TorchFunction, Types};
use crate::tensor::Tensor;
use crate::value::{Kwargs, Value};

/// Step 2: true when the call can go straight to the implementation, because no mode is active
/// and no relevant argument has a class that dispatches. Two loads per argument and one
/// thread-local read; no allocation, no hashing, no locking.
#[doc(hidden)]
#[inline(always)]
pub fn fast_path(relevant: &impl Relevant) -> bool {
    relevant.all_plain() && !state::modes_active()
}

pub use crate::protocol::args::Args;

/// Steps 3-6 for a call that left the fast path. `Ok(None)` means nothing dispatched (all
/// disabled, or only plain tensors under a disabled mode stack): run the implementation.
/// `args` and `kwargs` are what hooks and modes see; a typed call also gives its parameters and
/// a way to rerun it ([`Typed`]).
///
/// Generic over the relevant arguments so that gathering their classes compiles, in each
/// function's own dispatch code, to a look at each argument; the rest is [`dispatch_types`].
#[doc(hidden)]
#[inline(always)]
pub fn dispatch<R: Relevant + ?Sized>(
    func: &'static Func,
    relevant: &R,
    args: &[Value],
    kwargs: &Kwargs,
    typed: Option<Typed<'_>>,
) -> Result<Option<Value>> {
    let enabled = state::enabled();
    if enabled == Enabled::Nothing {
        return Ok(None);
    }
    // Under a mode, plain tensors are the common case: nothing to gather.
    let types = if enabled == Enabled::All && !relevant.all_plain() { gather(relevant) } else { Gathered::new() };
    dispatch_types(func, &types, args, kwargs, typed)
}

/// [`dispatch`] with the classes gathered.
#[inline(never)]
fn dispatch_types(
    func: &'static Func,
    types: &Types,
    args: &[Value],
    kwargs: &Kwargs,
    typed: Option<Typed<'_>>,
) -> Result<Option<Value>> {
    let mode_active = state::modes_active();
    if types.is_empty() && !mode_active {
        return Ok(None);
    }

    // The default hook's outcome needs no arguments when no mode is active (see `rerun`).
    if let (false, Some(&cls), Some(typed)) = (mode_active, types.first(), &typed)
        && cls.uses_default_hook()
        && types.iter().all(|t| cls.is_subclass_of(t))
    {
        let _depth = Depth::enter(func)?;
        let result = {
            let _no_subclasses = DisableTorchFunctionSubclass::new();
            (typed.rerun)(Route::Implementation)?
        };
        return Ok(Some(keep_subclass(func, cls, result, || first_instance(typed.params, cls))));
    }

    hooks(func, types, mode_active, args, kwargs, typed.map(|t| t.rerun))
}

/// What a typed call gives dispatch besides its arguments as values.
#[doc(hidden)]
pub struct Typed<'a> {
    /// The parameters, in order (where the default hook finds the first instance of a class).
    pub params: &'a dyn Relevant,
    /// Reruns the call with its typed arguments.
    pub rerun: Rerun<'a>,
}

/// Steps 4-6 with the arguments built: the top mode, then each gathered class's hook.
#[inline]
fn hooks(
    func: &'static Func,
    types: &Types,
    mode_active: bool,
    args: &[Value],
    kwargs: &Kwargs,
    rerun: Option<Rerun<'_>>,
) -> Result<Option<Value>> {
    let _depth = Depth::enter(func)?;
    let current = rerun.map(|rerun| Current::new(func, args, kwargs, rerun));
    with_current(current.as_ref(), || {
        let mut declined_mode = None;
        if mode_active {
            let outcome = state::with_top_mode(|mode| {
                let result = mode.torch_function(func, types, args, kwargs);
                if let Ok(Value::NotImplemented) = result {
                    declined_mode = Some(mode.name());
                }
                result
            });
            if let Some(result) = outcome {
                let result = result?;
                if !result.is_not_implemented() {
                    return Ok(Some(result));
                }
            }
        }
        for &cls in types {
            let Some(hook) = cls.hook() else { continue };
            let result = hook(cls, func, types, args, kwargs)?;
            if !result.is_not_implemented() {
                return Ok(Some(result));
            }
        }
        Err(no_implementation(func, types, declined_mode))
    })
}

/// The classes gathered for one call; four fit without allocating.
type Gathered = SmallVec<[&'static Class; 4]>;

/// Step 3: the classes that take part, in precedence order. A class comes once; a subclass goes
/// just before the first collected class it descends from; others keep argument order.
#[inline(always)]
fn gather<R: Relevant + ?Sized>(relevant: &R) -> Gathered {
    let mut types = Gathered::new();
    relevant.each_tensor(&mut |t| {
        let class = t.class_of();
        if !class.dispatches() || types.contains(&class) {
            return;
        }
        match types.iter().position(|&c| class.is_subclass_of(c)) {
            Some(at) => types.insert(at, class),
            None => types.push(class),
        }
    });
    types
}

/// Step 6: nobody handled the call.
fn no_implementation(func: &Func, types: &Types, mode: Option<String>) -> Error {
    let names: Vec<&str> = types.iter().map(|c| c.name()).collect();
    let mut message = format!(
        "no implementation found for '{func}' on types that implement __torch_function__: [{}]",
        names.join(", ")
    );
    if let Some(mode) = mode {
        message.push_str(&format!(" nor in mode {mode}"));
    }
    Error::declined(message)
}

/// `has_torch_function(args)`: whether a call with these relevant arguments would reach a hook
/// or a mode, in this thread's state: an active mode, unless all dispatch is disabled; an
/// argument whose class dispatches, unless subclass dispatch is disabled. As PyTorch's, it is
/// false for no arguments at all (`()`), even under a mode, and true under a mode for any
/// others, tensors or not.
pub fn has_torch_function(relevant: &dyn Relevant) -> bool {
    if relevant.is_empty() {
        return false;
    }
    match state::enabled() {
        Enabled::Nothing => false,
        Enabled::ModesOnly => state::modes_active(),
        Enabled::All => !fast_path(&relevant),
    }
}

/// `handle_torch_function`: runs the protocol for a function written by hand, without the
/// macro. Call it when [`has_torch_function`] is true; if nothing dispatches after all (every
/// class disabled in this scope), it runs `func`'s implementation.
pub fn handle_torch_function(
    func: &'static Func,
    relevant: &dyn Relevant,
    args: &[Value],
    kwargs: &Kwargs,
) -> Result<Value> {
    match dispatch(func, relevant, args, kwargs, None)? {
        Some(result) => Ok(result),
        None => func.implementation(args, kwargs),
    }
}

/// `is_tensor_like`: true for tensors, subclass instances and ducks; false for numbers,
/// strings, `None` and containers.
pub fn is_tensor_like(value: &Value) -> bool {
    matches!(value, Value::Tensor(_))
}

/// The base `Tensor` hook (docs/protocol.md section 3), which every subclass inherits.
impl TorchFunction for Tensor {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if !types.iter().all(|t| cls.is_subclass_of(t)) {
            return Ok(Value::NotImplemented);
        }
        let result = {
            let _no_subclasses = DisableTorchFunctionSubclass::new();
            // With no mode to see the call, calling it would reach the implementation anyway.
            if state::modes_active() { func.call(args, kwargs)? } else { func.implementation(args, kwargs)? }
        };
        let keyword: SmallVec<[&Value; 4]> = kwargs.iter().map(|(_, v)| v).collect();
        let arguments = (args, keyword.as_slice());
        Ok(keep_subclass(func, cls, result, || first_instance(&arguments, cls)))
    }
}

/// The default hook's last step: `result` with its tensors made `cls` instances, carrying the
/// attributes of the first argument of class `cls` (found by `source`, only if needed), unless
/// `cls` is `Tensor` itself or `func` returns the very same object.
fn keep_subclass<'a>(
    func: &Func,
    cls: &'static Class,
    mut result: Value,
    source: impl FnOnce() -> Option<&'a Tensor>,
) -> Value {
    if !std::ptr::eq(cls, Tensor::class()) && !func.returns_identity() {
        let source = LazyCell::new(source);
        convert(&mut result, cls, &|| *LazyCell::force(&source));
    }
    result
}

/// The first tensor of exactly class `cls` among `arguments`, in order (inside lists too).
fn first_instance<'a>(arguments: &'a dyn Relevant, cls: &'static Class) -> Option<&'a Tensor> {
    let mut found = None;
    arguments.each_tensor(&mut |t| {
        if found.is_none() && std::ptr::eq(t.class_of(), cls) {
            found = Some(t);
        }
    });
    found
}

/// Makes every tensor in `value` that is not already a `cls` instance a `cls` view, with the
/// per-instance attributes of the tensor `source` finds.
fn convert<'a>(value: &mut Value, cls: &'static Class, source: &dyn Fn() -> Option<&'a Tensor>) {
    match value {
        Value::Tensor(t) if !t.class_of().is_subclass_of(cls) && !t.is_duck() => {
            let Value::Tensor(t) = std::mem::take(value) else { return };
            *value = Value::Tensor(t.rewrap(cls, source()));
        }
        Value::List(items) | Value::Tuple(items) => items.iter_mut().for_each(|v| convert(v, cls, source)),
        _ => {}
    }
}
