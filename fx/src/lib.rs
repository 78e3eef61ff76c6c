//! Tracing through the protocol: `torch.fx` for Rust.
//!
//! [`symbolic_trace`] runs a module's forward (or [`symbolic_trace_fn`] a closure) on
//! [`Proxy`] ducks while a mode writes down every overridable call, constructors included,
//! into a [`Graph`] of fx's node kinds: `placeholder`, `get_attr` (parameters, buffers,
//! constants), `call_function`, `call_method`, `call_module` and `output`. Because the tracer
//! sits at the protocol's top layer, the program's own structure is kept: a user's
//! `#[torch_function]` is one node, and a leaf module (torchfn's layers by default) is one
//! `call_module` node; other modules are traced through.
//!
//! The graph can be printed (fx's printout, [`Graph::tabular`]), drawn ([`Graph::to_dot`]),
//! written as Rust source ([`Graph::to_rust`]), edited ([`Graph::insert`],
//! [`Graph::replace_all_uses_with`], [`Graph::erase_node`], [`Graph::eliminate_dead_code`],
//! [`Graph::lint`]; passes below), saved ([`Graph::to_json`], [`GraphModule::save`]) and run
//! ([`GraphModule`], an [`Interpreter`], [`ShapeProp`]).
//!
//! ```
//! use torchfn::fx::{self, Op};
//! use torchfn::nn::{Forward, Layer, Linear, Module, ReLU};
//! use torchfn::prelude::*;
//!
//! #[derive(torchfn::nn::Module)]
//! struct Mlp {
//!     fc: Linear,
//!     act: ReLU,
//! }
//!
//! impl Forward for Mlp {
//!     fn forward(&self, x: &Tensor) -> Result<Tensor> {
//!         let h = self.fc.call(x)?;
//!         &self.act.call(&h)? * 2.0
//!     }
//! }
//!
//! let mlp = Mlp { fc: Linear::new(3, 2, true, &Generator::new())?, act: ReLU::default() };
//! let x = torchfn::ones([4, 3], None, None)?;
//! let eager = mlp.forward(&x)?;
//!
//! let mut gm = fx::symbolic_trace(mlp)?;
//! assert_eq!(gm.graph().to_string(), "\
//! graph():
//!     %input : [num_users=1] = placeholder[target=input]
//!     %fc : [num_users=1] = call_module[target=fc](args = (%input,), kwargs = {})
//!     %act : [num_users=1] = call_module[target=act](args = (%fc,), kwargs = {})
//!     %mul : [num_users=1] = call_function[target=Tensor.__mul__](args = (%act, 2.0), kwargs = {})
//!     return mul
//! ");
//! assert_eq!(gm.forward(&x)?.to_vec::<f32>()?, eager.to_vec::<f32>()?);
//!
//! // A pass: every `* 2.0` becomes `+ 2.0`.
//! let graph = gm.graph_mut();
//! let muls: Vec<_> = graph.nodes().filter(|(_, n)| n.func() == Some(&Tensor::__MUL__)).map(|(id, _)| id).collect();
//! for id in muls {
//!     graph.get_mut(id).unwrap().op = Op::CallFunction(&Tensor::__ADD__);
//! }
//! gm.lint()?;
//! assert_eq!(gm.forward(&x)?.to_vec::<f32>()?, (&(&eager / 2.0)? + 2.0)?.to_vec::<f32>()?);
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! # Passes
//!
//! A pass is a function over a `&mut Graph` (or the [`GraphModule`], to add attributes): find
//! nodes by [`Node::func`] or [`Op`], add new ones with [`Graph::insert`] at
//! [`Position::Before`]/[`Position::After`] an anchor, move the uses of an old node to a new
//! one with [`Graph::replace_all_uses_with`], then [`Graph::eliminate_dead_code`] and
//! [`GraphModule::lint`]. `examples/fx_gpt.rs` swaps every `gelu` for `relu` and fuses
//! `linear` + `relu` into a user's function this way.
//!
//! # Data-dependent code
//!
//! A proxy has no data: reading it (`item()`, `to_vec()`, a value a typed call must return
//! now, such as a shape) is a [`TraceError`](torchfn::ErrorKind::Trace) that names the
//! operation and the ways out: trace with example inputs ([`Tracer::example_inputs`], shapes
//! become known and the graph is specialised to them), make the code a leaf (a
//! `#[torch_function]`, or a leaf module), or pass a concrete value
//! ([`Tracer::concrete_args`]).

#![warn(missing_docs)]

// Generated code names `::torchfn`: the runtime's API with the modules, one crate down.
extern crate torchfn_nn as torchfn;

mod graph;
mod graph_module;
mod interpreter;
mod json;
mod print;
mod rewrite;
mod tracer;

pub use graph::{Argument, Graph, Meta, Node, NodeId, Op, Position};
pub use graph_module::{GraphModule, NoModule};
pub use interpreter::{Interpreter, Run, ShapeProp, execute};
pub use rewrite::replace_pattern;
pub use tracer::{LeafPolicy, Proxy, Tracer, default_leaf, symbolic_trace, symbolic_trace_fn};

use torchfn::{Error, Func, Kwargs, Param, Result, Value};

/// Python's `operator.getitem` on a list or tuple, as a graph calls it for each item of a
/// function's list or tuple result (`split`, `max(dim)`) when tracing with examples.
pub static GETITEM: Func = Func::new(
    "operator",
    "getitem",
    &[Param::new("a", || "object".into(), None, false), Param::new("b", || "int".into(), None, false)],
    "`a[b]` for a list or tuple `a` and an int `b` (Python's `operator.getitem`).",
    getitem,
);

fn getitem(args: &[Value], _: &Kwargs) -> Result<Value> {
    match args {
        [sequence, Value::Int(i)] => {
            let items = sequence
                .as_slice()
                .ok_or_else(|| Error::type_error(format!("'{}' object is not subscriptable", sequence.type_name())))?;
            let at = if *i < 0 { *i + items.len() as i64 } else { *i };
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
                .ok_or_else(|| Error::index_error(format!("{} index out of range", sequence.type_name())))
        }
        _ => Err(Error::type_error("getitem() takes a list or tuple and an int")),
    }
}

/// The function a graph names: [`GETITEM`] or a registered function.
pub fn find_function(qualified_name: &str) -> Option<&'static Func> {
    if qualified_name == "operator.getitem" {
        return Some(&GETITEM);
    }
    torchfn::overrides::find_function(qualified_name)
}

/// What the Rust source of [`Graph::to_rust`] calls. Each is one line over the public API.
pub mod emitted {
    use super::*;
    use torchfn::nn::Module;

    /// Input `i` of the function.
    pub fn input(inputs: &[Value], i: usize) -> Result<Value> {
        inputs.get(i).cloned().ok_or_else(|| Error::type_error(format!("missing input {i}")))
    }

    /// Calls the function with this qualified name ([`find_function`], [`Func::call`]).
    pub fn call(qualified_name: &str, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let func = find_function(qualified_name)
            .ok_or_else(|| Error::value_error(format!("no function '{qualified_name}' is registered")))?;
        func.call(args, kwargs)
    }

    /// The parameter or buffer of `root` at `path`.
    pub fn attr(root: &dyn Module, path: &str) -> Result<Value> {
        graph_module::attributes(root)
            .remove(path)
            .map(Value::Tensor)
            .ok_or_else(|| Error::value_error(format!("{} has no parameter or buffer '{path}'", root.type_name())))
    }

    /// Calls the submodule of `root` at `path` on `args` (one tensor).
    pub fn call_module(root: &dyn Module, path: &str, args: &[Value]) -> Result<Value> {
        graph_module::call_layer(root, path, args, &Kwargs::new())
    }
}
