//! The `Module` trait: a value made of parameters, buffers and submodules, walked by a visitor
//! (what `#[derive(Module)]` writes), and everything PyTorch's `nn.Module` does on top of that
//! walk: named parameters with dotted names, train/eval, zero_grad, state_dict, repr.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use super::state_dict::{IncompatibleKeys, StateDict};
use crate::Tensor;
use crate::backend::Device;
use crate::error::Result;

/// A module (PyTorch's `nn.Module`): parameters, buffers and submodules, usually declared with
/// `#[derive(Module)]` on a struct whose fields are [`Parameter`]s, [`Buffer`]s, modules,
/// `Vec`s, arrays and `Option`s of modules, and a [`Training`] flag where behaviour depends on
/// it (fields marked `#[module(skip)]` are configuration). Its forward is an ordinary method.
///
/// ```
/// use torchfn::nn::{self, Forward, Linear, Module};
/// use torchfn::prelude::*;
///
/// #[derive(Module)]
/// struct Mlp {
///     fc1: Linear,
///     fc2: Linear,
/// }
///
/// impl Mlp {
///     fn forward(&self, x: &Tensor) -> Result<Tensor> {
///         self.fc2.forward(&nn::functional::relu(&self.fc1.forward(x)?, false)?)
///     }
/// }
///
/// let g = torchfn::Generator::new().manual_seed(0);
/// let mlp = Mlp { fc1: Linear::new(4, 8, true, &g)?, fc2: Linear::new(8, 1, true, &g)? };
/// let names: Vec<String> = mlp.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
/// assert_eq!(mlp.forward(&torchfn::ones([2, 4], None, None)?)?.shape()?, [2, 1]);
/// assert_eq!(mlp.to_string(), "Mlp(\n  (fc1): Linear(in_features=4, out_features=8, bias=True)\n  (fc2): Linear(in_features=8, out_features=1, bias=True)\n)");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub trait Module: Send + Sync {
    /// Shows the module's own parameters, buffers, flags and submodules (not theirs) to `visitor`,
    /// in declaration order.
    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>);

    /// As [`visit`](Module::visit), with each part replaceable (moving a module to a device).
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut);

    /// The module's type name, as its repr shows it (`Linear`).
    fn type_name(&self) -> &'static str;

    /// The text inside the parentheses of the module's repr (`in_features=4, ...`).
    fn extra_repr(&self) -> String {
        String::new()
    }

    /// Every parameter with its dotted name (`transformer.h.0.attn.c_attn.weight`), each shared
    /// parameter once, under the first name it is reached by (PyTorch's `named_parameters`).
    fn named_parameters(&self) -> Vec<(String, Parameter)> {
        distinct_parameters(self.as_dyn(), |prefix, name, p| (join(prefix, name), p.clone()))
    }

    /// The parameters' tensors, each shared parameter once: what an optimizer takes.
    fn parameters(&self) -> Vec<Tensor> {
        distinct_parameters(self.as_dyn(), |_, _, p| p.0.clone())
    }

    /// Every buffer with its dotted name (`layer1.0.bn1.running_mean`).
    fn named_buffers(&self) -> Vec<(String, Buffer)> {
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |prefix, part| {
            if let Part::Buffer(name, b) = part {
                out.push((join(prefix, name), b.clone()));
            }
        });
        out
    }

    /// The direct submodules, with their names.
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut out = Vec::new();
        self.visit(&mut Children(&mut out));
        out
    }

    /// Every module, this one first (named `""`), then depth first (PyTorch's `named_modules`).
    fn named_modules(&self) -> Vec<(String, &dyn Module)> {
        let mut out = vec![(String::new(), self.as_dyn())];
        let mut i = 0;
        while i < out.len() {
            let (prefix, module) = (out[i].0.clone(), out[i].1);
            let children: Vec<(String, &dyn Module)> =
                module.named_children().into_iter().map(|(n, m)| (join(&prefix, &n), m)).collect();
            out.splice(i + 1..i + 1, children);
            i += 1;
        }
        out
    }

    /// Sets every [`Training`] flag of the module and its submodules (`train(mode)`).
    fn train(&self, mode: bool) {
        walk(self.as_dyn(), "", &mut |_, part| {
            if let Part::Training(flag) = part {
                flag.set(mode);
            }
        });
    }

    /// `train(false)`.
    fn eval(&self) {
        self.train(false);
    }

    /// Whether the module is in training mode: its first flag's state (`true` without flags).
    fn is_training(&self) -> bool {
        let mut training = None;
        walk(self.as_dyn(), "", &mut |_, part| {
            if let Part::Training(flag) = part {
                training.get_or_insert(flag.get());
            }
        });
        training.unwrap_or(true)
    }

    /// Clears every parameter's gradient (`zero_grad()`, `set_to_none=True`).
    fn zero_grad(&self) -> Result<()> {
        for p in self.parameters() {
            p.set_grad(None)?;
        }
        Ok(())
    }

    /// Sets whether every parameter requires grad (`requires_grad_`).
    fn requires_grad_(&self, requires_grad: bool) -> Result<()> {
        for p in self.parameters() {
            p.requires_grad_(requires_grad)?;
        }
        Ok(())
    }

    /// Calls `f` on every module, children first, then this one (`apply(fn)`).
    fn apply(&self, f: &mut dyn FnMut(&dyn Module)) {
        let mut modules = self.named_modules();
        modules.reverse();
        for (_, m) in modules {
            f(m);
        }
    }

    /// The parameters and persistent buffers by dotted name, in PyTorch's order (`state_dict()`):
    /// shared parameters appear under each name.
    fn state_dict(&self) -> StateDict {
        let mut out = StateDict::new();
        walk(self.as_dyn(), "", &mut |prefix, part| match part {
            Part::Parameter(name, p) => out.insert(join(prefix, name), p.0.clone()),
            Part::Buffer(name, b) if b.persistent => out.insert(join(prefix, name), b.tensor.clone()),
            _ => {}
        });
        out
    }

    /// Copies `state`'s tensors into the module's parameters and persistent buffers
    /// (`load_state_dict`). Everything is checked before anything is written: a shape or dtype
    /// that differs is an error, and so, with `strict`, is a missing or unexpected key; after an
    /// error the module is as it was. Returns the missing and unexpected keys.
    fn load_state_dict(&self, state: &StateDict, strict: bool) -> Result<IncompatibleKeys> {
        super::state_dict::load(self.as_dyn(), state, strict)
    }

    /// Moves every parameter and buffer to `device` (`to(device)`); shared parameters stay
    /// shared, and parameters stay leaves that require grad. Int64 buffers become the device's
    /// integer type (int32 on wgpu, which has no int64).
    fn to_device(&mut self, device: Device) -> Result<()> {
        let mut mover = Mover { device, moved: HashMap::new(), error: None };
        self.visit_mut(&mut mover);
        mover.error.map_or(Ok(()), Err)
    }

    /// The module as `&dyn Module`.
    fn as_dyn(&self) -> &dyn Module;

    /// The module as a [`Layer`](super::Layer) when it has a forward
    /// ([`Forward`](super::Forward)): how a graph's `call_module` node runs a submodule found
    /// by its path. `#[derive(Module)]` writes it.
    fn as_layer(&self) -> Option<&dyn super::Layer> {
        None
    }

    /// The Rust module path the type is defined in (`module_path!()` where `#[derive(Module)]`
    /// was written; empty for modules implemented by hand): how `torchfn::fx`'s default
    /// leaf policy recognises torchfn's own layers, as fx looks at a module's `__module__`.
    fn rust_path(&self) -> &'static str {
        ""
    }

    /// PyTorch's repr: `Name(extra)`, or with submodules one per line, indented.
    fn repr(&self) -> String {
        let children = self.named_children();
        let extra = self.extra_repr();
        if children.is_empty() {
            return format!("{}({extra})", self.type_name());
        }
        let mut lines: Vec<String> = extra.lines().map(str::to_string).collect();
        let reprs: Vec<(String, String)> =
            children.into_iter().map(|(name, child)| (name, child.repr().replace('\n', "\n  "))).collect();
        // A list shows runs of equal modules once, as PyTorch's `ModuleList` does: `(0-1): 2 x ...`.
        let list = self.type_name() == "ModuleList";
        let mut i = 0;
        while i < reprs.len() {
            let run = if list { reprs[i..].iter().take_while(|(_, r)| *r == reprs[i].1).count() } else { 1 };
            let (name, text) = &reprs[i];
            if run > 1 {
                lines.push(format!("({name}-{}): {run} x {text}", reprs[i + run - 1].0));
            } else {
                lines.push(format!("({name}): {text}"));
            }
            i += run;
        }
        format!("{}(\n  {}\n)", self.type_name(), lines.join("\n  "))
    }
}

impl fmt::Display for dyn Module + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

impl fmt::Debug for dyn Module + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

/// Each parameter of `module` once, where the walk first reaches it (shared parameters are
/// reached several times), as `f` makes it from its module's prefix, its name and itself.
fn distinct_parameters<T>(module: &dyn Module, f: impl Fn(&str, &str, &Parameter) -> T) -> Vec<T> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    walk(module, "", &mut |prefix, part| {
        if let Part::Parameter(name, p) = part
            && seen.insert(p.0.identity())
        {
            out.push(f(prefix, name, p));
        }
    });
    out
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}

/// One part of a module, as the walk reports it.
enum Part<'a> {
    Parameter(&'a str, &'a Parameter),
    Buffer(&'a str, &'a Buffer),
    Training(&'a Training),
}

/// Every part of `module` and its submodules, depth first, each module's own parts before its
/// children's (PyTorch's `state_dict` order), with the dotted prefix of the module it is in.
fn walk(module: &dyn Module, prefix: &str, f: &mut dyn FnMut(&str, Part<'_>)) {
    struct Walk<'f, 'p> {
        prefix: &'p str,
        f: &'f mut dyn FnMut(&str, Part<'_>),
        children: Vec<(String, &'p dyn Module)>,
    }
    impl<'p> Visitor<'p> for Walk<'_, 'p> {
        fn parameter(&mut self, name: &str, p: &'p Parameter) {
            (self.f)(self.prefix, Part::Parameter(name, p));
        }
        fn buffer(&mut self, name: &str, b: &'p Buffer) {
            (self.f)(self.prefix, Part::Buffer(name, b));
        }
        fn training(&mut self, flag: &'p Training) {
            (self.f)(self.prefix, Part::Training(flag));
        }
        fn module(&mut self, name: &str, m: &'p dyn Module) {
            self.children.push((join(self.prefix, name), m));
        }
    }
    let mut w = Walk { prefix, f, children: Vec::new() };
    module.visit(&mut w);
    let Walk { f, children, .. } = w;
    for (name, child) in children {
        walk(child, &name, f);
    }
}

struct Children<'a, 'p>(&'a mut Vec<(String, &'p dyn Module)>);

impl<'p> Visitor<'p> for Children<'_, 'p> {
    fn module(&mut self, name: &str, m: &'p dyn Module) {
        self.0.push((name.to_string(), m));
    }
}

/// What a module shows of itself: each method has a default that ignores the part.
pub trait Visitor<'m> {
    /// A parameter of the module, by field name.
    fn parameter(&mut self, name: &str, parameter: &'m Parameter) {
        let _ = (name, parameter);
    }
    /// A buffer of the module.
    fn buffer(&mut self, name: &str, buffer: &'m Buffer) {
        let _ = (name, buffer);
    }
    /// A training flag of the module.
    fn training(&mut self, flag: &'m Training) {
        let _ = flag;
    }
    /// A submodule.
    fn module(&mut self, name: &str, module: &'m dyn Module) {
        let _ = (name, module);
    }
}

/// As [`Visitor`], with each part replaceable.
pub trait VisitorMut {
    /// A parameter of the module.
    fn parameter(&mut self, name: &str, parameter: &mut Parameter) {
        let _ = (name, parameter);
    }
    /// A buffer of the module.
    fn buffer(&mut self, name: &str, buffer: &mut Buffer) {
        let _ = (name, buffer);
    }
    /// A submodule.
    fn module(&mut self, name: &str, module: &mut dyn Module) {
        let _ = (name, module);
    }
}

/// Offers each parameter's and buffer's tensor of `module` and its submodules to `f`, in the
/// order the visitors reach them (a shared one once per place it is held), and holds what `f`
/// gives instead, where it gives something: how `func::functional_call` swaps a module's state.
pub(crate) fn replace_tensors<M: Module + ?Sized>(module: &mut M, f: &mut dyn FnMut(&Tensor) -> Option<Tensor>) {
    struct Replace<'f>(&'f mut dyn FnMut(&Tensor) -> Option<Tensor>);
    impl VisitorMut for Replace<'_> {
        fn parameter(&mut self, _: &str, p: &mut Parameter) {
            if let Some(t) = (self.0)(&p.0) {
                p.0 = t;
            }
        }
        fn buffer(&mut self, _: &str, b: &mut Buffer) {
            if let Some(t) = (self.0)(&b.tensor) {
                b.tensor = t;
            }
        }
        fn module(&mut self, _: &str, m: &mut dyn Module) {
            m.visit_mut(self);
        }
    }
    module.visit_mut(&mut Replace(f));
}

/// Moves parameters and buffers to a device, each shared tensor once.
struct Mover {
    device: Device,
    /// Moved tensors by the identity of the original (shared parameters stay shared).
    moved: HashMap<usize, Tensor>,
    error: Option<crate::Error>,
}

impl Mover {
    fn moved(&mut self, t: &Tensor, parameter: bool) -> Option<Tensor> {
        if self.error.is_some() {
            return None;
        }
        if let Some(done) = self.moved.get(&t.identity()) {
            return Some(done.clone());
        }
        let result = (|| -> Result<Tensor> {
            let _no_grad = crate::autograd::no_grad();
            // Integer buffers (BatchNorm's step count) take the device's integer type.
            let dtype = (t.dtype()? == crate::DType::Int64).then(|| self.device.index_dtype());
            let moved = t.to_device(self.device, dtype, false, false)?;
            if parameter { Parameter::new(&moved).map(|p| p.0) } else { Ok(moved) }
        })();
        match result {
            Ok(moved) => {
                if parameter && moved.identity() != t.identity() {
                    crate::autograd::set_moved_to(t, self.device);
                }
                self.moved.insert(t.identity(), moved.clone());
                Some(moved)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

impl VisitorMut for Mover {
    fn parameter(&mut self, _: &str, p: &mut Parameter) {
        if let Some(moved) = self.moved(&p.0, true) {
            p.0 = moved;
        }
    }
    fn buffer(&mut self, _: &str, b: &mut Buffer) {
        if let Some(moved) = self.moved(&b.tensor, false) {
            b.tensor = moved;
        }
    }
    fn module(&mut self, _: &str, m: &mut dyn Module) {
        m.visit_mut(self);
    }
}

/// How a field of a module shows itself to visitors: parameters, buffers, flags, modules, and
/// `Option`s of them (implemented for every [`Module`], so `Vec`s and arrays of modules too).
pub trait ModuleField {
    /// Shows the field, named `name`, to `visitor`.
    fn visit_field<'m>(&'m self, name: &str, visitor: &mut dyn Visitor<'m>);
    /// Shows the field, replaceable.
    fn visit_field_mut(&mut self, name: &str, visitor: &mut dyn VisitorMut);
}

impl<M: Module> ModuleField for M {
    fn visit_field<'m>(&'m self, name: &str, visitor: &mut dyn Visitor<'m>) {
        visitor.module(name, self.as_dyn());
    }
    fn visit_field_mut(&mut self, name: &str, visitor: &mut dyn VisitorMut) {
        visitor.module(name, self);
    }
}

impl<T: ModuleField> ModuleField for Option<T> {
    fn visit_field<'m>(&'m self, name: &str, visitor: &mut dyn Visitor<'m>) {
        if let Some(field) = self {
            field.visit_field(name, visitor);
        }
    }
    fn visit_field_mut(&mut self, name: &str, visitor: &mut dyn VisitorMut) {
        if let Some(field) = self {
            field.visit_field_mut(name, visitor);
        }
    }
}

/// Implements `Module` for a list type of modules (PyTorch's `ModuleList`): its children are
/// named `0`, `1`...
macro_rules! module_list {
    ($(#[$doc:meta] impl[$($generics:tt)*] $list:ty;)*) => {$(
        #[$doc]
        impl<$($generics)*> Module for $list {
            fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
                for (i, m) in self.iter().enumerate() {
                    visitor.module(&i.to_string(), m.as_dyn());
                }
            }
            fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
                for (i, m) in self.iter_mut().enumerate() {
                    visitor.module(&i.to_string(), m);
                }
            }
            fn type_name(&self) -> &'static str {
                "ModuleList"
            }
            fn as_dyn(&self) -> &dyn Module {
                self
            }
        }
    )*};
}

module_list! {
    /// A `Vec` of modules is a module (PyTorch's `ModuleList`).
    impl[M: Module] Vec<M>;
    /// An array of modules is a module, as a `Vec`.
    impl[M: Module, const N: usize] [M; N];
}

/// A module's learnable tensor (PyTorch's `nn.Parameter`): a leaf that requires grad, an
/// instance of the `Parameter` tensor subclass, whose override hook is disabled as PyTorch's
/// is: operations on it give plain tensors, and it never stands in the way of another
/// argument's override. Clones share the parameter (tied weights).
#[derive(Clone)]
pub struct Parameter(Tensor);

/// The tensor subclass of parameters (hook disabled, like PyTorch's `Parameter`).
#[derive(crate::TensorSubclass)]
#[torchfn(disable_torch_function)]
pub struct ParameterClass;

impl Parameter {
    /// A parameter holding `data`'s values (detached from any history), requiring grad.
    pub fn new(data: &Tensor) -> Result<Parameter> {
        Parameter::with_requires_grad(data, true)
    }

    /// A parameter that requires grad or not (`Parameter(data, requires_grad=False)`).
    pub fn with_requires_grad(data: &Tensor, requires_grad: bool) -> Result<Parameter> {
        let leaf = data.detach()?.requires_grad_(requires_grad)?;
        Ok(Parameter(leaf.as_subclass(ParameterClass)?))
    }

    /// The parameter's tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }
}

impl std::ops::Deref for Parameter {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.0
    }
}

impl fmt::Debug for Parameter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Parameter containing:\n{}", self.0.detach().map_err(|_| fmt::Error)?)
    }
}

impl ModuleField for Parameter {
    fn visit_field<'m>(&'m self, name: &str, visitor: &mut dyn Visitor<'m>) {
        visitor.parameter(name, self);
    }
    fn visit_field_mut(&mut self, name: &str, visitor: &mut dyn VisitorMut) {
        visitor.parameter(name, self);
    }
}

/// A module's tensor that is state but not learnable (PyTorch's `register_buffer`): BatchNorm's
/// running statistics. Persistent buffers are in the state_dict, non-persistent ones are not.
#[derive(Clone)]
pub struct Buffer {
    tensor: Tensor,
    persistent: bool,
}

impl Buffer {
    /// A persistent buffer (`register_buffer(name, tensor)`).
    pub fn new(tensor: Tensor) -> Buffer {
        Buffer { tensor, persistent: true }
    }

    /// A buffer left out of the state_dict (`persistent=False`).
    pub fn non_persistent(tensor: Tensor) -> Buffer {
        Buffer { tensor, persistent: false }
    }

    /// Whether the state_dict holds it.
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// The buffer's tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}

impl std::ops::Deref for Buffer {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

impl ModuleField for Buffer {
    fn visit_field<'m>(&'m self, name: &str, visitor: &mut dyn Visitor<'m>) {
        visitor.buffer(name, self);
    }
    fn visit_field_mut(&mut self, name: &str, visitor: &mut dyn VisitorMut) {
        visitor.buffer(name, self);
    }
}

/// A module's training flag (PyTorch's `self.training`), set by [`Module::train`] and
/// [`Module::eval`] on every module that has one; `true` to begin with.
#[derive(Debug)]
pub struct Training(AtomicBool);

impl Default for Training {
    fn default() -> Self {
        Training(AtomicBool::new(true))
    }
}

impl Training {
    /// Whether the module is training.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the flag.
    pub fn set(&self, training: bool) {
        self.0.store(training, Ordering::Relaxed);
    }
}

impl ModuleField for Training {
    fn visit_field<'m>(&'m self, _: &str, visitor: &mut dyn Visitor<'m>) {
        visitor.training(self);
    }
    fn visit_field_mut(&mut self, _: &str, _: &mut dyn VisitorMut) {}
}

/// What `#[derive(Module)]` uses to write [`Module::as_layer`]: `(&&LayerProbe(m)).probe_layer()`
/// is `Some` when the module's type implements [`Forward`](super::Forward) and `None`
/// otherwise (method resolution tries the impl on `&&LayerProbe<T>`, which needs a forward,
/// before the one on `&LayerProbe<T>`). Not public API.
#[doc(hidden)]
pub mod layer_probe {
    use super::super::Layer;

    /// A module's type, probed for a forward.
    pub struct LayerProbe<'a, T>(pub &'a T);

    /// Chosen when the type has a forward.
    pub trait HasForward<'a> {
        /// The module as a layer.
        fn probe_layer(self) -> Option<&'a dyn Layer>;
    }

    impl<'a, T: Layer> HasForward<'a> for &&LayerProbe<'a, T> {
        fn probe_layer(self) -> Option<&'a dyn Layer> {
            Some(self.0)
        }
    }

    /// Chosen otherwise.
    pub trait NoForward<'a> {
        /// `None`.
        fn probe_layer(self) -> Option<&'a dyn Layer>;
    }

    impl<'a, T> NoForward<'a> for &LayerProbe<'a, T> {
        fn probe_layer(self) -> Option<&'a dyn Layer> {
            None
        }
    }
}
