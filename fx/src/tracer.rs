//! Symbolic tracing (`torch.fx.symbolic_trace`): the program runs on [`Proxy`] ducks while a
//! mode writes down every overridable call it makes, constructors included, and
//! [`Layer::call`] reports module calls, so leaves become one `call_module` node.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::graph::{Argument, Graph, NodeId, Op};
use super::graph_module::GraphModule;
use torchfn::nn::{Layer, Module, ModuleCallHook, install_module_call_hook, module_key};
use torchfn::{
    Class, Error, ErrorKind, Func, FuncKind, Kwargs, Outcome, Result, Tensor, ToValue, TorchFunction,
    TorchFunctionMode, Types, Value, push_mode,
};

/// A duck tensor standing for a node's result while tracing (fx's `Proxy`). Every overridable
/// call that receives one is written down instead of computed. With example inputs
/// ([`Tracer::example_inputs`]) a proxy also carries the value the example computes, so that
/// the program can read shapes.
#[derive(torchfn::DuckTensor)]
#[torchfn(data_error = Proxy::read)]
pub struct Proxy {
    trace: u64,
    node: NodeId,
    name: String,
    example: Option<Tensor>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proxy({})", self.name)
    }
}

impl Proxy {
    /// The node this proxy stands for.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value the example inputs compute here, when tracing with examples.
    pub fn example(&self) -> Option<&Tensor> {
        self.example.as_ref()
    }

    /// The error of code that reads the value a proxy stands for (its data, or an override's
    /// result its caller must have now).
    fn read(&self, what: &str) -> Error {
        reading_a_proxy(what)
    }
}

/// A proxy is only ever handled by its tracer's mode; reaching its own hook means the trace
/// it belongs to is over.
impl TorchFunction for Proxy {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let name = args
            .iter()
            .chain(kwargs.iter().map(|(_, v)| v))
            .find_map(|v| v.duck::<Proxy>())
            .map_or_else(String::new, |p| format!(" {}", p.name));
        Err(Error::new(
            ErrorKind::Trace,
            format!(
                "the Proxy{name} was passed to {func} outside the trace that made it: proxies stand for values of a \
                 graph being traced and have no data; run the traced GraphModule instead"
            ),
        ))
    }
}

/// The `TraceError` for reading what a proxy stands for while tracing: `what` (such as
/// "`Tensor.item` needs a Scalar") names the operation.
pub(crate) fn reading_a_proxy(what: &str) -> Error {
    Error::new(
        ErrorKind::Trace,
        format!(
            "symbolically traced variables cannot be read while tracing: {what}, but a Proxy stands for a value the \
             graph computes later (data-dependent control flow or a shape read). Trace with example inputs \
             (Tracer::example_inputs) so that shapes are known, make the code that reads the value a leaf (a \
             #[torch_function] or a leaf module), or pass the value as a concrete argument (Tracer::concrete_args)"
        ),
    )
}

/// Which modules a trace records as one `call_module` node instead of tracing through
/// (fx's `is_leaf_module`).
pub type LeafPolicy = dyn Fn(&dyn Module, &str) -> bool;

/// fx's default: torchfn's own layers (`Linear`, `LayerNorm`, `Conv2d`...) are leaves, and
/// containers (`Sequential`, lists) and the user's modules are traced through.
pub fn default_leaf(module: &dyn Module, _path: &str) -> bool {
    module.rust_path().starts_with("torchfn_nn::") && module.as_layer().is_some()
}

/// Functions whose result depends only on shapes, dtypes and devices: answered from the
/// examples when tracing with them, never written down.
fn reads_metadata(func: &Func) -> bool {
    func.kind() == FuncKind::Property
        || (func.namespace() == "Tensor"
            && matches!(func.name(), "size" | "dim" | "numel" | "ndimension" | "nelement" | "is_contiguous"))
}

/// A configurable tracer (`torch.fx.Tracer`): which modules are leaves, which functions are
/// traced through, input names, example inputs and concrete arguments.
///
/// ```
/// use torchfn::fx::Tracer;
/// let gm = Tracer::new().trace_fn(&["x"], |x| (&x[0] * 2.0)?.relu())?;
/// assert_eq!(gm.graph().len(), 4); // x, mul, relu, output
/// let y = gm.call(&[torchfn::tensor([-1.0f32, 3.0])?.into()])?;
/// assert_eq!(y.as_tensor().unwrap().to_vec::<f32>()?, [0.0, 6.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct Tracer {
    leaf: Rc<LeafPolicy>,
    trace_through: Vec<&'static Func>,
    input_name: String,
    examples: Option<Vec<Tensor>>,
    concrete: Vec<(usize, Tensor)>,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

impl Tracer {
    /// A tracer with fx's defaults: torchfn's layers are leaves, every overridable function
    /// (a user's `#[torch_function]` included) is one node, no examples.
    pub fn new() -> Tracer {
        Tracer {
            leaf: Rc::new(default_leaf),
            trace_through: Vec::new(),
            input_name: "input".to_string(),
            examples: None,
            concrete: Vec::new(),
        }
    }

    /// Decides which modules are leaves: `policy(module, path)` is true for a module to record
    /// as one `call_module` node (fx's `is_leaf_module`).
    pub fn leaf_modules(mut self, policy: impl Fn(&dyn Module, &str) -> bool + 'static) -> Tracer {
        self.leaf = Rc::new(policy);
        self
    }

    /// Traces through `func` (a user's `#[torch_function]`) instead of recording it as one
    /// node: its body's calls are recorded (the opposite of fx's `wrap`).
    pub fn trace_through(mut self, func: &'static Func) -> Tracer {
        self.trace_through.push(func);
        self
    }

    /// Names a traced module's input (its placeholder); `input` by default. A traced
    /// function's inputs are named by [`trace_fn`](Tracer::trace_fn)'s `names`.
    pub fn input_name(mut self, name: impl Into<String>) -> Tracer {
        self.input_name = name.into();
        self
    }

    /// Traces with example inputs: each proxy carries the value the examples compute, so the
    /// program can read shapes, dtypes and devices (the graph is then specialised to them, as
    /// fx's concrete tracing is). Reading data (`item`, `to_vec`) is still a `TraceError`. The
    /// program runs once on the examples, with gradients off: random streams advance and
    /// modules in training mode update their running statistics, as a forward would.
    pub fn example_inputs(mut self, examples: impl IntoIterator<Item = Tensor>) -> Tracer {
        self.examples = Some(examples.into_iter().collect());
        self
    }

    /// Passes a real tensor as input `index` (fx's `concrete_args`): the program sees the
    /// tensor itself, may read it, and the graph bakes in what it computes from it. The input
    /// keeps its placeholder so that the graph is called with as many inputs.
    pub fn concrete_args(mut self, index: usize, value: Tensor) -> Tracer {
        self.concrete.push((index, value));
        self
    }

    /// Traces `module`'s forward into a [`GraphModule`] that owns the module.
    pub fn trace<M: Layer + 'static>(&self, module: M) -> Result<GraphModule> {
        // The root's own forward is always traced through, whatever the leaf policy says of it.
        let (graph, constants) =
            self.record(Some(&module), &[&self.input_name], |inputs| Ok(module.forward(&inputs[0])?.to_value()))?;
        Ok(GraphModule::from_parts(Box::new(module), graph, constants))
    }

    /// Traces a function of tensors (a closure) into a [`GraphModule`] with no module: one
    /// placeholder per name in `names`, in order.
    pub fn trace_fn<R: ToValue>(&self, names: &[&str], f: impl FnOnce(&[Tensor]) -> Result<R>) -> Result<GraphModule> {
        let (graph, constants) = self.record(None, names, |inputs| Ok(f(inputs)?.to_value()))?;
        Ok(GraphModule::from_parts(Box::new(super::graph_module::NoModule), graph, constants))
    }

    /// Runs `program` on proxies, with the mode and the module-call hook installed, and returns
    /// the graph and the constant tensors it reads.
    fn record(
        &self,
        root: Option<&dyn Layer>,
        names: &[&str],
        program: impl FnOnce(&[Tensor]) -> Result<Value>,
    ) -> Result<(Graph, Vec<(String, Tensor)>)> {
        static TRACES: AtomicU64 = AtomicU64::new(1);
        let mut state = State {
            graph: Graph::new(),
            trace: TRACES.fetch_add(1, Ordering::Relaxed),
            attrs: HashMap::new(),
            attr_nodes: HashMap::new(),
            constants: Vec::new(),
            modules: HashMap::new(),
            leaf: self.leaf.clone(),
            trace_through: self.trace_through.clone(),
            examples: self.examples.is_some(),
            paused: false,
        };
        if let Some(examples) = &self.examples
            && examples.len() != names.len()
        {
            return Err(Error::value_error(format!(
                "example_inputs: the traced program takes {} inputs, {} examples were given",
                names.len(),
                examples.len()
            )));
        }
        if let Some(root) = root {
            let root = root.as_dyn();
            for (name, p) in root.named_parameters() {
                state.attrs.entry(p.identity()).or_insert(name);
            }
            for (name, b) in root.named_buffers() {
                state.attrs.entry(b.identity()).or_insert(name);
            }
            for (path, m) in root.named_modules() {
                state.modules.entry(module_key(m)).or_insert(path);
            }
        }
        let mut proxies = Vec::with_capacity(names.len());
        for (i, &name) in names.iter().enumerate() {
            let node = state.graph.create_node(Op::Placeholder(name.to_string()), vec![], vec![], name);
            let concrete = self.concrete.iter().find(|(at, _)| *at == i).map(|(_, t)| t.clone());
            let example = match &self.examples {
                Some(examples) => Some(torchfn::clone(&examples[i].detach()?)?),
                None => None,
            };
            proxies.push(concrete.unwrap_or_else(|| state.proxy(node, example)));
        }
        let state = Rc::new(RefCell::new(state));
        let result = {
            let _mode = push_mode(TraceMode(state.clone()));
            let _hook = install_module_call_hook(Some(Rc::new(TraceMode(state.clone()))));
            program(&proxies)
        }?;
        let mut state = Rc::try_unwrap(state)
            .map_err(|_| {
                Error::runtime_error(
                    "fx: the traced program kept the tracer's mode (from mode_stack or pop_mode) after the trace",
                )
            })?
            .into_inner();
        let output = state.argument(&result)?;
        state.graph.create_node(Op::Output, vec![output], vec![], "output");
        Ok((state.graph, state.constants))
    }
}

/// Traces `module` with the default [`Tracer`] (`torch.fx.symbolic_trace`).
///
/// ```
/// use torchfn::nn::{Linear, Module};
/// use torchfn::Generator;
/// let gm = torchfn::fx::symbolic_trace(Linear::new(3, 2, true, &Generator::new())?)?;
/// assert_eq!(gm.graph().to_string(), "\
/// graph():
///     %input : [num_users=1] = placeholder[target=input]
///     %weight : [num_users=1] = get_attr[target=weight]
///     %bias : [num_users=1] = get_attr[target=bias]
///     %linear : [num_users=1] = call_function[target=torchfn.nn.functional.linear](args = (%input, %weight, %bias), kwargs = {})
///     return linear
/// ");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn symbolic_trace<M: Layer + 'static>(module: M) -> Result<GraphModule> {
    Tracer::new().trace(module)
}

/// Traces a function of tensors with the default [`Tracer`]: `names` name its inputs.
pub fn symbolic_trace_fn<R: ToValue>(names: &[&str], f: impl FnOnce(&[Tensor]) -> Result<R>) -> Result<GraphModule> {
    Tracer::new().trace_fn(names, f)
}

/// What one trace knows.
struct State {
    graph: Graph,
    trace: u64,
    /// The root's parameters and buffers by tensor identity, with their dotted names.
    attrs: HashMap<usize, String>,
    /// The `get_attr` node of each attribute read so far.
    attr_nodes: HashMap<String, NodeId>,
    /// Tensors the program used that are not the module's: `_tensor_constant0`...
    constants: Vec<(String, Tensor)>,
    /// The root's modules by [`module_key`], with their paths.
    modules: HashMap<(usize, &'static str), String>,
    leaf: Rc<LeafPolicy>,
    trace_through: Vec<&'static Func>,
    examples: bool,
    /// True while a leaf module runs on the examples: calls then just run.
    paused: bool,
}

impl State {
    fn proxy(&self, node: NodeId, example: Option<Tensor>) -> Tensor {
        let name = self.graph.node(node).name().to_string();
        Tensor::from_duck(Proxy { trace: self.trace, node, name, example })
    }

    /// Whether `value` holds a proxy of this trace or an attribute of the root.
    fn involves(&self, value: &Value) -> bool {
        match value {
            Value::Tensor(t) => match t.duck::<Proxy>() {
                Some(_) => true,
                None => !t.is_duck() && self.attrs.contains_key(&t.identity()),
            },
            Value::List(items) | Value::Tuple(items) => items.iter().any(|v| self.involves(v)),
            _ => false,
        }
    }

    /// The graph argument for a value of the program: proxies become their nodes, the root's
    /// parameters and buffers `get_attr` nodes, other tensors constants read by `get_attr`.
    fn argument(&mut self, value: &Value) -> Result<Argument> {
        Ok(match value {
            Value::Tensor(t) => {
                if let Some(p) = t.duck::<Proxy>() {
                    if p.trace != self.trace {
                        return Err(Error::new(
                            ErrorKind::Trace,
                            format!("the Proxy {} belongs to another trace and cannot be used in this one", p.name),
                        ));
                    }
                    return Ok(Argument::Node(p.node));
                }
                if t.is_duck() {
                    return Err(Error::new(
                        ErrorKind::Trace,
                        format!(
                            "a {} duck cannot be a constant of a graph: only tensors can",
                            torchfn::Class::of(t).name()
                        ),
                    ));
                }
                let path = match self.attrs.get(&t.identity()) {
                    Some(path) => path.clone(),
                    None => {
                        let path = format!("_tensor_constant{}", self.constants.len());
                        self.attrs.insert(t.identity(), path.clone());
                        self.constants.push((path.clone(), t.detach()?));
                        path
                    }
                };
                Argument::Node(self.attr_node(&path))
            }
            Value::List(items) => Argument::List(items.iter().map(|v| self.argument(v)).collect::<Result<_>>()?),
            Value::Tuple(items) => Argument::Tuple(items.iter().map(|v| self.argument(v)).collect::<Result<_>>()?),
            other => Argument::Const(other.clone()),
        })
    }

    fn attr_node(&mut self, path: &str) -> NodeId {
        if let Some(&node) = self.attr_nodes.get(path) {
            return node;
        }
        let node = self.graph.create_node(Op::GetAttr(path.to_string()), vec![], vec![], path);
        self.attr_nodes.insert(path.to_string(), node);
        node
    }

    /// What the examples hold in place of the proxies in `value`.
    fn example_of(&self, value: &Value) -> Value {
        match value {
            Value::Tensor(t) => match t.duck::<Proxy>() {
                Some(Proxy { example: Some(e), .. }) => Value::Tensor(e.clone()),
                _ => value.clone(),
            },
            Value::List(items) => Value::List(items.iter().map(|v| self.example_of(v)).collect()),
            Value::Tuple(items) => Value::Tuple(items.iter().map(|v| self.example_of(v)).collect()),
            other => other.clone(),
        }
    }

    /// The program's view of a recorded node's result: a proxy, carrying the example's value
    /// when there is one; a list or tuple of tensors becomes one `getitem` node per item.
    fn result(&mut self, node: NodeId, example: Option<Value>) -> Value {
        match example {
            None => Value::Tensor(self.proxy(node, None)),
            Some(Value::Tensor(t)) => Value::Tensor(self.proxy(node, Some(t))),
            Some(Value::List(items)) => Value::List(self.items(node, items)),
            Some(Value::Tuple(items)) => Value::Tuple(self.items(node, items)),
            Some(other) => other,
        }
    }

    fn items(&mut self, node: NodeId, items: Vec<Value>) -> Vec<Value> {
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let args = vec![Argument::Node(node), Argument::Const(Value::Int(i as i64))];
                let getitem = self.graph.create_node(Op::CallFunction(&super::GETITEM), args, vec![], "getitem");
                self.result(getitem, Some(item))
            })
            .collect()
    }
}

/// The tracer's mode (and module-call hook): writes down each call that involves a proxy or
/// the root's attributes, and each constructor.
struct TraceMode(Rc<RefCell<State>>);

impl TorchFunctionMode for TraceMode {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        if self.0.borrow().paused {
            return func.call(args, kwargs);
        }
        if self.0.borrow().trace_through.contains(&func) {
            let _again = push_mode(TraceMode(self.0.clone()));
            return func.implementation(args, kwargs);
        }
        let (involved, examples) = {
            let state = self.0.borrow();
            // Printing during a trace prints; it is no step of the program.
            let printing = func == Tensor::__REPR__ || func == Tensor::__FORMAT__;
            let involved = !printing
                && (func.ignored().is_some()
                    || args.iter().any(|v| state.involves(v))
                    || kwargs.iter().any(|(_, v)| state.involves(v)));
            (involved, state.examples)
        };
        if !involved {
            return func.call(args, kwargs);
        }
        let example = if examples {
            let state = self.0.borrow();
            let args: Vec<Value> = args.iter().map(|v| state.example_of(v)).collect();
            let mut ex_kwargs = Kwargs::new();
            for (k, v) in kwargs.iter() {
                ex_kwargs.insert(k, state.example_of(v));
            }
            drop(state);
            let _no_grad = torchfn::autograd::no_grad();
            let value = func.call(&args, &ex_kwargs)?;
            if reads_metadata(func) {
                return Ok(value);
            }
            if !holds_tensor(&value) {
                return Err(reading_a_proxy(&format!("{func} returned {} to the program", value.type_name())));
            }
            Some(value)
        } else {
            None
        };
        let mut state = self.0.borrow_mut();
        let args = args.iter().map(|v| state.argument(v)).collect::<Result<Vec<_>>>()?;
        let kwargs = kwargs.iter().map(|(k, v)| Ok((k.to_string(), state.argument(v)?))).collect::<Result<Vec<_>>>()?;
        let node = state.graph.create_node(Op::call(func), args, kwargs, &node_name(func));
        Ok(state.result(node, example))
    }

    fn name(&self) -> String {
        "fx.Tracer".to_string()
    }
}

impl ModuleCallHook for TraceMode {
    fn call_module(&self, module: &dyn Layer, input: &Tensor) -> Result<Tensor> {
        let path = {
            let state = self.0.borrow();
            if state.paused {
                None
            } else {
                state
                    .modules
                    .get(&module_key(module.as_dyn()))
                    .cloned()
                    .filter(|path| (state.leaf)(module.as_dyn(), path))
            }
        };
        let Some(path) = path else {
            return module.forward(input);
        };
        let example = match input.duck::<Proxy>() {
            Some(Proxy { example: Some(e), .. }) => {
                self.0.borrow_mut().paused = true;
                let out = {
                    let _no_grad = torchfn::autograd::no_grad();
                    module.forward(e)
                };
                self.0.borrow_mut().paused = false;
                Some(out?.to_value())
            }
            _ => None,
        };
        let mut state = self.0.borrow_mut();
        let arg = state.argument(&input.to_value())?;
        let node = state.graph.create_node(Op::CallModule(path.clone()), vec![arg], vec![], &path);
        state.result(node, example).to::<Tensor>()
    }
}

fn holds_tensor(value: &Value) -> bool {
    match value {
        Value::Tensor(_) => true,
        Value::List(items) | Value::Tuple(items) => items.iter().any(holds_tensor),
        _ => false,
    }
}

/// A node's name for a call of `func`: its name, without an operator's underscores
/// (`Tensor.__add__` gives `add`, `Tensor.shape.__get__` gives `shape`).
fn node_name(func: &Func) -> String {
    let name = func.name();
    let name = name.strip_suffix(".__get__").unwrap_or(name);
    name.trim_matches('_').to_string()
}
