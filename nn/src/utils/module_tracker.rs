//! Which modules a program is in, forward and backward (`torch.utils.module_tracker`):
//! [`ModuleTracker`] follows module calls through global module hooks, and the backward pass
//! through multi-grad hooks on the modules' inputs and outputs, as PyTorch's does, so a tool
//! (the [FLOP counter](super::flop_counter)) can charge what runs to the modules running it.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use torchfn::nn::{self, Forward, Layer, Linear, Module, ModuleHooks};
//! use torchfn::prelude::*;
//! use torchfn::utils::module_tracker::ModuleTracker;
//!
//! #[derive(Module)]
//! struct Net {
//!     fc: Linear,
//! }
//!
//! impl Forward for Net {
//!     fn forward(&self, x: &Tensor) -> Result<Tensor> {
//!         nn::functional::relu(&self.fc.call(x)?, false)
//!     }
//! }
//!
//! let net = Net { fc: Linear::new(3, 2, true, &Generator::new().manual_seed(0))? };
//! let tracker = Arc::new(ModuleTracker::new());
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let (t, log) = (tracker.clone(), seen.clone());
//! // The tracker's global hooks run before a module's own: fc is entered by now.
//! let hook = net.fc.register_forward_pre_hook(move |_, _| {
//!     log.lock().unwrap().push(t.parents().into_iter().collect::<Vec<_>>());
//!     Ok(None)
//! });
//! net.call(&torchfn::ones([1, 3], None, None)?)?;
//! drop(hook);
//! assert_eq!(*seen.lock().unwrap(), [vec!["Global", "Net", "Net.fc"]]);
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::thread::{self, ThreadId};

use parking_lot::Mutex;

use crate::Tensor;
use crate::autograd::graph::{MultiGradMode, in_backward, queue_callback, register_multi_grad_hook};
use crate::error::Result;
use crate::modules::{
    Module, RemovableHandle, module_key, register_module_forward_hook, register_module_forward_pre_hook,
};

type Key = crate::modules::ModuleKey;

/// Tracks the modules the program is in (PyTorch's `ModuleTracker`), from its creation until
/// it is dropped, on the thread that created it. A module is named, the first time it is
/// called, by its type (`GPT2LMHeadModel`), and its submodules by their paths under it
/// (`GPT2LMHeadModel.transformer.h.0.attn`).
///
/// In the backward pass a module is entered when the gradients of its outputs are ready and
/// left when those of its inputs are, as PyTorch's tracker does it, with PyTorch's results: a
/// module that returns its input (a dropout of probability 0) is entered and never left until
/// the backward ends, and a module whose input also feeds others (a residual's downsample) is
/// left only when every gradient of that input is in.
pub struct ModuleTracker {
    state: Arc<Mutex<State>>,
    /// The global module hooks it follows calls with (removed when it is dropped).
    _hooks: [RemovableHandle; 2],
}

struct State {
    /// The names are shared with `names` (entering a module allocates nothing).
    parents: BTreeSet<Arc<str>>,
    /// Each module's name, and whether its submodules are named yet (it has been called).
    names: HashMap<Key, (Arc<str>, bool)>,
    /// Whether the backward running resets the parents when it ends.
    has_callback: bool,
    thread: ThreadId,
}

impl State {
    /// PyTorch's `_get_mod_name`: the module's name, naming its submodules the first time.
    fn name_of(&mut self, module: &dyn Module) -> Arc<str> {
        let (name, seen) = self.names.entry(module_key(module)).or_insert_with(|| (module.type_name().into(), false));
        if std::mem::replace(seen, true) {
            return name.clone();
        }
        let name = name.clone();
        for (child_name, child) in module.named_children() {
            // Renamed under this module; one already called keeps its submodules' names.
            let path: Arc<str> = format!("{name}.{child_name}").into();
            self.names.entry(module_key(child)).and_modify(|(name, _)| *name = path.clone()).or_insert((path, false));
            self.name_of(child);
        }
        name
    }
}

/// Enters `name`, in the backward pass arranging for the parents to reset when it ends.
fn enter(state: &Arc<Mutex<State>>, name: &Arc<str>, backward: bool) {
    let mut s = state.lock();
    if backward && !s.has_callback {
        let weak = Arc::downgrade(state);
        let queued = queue_callback(move || {
            if let Some(state) = weak.upgrade() {
                let mut s = state.lock();
                s.parents = BTreeSet::from([Arc::from("Global")]);
                s.has_callback = false;
            }
            Ok(())
        });
        s.has_callback = queued.is_ok();
    }
    s.parents.insert(name.clone());
}

/// Leaves `name` (nothing when it was not entered: PyTorch logs that and goes on).
fn leave(state: &Arc<Mutex<State>>, name: &Arc<str>) {
    state.lock().parents.remove(&**name);
}

/// Those of `tensors` that require grad.
fn requiring_grad(tensors: &[Tensor]) -> Vec<Tensor> {
    tensors.iter().filter(|t| t.requires_grad().unwrap_or(false)).cloned().collect()
}

/// Runs `f(state, name)` on the tensors' gradients in the backward pass, once all are in.
fn on_gradients(
    state: &Arc<Mutex<State>>,
    tensors: &[Tensor],
    name: Arc<str>,
    f: fn(&Arc<Mutex<State>>, &Arc<str>),
) -> Result<()> {
    let tensors = requiring_grad(tensors);
    if tensors.is_empty() {
        return Ok(());
    }
    let state = state.clone();
    register_multi_grad_hook(&tensors, MultiGradMode::All, move |_| {
        f(&state, &name);
        Ok(())
    })
}

impl ModuleTracker {
    /// A tracker following module calls from now until it is dropped, on this thread.
    pub fn new() -> ModuleTracker {
        let state = Arc::new(Mutex::new(State {
            parents: BTreeSet::from([Arc::from("Global")]),
            names: HashMap::new(),
            has_callback: false,
            thread: thread::current().id(),
        }));
        let ours = {
            let state = state.clone();
            move || state.lock().thread == thread::current().id()
        };
        let pre = {
            let (state, ours) = (state.clone(), ours.clone());
            register_module_forward_pre_hook(move |module, inputs| {
                if ours() {
                    let name = state.lock().name_of(module);
                    enter(&state, &name, false);
                    on_gradients(&state, inputs, name, leave)?;
                }
                Ok(None)
            })
        };
        let post = {
            let state = state.clone();
            register_module_forward_hook(move |module, _, outputs| {
                if ours() {
                    let name = state.lock().name_of(module);
                    leave(&state, &name);
                    on_gradients(&state, outputs, name, |state, name| enter(state, name, true))?;
                }
                Ok(None)
            })
        };
        ModuleTracker { state, _hooks: [pre, post] }
    }

    /// The modules the program is in now, `Global` always among them.
    pub fn parents(&self) -> BTreeSet<String> {
        self.state.lock().parents.iter().map(|name| name.to_string()).collect()
    }

    /// Runs `f` on the name of each module the program is in now (`Global` among them), without
    /// copying the names.
    pub(crate) fn for_each_parent(&self, f: impl FnMut(&Arc<str>)) {
        self.state.lock().parents.iter().for_each(f);
    }

    /// Whether the program is in a backward pass.
    pub fn is_bw(&self) -> bool {
        in_backward()
    }
}

impl Default for ModuleTracker {
    fn default() -> Self {
        ModuleTracker::new()
    }
}
