//! The graph: nodes in program order, each an operation whose arguments refer to earlier nodes
//! or are constants (`torch.fx.Graph` and `Node`), and the edits passes make to it.

use std::collections::{HashMap, HashSet};

use torchfn::{DType, Error, ErrorKind, Func, FuncKind, Result, Shape, Value};

/// A node's identity in its graph. Stable while the graph is edited: erasing other nodes or
/// inserting new ones never changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) usize);

/// What a node does, with its target (fx's `op` and `target` together, so that a node can
/// only have a target of the right kind).
#[derive(Clone, Debug)]
pub enum Op {
    /// An input of the graph, by name (`placeholder`).
    Placeholder(String),
    /// A parameter, buffer or constant of the module, by dotted path (`get_attr`).
    GetAttr(String),
    /// An overridable function (`call_function`): `torchfn.add`, an operator such as
    /// `Tensor.__add__`, or a user's `#[torch_function]`.
    CallFunction(&'static Func),
    /// A tensor method, called on the first argument (`call_method`): `Tensor.view`.
    CallMethod(&'static Func),
    /// A submodule's forward, by dotted path (`call_module`).
    CallModule(String),
    /// The graph's result: its one argument (`output`).
    Output,
}

impl Op {
    /// fx's name of the node kind: `placeholder`, `get_attr`, `call_function`, `call_method`,
    /// `call_module` or `output`.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Placeholder(_) => "placeholder",
            Op::GetAttr(_) => "get_attr",
            Op::CallFunction(_) => "call_function",
            Op::CallMethod(_) => "call_method",
            Op::CallModule(_) => "call_module",
            Op::Output => "output",
        }
    }

    /// The target as fx prints it: the input name, the attribute or module path, the function's
    /// qualified name (`torchfn.add`), the method's name (`view`), or `output`.
    pub fn target(&self) -> String {
        match self {
            Op::Placeholder(name) | Op::GetAttr(name) | Op::CallModule(name) => name.clone(),
            Op::CallFunction(func) => func.qualified_name(),
            Op::CallMethod(func) => func.name().to_string(),
            Op::Output => "output".to_string(),
        }
    }

    /// The call for `func`: a method of `Tensor` (not an operator or property) is a
    /// `call_method`, anything else a `call_function`.
    pub fn call(func: &'static Func) -> Op {
        if func.kind() == FuncKind::Method { Op::CallMethod(func) } else { Op::CallFunction(func) }
    }

    fn same(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::CallFunction(a), Op::CallFunction(b)) | (Op::CallMethod(a), Op::CallMethod(b)) => a == b,
            (Op::Output, Op::Output) => true,
            (Op::Placeholder(a), Op::Placeholder(b))
            | (Op::GetAttr(a), Op::GetAttr(b))
            | (Op::CallModule(a), Op::CallModule(b)) => a == b,
            _ => false,
        }
    }
}

/// An argument of a node: another node's result, a constant, or a list or tuple of arguments
/// (fx's `Argument`). Constants are never tensors: a constant tensor is an attribute of the
/// module, read by a `get_attr` node.
#[derive(Clone, Debug)]
pub enum Argument {
    /// The result of an earlier node.
    Node(NodeId),
    /// A constant that is not a tensor, a list or a tuple: `None`, a number, a string, a dtype,
    /// a device, a generator, a slice or `...`.
    Const(Value),
    /// A list of arguments.
    List(Vec<Argument>),
    /// A tuple of arguments.
    Tuple(Vec<Argument>),
}

impl Argument {
    /// Every node this argument refers to, in order.
    pub fn nodes(&self) -> Vec<NodeId> {
        let mut out = Vec::new();
        self.visit(&mut |id| out.push(id));
        out
    }

    fn visit(&self, f: &mut dyn FnMut(NodeId)) {
        match self {
            Argument::Node(id) => f(*id),
            Argument::Const(_) => {}
            Argument::List(items) | Argument::Tuple(items) => items.iter().for_each(|a| a.visit(f)),
        }
    }

    /// The argument with each node reference mapped by `f`.
    pub fn map_nodes(&self, f: &mut dyn FnMut(NodeId) -> NodeId) -> Argument {
        match self {
            Argument::Node(id) => Argument::Node(f(*id)),
            Argument::Const(v) => Argument::Const(v.clone()),
            Argument::List(items) => Argument::List(items.iter().map(|a| a.map_nodes(f)).collect()),
            Argument::Tuple(items) => Argument::Tuple(items.iter().map(|a| a.map_nodes(f)).collect()),
        }
    }

    fn same(&self, other: &Argument, names: &dyn Fn(NodeId, NodeId) -> bool) -> bool {
        match (self, other) {
            (Argument::Node(a), Argument::Node(b)) => names(*a, *b),
            (Argument::Const(a), Argument::Const(b)) => same_constant(a, b),
            (Argument::List(a), Argument::List(b)) | (Argument::Tuple(a), Argument::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y, names))
            }
            _ => false,
        }
    }
}

/// Whether two constants are equal (floats bit for bit, generators by identity).
pub(super) fn same_constant(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::None, Value::None) | (Value::Ellipsis, Value::Ellipsis) => true,
        (Value::NotImplemented, Value::NotImplemented) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::DType(x), Value::DType(y)) => x == y,
        (Value::Device(x), Value::Device(y)) => x == y,
        (Value::Slice(x), Value::Slice(y)) => x == y,
        (Value::Generator(x), Value::Generator(y)) => x.same(y),
        _ => false,
    }
}

/// What passes learn about a node's result ([`ShapeProp`](super::ShapeProp) fills it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    /// The shape of the tensor the node computes.
    pub shape: Option<Shape>,
    /// Its dtype.
    pub dtype: Option<DType>,
}

/// One operation of a graph.
#[derive(Clone, Debug)]
pub struct Node {
    name: String,
    /// What the node does, and its target.
    pub op: Op,
    /// Positional arguments.
    pub args: Vec<Argument>,
    /// Keyword arguments, in order.
    pub kwargs: Vec<(String, Argument)>,
    /// What passes recorded about the result.
    pub meta: Meta,
}

impl Node {
    /// The node's name, unique in its graph (`add_1`, `transformer_h_0_ln_1`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The function a `call_function` or `call_method` node calls.
    pub fn func(&self) -> Option<&'static Func> {
        match self.op {
            Op::CallFunction(f) | Op::CallMethod(f) => Some(f),
            _ => None,
        }
    }

    /// Every node the arguments refer to, in order, with repeats.
    pub fn inputs(&self) -> Vec<NodeId> {
        let mut out = Vec::new();
        for a in self.args.iter().chain(self.kwargs.iter().map(|(_, a)| a)) {
            a.visit(&mut |id| out.push(id));
        }
        out
    }

    /// Whether erasing the node when its result is unused would change what the program
    /// does: inputs, the output, and functions that write to an argument (in-place methods
    /// such as `add_`, `Tensor.__setitem__`, `Tensor.__iadd__`).
    pub fn is_impure(&self) -> bool {
        match &self.op {
            Op::Placeholder(_) | Op::Output => true,
            Op::CallFunction(f) | Op::CallMethod(f) => {
                let name = f.name();
                (name.ends_with('_') && !name.ends_with("__")) || name == "__setitem__" || name.starts_with("__i")
            }
            Op::GetAttr(_) | Op::CallModule(_) => false,
        }
    }
}

/// Where [`Graph::insert`] puts a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Just before this node.
    Before(NodeId),
    /// Just after this node.
    After(NodeId),
    /// Before the output node, or last when there is none (fx's default insertion point).
    End,
}

/// A program as a list of nodes in execution order (`torch.fx.Graph`).
///
/// Nodes are kept in an arena and named by [`NodeId`]s that stay valid across edits; the order
/// is a separate list. Every node's name is unique.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Option<Node>>,
    order: Vec<NodeId>,
    names: HashSet<String>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// The node with this id.
    ///
    /// # Panics
    ///
    /// When `id` is not a live node of this graph (it was erased, or comes from another graph).
    pub fn node(&self, id: NodeId) -> &Node {
        self.get(id).expect("fx: no such node in this graph")
    }

    /// The node with this id, when it is a live node of this graph.
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0).and_then(Option::as_ref)
    }

    /// The node with this id, to edit its arguments or metadata.
    pub fn get_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(id.0).and_then(Option::as_mut)
    }

    /// The node ids in execution order.
    pub fn ids(&self) -> &[NodeId] {
        &self.order
    }

    /// The nodes in execution order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.order.iter().map(|&id| (id, self.node(id)))
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The node named `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes().find(|(_, n)| n.name == name).map(|(id, _)| id)
    }

    /// The output node, when the graph has one.
    pub fn output(&self) -> Option<NodeId> {
        self.nodes().find(|(_, n)| matches!(n.op, Op::Output)).map(|(id, _)| id)
    }

    /// The placeholders (the graph's inputs), in order.
    pub fn placeholders(&self) -> Vec<NodeId> {
        self.nodes().filter(|(_, n)| matches!(n.op, Op::Placeholder(_))).map(|(id, _)| id).collect()
    }

    /// The nodes whose arguments use `id`'s result, in execution order, each once.
    pub fn users(&self, id: NodeId) -> Vec<NodeId> {
        self.nodes().filter(|(_, n)| n.inputs().contains(&id)).map(|(user, _)| user).collect()
    }

    /// For each node, how many nodes use it (fx's `num_users`).
    pub fn user_counts(&self) -> HashMap<NodeId, usize> {
        let mut counts: HashMap<NodeId, usize> = self.order.iter().map(|&id| (id, 0)).collect();
        for (_, node) in self.nodes() {
            let mut seen = HashSet::new();
            for input in node.inputs() {
                if seen.insert(input) {
                    *counts.entry(input).or_default() += 1;
                }
            }
        }
        counts
    }

    /// Appends a node (before the output node, if any); `name` is a hint, made unique.
    pub fn create_node(&mut self, op: Op, args: Vec<Argument>, kwargs: Vec<(String, Argument)>, name: &str) -> NodeId {
        self.insert(Position::End, op, args, kwargs, name).expect("the end is always a position")
    }

    /// Inserts a node at `position`; `name` is a hint (`add` becomes `add_1` if taken). An
    /// anchor that is not a node of this graph is a `ValueError`.
    pub fn insert(
        &mut self,
        position: Position,
        op: Op,
        args: Vec<Argument>,
        kwargs: Vec<(String, Argument)>,
        name: &str,
    ) -> Result<NodeId> {
        let at = match position {
            Position::Before(anchor) => self.index_of(anchor)?,
            Position::After(anchor) => self.index_of(anchor)? + 1,
            Position::End => match self.order.last() {
                Some(&last) if matches!(self.node(last).op, Op::Output) => self.order.len() - 1,
                _ => self.order.len(),
            },
        };
        let name = self.unique_name(name);
        self.names.insert(name.clone());
        let id = NodeId(self.nodes.len());
        self.nodes.push(Some(Node { name, op, args, kwargs, meta: Meta::default() }));
        self.order.insert(at, id);
        Ok(id)
    }

    fn index_of(&self, id: NodeId) -> Result<usize> {
        self.order
            .iter()
            .position(|&n| n == id)
            .ok_or_else(|| Error::value_error("insert: the anchor node is not in this graph"))
    }

    /// A name not yet used in this graph, made from `hint` as fx does: characters that cannot
    /// be in an identifier become `_`, and a taken name gets `_1`, `_2`...
    fn unique_name(&self, hint: &str) -> String {
        let mut base: String =
            hint.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
            base.insert(0, '_');
        }
        if !self.names.contains(&base) {
            return base;
        }
        (1..).map(|i| format!("{base}_{i}")).find(|n| !self.names.contains(n)).expect("an unused name")
    }

    /// Makes every use of `old` a use of `new` (in every node but `new` itself) and returns the
    /// nodes changed (`replace_all_uses_with`).
    pub fn replace_all_uses_with(&mut self, old: NodeId, new: NodeId) -> Vec<NodeId> {
        let users: Vec<NodeId> = self.users(old).into_iter().filter(|&u| u != new).collect();
        for &user in &users {
            let node = self.nodes[user.0].as_mut().expect("a live user");
            let mut swap = |id: NodeId| if id == old { new } else { id };
            node.args = node.args.iter().map(|a| a.map_nodes(&mut swap)).collect();
            node.kwargs = node.kwargs.iter().map(|(k, a)| (k.clone(), a.map_nodes(&mut swap))).collect();
        }
        users
    }

    /// Removes a node nobody uses (`erase_node`); a node still in use is a `RuntimeError`
    /// naming its users.
    pub fn erase_node(&mut self, id: NodeId) -> Result<()> {
        let Some(node) = self.get(id) else {
            return Err(Error::runtime_error("erase_node: the node is not in this graph"));
        };
        let users = self.users(id);
        if !users.is_empty() {
            let names: Vec<&str> = users.iter().map(|&u| self.node(u).name()).collect();
            return Err(Error::runtime_error(format!(
                "Tried to erase Node {} but it still had {} users in the graph: {}",
                node.name,
                users.len(),
                names.join(", ")
            )));
        }
        let name = node.name.clone();
        self.names.remove(&name);
        self.order.retain(|&n| n != id);
        self.nodes[id.0] = None;
        Ok(())
    }

    /// Erases every node whose result nobody uses and that is not impure
    /// ([`Node::is_impure`]), last to first, so chains of dead nodes go at once; returns
    /// whether anything changed (`eliminate_dead_code`).
    pub fn eliminate_dead_code(&mut self) -> bool {
        let mut changed = false;
        for id in self.order.clone().into_iter().rev() {
            if !self.node(id).is_impure() && self.users(id).is_empty() {
                self.erase_node(id).expect("an unused node erases");
                changed = true;
            }
        }
        changed
    }

    /// Checks the graph is well formed (`lint`): every argument refers to a node that comes
    /// earlier, names are unique, there is exactly one output and it is last, placeholders
    /// have no arguments and the output has one. A `RuntimeError` says what is wrong, naming
    /// the node.
    pub fn lint(&self) -> Result<()> {
        let fail = |message: String| Err(Error::new(ErrorKind::Runtime, message));
        let mut seen = HashSet::new();
        let mut names = HashSet::new();
        for (i, (id, node)) in self.nodes().enumerate() {
            if !names.insert(node.name.as_str()) {
                return fail(format!("Node redefined name {}!", node.name));
            }
            for input in node.inputs() {
                match self.get(input) {
                    None => return fail(format!("Argument of Node {} refers to an erased node", node.name)),
                    Some(arg) if !seen.contains(&input) => {
                        return fail(format!(
                            "Argument {} of Node {} was used before it was defined!",
                            arg.name, node.name
                        ));
                    }
                    Some(_) => {}
                }
            }
            match node.op {
                Op::Placeholder(_) | Op::GetAttr(_) if !node.args.is_empty() || !node.kwargs.is_empty() => {
                    return fail(format!("{} node {} takes no arguments", node.op.kind(), node.name));
                }
                Op::Output if i + 1 != self.len() => {
                    return fail(format!("the output node {} is not the last node", node.name));
                }
                Op::Output if node.args.len() != 1 || !node.kwargs.is_empty() => {
                    return fail(format!("the output node {} must have exactly one argument", node.name));
                }
                _ => {}
            }
            seen.insert(id);
        }
        if self.output().is_none() {
            return fail("the graph has no output node".to_string());
        }
        Ok(())
    }
}

/// Two graphs are equal when they have the same nodes in the same order: names, kinds,
/// targets and arguments (constants bit for bit). Metadata is not compared.
impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        let same_node = |a: NodeId, b: NodeId| match (self.get(a), other.get(b)) {
            (Some(x), Some(y)) => x.name == y.name,
            _ => false,
        };
        self.len() == other.len()
            && self.nodes().zip(other.nodes()).all(|((_, a), (_, b))| {
                a.name == b.name
                    && a.op.same(&b.op)
                    && a.args.len() == b.args.len()
                    && a.args.iter().zip(&b.args).all(|(x, y)| x.same(y, &same_node))
                    && a.kwargs.len() == b.kwargs.len()
                    && a.kwargs.iter().zip(&b.kwargs).all(|((k, x), (l, y))| k == l && x.same(y, &same_node))
            })
    }
}
