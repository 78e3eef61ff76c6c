//! Custom autograd Functions, as PyTorch's `torch.autograd.Function`: an operation with its own
//! backward (and forward derivative), for what autograd cannot differentiate on its own or
//! differentiates badly.
//!
//! A Function is a type implementing [`Function`]: its `forward` (any arguments: tensors,
//! numbers, options), a `setup_context` that saves what the backward needs on the [`Ctx`], and
//! its `backward`. The type itself is the state kept on the context: its fields are reached as
//! `ctx.constant`, as PyTorch's `ctx.constant = constant`. [`Function::apply`] runs it.
//!
//! ```
//! use torchfn::autograd::{Ctx, Function};
//! use torchfn::{Result, Tensor};
//!
//! #[derive(Default)]
//! struct MulConstant {
//!     constant: f64,
//! }
//!
//! impl Function for MulConstant {
//!     type Inputs = (Tensor, f64);
//!     type Output = Tensor;
//!     type GradOutputs = Tensor;
//!
//!     fn forward((tensor, constant): &(Tensor, f64)) -> Result<Tensor> {
//!         tensor * *constant
//!     }
//!
//!     fn setup_context(ctx: &mut Ctx<Self>, (_, constant): &(Tensor, f64), _: &Tensor) -> Result<()> {
//!         ctx.constant = *constant;
//!         Ok(())
//!     }
//!
//!     fn backward(ctx: &mut Ctx<Self>, grad_output: Tensor) -> Result<Vec<Option<Tensor>>> {
//!         Ok(vec![Some((&grad_output * ctx.constant)?), None])
//!     }
//! }
//!
//! let x = torchfn::tensor([1.0f64, 2.0])?.requires_grad_(true)?;
//! let y = MulConstant::apply((x.clone(), 3.0))?;
//! assert_eq!(y.grad_fn()?.unwrap().name(), "MulConstantBackward");
//! y.sum()?.backward()?;
//! assert_eq!(x.grad()?.unwrap().to_vec::<f64>()?, [3.0, 3.0]);
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! `apply` is an overridable call (`MulConstant.apply`, see [`Function::handle`]): modes and
//! subclass hooks see it like any operation, and subclass instances passed in come back as
//! instances of their subclass.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use parking_lot::{Mutex, RwLock};

use super::graph::{Backward, Edge, Node, SavedTensor};
use super::{forward_ad, meta};
use crate::error::{Error, Result, bail};
use crate::protocol::{Func, Param};
use crate::tensor::Tensor;
use crate::value::{FromValue, Kwargs, ToValue, Value};

/// A custom autograd Function (PyTorch's `torch.autograd.Function`). Implement `forward` and
/// `setup_context` (or the combined [`forward_with_ctx`](Function::forward_with_ctx)), and
/// `backward` (or its alias [`vjp`](Function::vjp)); `jvp` for forward-mode AD. Run it with
/// [`apply`](Function::apply). The type is also the state kept on the [`Ctx`]: its fields are
/// reached through `ctx` (`ctx.constant`), and a fresh `Default` value starts each call.
pub trait Function: Default + Send + Sync + Sized + 'static {
    /// The arguments of `forward`: a tensor, or a tuple of tensors, numbers, options...
    type Inputs: FunctionInputs;
    /// What `forward` returns: a tensor or a tuple of tensors.
    type Output: FunctionOutput;
    /// What `backward` receives: one gradient per output, as `Tensor` (always given: a
    /// missing gradient is materialized as zeros) or as `Option<Tensor>` (for
    /// `set_materialize_grads(false)`); a tuple of them for several outputs.
    type GradOutputs: FromSlots;

    /// Set to `true` for a backward that is not itself differentiable (PyTorch's
    /// `@once_differentiable`): it runs without recording, and differentiating its result
    /// again is an error.
    const ONCE_DIFFERENTIABLE: bool = false;

    /// The computation (the separate form, with [`setup_context`](Function::setup_context)). It
    /// runs without recording: its inputs are the caller's tensors, but nothing it does is
    /// differentiated. Leave it out when you write [`forward_with_ctx`](Function::forward_with_ctx).
    fn forward(inputs: &Self::Inputs) -> Result<Self::Output> {
        let _ = inputs;
        bail!(
            NotImplemented,
            "You must implement the forward function (or forward_with_ctx) for custom autograd.Function {}.",
            Self::name()
        )
    }

    /// Saves on `ctx` what the backward needs, after `forward` (no computation here).
    fn setup_context(ctx: &mut Ctx<Self>, inputs: &Self::Inputs, output: &Self::Output) -> Result<()> {
        let _ = (ctx, inputs, output);
        Ok(())
    }

    /// The combined form: forward with the context at hand (to save intermediate values
    /// without returning them). By default `forward` then `setup_context`.
    fn forward_with_ctx(ctx: &mut Ctx<Self>, inputs: &Self::Inputs) -> Result<Self::Output> {
        let output = Self::forward(inputs)?;
        Self::setup_context(ctx, inputs, &output)?;
        Ok(output)
    }

    /// The gradients of the inputs, one per argument of `forward` (`None` for arguments that
    /// are not tensors or need none; extra trailing `None`s are allowed), from the gradients
    /// of the outputs. Written with differentiable operations, it can be differentiated again.
    fn backward(ctx: &mut Ctx<Self>, grad_outputs: Self::GradOutputs) -> Result<Vec<Option<Tensor>>> {
        Self::vjp(ctx, grad_outputs)
    }

    /// An alias of [`backward`](Function::backward): implement either.
    fn vjp(ctx: &mut Ctx<Self>, grad_outputs: Self::GradOutputs) -> Result<Vec<Option<Tensor>>> {
        let _ = (ctx, grad_outputs);
        bail!(
            NotImplemented,
            "You must implement either the backward or vjp method for your custom autograd.Function {} to use it \
             with backward mode AD.",
            Self::name()
        )
    }

    /// Forward-mode AD: the tangents of the outputs (one per output) from the tangents of the
    /// inputs (one per argument of `forward`; `None` for arguments that are not tensors, and,
    /// with `set_materialize_grads(false)`, for tensors without a tangent). Called right after
    /// `forward` when an input has a tangent.
    fn jvp(ctx: &mut Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let _ = (ctx, tangents);
        bail!(
            NotImplemented,
            "You must implement the jvp function for custom autograd.Function {} to use it with forward mode AD.",
            Self::name()
        )
    }

    /// The Function's name (the type's), which its nodes carry as `{name}Backward`.
    fn name() -> &'static str {
        short_name(std::any::type_name::<Self>())
    }

    /// The name of the Function's nodes (`grad_fn.name()`): `{name}Backward`, as PyTorch names
    /// a custom Function's. A Function that stands for one of PyTorch's own operations gives
    /// that operation's node name instead.
    fn node_name() -> Cow<'static, str> {
        Cow::Owned(format!("{}Backward", Self::name()))
    }

    /// Runs the Function: the protocol first (modes and subclass hooks see
    /// [`handle`](Function::handle)), then `forward`; when an input requires grad, the outputs
    /// carry a node named `{name}Backward` whose backward is this Function's; when an input has
    /// a tangent, the outputs get theirs from `jvp`.
    fn apply(inputs: Self::Inputs) -> Result<Self::Output> {
        apply::<Self>(inputs)
    }

    /// The handle of `apply` in the protocol (`{name}.apply`): what hooks and modes receive as
    /// `func` for a call of this Function.
    fn handle() -> &'static Func {
        handle::<Self>()
    }
}

/// The context of one call of a custom Function: what forward saves for backward (tensors with
/// [`save_for_backward`](Ctx::save_for_backward), anything else in the Function's own fields,
/// reached through `ctx` itself), and the call's flags.
pub struct Ctx<F> {
    /// For each argument of `forward`: whether it is a tensor that needs a gradient.
    pub needs_input_grad: Vec<bool>,
    state: F,
    /// The tensors saved for backward (`None` entries too), until the node takes them.
    to_save: Vec<Option<Tensor>>,
    /// The saved tensors as backward reads them (unpacked, checked for in-place changes).
    saved: Option<Vec<Option<Tensor>>>,
    for_forward: Vec<Option<Tensor>>,
    in_jvp: bool,
    dirty: Vec<Tensor>,
    non_differentiable: Vec<Tensor>,
    materialize_grads: bool,
}

impl<F: Function> Ctx<F> {
    fn new(needs_input_grad: Vec<bool>) -> Ctx<F> {
        Ctx {
            needs_input_grad,
            state: F::default(),
            to_save: Vec::new(),
            saved: None,
            for_forward: Vec::new(),
            in_jvp: false,
            dirty: Vec::new(),
            non_differentiable: Vec::new(),
            materialize_grads: true,
        }
    }

    /// Saves tensors for backward (`ctx.save_for_backward(input, weight, bias)`): a tensor, or
    /// a tuple of tensors and options. Inputs and outputs saved this way are checked against
    /// in-place changes when backward reads them, and keep their history (so a backward written
    /// with differentiable operations differentiates through them).
    pub fn save_for_backward(&mut self, tensors: impl SaveTensors) {
        self.to_save = tensors.into_slots();
    }

    /// The tensors saved with [`save_for_backward`](Ctx::save_for_backward), in backward, as
    /// the tuple (or tensor) they were saved as: `let (input, weight, bias): (Tensor, Tensor,
    /// Option<Tensor>) = ctx.saved_tensors()?`. In `jvp`, those saved with
    /// [`save_for_forward`](Ctx::save_for_forward).
    pub fn saved_tensors<T: FromSlots>(&self) -> Result<T> {
        let slots = if self.in_jvp {
            self.for_forward.clone()
        } else {
            match &self.saved {
                Some(saved) => saved.clone(),
                None => bail!(
                    Runtime,
                    "{}: saved_tensors can only be read in backward (or, for save_for_forward, in jvp)",
                    F::name()
                ),
            }
        };
        T::from_slots(slots, &|| format!("{}.saved_tensors", F::name()))
    }

    /// Saves tensors for `jvp` (`ctx.save_for_forward`).
    pub fn save_for_forward(&mut self, tensors: impl SaveTensors) {
        self.for_forward = tensors.into_slots();
    }

    /// Marks inputs that forward modified in place (`ctx.mark_dirty`): returned as outputs,
    /// they take the Function's node as their history.
    pub fn mark_dirty(&mut self, tensors: &[&Tensor]) {
        self.dirty.extend(tensors.iter().map(|&t| t.clone()));
    }

    /// Marks outputs that are not differentiable (`ctx.mark_non_differentiable`): they do not
    /// require grad, and their gradient in backward is always zero.
    pub fn mark_non_differentiable(&mut self, tensors: &[&Tensor]) {
        self.non_differentiable.extend(tensors.iter().map(|&t| t.clone()));
    }

    /// With `false`, gradients missing for some outputs reach backward (and tangents missing
    /// for some inputs reach jvp) as `None` instead of zeros (`ctx.set_materialize_grads`);
    /// declare `GradOutputs` with `Option<Tensor>` to receive them.
    pub fn set_materialize_grads(&mut self, value: bool) {
        self.materialize_grads = value;
    }
}

impl<F> Deref for Ctx<F> {
    type Target = F;
    fn deref(&self) -> &F {
        &self.state
    }
}

impl<F> DerefMut for Ctx<F> {
    fn deref_mut(&mut self) -> &mut F {
        &mut self.state
    }
}

/// `LinearFunction` from `crate::LinearFunction`.
fn short_name(path: &'static str) -> &'static str {
    let path = path.split('<').next().unwrap_or(path);
    path.rsplit("::").next().unwrap_or(path)
}

/// The protocol handle of `F::apply`, made (and kept) the first time it is needed.
fn handle<F: Function>() -> &'static Func {
    static HANDLES: OnceLock<RwLock<HashMap<TypeId, &'static Func>>> = OnceLock::new();
    static PARAMS: [Param; 1] = [Param::new("args", || "object".into(), None, true)];
    let handles = HANDLES.get_or_init(Default::default);
    if let Some(&func) = handles.read().get(&TypeId::of::<F>()) {
        return func;
    }
    let mut handles = handles.write();
    let func: &&'static Func = handles.entry(TypeId::of::<F>()).or_insert_with(|| {
        let doc = "A custom autograd Function's apply.";
        Box::leak(Box::new(Func::new(F::name(), "apply", &PARAMS, doc, implementation::<F>)))
    });
    func
}

/// `F::apply` through the protocol.
fn apply<F: Function>(inputs: F::Inputs) -> Result<F::Output> {
    let values = inputs.to_values();
    if crate::protocol::dispatch::fast_path(&values.as_slice()) {
        return run::<F>(&inputs, &values);
    }
    let result = crate::overrides::handle_torch_function(handle::<F>(), &values.as_slice(), &values, &Kwargs::new())?;
    F::Output::from_value(&result).ok_or_else(|| {
        Error::type_error(format!(
            "'{}.apply' returned {} from an override, but its callers expect {}",
            F::name(),
            result.type_name(),
            F::Output::type_name()
        ))
    })
}

/// The implementation behind the handle: the arguments back to `F::Inputs`, then the call.
fn implementation<F: Function>(args: &[Value], _: &Kwargs) -> Result<Value> {
    let inputs = F::Inputs::from_values(args).ok_or_else(|| {
        let given: Vec<&str> = args.iter().map(Value::type_name).collect();
        Error::type_error(format!(
            "{}.apply() expects arguments ({}), got ({})",
            F::name(),
            F::Inputs::type_names(),
            given.join(", ")
        ))
    })?;
    Ok(run::<F>(&inputs, args)?.to_value())
}

/// One call of `F` (`values`: its inputs as values): forward without recording, then the
/// outputs wrapped with the node (when an input requires grad) and their tangents (when an input
/// has one).
fn run<F: Function>(inputs: &F::Inputs, values: &[Value]) -> Result<F::Output> {
    let tensors: Vec<Option<&Tensor>> = values.iter().map(Value::as_tensor).collect();
    let grad_mode = super::is_grad_enabled();
    let needs: Vec<bool> = tensors.iter().map(|t| t.is_some_and(|t| grad_mode && meta::requires_grad(t))).collect();
    let records = needs.iter().any(|&n| n);
    let present: Vec<&Tensor> = tensors.iter().flatten().copied().collect();
    let has_tangents = forward_ad::tangents(&present).is_some();
    let mut ctx = Ctx::<F>::new(needs);
    let output = {
        let _no_grad = super::no_grad();
        let _no_tangents = forward_ad::suspend();
        F::forward_with_ctx(&mut ctx, inputs)?
    };
    if !records && !has_tangents {
        return Ok(output);
    }
    let mut outputs = output.into_tensors();
    let differentiable: Vec<bool> = outputs
        .iter()
        .map(|o| {
            o.dense().is_some_and(|d| d.dtype.is_floating_point()) && !ctx.non_differentiable.iter().any(|n| n.is(o))
        })
        .collect();
    // An input returned as it is becomes a new view of itself (unless forward marked it dirty:
    // then the input itself takes the new history).
    for out in outputs.iter_mut() {
        if tensors.iter().flatten().any(|t| t.is(out)) && !ctx.dirty.iter().any(|d| d.is(out)) {
            let _no_grad = super::no_grad();
            let _no_tangents = forward_ad::suspend();
            *out = crate::primitive::view(out, |l| Ok(l.clone()))?;
        }
    }
    let tangents = if has_tangents { Some(output_tangents(&mut ctx, &tensors, outputs.len())?) } else { None };
    if records {
        record(ctx, &tensors, &outputs, &differentiable)?;
    }
    if let Some(tangents) = tangents {
        for ((out, tangent), &diff) in outputs.iter().zip(tangents).zip(&differentiable) {
            if diff {
                forward_ad::set_tangent(out, tangent);
            }
        }
    }
    F::Output::from_tensors(outputs)
        .ok_or_else(|| Error::runtime_error(format!("{}: forward's outputs changed in number", F::name())))
}

/// The tangents of the outputs from `F::jvp`, checked.
fn output_tangents<F: Function>(
    ctx: &mut Ctx<F>,
    inputs: &[Option<&Tensor>],
    outputs: usize,
) -> Result<Vec<Option<Tensor>>> {
    let tangents: Vec<Option<Tensor>> = inputs
        .iter()
        .map(|t| match t {
            Some(t) => match forward_ad::tangent(t) {
                Some(tangent) => Ok(Some(tangent)),
                None if ctx.materialize_grads => crate::zeros_like(t, None).map(Some),
                None => Ok(None),
            },
            None => Ok(None),
        })
        .collect::<Result<_>>()?;
    ctx.in_jvp = true;
    let result = {
        let _no_tangents = forward_ad::suspend();
        F::jvp(ctx, tangents)
    };
    ctx.in_jvp = false;
    let result = result?;
    if result.len() != outputs {
        bail!(
            Runtime,
            "{}.jvp returned an incorrect number of tangents (expected {outputs}, got {})",
            F::name(),
            result.len()
        );
    }
    Ok(result)
}

/// Makes the node of one call: its edges (one per argument of forward), the tensors saved, and
/// the outputs' history.
fn record<F: Function>(
    mut ctx: Ctx<F>,
    inputs: &[Option<&Tensor>],
    outputs: &[Tensor],
    differentiable: &[bool],
) -> Result<()> {
    for dirty in &ctx.dirty {
        if meta::requires_grad(dirty) && meta::is_leaf(dirty) {
            bail!(Runtime, "{}: a leaf Variable that requires grad is being used in an in-place operation.", F::name());
        }
    }
    let next: Vec<Option<Edge>> = inputs
        .iter()
        .zip(&ctx.needs_input_grad)
        .map(|(t, &needs)| if needs { t.and_then(meta::gradient_edge) } else { None })
        .collect();
    // Saved outputs are kept without their history (the node would keep itself alive) and
    // given it back when unpacked; inputs are kept as they are.
    let mut saved = Vec::new();
    let mut slots = Vec::new();
    for tensor in std::mem::take(&mut ctx.to_save) {
        slots.push(tensor.as_ref().map(|_| saved.len()));
        let Some(tensor) = tensor else { continue };
        saved.push(match outputs.iter().position(|o| o.is(&tensor)) {
            Some(nr) if differentiable[nr] => SavedTensor::output(meta::detached(&tensor), nr),
            _ => SavedTensor::input(&tensor),
        });
    }
    let metas: Vec<_> =
        outputs.iter().map(|o| o.data("apply", "output").map(meta::output_meta)).collect::<Result<_>>()?;
    let inputs_are_tensors = inputs.iter().map(Option::is_some).collect();
    let backward = Custom { ctx: Mutex::new(ctx), slots, inputs_are_tensors };
    let node = Node::function(backward, next, saved, metas);
    for (nr, (out, &diff)) in outputs.iter().zip(differentiable).enumerate() {
        if diff {
            meta::set_history(out, Some(Edge { node: node.clone(), output_nr: nr }));
        }
    }
    Ok(())
}

/// The node of a custom Function: its context, and where each saved tensor went.
struct Custom<F> {
    ctx: Mutex<Ctx<F>>,
    /// For each tensor given to `save_for_backward`: its place among the node's saved tensors
    /// (`None` for a saved `None`).
    slots: Vec<Option<usize>>,
    inputs_are_tensors: Vec<bool>,
}

impl<F: Function> Backward for Custom<F> {
    fn name(&self) -> Cow<'static, str> {
        F::node_name()
    }

    fn materialize_grads(&self) -> bool {
        self.ctx.lock().materialize_grads
    }

    fn apply(&self, node: &Node, grads: Vec<Option<Tensor>>, saved: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        let name = F::node_name;
        let Some(mut ctx) = self.ctx.try_lock() else {
            bail!(Runtime, "{}: backward was called again while it was running (reentrant backward)", name());
        };
        ctx.saved = Some(self.slots.iter().map(|slot| slot.map(|i| saved[i].clone())).collect());
        // What the gradients of a once-differentiable backward, recorded, depend on: the
        // gradients flowing in, and the inputs.
        let upstream: Vec<Edge> = if F::ONCE_DIFFERENTIABLE && super::is_grad_enabled() {
            let incoming = grads.iter().flatten().filter_map(meta::gradient_edge);
            incoming.chain(node.next.iter().flatten().cloned()).collect()
        } else {
            Vec::new()
        };
        let grad_outputs = F::GradOutputs::from_slots(grads, &|| format!("{}'s grad_outputs", name()))?;
        let result = {
            let _once = F::ONCE_DIFFERENTIABLE.then(super::no_grad);
            F::backward(&mut ctx, grad_outputs)
        };
        ctx.saved = None;
        drop(ctx);
        let mut result = result?;
        let n = self.inputs_are_tensors.len();
        if result.len() < n || result[n..].iter().any(Option::is_some) {
            bail!(
                Runtime,
                "function {} returned an incorrect number of gradients (expected {n}, got {})",
                name(),
                result.len()
            );
        }
        result.truncate(n);
        for (i, (grad, &is_tensor)) in result.iter().zip(&self.inputs_are_tensors).enumerate() {
            if grad.is_some() && !is_tensor {
                bail!(
                    Runtime,
                    "function {} returned a gradient different than None at position {}, but the corresponding \
                     forward input was not a Variable",
                    name(),
                    i + 1
                );
            }
        }
        if !upstream.is_empty() {
            return delay_error(&name(), upstream, result);
        }
        Ok(result)
    }
}

/// The gradients of a once-differentiable backward, given a history (from `upstream`, what they
/// depend on) that fails when differentiated (PyTorch's `DelayedError`).
fn delay_error(name: &str, upstream: Vec<Edge>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    let message =
        format!("trying to differentiate twice a function that was marked with @once_differentiable ({name})");
    let metas: Vec<_> = grads
        .iter()
        .map(|g| match g {
            Some(g) => g.data("backward", "grad").map(meta::output_meta),
            None => Ok(super::OutputMeta {
                shape: crate::tensor::Shape::from([0]),
                dtype: crate::tensor::DType::Float32,
                device: crate::backend::Device::CPU,
            }),
        })
        .collect::<Result<_>>()?;
    let node = Node::function(DelayedError(message), upstream.into_iter().map(Some), Vec::new(), metas);
    Ok(grads
        .into_iter()
        .enumerate()
        .map(|(nr, g)| g.map(|g| meta::alias_with_history(&g, Edge { node: node.clone(), output_nr: nr })))
        .collect())
}

/// A node that fails when backward reaches it.
struct DelayedError(String);

impl Backward for DelayedError {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed("DelayedError")
    }

    fn apply(&self, _: &Node, _: Vec<Option<Tensor>>, _: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        Err(Error::runtime_error(self.0.clone()))
    }
}

/// The arguments of a custom Function's `forward`: a tensor, or a tuple of values that convert
/// to and from [`Value`] (tensors, `Option<Tensor>`, numbers, strings...). Only tensors given
/// directly (not inside lists) take part in autograd, as in PyTorch.
pub trait FunctionInputs: Send + Sync + Sized + 'static {
    /// The arguments as values, in order.
    fn to_values(&self) -> Vec<Value>;
    /// The arguments from values (what a hook passes on), `None` when they do not fit.
    fn from_values(values: &[Value]) -> Option<Self>;
    /// The expected types, for error messages.
    fn type_names() -> String;
}

impl FunctionInputs for Tensor {
    fn to_values(&self) -> Vec<Value> {
        vec![Value::Tensor(self.clone())]
    }
    fn from_values(values: &[Value]) -> Option<Self> {
        match values {
            [Value::Tensor(t)] => Some(t.clone()),
            _ => None,
        }
    }
    fn type_names() -> String {
        "Tensor".into()
    }
}

macro_rules! function_inputs {
    ($($name:ident $index:tt),+) => {
        impl<$($name: ToValue + FromValue + Send + Sync + 'static),+> FunctionInputs for ($($name,)+) {
            fn to_values(&self) -> Vec<Value> {
                vec![$(self.$index.to_value()),+]
            }
            fn from_values(values: &[Value]) -> Option<Self> {
                let count = [$($index),+].len();
                if values.len() != count {
                    return None;
                }
                Some(($($name::from_value(&values[$index])?,)+))
            }
            fn type_names() -> String {
                [$($name::type_name()),+].join(", ")
            }
        }
    };
}

function_inputs!(A 0);
function_inputs!(A 0, B 1);
function_inputs!(A 0, B 1, C 2);
function_inputs!(A 0, B 1, C 2, D 3);
function_inputs!(A 0, B 1, C 2, D 3, E 4);
function_inputs!(A 0, B 1, C 2, D 3, E 4, G 5);

/// What a function of tensors returns (a checked function, a custom Function's forward): its
/// tensors, in order.
pub trait Outputs {
    /// The tensors, in order.
    fn into_tensors(self) -> Vec<Tensor>;
}

impl Outputs for Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }
}

impl Outputs for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }
}

impl Outputs for (Tensor, Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0, self.1]
    }
}

impl Outputs for (Tensor, Tensor, Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0, self.1, self.2]
    }
}

/// The tensors of a value, in order, those in lists and tuples flattened (as a registered
/// function's result: `max`'s `(values, indices)`); other items are left out.
impl Outputs for Value {
    fn into_tensors(self) -> Vec<Tensor> {
        fn collect(value: Value, out: &mut Vec<Tensor>) {
            match value {
                Value::Tensor(t) => out.push(t),
                Value::List(items) | Value::Tuple(items) => items.into_iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        collect(self, &mut out);
        out
    }
}

/// What a custom Function's `forward` returns: a tensor, a tuple of tensors, or a `Vec`; also
/// what `torchfn::func`'s transforms return in the function's shape.
pub trait FunctionOutput: Outputs + ToValue + FromValue + Send + Sync + 'static {
    /// The output back from its tensors.
    fn from_tensors(tensors: Vec<Tensor>) -> Option<Self>;
}

impl FunctionOutput for Tensor {
    fn from_tensors(tensors: Vec<Tensor>) -> Option<Self> {
        let [t] = <[Tensor; 1]>::try_from(tensors).ok()?;
        Some(t)
    }
}

impl FunctionOutput for Vec<Tensor> {
    fn from_tensors(tensors: Vec<Tensor>) -> Option<Self> {
        Some(tensors)
    }
}

impl FunctionOutput for (Tensor, Tensor) {
    fn from_tensors(tensors: Vec<Tensor>) -> Option<Self> {
        let [a, b] = <[Tensor; 2]>::try_from(tensors).ok()?;
        Some((a, b))
    }
}

/// One slot of saved tensors or gradients: `Tensor` (must be present) or `Option<Tensor>`.
pub trait Slot: Sized {
    /// The slot's value, `None` when a required tensor is missing.
    fn from_slot(slot: Option<Tensor>) -> Option<Self>;
}

impl Slot for Tensor {
    fn from_slot(slot: Option<Tensor>) -> Option<Self> {
        slot
    }
}

impl Slot for Option<Tensor> {
    fn from_slot(slot: Option<Tensor>) -> Option<Self> {
        Some(slot)
    }
}

/// What slots are called in an error (`ExpBackward's grad_outputs`), made only for the error.
pub type Names<'a> = &'a dyn Fn() -> String;

/// What tensor slots convert to: a tensor, an option, or a tuple of them
/// (`ctx.saved_tensors()`, a Function's `GradOutputs`).
pub trait FromSlots: Sized {
    /// The value from its slots; `what` names them, for errors only.
    fn from_slots(slots: Vec<Option<Tensor>>, what: Names<'_>) -> Result<Self>;
}

#[cold]
fn slot_error(what: Names<'_>, index: usize, count: usize, expected: usize) -> Error {
    let what = what();
    if count != expected {
        return Error::runtime_error(format!("{what}: expected {expected} tensors, got {count}"));
    }
    Error::runtime_error(format!(
        "{what}[{index}] is None (a None was saved, or gradients are not materialized): take it as Option<Tensor>"
    ))
}

impl<T: Slot> FromSlots for T {
    fn from_slots(slots: Vec<Option<Tensor>>, what: Names<'_>) -> Result<Self> {
        let count = slots.len();
        let [slot] = <[Option<Tensor>; 1]>::try_from(slots).map_err(|_| slot_error(what, 0, count, 1))?;
        T::from_slot(slot).ok_or_else(|| slot_error(what, 0, 1, 1))
    }
}

impl FromSlots for Vec<Option<Tensor>> {
    fn from_slots(slots: Vec<Option<Tensor>>, _: Names<'_>) -> Result<Self> {
        Ok(slots)
    }
}

macro_rules! from_slots {
    ($count:literal; $($name:ident $var:ident $index:tt),+) => {
        impl<$($name: Slot),+> FromSlots for ($($name,)+) {
            fn from_slots(slots: Vec<Option<Tensor>>, what: Names<'_>) -> Result<Self> {
                let count = slots.len();
                let slots = <[Option<Tensor>; $count]>::try_from(slots).map_err(|_| slot_error(what, 0, count, $count))?;
                let [$($var),+] = slots;
                Ok(($($name::from_slot($var).ok_or_else(|| slot_error(what, $index, $count, $count))?,)+))
            }
        }
    };
}

from_slots!(2; A a 0, B b 1);
from_slots!(3; A a 0, B b 1, C c 2);
from_slots!(4; A a 0, B b 1, C c 2, D d 3);
from_slots!(5; A a 0, B b 1, C c 2, D d 3, E e 4);
from_slots!(6; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
from_slots!(7; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);

/// What `save_for_backward` takes: a tensor, an option of one, or a tuple of them (by value or
/// by reference).
pub trait SaveTensors {
    /// The tensors, `None` for saved `None`s.
    fn into_slots(self) -> Vec<Option<Tensor>>;
}

/// One tensor to save: `Tensor`, `&Tensor`, `Option<Tensor>`, `Option<&Tensor>`,
/// `&Option<Tensor>`.
pub trait SaveSlot {
    /// The tensor, or `None`.
    fn into_slot(self) -> Option<Tensor>;
}

impl SaveSlot for Tensor {
    fn into_slot(self) -> Option<Tensor> {
        Some(self)
    }
}
impl SaveSlot for &Tensor {
    fn into_slot(self) -> Option<Tensor> {
        Some(self.clone())
    }
}
impl SaveSlot for Option<Tensor> {
    fn into_slot(self) -> Option<Tensor> {
        self
    }
}
impl SaveSlot for Option<&Tensor> {
    fn into_slot(self) -> Option<Tensor> {
        self.cloned()
    }
}
impl SaveSlot for &Option<Tensor> {
    fn into_slot(self) -> Option<Tensor> {
        self.clone()
    }
}

impl<T: SaveSlot> SaveTensors for T {
    fn into_slots(self) -> Vec<Option<Tensor>> {
        vec![self.into_slot()]
    }
}

macro_rules! save_tensors {
    ($($name:ident $index:tt),+) => {
        impl<$($name: SaveSlot),+> SaveTensors for ($($name,)+) {
            fn into_slots(self) -> Vec<Option<Tensor>> {
                vec![$(self.$index.into_slot()),+]
            }
        }
    };
}

save_tensors!(A 0);
save_tensors!(A 0, B 1);
save_tensors!(A 0, B 1, C 2);
save_tensors!(A 0, B 1, C 2, D 3);
save_tensors!(A 0, B 1, C 2, D 3, E 4);
save_tensors!(A 0, B 1, C 2, D 3, E 4, F 5);
save_tensors!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
