//! A graph as JSON, without weights: nodes in order, functions by qualified name.
//!
//! ```json
//! {"format": "torchfn.fx.graph", "version": 1, "nodes": [
//!   {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": []},
//!   {"name": "add", "op": "call_function", "target": "torchfn.add",
//!    "args": [{"node": "x"}, 1], "kwargs": [["alpha", 2.5]]},
//!   {"name": "output", "op": "output", "target": "output", "args": [{"node": "add"}], "kwargs": []}]}
//! ```
//!
//! Constants: `null`, booleans, integers and floats (a float always has a decimal point;
//! `{"float": "nan"}`, `"inf"`, `"-inf"` for the others), strings, `{"dtype": "float32"}`,
//! `{"device": "cpu"}`, `{"slice": [start, stop, step]}`, `{"ellipsis": true}`,
//! `{"not_implemented": true}`; lists and tuples are `{"list": [...]}` and `{"tuple": [...]}`.

use std::collections::HashMap;

use serde_json::{Value as Json, json};

use super::graph::{Argument, Graph, NodeId, Op, Position};
use torchfn::{DType, Device, Error, Func, FuncKind, Result, Shape, Slice, Value};

const FORMAT: &str = "torchfn.fx.graph";

/// The version of the format this file writes and reads.
const VERSION: u64 = 1;

impl Graph {
    /// The graph as JSON text; [`Graph::from_json`] reads it back equal. A generator constant
    /// cannot be written (it is a live random stream), which is a `ValueError`.
    pub fn to_json(&self) -> Result<String> {
        let nodes = self
            .nodes()
            .map(|(_, node)| {
                let args = node.args.iter().map(|a| self.encode(a)).collect::<Result<Vec<_>>>()?;
                let kwargs =
                    node.kwargs.iter().map(|(k, a)| Ok(json!([k, self.encode(a)?]))).collect::<Result<Vec<_>>>()?;
                let mut out = json!({
                    "name": node.name(), "op": node.op.kind(), "target": target_text(&node.op),
                    "args": args, "kwargs": kwargs,
                });
                if let (Some(shape), Some(dtype)) = (&node.meta.shape, node.meta.dtype) {
                    out["meta"] = json!({"shape": shape.to_vec(), "dtype": dtype.name()});
                }
                Ok(out)
            })
            .collect::<Result<Vec<_>>>()?;
        let doc = json!({"format": FORMAT, "version": VERSION, "nodes": nodes});
        serde_json::to_string_pretty(&doc).map_err(|e| Error::value_error(format!("to_json: {e}")))
    }

    fn encode(&self, arg: &Argument) -> Result<Json> {
        Ok(match arg {
            Argument::Node(id) => json!({"node": self.node(*id).name()}),
            Argument::List(items) => json!({"list": items.iter().map(|a| self.encode(a)).collect::<Result<Vec<_>>>()?}),
            Argument::Tuple(items) => {
                json!({"tuple": items.iter().map(|a| self.encode(a)).collect::<Result<Vec<_>>>()?})
            }
            Argument::Const(v) => match v {
                Value::None => Json::Null,
                Value::Bool(b) => json!(b),
                Value::Int(i) => json!(i),
                Value::Float(x) if x.is_finite() => json!(x),
                Value::Float(x) => json!({"float": if x.is_nan() { "nan" } else if *x > 0.0 { "inf" } else { "-inf" }}),
                Value::Str(s) => json!(s),
                Value::DType(d) => json!({"dtype": d.name()}),
                Value::Device(d) => json!({"device": d.to_string()}),
                Value::Slice(s) => json!({"slice": [s.start, s.stop, s.step]}),
                Value::Ellipsis => json!({"ellipsis": true}),
                Value::NotImplemented => json!({"not_implemented": true}),
                Value::Generator(_) | Value::Tensor(_) | Value::List(_) | Value::Tuple(_) | Value::Object(_) => {
                    return Err(Error::value_error(format!(
                        "to_json: a {} constant cannot be saved in a graph",
                        v.type_name()
                    )));
                }
            },
        })
    }

    /// Reads a graph [`to_json`](Graph::to_json) wrote. Functions are found by qualified name
    /// in the registry, so the crate that defines a user's function must be linked; anything
    /// malformed is a `ValueError` naming the node.
    pub fn from_json(text: &str) -> Result<Graph> {
        let bad = |what: String| Error::value_error(format!("from_json: {what}"));
        let doc: Json = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if doc["format"] != FORMAT {
            return Err(bad(format!("not a torchfn fx graph (format is {})", doc["format"])));
        }
        if doc["version"] != VERSION {
            return Err(bad(format!(
                "version {} of the graph format is not one this torchfn reads (it reads version {VERSION})",
                doc["version"]
            )));
        }
        let nodes = doc["nodes"].as_array().ok_or_else(|| bad("no 'nodes' list".into()))?;
        let mut graph = Graph::new();
        let mut ids: HashMap<String, NodeId> = HashMap::new();
        let mut last = None;
        for node in nodes {
            let field = |key: &str| node[key].as_str().ok_or_else(|| bad(format!("a node without '{key}': {node}")));
            let (name, target) = (field("name")?, field("target")?);
            let func = |kind: FuncKind| -> Result<&'static Func> {
                let f = super::find_function(target)
                    .ok_or_else(|| bad(format!("node {name}: no function '{target}' is registered")))?;
                if (kind == FuncKind::Method) != (f.kind() == FuncKind::Method) {
                    return Err(bad(format!("node {name}: '{target}' is not a {}", field("op").unwrap_or_default())));
                }
                Ok(f)
            };
            let op = match field("op")? {
                "placeholder" => Op::Placeholder(target.to_string()),
                "get_attr" => Op::GetAttr(target.to_string()),
                "call_function" => Op::CallFunction(func(FuncKind::Function)?),
                "call_method" => Op::CallMethod(func(FuncKind::Method)?),
                "call_module" => Op::CallModule(target.to_string()),
                "output" => Op::Output,
                other => return Err(bad(format!("node {name}: unknown op '{other}'"))),
            };
            let decode = |a: &Json| decode(a, &ids).map_err(|e| bad(format!("node {name}: {e}")));
            let args = node["args"].as_array().map_or(Ok(vec![]), |a| a.iter().map(decode).collect())?;
            let kwargs = node["kwargs"].as_array().map_or(Ok(vec![]), |pairs| {
                pairs
                    .iter()
                    .map(|p| match (p[0].as_str(), p.get(1)) {
                        (Some(k), Some(v)) => Ok((k.to_string(), decode(v)?)),
                        _ => Err(bad(format!("node {name}: a keyword argument is not [name, value]"))),
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            // In the file's order: `create_node` would put a node that follows an output node
            // before it, where the nodes it uses may not have run.
            let position = last.map_or(Position::End, Position::After);
            let id = graph.insert(position, op, args, kwargs, name)?;
            last = Some(id);
            if graph.node(id).name() != name {
                return Err(bad(if ids.contains_key(name) {
                    format!("the name {name} is used twice")
                } else {
                    format!(
                        "the node name {name:?} is not an identifier (letters, digits and '_', not starting with a \
                         digit)"
                    )
                }));
            }
            if let Some(meta) = node.get("meta") {
                let shape =
                    meta["shape"].as_array().map(|s| s.iter().filter_map(Json::as_u64).map(|n| n as usize).collect());
                let node = graph.get_mut(id).expect("just created");
                node.meta.shape = shape.map(|s: Vec<usize>| Shape::from(&s[..]));
                node.meta.dtype = meta["dtype"].as_str().and_then(DType::from_name);
            }
            ids.insert(name.to_string(), id);
        }
        Ok(graph)
    }
}

fn target_text(op: &Op) -> String {
    match op {
        Op::CallMethod(func) => func.qualified_name(),
        other => other.target(),
    }
}

fn decode(arg: &Json, ids: &HashMap<String, NodeId>) -> std::result::Result<Argument, String> {
    let constant = |v: Value| Ok(Argument::Const(v));
    let items = |v: &Json| -> std::result::Result<Vec<Argument>, String> {
        v.as_array().ok_or("a list that is not an array")?.iter().map(|a| decode(a, ids)).collect()
    };
    let int = |v: &Json| v.as_i64();
    match arg {
        Json::Null => constant(Value::None),
        Json::Bool(b) => constant(Value::Bool(*b)),
        Json::Number(n) if n.is_f64() => constant(Value::Float(n.as_f64().unwrap_or_default())),
        Json::Number(n) => n.as_i64().map(|i| Argument::Const(Value::Int(i))).ok_or(format!("{n} is out of range")),
        Json::String(s) => constant(Value::Str(s.clone())),
        Json::Object(map) => {
            let (key, v) = map.iter().next().ok_or("an empty object")?;
            match key.as_str() {
                "node" => v
                    .as_str()
                    .and_then(|n| ids.get(n))
                    .map(|&id| Argument::Node(id))
                    .ok_or(format!("{v} names no earlier node")),
                "list" => Ok(Argument::List(items(v)?)),
                "tuple" => Ok(Argument::Tuple(items(v)?)),
                "float" => match v.as_str() {
                    Some("nan") => constant(Value::Float(f64::NAN)),
                    Some("inf") => constant(Value::Float(f64::INFINITY)),
                    Some("-inf") => constant(Value::Float(f64::NEG_INFINITY)),
                    _ => Err(format!("{v} is not a float")),
                },
                "dtype" => v
                    .as_str()
                    .and_then(DType::from_name)
                    .map(|d| Argument::Const(Value::DType(d)))
                    .ok_or(format!("no dtype {v}")),
                "device" => v
                    .as_str()
                    .and_then(|d| Device::parse(d).ok())
                    .map(|d| Argument::Const(Value::Device(d)))
                    .ok_or(format!("no device {v}")),
                "slice" => {
                    let s = Slice { start: int(&v[0]), stop: int(&v[1]), step: int(&v[2]) };
                    constant(Value::from(s))
                }
                "ellipsis" => constant(Value::Ellipsis),
                "not_implemented" => constant(Value::NotImplemented),
                other => Err(format!("unknown constant kind '{other}'")),
            }
        }
        Json::Array(_) => Err("a bare array (lists are {\"list\": [...]})".into()),
    }
}
