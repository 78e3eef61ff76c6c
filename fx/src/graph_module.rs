//! A graph with the module it reads from (`torch.fx.GraphModule`): a module whose forward
//! runs the graph, owning the traced module's parameters, so it trains, saves and loads.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use super::graph::{Graph, Op};
use super::interpreter::{Interpreter, Run};
use torchfn::nn::{Buffer, Forward, Layer, Module, StateDict, Visitor, VisitorMut};
use torchfn::{Error, Kwargs, Result, Tensor, Value};

/// A traced program: its [`Graph`] and the module whose parameters, buffers and submodules
/// the graph reads (the traced module itself, owned), plus the constant tensors the program
/// used (`_tensor_constant0`...), kept as buffers.
///
/// As a [`Module`] it shows the traced module's parameters under the same names, so an
/// optimizer trains it and `state_dict` is the traced module's (with the constants); as a
/// [`Forward`] it runs the graph ([`Run`]).
pub struct GraphModule {
    root: Box<dyn Module>,
    graph: Graph,
    constants: Vec<(String, Buffer)>,
    /// The tensors `get_attr` reads, by path; rebuilt after the module changes.
    attrs: OnceLock<HashMap<String, Tensor>>,
}

impl GraphModule {
    pub(crate) fn from_parts(root: Box<dyn Module>, graph: Graph, constants: Vec<(String, Tensor)>) -> GraphModule {
        let constants = constants.into_iter().map(|(name, t)| (name, Buffer::new(t))).collect();
        GraphModule { root, graph, constants, attrs: OnceLock::new() }
    }

    /// A graph module made by hand: `graph` reading from `root`. The graph is checked
    /// ([`Graph::lint`]), and so is every `get_attr` and `call_module` target.
    pub fn new(root: impl Module + 'static, graph: Graph) -> Result<GraphModule> {
        let gm = GraphModule::from_parts(Box::new(root), graph, Vec::new());
        gm.check()?;
        Ok(gm)
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph, to edit it (a pass). Check the result with [`lint`](GraphModule::lint).
    pub fn graph_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }

    /// The module the graph reads from (for a traced function, an empty one).
    pub fn root(&self) -> &dyn Module {
        &*self.root
    }

    /// Checks the graph ([`Graph::lint`]) and that every attribute and submodule it names
    /// exists.
    pub fn lint(&self) -> Result<()> {
        self.check()
    }

    fn check(&self) -> Result<()> {
        self.graph.lint()?;
        for (_, node) in self.graph.nodes() {
            match &node.op {
                Op::GetAttr(path) => {
                    self.attribute(path)?;
                }
                Op::CallModule(path) => {
                    self.layer(path)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Runs the graph on `inputs`, one per placeholder.
    pub fn call(&self, inputs: &[Value]) -> Result<Value> {
        Run(self).run(inputs)
    }

    /// The parameter, buffer or constant at a dotted path (`transformer.wte.weight`).
    pub fn attribute(&self, path: &str) -> Result<Tensor> {
        let attrs = self.attrs.get_or_init(|| attributes(self));
        attrs.get(path).cloned().ok_or_else(|| {
            Error::new(torchfn::ErrorKind::Value, format!("GraphModule has no parameter, buffer or constant '{path}'"))
        })
    }

    /// The submodule at a dotted path (`transformer.h.0.ln_1`), as a layer it can call.
    pub fn layer(&self, path: &str) -> Result<&dyn Layer> {
        submodule(self.root(), path)
    }

    /// Calls the submodule at `path` on `args` (one tensor), as a `call_module` node does.
    pub fn call_submodule(&self, path: &str, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        call_layer(self.root(), path, args, kwargs)
    }

    /// The graph as the source of a Rust function that calls torchfn
    /// ([`Graph::to_rust`]).
    pub fn to_rust(&self, name: &str) -> Result<String> {
        self.graph.to_rust(name)
    }

    /// Writes the graph module to the directory `dir` (created if missing): `graph.json`
    /// ([`Graph::to_json`]) and `state_dict.safetensors` (every parameter, buffer and
    /// constant).
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::os_error(format!("{}: {e}", dir.display())))?;
        let json = self.graph.to_json()?;
        let path = dir.join("graph.json");
        std::fs::write(&path, json).map_err(|e| Error::os_error(format!("{}: {e}", path.display())))?;
        torchfn::safetensors::save_file(&self.state_dict(), dir.join("state_dict.safetensors"))
    }

    /// Reads a graph module [`save`](GraphModule::save) wrote, onto `root`: a module of the
    /// traced type, whose weights are then loaded from the file (Rust cannot make a module
    /// of a type from a file; [`NoModule`] for a traced function). Every key must match.
    pub fn load(dir: impl AsRef<Path>, root: impl Module + 'static) -> Result<GraphModule> {
        let dir = dir.as_ref();
        let path = dir.join("graph.json");
        let json = std::fs::read_to_string(&path).map_err(|e| Error::os_error(format!("{}: {e}", path.display())))?;
        let graph = Graph::from_json(&json)?;
        let state = torchfn::safetensors::load_file(dir.join("state_dict.safetensors"))?;
        let root_keys: Vec<String> = root.state_dict().keys().map(str::to_string).collect();
        let mut own = StateDict::new();
        let mut constants = Vec::new();
        for (name, t) in state.iter() {
            if root_keys.iter().any(|k| k == name) {
                own.insert(name, t.clone());
            } else {
                constants.push((name.to_string(), t.clone()));
            }
        }
        root.load_state_dict(&own, true)?;
        let gm = GraphModule::from_parts(Box::new(root), graph, constants);
        gm.check()?;
        Ok(gm)
    }
}

impl Module for GraphModule {
    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
        self.root.visit(visitor);
        for (name, b) in &self.constants {
            visitor.buffer(name, b);
        }
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        self.attrs = OnceLock::new();
        self.root.visit_mut(visitor);
        for (name, b) in &mut self.constants {
            visitor.buffer(name, b);
        }
    }

    fn type_name(&self) -> &'static str {
        "GraphModule"
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn as_layer(&self) -> Option<&dyn Layer> {
        Some(self)
    }
}

/// Runs the graph on one input; its output must be a tensor.
impl Forward for GraphModule {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.call(&[Value::Tensor(input.clone())])?.to::<Tensor>()
    }
}

/// Every parameter and buffer of `module` by dotted name.
pub(super) fn attributes(module: &dyn Module) -> HashMap<String, Tensor> {
    let mut map = HashMap::new();
    for (name, p) in module.named_parameters() {
        map.insert(name, p.tensor().clone());
    }
    for (name, b) in module.named_buffers() {
        map.insert(name, b.tensor().clone());
    }
    map
}

/// The submodule of `root` at a dotted path (`transformer.h.0.ln_1`), as a layer to call.
pub(super) fn submodule<'m>(root: &'m dyn Module, path: &str) -> Result<&'m dyn Layer> {
    let mut module = root;
    for part in path.split('.') {
        module =
            module.named_children().into_iter().find(|(name, _)| name == part).map(|(_, m)| m).ok_or_else(|| {
                Error::value_error(format!("{} has no submodule '{path}' ('{part}' is missing)", root.type_name()))
            })?;
    }
    module.as_layer().ok_or_else(|| {
        Error::type_error(format!(
            "the submodule '{path}' ({}) has no forward, so a call_module node cannot run it",
            module.type_name()
        ))
    })
}

/// Calls the submodule of `root` at `path` on `args` (one tensor), as a `call_module` node does.
pub(super) fn call_layer(root: &dyn Module, path: &str, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
    let layer = submodule(root, path)?;
    match (args, kwargs.is_empty()) {
        ([Value::Tensor(input)], true) => Ok(Value::Tensor(layer.call(input)?)),
        _ => Err(Error::type_error(format!(
            "the module '{path}' takes one tensor, not ({})",
            args.iter().map(Value::type_name).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The module of a traced function: nothing in it.
pub struct NoModule;

impl Module for NoModule {
    fn visit<'m>(&'m self, _: &mut dyn Visitor<'m>) {}
    fn visit_mut(&mut self, _: &mut dyn VisitorMut) {}
    fn type_name(&self) -> &'static str {
        "Module"
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

impl std::fmt::Display for GraphModule {
    /// The module's repr, then its graph's code, as fx prints a GraphModule.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n\n{}", self.repr(), self.graph)
    }
}

impl std::fmt::Debug for GraphModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
