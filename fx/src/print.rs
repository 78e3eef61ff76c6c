//! Seeing a graph: fx's printout (`Display`), `print_tabular`, Graphviz DOT, and the graph as
//! the source of a Rust function.

use std::collections::HashMap;
use std::fmt::{self, Write};

use super::graph::{Argument, Graph, Node, NodeId, Op};
use torchfn::{Error, Result, Value};

/// fx's printout: one line per node, `%name : [num_users=N] = op[target=...](args = (...),
/// kwargs = {...})`, and `return` with the output.
impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let users = self.user_counts();
        writeln!(f, "graph():")?;
        for (id, node) in self.nodes() {
            if let Op::Output = node.op {
                writeln!(f, "    return {}", self.python(&returned(node), ""))?;
                continue;
            }
            write!(
                f,
                "    %{} : [num_users={}] = {}[target={}]",
                node.name(),
                users[&id],
                node.op.kind(),
                node.op.target()
            )?;
            if !matches!(node.op, Op::Placeholder(_) | Op::GetAttr(_)) {
                write!(f, "(args = {}, kwargs = {})", self.python_args(node), self.python_kwargs(node))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

impl Graph {
    /// An argument as Python would write it, with nodes as `{prefix}name`.
    fn python(&self, arg: &Argument, prefix: &str) -> String {
        let seq = |items: &[Argument], open: &str, close: &str| {
            let parts: Vec<String> = items.iter().map(|a| self.python(a, prefix)).collect();
            let comma = if close == ")" && parts.len() == 1 { "," } else { "" };
            format!("{open}{}{comma}{close}", parts.join(", "))
        };
        match arg {
            Argument::Node(id) => format!("{prefix}{}", self.get(*id).map_or("<erased>", Node::name)),
            Argument::Const(v) => v.to_string(),
            Argument::List(items) => seq(items, "[", "]"),
            Argument::Tuple(items) => seq(items, "(", ")"),
        }
    }

    fn python_args(&self, node: &Node) -> String {
        self.python(&Argument::Tuple(node.args.clone()), "%")
    }

    fn python_kwargs(&self, node: &Node) -> String {
        let parts: Vec<String> = node.kwargs.iter().map(|(k, a)| format!("{k}: {}", self.python(a, "%"))).collect();
        format!("{{{}}}", parts.join(", "))
    }

    /// The table fx's `print_tabular` prints: opcode, name, target, args and kwargs per node.
    pub fn tabular(&self) -> String {
        let mut rows = vec![["opcode", "name", "target", "args", "kwargs"].map(String::from)];
        for (_, node) in self.nodes() {
            let (args, kwargs) = match node.op {
                Op::Output => (self.python(&returned(node), ""), "{}".to_string()),
                _ => (self.python(&Argument::Tuple(node.args.clone()), ""), self.python_kwargs(node).replace('%', "")),
            };
            rows.push([node.op.kind().to_string(), node.name().to_string(), node.op.target(), args, kwargs]);
        }
        let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(&rows[0]);
        out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
        for row in &rows[1..] {
            out += &line(row);
        }
        out
    }

    /// Prints [`tabular`](Graph::tabular) to standard output (fx's `print_tabular`).
    pub fn print_tabular(&self) {
        print!("{}", self.tabular());
    }

    /// The graph in Graphviz's DOT language, one box per node (colored by kind, with shape and
    /// dtype when known) and an edge from each argument to its user, as fx's `FxGraphDrawer`
    /// draws it. Render it with `dot -Tsvg graph.dot -o graph.svg`.
    pub fn to_dot(&self, name: &str) -> String {
        let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = format!("digraph \"{}\" {{\n", quote(name));
        out += "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
        for (_, node) in self.nodes() {
            let color = match node.op {
                Op::Placeholder(_) => "#c6dbef",
                Op::GetAttr(_) => "#e5e5e5",
                Op::CallFunction(_) => "#fdd0a2",
                Op::CallMethod(_) => "#fcbba1",
                Op::CallModule(_) => "#c7e9c0",
                Op::Output => "#dadaeb",
            };
            let mut label = format!("{}\\n{}", quote(node.name()), node.op.kind());
            if !matches!(node.op, Op::Output) && node.op.target() != node.name() {
                label += &format!("\\n{}", quote(&node.op.target()));
            }
            if let (Some(shape), Some(dtype)) = (&node.meta.shape, node.meta.dtype) {
                label += &format!("\\n{dtype}{:?}", shape.to_vec());
            }
            writeln!(out, "  \"{}\" [label=\"{label}\", fillcolor=\"{color}\"];", quote(node.name())).ok();
        }
        for (_, node) in self.nodes() {
            let mut seen = Vec::new();
            for input in node.inputs() {
                if !seen.contains(&input) {
                    seen.push(input);
                    writeln!(
                        out,
                        "  \"{}\" -> \"{}\";",
                        quote(self.get(input).map_or("<erased>", Node::name)),
                        quote(node.name())
                    )
                    .ok();
                }
            }
        }
        out + "}\n"
    }

    /// The graph as the source of a Rust function named `name` that calls torchfn: each node
    /// is one statement calling its function by name (`call("torchfn.add", ...)`), reading an
    /// attribute or calling a submodule of the module passed in. The function has the
    /// signature `fn(root: &dyn torchfn::nn::Module, inputs: &[Value]) -> Result<Value>` and
    /// gives what running the graph gives; compile it beside the crate that defines the
    /// functions the graph calls. A graph with a generator constant has no source (a
    /// generator cannot be written down).
    pub fn to_rust(&self, name: &str) -> Result<String> {
        let mut vars: HashMap<NodeId, String> = HashMap::new();
        for (id, node) in self.nodes() {
            vars.insert(id, rust_variable(node.name()));
        }
        let mut body = String::new();
        let mut inputs = 0;
        for (id, node) in self.nodes() {
            let var = &vars[&id];
            let args = || -> Result<String> {
                Ok(node.args.iter().map(|a| rust_value(a, &vars)).collect::<Result<Vec<_>>>()?.join(", "))
            };
            let kwargs = || -> Result<String> {
                let parts = node
                    .kwargs
                    .iter()
                    .map(|(k, a)| Ok(format!("({k:?}, {})", rust_value(a, &vars)?)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(if parts.is_empty() {
                    "&Kwargs::new()".to_string()
                } else {
                    format!("&Kwargs::from([{}])", parts.join(", "))
                })
            };
            let statement = match &node.op {
                Op::Placeholder(_) => {
                    inputs += 1;
                    format!("let {var} = input(inputs, {})?;", inputs - 1)
                }
                Op::GetAttr(path) => format!("let {var} = attr(root, {path:?})?;"),
                Op::CallFunction(func) | Op::CallMethod(func) => {
                    format!("let {var} = call({:?}, &[{}], {})?;", func.qualified_name(), args()?, kwargs()?)
                }
                Op::CallModule(path) => format!("let {var} = call_module(root, {path:?}, &[{}])?;", args()?),
                Op::Output => format!("Ok({})", rust_value(&returned(node), &vars)?),
            };
            writeln!(body, "    {statement}").ok();
        }
        Ok(format!(
            "/// The traced graph as Rust (written by torchfn::fx).\n\
             #[allow(unused_variables, clippy::all)]\n\
             pub fn {name}(root: &dyn torchfn::nn::Module, inputs: &[torchfn::Value]) -> torchfn::Result<torchfn::Value> {{\n    \
             use torchfn::fx::emitted::{{attr, call, call_module, input}};\n    \
             use torchfn::{{Kwargs, Value}};\n{body}}}\n"
        ))
    }
}

/// What an output node returns (`None` for a malformed one without arguments).
fn returned(node: &Node) -> Argument {
    node.args.first().cloned().unwrap_or(Argument::Const(Value::None))
}

/// A node's name as a Rust variable: `v_` before it, so that no name is a keyword or clashes
/// with the function's own parameters.
fn rust_variable(name: &str) -> String {
    format!("v_{name}")
}

/// An argument as a Rust expression of type `Value`.
fn rust_value(arg: &Argument, vars: &HashMap<NodeId, String>) -> Result<String> {
    let seq = |items: &[Argument], kind: &str| -> Result<String> {
        let parts = items.iter().map(|a| rust_value(a, vars)).collect::<Result<Vec<_>>>()?;
        Ok(format!("Value::{kind}(vec![{}])", parts.join(", ")))
    };
    Ok(match arg {
        Argument::Node(id) => format!("{}.clone()", vars.get(id).map_or("v_erased", String::as_str)),
        Argument::List(items) => seq(items, "List")?,
        Argument::Tuple(items) => seq(items, "Tuple")?,
        Argument::Const(v) => match v {
            Value::None => "Value::None".into(),
            Value::NotImplemented => "Value::NotImplemented".into(),
            Value::Bool(b) => format!("Value::Bool({b})"),
            Value::Int(i) => format!("Value::Int({i})"),
            Value::Float(x) if x.is_finite() => format!("Value::Float({x:?})"),
            Value::Float(x) if x.is_nan() => "Value::Float(f64::NAN)".into(),
            Value::Float(x) => format!("Value::Float({}f64::INFINITY)", if *x < 0.0 { "-" } else { "" }),
            Value::Str(s) => format!("Value::Str({s:?}.to_string())"),
            Value::DType(d) => format!("Value::DType(torchfn::DType::{d:?})"),
            Value::Device(d) => format!("Value::Device(torchfn::Device::parse({:?})?)", d.to_string()),
            Value::Slice(s) => format!(
                "Value::from(torchfn::Slice {{ start: {:?}, stop: {:?}, step: {:?} }})",
                s.start, s.stop, s.step
            ),
            Value::Ellipsis => "Value::Ellipsis".into(),
            Value::Generator(_) | Value::Tensor(_) | Value::List(_) | Value::Tuple(_) | Value::Object(_) => {
                return Err(Error::value_error(format!(
                    "to_rust: a {} constant cannot be written as Rust source",
                    v.type_name()
                )));
            }
        },
    })
}
