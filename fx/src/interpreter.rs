//! Running a graph node by node with real values (`torch.fx.Interpreter`), and the shape
//! propagation built on it (`ShapeProp`).

use super::graph::{Argument, Meta, Node, NodeId, Op};
use super::graph_module::GraphModule;
use torchfn::{Error, Func, Kwargs, Result, Value};

/// Executes a [`GraphModule`]'s graph through the protocol: each `call_function` and
/// `call_method` node is the function called by name ([`Func::call`]), so hooks and modes see
/// every call, as in eager code. Each node kind has a method to override; `run` walks the
/// nodes, frees each value after its last use, and returns the output.
///
/// ```
/// use torchfn::fx::{Interpreter, Node, Run};
/// use torchfn::{Func, Kwargs, Result, Value};
///
/// /// Counts the calls as it runs them.
/// struct Counting<'g>(Run<'g>, usize);
/// impl<'g> Interpreter<'g> for Counting<'g> {
///     fn module(&self) -> &'g torchfn::fx::GraphModule {
///         self.0.module()
///     }
///     fn call_function(&mut self, node: &'g Node, func: &'static Func, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
///         self.1 += 1;
///         func.call(args, kwargs)
///     }
/// }
///
/// let gm = torchfn::fx::symbolic_trace_fn(&["x"], |x| &(&x[0] + 1.0)? * 2.0)?;
/// let mut counting = Counting(Run(&gm), 0);
/// let y = counting.run(&[torchfn::tensor([1.0f32])?.into()])?;
/// assert_eq!(y.as_tensor().unwrap().to_vec::<f32>()?, [4.0]);
/// assert_eq!(counting.1, 2);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub trait Interpreter<'g> {
    /// The graph module being run.
    fn module(&self) -> &'g GraphModule;

    /// Runs the graph on `inputs` (one per placeholder) and returns the output's value.
    fn run(&mut self, inputs: &[Value]) -> Result<Value> {
        let gm = self.module();
        let graph = gm.graph();
        let placeholders = graph.placeholders();
        if inputs.len() != placeholders.len() {
            return Err(Error::type_error(format!(
                "forward() takes {} positional arguments but {} were given",
                placeholders.len(),
                inputs.len()
            )));
        }
        let last_use = last_uses(gm);
        let mut env: Vec<Option<Value>> = vec![None; last_use.len()];
        let mut inputs = inputs.iter();
        for (position, (id, node)) in graph.nodes().enumerate() {
            let value = match &node.op {
                Op::Placeholder(_) => {
                    let input = inputs.next().cloned().unwrap_or_default();
                    self.run_node(id, node, &[input], &Kwargs::new())?
                }
                Op::Output => {
                    return self.output(
                        node,
                        load(&env, &node.args.first().cloned().unwrap_or(Argument::Const(Value::None)))?,
                    );
                }
                _ => {
                    let args = node.args.iter().map(|a| load(&env, a)).collect::<Result<Vec<_>>>()?;
                    let mut kwargs = Kwargs::new();
                    for (k, a) in &node.kwargs {
                        kwargs.insert(k.as_str(), load(&env, a)?);
                    }
                    self.run_node(id, node, &args, &kwargs)?
                }
            };
            env[id.0] = Some(value);
            for input in node.inputs() {
                if last_use.get(input.0) == Some(&position) {
                    env[input.0] = None;
                }
            }
        }
        Err(Error::runtime_error("the graph has no output node"))
    }

    /// Runs one node other than the output, given its arguments' values (a placeholder's is
    /// its input): calls the method for its kind ([`execute`]). Override it to see every
    /// node's result.
    fn run_node(&mut self, id: NodeId, node: &'g Node, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let _ = id;
        execute(self, node, args, kwargs)
    }

    /// A `placeholder`: the input given for it.
    fn placeholder(&mut self, node: &'g Node, input: Value) -> Result<Value> {
        let _ = node;
        Ok(input)
    }

    /// A `get_attr`: the module's parameter, buffer or constant at `path`.
    fn get_attr(&mut self, node: &'g Node, path: &str) -> Result<Value> {
        let _ = node;
        self.module().attribute(path).map(Value::Tensor)
    }

    /// A `call_function`: `func` called by name.
    fn call_function(&mut self, node: &'g Node, func: &'static Func, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let _ = node;
        func.call(args, kwargs)
    }

    /// A `call_method`: the method called by name, its receiver first.
    fn call_method(&mut self, node: &'g Node, func: &'static Func, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let _ = node;
        func.call(args, kwargs)
    }

    /// A `call_module`: the submodule at `path` called on its input ([`Layer::call`]).
    ///
    /// [`Layer::call`]: torchfn::nn::Layer::call
    fn call_module(&mut self, node: &'g Node, path: &str, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let _ = node;
        self.module().call_submodule(path, args, kwargs)
    }

    /// The `output`: the graph's result.
    fn output(&mut self, node: &'g Node, value: Value) -> Result<Value> {
        let _ = node;
        Ok(value)
    }
}

/// What [`Interpreter::run_node`] does by default: calls the interpreter's method for the
/// node's kind. An override of `run_node` calls it to run the node.
pub fn execute<'g, I: Interpreter<'g> + ?Sized>(
    interpreter: &mut I,
    node: &'g Node,
    args: &[Value],
    kwargs: &Kwargs,
) -> Result<Value> {
    match &node.op {
        Op::GetAttr(path) => interpreter.get_attr(node, path),
        Op::CallFunction(func) => interpreter.call_function(node, func, args, kwargs),
        Op::CallMethod(func) => interpreter.call_method(node, func, args, kwargs),
        Op::CallModule(path) => interpreter.call_module(node, path, args, kwargs),
        Op::Placeholder(_) => interpreter.placeholder(node, args.first().cloned().unwrap_or_default()),
        Op::Output => interpreter.output(node, args.first().cloned().unwrap_or_default()),
    }
}

/// The plain interpreter: every node as its kind's default method runs it.
pub struct Run<'g>(pub &'g GraphModule);

impl<'g> Interpreter<'g> for Run<'g> {
    fn module(&self) -> &'g GraphModule {
        self.0
    }
}

/// For each node (by arena index), the position in the order of the last node that uses it
/// (`usize::MAX` for unused ones), so the interpreter can free values early.
fn last_uses(gm: &GraphModule) -> Vec<usize> {
    let graph = gm.graph();
    let ids = graph.nodes().flat_map(|(id, node)| std::iter::once(id).chain(node.inputs()));
    let mut last = vec![usize::MAX; ids.map(|id| id.0 + 1).max().unwrap_or(0)];
    for (position, (_, node)) in graph.nodes().enumerate() {
        for input in node.inputs() {
            last[input.0] = position;
        }
    }
    last
}

/// The value of an argument, with node references looked up in `env`.
fn load(env: &[Option<Value>], arg: &Argument) -> Result<Value> {
    Ok(match arg {
        Argument::Node(id) => env
            .get(id.0)
            .and_then(Option::clone)
            .ok_or_else(|| Error::runtime_error("fx: an argument refers to a node that has not run"))?,
        Argument::Const(v) => v.clone(),
        Argument::List(items) => Value::List(items.iter().map(|a| load(env, a)).collect::<Result<_>>()?),
        Argument::Tuple(items) => Value::Tuple(items.iter().map(|a| load(env, a)).collect::<Result<_>>()?),
    })
}

/// Shape propagation (`torch.fx.passes.shape_prop.ShapeProp`): runs the graph on example
/// inputs and records each tensor result's shape and dtype in its node's [`Meta`].
///
/// ```
/// use torchfn::fx::{ShapeProp, symbolic_trace_fn};
/// let mut gm = symbolic_trace_fn(&["x"], |x| x[0].transpose(0, 1))?;
/// ShapeProp::propagate(&mut gm, &[torchfn::ones([2, 3], None, None)?.into()])?;
/// let t = gm.graph().find("transpose").unwrap();
/// assert_eq!(gm.graph().node(t).meta.shape.as_deref(), Some(&[3, 2][..]));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct ShapeProp<'g> {
    run: Run<'g>,
    found: Vec<(NodeId, Meta)>,
}

impl<'g> Interpreter<'g> for ShapeProp<'g> {
    fn module(&self) -> &'g GraphModule {
        self.run.module()
    }

    fn run_node(&mut self, id: NodeId, node: &'g Node, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let value = execute(self, node, args, kwargs)?;
        self.record(id, &value);
        Ok(value)
    }
}

impl ShapeProp<'_> {
    fn record(&mut self, id: NodeId, value: &Value) {
        if let Some(t) = value.as_tensor().filter(|t| !t.is_duck()) {
            self.found.push((id, Meta { shape: t.shape().ok(), dtype: t.dtype().ok() }));
        }
    }

    /// Runs `gm` on `inputs` and fills in every tensor node's shape and dtype.
    pub fn propagate(gm: &mut GraphModule, inputs: &[Value]) -> Result<Value> {
        let (value, found) = {
            let mut prop = ShapeProp { run: Run(gm), found: Vec::new() };
            let value = prop.run(inputs)?;
            (value, prop.found)
        };
        let graph = gm.graph_mut();
        for (id, meta) in found {
            if let Some(node) = graph.get_mut(id) {
                node.meta = meta;
            }
        }
        Ok(value)
    }
}
