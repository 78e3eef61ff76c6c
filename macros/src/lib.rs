//! Procedural macros of [torchfn](https://docs.rs/torchfn): `#[torch_function]`, `#[dispatcher]`,
//! `#[derive(TensorSubclass)]`, `#[derive(DuckTensor)]` and `#[derive(Module)]`.
//!
//! Use them through the `torchfn` crate, which re-exports them. The entry points here are thin:
//! the expansions live in ordinary modules that return `syn::Result` and are unit-tested
//! without a compiler round trip.

#![warn(missing_docs)]

mod class;
mod dispatcher;
mod expand;
mod implements;
mod methods;
mod module;
mod options;
mod signature;
mod verify;
mod wrapper;

use std::hash::{DefaultHasher, Hash, Hasher};

use proc_macro::TokenStream;

/// Makes a function (or a `Tensor` method) overridable: every call goes through the override
/// protocol, the function gets a handle for hooks to compare with `func`, and it is listed in
/// the registry with its signature.
///
/// ```
/// use torchfn::prelude::*;
///
/// /// Which arguments may carry overrides. Same parameters, defaults only `None`.
/// #[dispatcher]
/// fn axpy_dispatcher(x: &Tensor, y: &Tensor, #[default(None)] alpha: f64) -> impl Relevant {
///     [x, y]
/// }
///
/// /// `alpha * x + y`.
/// #[torch_function(dispatcher = axpy_dispatcher, module = "blas")]
/// pub fn axpy(x: &Tensor, y: &Tensor, #[default(1.0)] alpha: f64) -> Result<Tensor> {
///     &(x * alpha)? + y
/// }
///
/// let (x, y) = (torchfn::tensor([1.0f32, 2.0])?, torchfn::tensor([10.0f32, 20.0])?);
/// assert_eq!(axpy(&x, &y, 2.0)?.to_vec::<f32>()?, [12.0, 24.0]);
/// assert_eq!(AXPY.qualified_name(), "blas.axpy");                      // the handle
/// assert_eq!(AXPY.signature().to_string(), "(x, y, alpha=1.0)");
/// let by_name = AXPY.call(&[x.into(), y.into()], &Kwargs::new())?;     // alpha defaults to 1.0
/// assert_eq!(by_name.to_string(), "tensor([11., 22.])");
/// # Ok::<(), torchfn::Error>(())
/// ```
///
/// What it generates, for `fn name`:
///
/// - the public function, with the same signature: a fast path straight to the body when no
///   argument's class dispatches and no mode is active, the protocol otherwise;
/// - `NAME`, the function's handle (`&'static Func`): qualified name, kind, signature,
///   documentation, `call(args, kwargs)` with Python's argument binding, and `implementation`;
/// - its registration, so `torchfn::overrides::get_overridable_functions()` lists it.
///
/// Parameters may carry `#[default(value)]` (used by the by-name call and shown in the
/// signature), one may be `#[variadic]` (Python's `*args`: it takes the remaining positional
/// arguments, and the parameters after it are keyword-only), and one may be `#[keyword_only]`
/// (Python's bare `*` before it: it and the parameters after it are keyword-only; a typed call
/// passes them to hooks as keywords, left out at their default). A parameter written
/// `impl Into<T>` is converted once, on entry. Parameter types implement `torchfn::Arg`;
/// the return type is `Result<T>`.
///
/// Options:
///
/// - `dispatcher = path`: the dispatcher, marked `#[dispatcher]`, in this module, another
///   module or another crate. Without one, every parameter's tensors are relevant.
/// - `module = "ns"`: the namespace of a free function (default: the crate name). Methods of
///   `impl Tensor` are in `Tensor`.
/// - `name = "..."`: the registered name (default: the Rust name; `x.__get__` for a property).
/// - `verify = false`: skip the signature check (for a dispatcher written without
///   `#[dispatcher]`, which must still take the same arguments).
/// - `docs_from_dispatcher`: put the dispatcher's documentation first.
/// - `property`: a `Tensor` property getter; `nowrap`: its result is returned as is by the
///   default hook (the very same object, as `Tensor._base`).
/// - `class = C`: methods of the user's class `C` (a subclass or a duck). On an
///   `impl Trait for Tensor` block, every method becomes overridable: `t.method()` calls the
///   associated function `C::method(&t)`, whose handle is `C::METHOD`, registered as
///   `C.method`; a method may carry its own `#[torch_function(...)]` options. On an associated
///   function of `C`, the first parameter `self_: &Tensor` is the instance.
///
/// ```
/// use torchfn::prelude::*;
///
/// #[derive(TensorSubclass)]
/// struct Meters;
///
/// trait MetersMethods {
///     fn to_feet(&self) -> Result<Tensor>;
/// }
///
/// #[torch_function(class = Meters)]
/// impl MetersMethods for Tensor {
///     fn to_feet(&self) -> Result<Tensor> {
///         self * 3.28084
///     }
/// }
///
/// let m = torchfn::tensor([1.0f32])?.as_subclass(Meters)?;
/// assert!(m.to_feet()?.is_instance::<Meters>());
/// assert_eq!(Meters::TO_FEET.qualified_name(), "Meters.to_feet");
/// # Ok::<(), torchfn::Error>(())
/// ```
///
/// The compile-time check (docs/protocol.md section 7) refuses a dispatcher whose parameters differ
/// in name, order or number, or in which is variadic or has a default, and reports every
/// mismatch at its parameter. A method's receiver `self` is the dispatcher's `self_`.
#[proc_macro_attribute]
pub fn torch_function(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::torch_function(args.into(), item.into()).into()
}

/// Registers a function as a type's implementation of an overridable function, in a table of
/// handled functions (seed 001's `@implements(torch.mean)` decorator and its `HANDLED_FUNCTIONS`):
/// `#[implements(torchfn::MEAN, table = HANDLED_FUNCTIONS)]`, where `HANDLED_FUNCTIONS` is a
/// `static` [`HandledFunctions`](https://docs.rs/torchfn/latest/torchfn/overrides/struct.HandledFunctions.html).
///
/// The function stays an ordinary function. The table's `call(func, args, kwargs)` binds a
/// call's arguments to the function's own signature, as Python binds
/// `HANDLED_FUNCTIONS[func](*args, **kwargs)`: an implementation of `add` without `alpha` refuses
/// `alpha=2` with `add() got an unexpected keyword argument 'alpha'`. Parameters take the same
/// types and marks (`#[default]`, `#[variadic]`, `#[keyword_only]`) as `#[torch_function]`'s.
///
/// ```
/// use torchfn::overrides::HandledFunctions;
/// use torchfn::prelude::*;
///
/// /// Half of every tensor, stored as one number.
/// #[derive(Debug, DuckTensor)]
/// struct Half(f64);
///
/// static HANDLED_FUNCTIONS: HandledFunctions = HandledFunctions::new();
///
/// impl TorchFunction for Half {
///     fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
///         HANDLED_FUNCTIONS.call(func, args, kwargs)
///     }
/// }
///
/// #[implements(torchfn::SUM, table = HANDLED_FUNCTIONS)]
/// fn sum(input: &Tensor) -> Result<f64> {
///     Ok(input.duck::<Half>().map_or(0.0, |h| h.0))
/// }
///
/// let h = Tensor::from_duck(Half(0.5));
/// assert_eq!(torchfn::sum(&h)?.item()?, Scalar::Float(0.5));
/// assert!(torchfn::mean(&h).is_err()); // not in the table: NotImplemented, then a TypeError
/// # Ok::<(), torchfn::Error>(())
/// ```
#[proc_macro_attribute]
pub fn implements(args: TokenStream, item: TokenStream) -> TokenStream {
    implements::expand(args.into(), item.into()).into()
}

/// Marks a dispatcher: a function with an implementation's parameters that returns its
/// *relevant arguments*, the values that may carry overrides (any `impl Relevant`: a tensor,
/// an array or tuple of them, a slice, an `Option`).
///
/// Its parameters may have defaults, which must be `None`; it may live in any module or crate,
/// and `#[torch_function(dispatcher = path)]` checks its signature at compile time through a
/// hidden macro of the same name that this attribute defines. Its references share one
/// lifetime, so it can return `[input, other]`.
///
/// ```
/// use torchfn::prelude::*;
///
/// /// `out` is relevant too: an override may want to see it.
/// #[dispatcher]
/// pub fn binary_dispatcher(input: &Tensor, other: &Tensor, #[default(None)] out: Option<&Tensor>) -> impl Relevant {
///     (input, other, out)
/// }
/// ```
#[proc_macro_attribute]
pub fn dispatcher(args: TokenStream, item: TokenStream) -> TokenStream {
    let unique = unique_suffix(&item);
    dispatcher::expand(args.into(), item.into(), &unique).into()
}

/// The second stage of `#[torch_function]`, called by a dispatcher's hidden macro.
#[doc(hidden)]
#[proc_macro]
pub fn torch_function_checked(input: TokenStream) -> TokenStream {
    expand::checked(input.into()).into()
}

/// Declares a tensor subclass: the type's values are the per-instance attributes its tensors
/// carry (`t.as_subclass(Meters { scale: 1.0 })`, read back with `t.attrs::<Meters>()`).
///
/// By default the subclass gets the base `Tensor`'s hook, which keeps the subclass and its
/// attributes through every operation. Options, in `#[torchfn(...)]`:
///
/// - `parent = Type`: descend from another subclass (default: `Tensor`);
/// - `hook`: the type implements `TorchFunction` itself (and can call the default as
///   `Tensor::torch_function`, its `super()`);
/// - `disable_torch_function`: the class takes no part in dispatch (PyTorch's
///   `_disabled_torch_function_impl`).
///
/// ```
/// use torchfn::prelude::*;
///
/// #[derive(TensorSubclass)]
/// struct Meters {
///     scale: f64,
/// }
///
/// /// A hook of its own, which defers to `super()` and so keeps the subclass.
/// #[derive(TensorSubclass)]
/// #[torchfn(parent = Meters, hook)]
/// struct CountedMeters;
///
/// impl TorchFunction for CountedMeters {
///     fn torch_function(cls: &'static Class, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
///         Tensor::torch_function(cls, func, types, args, kwargs)
///     }
/// }
///
/// let m = torchfn::tensor([1.0f32])?.as_subclass(Meters { scale: 1000.0 })?;
/// let c = torchfn::tensor([2.0f32])?.as_subclass(CountedMeters)?;
/// let sum = (&m + &c)?; // the most derived class wins
/// assert!(sum.is_instance::<CountedMeters>() && sum.is_instance::<Meters>());
/// assert_eq!(m.sum()?.attrs::<Meters>().unwrap().scale, 1000.0);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[proc_macro_derive(TensorSubclass, attributes(torchfn))]
pub fn derive_tensor_subclass(input: TokenStream) -> TokenStream {
    class::derive(input.into(), class::Kind::Subclass).into()
}

/// Declares a duck tensor type: a type that is no tensor but takes part in the protocol, passed
/// wherever a tensor is expected through `Tensor::from_duck`. It implements `TorchFunction`
/// (its hook) and `Debug` (how it prints); `#[torchfn(parent = Duck)]` gives it a duck parent,
/// and `#[torchfn(data_error = f)]`, with `f: fn(&Self, &str) -> torchfn::Error`, the error of
/// code that needs its data (`item()`, a shape), in place of the protocol's `TypeError`.
///
/// ```
/// use torchfn::prelude::*;
///
/// /// A tensor of `n` copies of `value`, never materialised.
/// #[derive(Debug, DuckTensor)]
/// struct Constant {
///     n: usize,
///     value: f64,
/// }
///
/// impl TorchFunction for Constant {
///     fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], _: &Kwargs) -> Outcome {
///         match (func == torchfn::SUM, args.first().and_then(|a| a.duck::<Constant>())) {
///             (true, Some(c)) => Ok(Value::Float(c.value * c.n as f64)),
///             _ => Ok(Value::NotImplemented),
///         }
///     }
/// }
///
/// let c = Tensor::from_duck(Constant { n: 1000, value: 0.5 });
/// assert_eq!(torchfn::sum(&c)?.item()?, Scalar::Float(500.0));
/// assert!(torchfn::mean(&c).is_err()); // not handled: a TypeError naming `torchfn.mean`
/// # Ok::<(), torchfn::Error>(())
/// ```
#[proc_macro_derive(DuckTensor, attributes(torchfn))]
pub fn derive_duck_tensor(input: TokenStream) -> TokenStream {
    class::derive(input.into(), class::Kind::Duck).into()
}

/// A name part unique to where `item` is written: `#[macro_export]` puts every dispatcher's hidden
/// macro at its crate's root, so two dispatchers of the same name in different modules must not
/// collide. Derived from the file, line and column, so it is the same on every build.
fn unique_suffix(item: &TokenStream) -> String {
    let span = item.clone().into_iter().next().map_or_else(proc_macro::Span::call_site, |t| t.span());
    let mut hasher = DefaultHasher::new();
    (span.file(), span.line(), span.column()).hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// Declares a wrapper tensor type (`torchfn::dispatch::WrapperTensor`): a struct around one
/// inner tensor (the field of type `Tensor`, or the one marked `#[wrapper(inner)]`), whose
/// other fields are cloned into each wrapped result. Its hook (`WrapperSubclass`) is then a few
/// lines: `Self::dispatch_inner(func, args, kwargs)` changes nothing.
///
/// ```
/// use torchfn::dispatch::{Operator, WrapperSubclass, WrapperTensor};
/// use torchfn::prelude::*;
///
/// #[derive(WrapperTensor)]
/// struct Tagged(Tensor, u32);
///
/// impl WrapperSubclass for Tagged {
///     fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
///         Self::dispatch_inner(func, args, kwargs)
///     }
/// }
///
/// let t = Tagged(torchfn::ones([2], None, None)?, 7).wrap()?;
/// let u = t.exp()?;
/// assert_eq!(u.wrapper::<Tagged>().unwrap().1, 7);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[proc_macro_derive(WrapperTensor, attributes(wrapper))]
pub fn derive_wrapper_tensor(input: TokenStream) -> TokenStream {
    wrapper::derive(input.into()).into()
}

/// Makes a struct a module (`torchfn::nn::Module`): its fields (parameters, buffers, training
/// flags, submodules, `Vec`s, arrays and `Option`s of modules) are walked in declaration order
/// for `named_parameters`, `state_dict`, `train`/`eval`, `to_device` and the repr; fields marked
/// `#[module(skip)]` are configuration. `#[module(extra_repr = method)]` on the struct names a
/// `fn(&self) -> String` giving the repr's inside. Also implements `Display` (the repr).
///
/// ```
/// use torchfn::nn::{Linear, Module};
///
/// #[derive(Module)]
/// #[module(extra_repr = describe)]
/// struct Head {
///     proj: Linear,
///     #[module(skip)]
///     scale: f64,
/// }
///
/// impl Head {
///     fn describe(&self) -> String {
///         format!("scale={}", self.scale)
///     }
/// }
///
/// let head = Head { proj: Linear::new(2, 2, false, &torchfn::Generator::new())?, scale: 0.5 };
/// assert_eq!(head.to_string(), "Head(\n  scale=0.5\n  (proj): Linear(in_features=2, out_features=2, bias=False)\n)");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    module::derive(input.into()).into()
}
