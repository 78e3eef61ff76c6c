//! Tables of handled functions: what a duck (or a subclass) implements itself, declared one
//! attribute per function, `#[implements(torchfn::MEAN, table = HANDLED_FUNCTIONS)]` (seed 001's
//! `HANDLED_FUNCTIONS` dictionary and its `@implements` decorator).
//!
//! Each implementation is a function of its own, with its own signature: the table hands it the
//! call's arguments, and binding them is checked against that signature as Python binds a call,
//! so an implementation of `add` that takes no `alpha` refuses `alpha=2` with Python's
//! `TypeError: add() got an unexpected keyword argument 'alpha'`.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::protocol::{Func, Outcome};
use crate::value::{Kwargs, Value};

/// A table of the functions a type handles itself, keyed by the handle of the function
/// handled: a `static` that `#[implements(func, table = TABLE)]` fills at link time.
///
/// ```
/// use torchfn::overrides::HandledFunctions;
/// use torchfn::prelude::*;
///
/// static HANDLED: HandledFunctions = HandledFunctions::new();
///
/// /// `torch.mean` of anything: the number of its elements.
/// #[implements(torchfn::MEAN, table = HANDLED)]
/// fn mean(input: &Tensor) -> Result<i64> {
///     Ok(input.shape()?.iter().product::<usize>() as i64)
/// }
///
/// let x = torchfn::ones([3], None, None)?;
/// assert!(HANDLED.contains(torchfn::MEAN) && !HANDLED.contains(torchfn::ADD));
/// assert_eq!(HANDLED.functions(), [torchfn::MEAN]);
/// assert_eq!(HANDLED.call(torchfn::MEAN, &[(&x).into()], &Kwargs::new())?.as_int(), Some(3));
/// assert!(matches!(HANDLED.call(torchfn::ADD, &[], &Kwargs::new())?, Value::NotImplemented));
/// // The implementation's own signature binds the call, as Python's does.
/// let err = HANDLED.call(torchfn::MEAN, &[(&x).into()], &Kwargs::from([("dim", 0)])).unwrap_err();
/// assert_eq!(err.to_string(), "mean() got an unexpected keyword argument 'dim'");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct HandledFunctions {
    by_func: OnceLock<HashMap<usize, &'static Func>>,
}

impl HandledFunctions {
    /// An empty table, filled by the `#[implements]` functions that name it.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        HandledFunctions { by_func: OnceLock::new() }
    }

    fn table(&'static self) -> &'static HashMap<usize, &'static Func> {
        self.by_func.get_or_init(|| {
            let mut entries: Vec<&Implements> =
                inventory::iter::<Implements>.into_iter().filter(|e| std::ptr::eq(e.table, self)).collect();
            // Two implementations of one function: the first by qualified name, on every run.
            entries.sort_by_key(|e| std::cmp::Reverse(e.implementation.qualified_name()));
            entries.into_iter().map(|e| (key(e.func), e.implementation)).collect()
        })
    }

    /// The implementation of `func` in this table, if there is one: a handle to call with the
    /// call's `args` and `kwargs` (its `implementation` binds them to its own signature).
    pub fn get(&'static self, func: &'static Func) -> Option<&'static Func> {
        self.table().get(&key(func)).copied()
    }

    /// Whether this table implements `func` (`func in HANDLED_FUNCTIONS`).
    pub fn contains(&'static self, func: &'static Func) -> bool {
        self.get(func).is_some()
    }

    /// The functions this table implements, by qualified name.
    pub fn functions(&'static self) -> Vec<&'static Func> {
        let mut funcs: Vec<&'static Func> = inventory::iter::<Implements>
            .into_iter()
            .filter(|e| {
                std::ptr::eq(e.table, self) && self.get(e.func).is_some_and(|i| std::ptr::eq(i, e.implementation))
            })
            .map(|e| e.func)
            .collect();
        funcs.sort_by_key(|f| f.qualified_name());
        funcs
    }

    /// Calls this table's implementation of `func` with `args` and `kwargs`, bound to the
    /// implementation's own signature (`HANDLED_FUNCTIONS[func](*args, **kwargs)`);
    /// `NotImplemented` when the table has none, so a hook can return it as is.
    pub fn call(&'static self, func: &'static Func, args: &[Value], kwargs: &Kwargs) -> Outcome {
        match self.get(func) {
            Some(implementation) => implementation.implementation(args, kwargs),
            None => Ok(Value::NotImplemented),
        }
    }
}

fn key(func: &'static Func) -> usize {
    std::ptr::from_ref(func) as usize
}

/// One `#[implements]` function: the table it goes into, the function it implements and its
/// own handle. Written by the attribute.
#[doc(hidden)]
pub struct Implements {
    table: &'static HandledFunctions,
    func: &'static Func,
    implementation: &'static Func,
}

impl Implements {
    /// Used by `#[implements]`.
    pub const fn __new(table: &'static HandledFunctions, func: &'static Func, implementation: &'static Func) -> Self {
        Implements { table, func, implementation }
    }
}

inventory::collect!(Implements);
