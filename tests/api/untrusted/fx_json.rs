//! Graphs from JSON ([`Graph::from_json`]), then run: graphs built from random nodes (common
//! operations and any registered function, arguments that are earlier nodes or constants of
//! every kind) and graphs traced from code, changed (targets unknown, misspelt or of the
//! wrong kind, names repeated, references to later or missing nodes, nodes after the
//! output, fields missing or of the wrong type, constants malformed or nested past serde's
//! limit), and their text flipped and cut. A graph that loads must call only registered
//! functions, print, write back to JSON that loads equal, and, when it passes `lint` and its
//! constants are small, run on small inputs; one that does not load must give a `ValueError`
//! from `from_json`.

use std::cell::Cell;

use serde_json::{Value as Json, json};
use torchfn::fx::{Graph, GraphModule, NoModule, find_function};
use torchfn::{ErrorKind, Func, FuncKind, Tensor, Value};

use super::mutate::{Rng, escaped, mutate_bytes};
use super::npy::random_tensor;
use super::{Verdict, functions, fuzz};

/// Inputs in the default run.
const INPUTS: usize = 3000;

thread_local! {
    /// How many graphs ran, and how many of them gave a result, on this thread.
    static RAN: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Operations that run on small tensors, with their node kind, so that many graphs run.
const COMMON: [(&str, &str); 16] = [
    ("call_function", "Tensor.__add__"),
    ("call_function", "Tensor.__mul__"),
    ("call_function", "torchfn.add"),
    ("call_function", "torchfn.neg"),
    ("call_function", "torchfn.relu"),
    ("call_function", "torchfn.cat"),
    ("call_function", "torchfn.sum"),
    ("call_function", "torchfn.matmul"),
    ("call_function", "torchfn.chunk"),
    ("call_function", "operator.getitem"),
    ("call_function", "Tensor.__getitem__"),
    ("call_method", "Tensor.transpose"),
    ("call_method", "Tensor.sum"),
    ("call_method", "Tensor.relu"),
    ("call_method", "Tensor.reshape"),
    ("call_method", "Tensor.softmax"),
];

/// Node kinds, real and not.
const OPS: [&str; 9] =
    ["placeholder", "get_attr", "call_function", "call_method", "call_module", "output", "call", "", "Output"];

/// Targets no function is registered under, or not in the form of a qualified name.
const UNKNOWN: [&str; 8] =
    ["torchfn.nope", "Tensor.nope", "nope", "", "torchfn.", ".add", "torchfn.add ", "operator.add"];

/// A function for a random node: a common operation or any registered one, with its kind.
fn target(rng: &mut Rng, funcs: &[&'static Func]) -> (String, String) {
    if rng.percent(60) {
        let (op, target) = rng.pick(&COMMON);
        return (op.to_string(), target.to_string());
    }
    let func = rng.pick(funcs);
    let op = if func.kind() == FuncKind::Method { "call_method" } else { "call_function" };
    (op.to_string(), func.qualified_name())
}

/// A random constant: small numbers mostly, and every kind the format has, malformed too.
fn constant(rng: &mut Rng, depth: usize) -> Json {
    match rng.below(if depth > 2 { 12 } else { 26 }) {
        0..=3 => json!(rng.below(7) as i64 - 2),
        4 => json!(rng.pick(&[i64::MAX, i64::MIN, 1 << 40, -(1 << 40), 255])),
        5 => json!(u64::MAX),
        6 => json!(rng.pick(&[0.5, -1.5, 2.0, 1e300, -0.0, 5e-324])),
        7 => Json::Null,
        8 => json!(rng.percent(50)),
        9 => json!(rng.pick(&["mean", "", "cpu", "sum", "\u{e9}", "none"])),
        10 => json!({"float": rng.pick(&[json!("nan"), json!("inf"), json!("-inf"), json!("NaN"), json!(1)])}),
        11 => json!({"dtype": rng.pick(&["float32", "int64", "bool", "float64", "int32", "float16", "bogus"])}),
        12 => {
            json!({"device": rng.pick(&[json!("cpu"), json!("meta"), json!("cuda"), json!("bogus"), json!("cpu:0"), json!("cpu:99999999999999999999"), json!(0)])})
        }
        13 => {
            json!({"slice": rng.pick(&[json!([1, null, 2]), json!([null, null, null]), json!([0, -1]), json!([]), json!("1:2"), json!([1, "a", 2.5])])})
        }
        14 => json!({"ellipsis": true}),
        15 => json!({"not_implemented": true}),
        16..=18 => {
            let items: Vec<Json> = (0..rng.below(4)).map(|_| constant(rng, depth + 1)).collect();
            json!({"list": items})
        }
        19 | 20 => {
            let items: Vec<Json> = (0..rng.below(4)).map(|_| constant(rng, depth + 1)).collect();
            json!({"tuple": items})
        }
        21 => json!({"node": rng.pick(&[json!("nowhere"), json!(1), json!(null)])}),
        22 => rng.pick(&[json!({}), json!({"a": 1, "b": 2}), json!({"list": 1}), json!({"tuple": [1], "list": []})]),
        23 => json!([1, 2]),
        24 => {
            // Nested past what serde reads (128 levels) or just under it.
            let mut value = json!(1);
            for _ in 0..rng.pick(&[60, 126, 127, 200]) {
                value = json!({"list": [value]});
            }
            value
        }
        _ => json!(rng.bytes(3).iter().map(|&b| b as i64).sum::<i64>()),
    }
}

/// A random node argument: an earlier node or a constant.
fn argument(rng: &mut Rng, names: &[String]) -> Json {
    if !names.is_empty() && rng.percent(55) {
        json!({"node": rng.pick(names)})
    } else if !names.is_empty() && rng.percent(20) {
        let items: Vec<Json> = (0..1 + rng.below(3)).map(|_| json!({"node": rng.pick(names)})).collect();
        json!({rng.pick(&["list", "tuple"]): items})
    } else {
        constant(rng, 0)
    }
}

/// A random graph: one or two inputs, a few calls on earlier nodes and constants, an output.
fn built(rng: &mut Rng, funcs: &[&'static Func]) -> Json {
    let mut nodes = Vec::new();
    let mut names = Vec::new();
    for name in ["x", "y"].into_iter().take(1 + rng.below(2)) {
        nodes.push(json!({"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": []}));
        names.push(name.to_string());
    }
    for i in 0..rng.below(7) {
        let (op, target) = target(rng, funcs);
        let args: Vec<Json> = (0..rng.below(4)).map(|_| argument(rng, &names)).collect();
        let kwargs: Vec<Json> = if rng.percent(25) {
            let key = rng.pick(&["dim", "alpha", "keepdim", "input", "other", "bogus", "axis", ""]);
            vec![json!([key, argument(rng, &names)])]
        } else {
            vec![]
        };
        let name = format!("n{i}");
        nodes.push(json!({"name": name, "op": op, "target": target, "args": args, "kwargs": kwargs}));
        names.push(name);
    }
    let out = if rng.percent(80) { json!({"node": names.last()}) } else { argument(rng, &names) };
    nodes.push(json!({"name": "output", "op": "output", "target": "output", "args": [out], "kwargs": []}));
    json!({"format": "torchfn.fx.graph", "version": 1, "nodes": nodes})
}

/// A graph traced from code, as JSON.
fn traced(rng: &mut Rng) -> Json {
    let traced = match rng.below(3) {
        0 => torchfn::fx::symbolic_trace_fn(&["x"], |x| &(&x[0] + 1.0)? * 2.0),
        1 => torchfn::fx::symbolic_trace_fn(&["x", "y"], |x| {
            let a = (&(&x[0] + 1.0)? * 2.0)?.transpose(0, 1)?.sum()?;
            let d = torchfn::cat(&[x[1].clone(), x[1].relu()?], 0)?;
            &d + &a
        }),
        _ => torchfn::fx::symbolic_trace_fn(&["x"], |x| x[0].softmax(-1, None)?.neg()),
    };
    let text = traced.and_then(|gm| gm.graph().to_json()).expect("a traced graph saves");
    serde_json::from_str(&text).expect("to_json writes JSON")
}

/// `doc` changed in one to three places: a node's name, kind, target, arguments or metadata,
/// the order of the nodes, or the document's own fields.
fn mutate(rng: &mut Rng, doc: &mut Json, funcs: &[&'static Func]) {
    for _ in 0..1 + rng.below(3) {
        if !doc.is_object() {
            return;
        }
        let names: Vec<String> = doc["nodes"]
            .as_array()
            .map(|nodes| nodes.iter().filter_map(|n| n["name"].as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let Some(nodes) = doc["nodes"].as_array_mut().filter(|n| !n.is_empty()) else {
            doc["nodes"] = json!([]);
            return;
        };
        let len = nodes.len();
        let i = rng.below(len);
        if !nodes[i].is_object() {
            continue;
        }
        let node = &mut nodes[i];
        match rng.below(16) {
            0 => node["name"] = json!(rng.pick(&["x", "output", "", "1x", "a b", "\u{e9}", "n0"])),
            1 => node["name"] = constant(rng, 2),
            2 => node["op"] = json!(rng.pick(&OPS)),
            3 => node["target"] = json!(rng.pick(&UNKNOWN)),
            4 => node["target"] = json!(target(rng, funcs).1),
            5 => node["target"] = constant(rng, 2),
            6 => {
                let key = rng.pick(&["name", "op", "target", "args", "kwargs"]);
                if let Some(fields) = node.as_object_mut() {
                    fields.remove(key);
                }
            }
            7 => node["args"] = rng.pick(&[json!({}), json!("x"), json!(null), json!([[1]])]),
            8 => {
                node["kwargs"] = rng.pick(&[
                    json!({"dim": 0}),
                    json!([["dim"]]),
                    json!([[1, 2]]),
                    json!([["dim", 0, 1]]),
                    json!("x"),
                ])
            }
            9 => {
                let arg = if !names.is_empty() && rng.percent(50) {
                    json!({"node": rng.pick(&names)})
                } else {
                    constant(rng, 0)
                };
                if let Some(args) = node["args"].as_array_mut() {
                    let at = rng.below(args.len() + 1);
                    args.insert(at, arg);
                } else {
                    node["args"] = json!([arg]);
                }
            }
            10 => {
                if let Some(args) = node["args"].as_array_mut().filter(|a| !a.is_empty()) {
                    let at = rng.below(args.len());
                    args.remove(at);
                }
            }
            11 => {
                node["meta"] = rng.pick(&[
                    json!({"shape": [2, 3], "dtype": "float32"}),
                    json!({"shape": [-1, 1e300, "a"], "dtype": 5}),
                    json!({"shape": 5}),
                    json!(7),
                    json!({"shape": [18446744073709551615u64, 0], "dtype": "bogus"}),
                ])
            }
            12 => {
                let j = rng.below(len);
                nodes.swap(i, j);
            }
            13 => {
                let copy = nodes[i].clone();
                let at = rng.below(len + 1);
                nodes.insert(at, copy);
            }
            14 => {
                nodes.remove(i);
            }
            _ => match rng.below(5) {
                0 => doc["format"] = json!(rng.pick(&["torchfn.fx", "", "torchfn.fx.graph "])),
                1 => doc["version"] = json!(rng.pick(&[json!(2), json!(0), json!("1"), json!(null)])),
                2 => doc["nodes"] = rng.pick(&[json!({}), json!(null), json!([1, 2]), json!([[]])]),
                3 => *doc = rng.pick(&[json!([]), json!(null), json!("torchfn.fx.graph"), json!(1)]),
                _ => {
                    if let Some(fields) = doc.as_object_mut() {
                        fields.remove(rng.pick(&["format", "version", "nodes"]));
                    }
                }
            },
        }
    }
}

/// A random graph as JSON text: built or traced, changed or not, its text flipped and cut
/// now and then.
fn text(rng: &mut Rng, funcs: &[&'static Func]) -> String {
    let mut doc = if rng.percent(80) { built(rng, funcs) } else { traced(rng) };
    if rng.percent(60) {
        mutate(rng, &mut doc, funcs);
    }
    let text = if rng.percent(50) { doc.to_string() } else { serde_json::to_string_pretty(&doc).expect("JSON prints") };
    if rng.percent(20) {
        let bytes = mutate_bytes(rng, text.as_bytes(), b"{\"node\": \"x\"}, [\"alpha\", 2]");
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        text
    }
}

/// Whether running `doc`'s graph is cheap: every number small, every list short, every device
/// the CPU or the meta device, a handful of nodes. A graph of large constants may rightly ask for a huge tensor,
/// which the binder target and `no_panic` test; this target tests running what was loaded.
fn cheap(doc: &Json) -> bool {
    fn small(v: &Json, depth: usize) -> bool {
        match v {
            Json::Number(n) => n.as_f64().is_some_and(|x| x.abs() <= 8.0 || x.is_nan()),
            Json::Array(items) => items.len() <= 6 && depth < 40 && items.iter().all(|v| small(v, depth + 1)),
            Json::Object(fields) => {
                fields.get("device").is_none_or(|d| d == "cpu" || d == "meta")
                    && fields.values().all(|v| small(v, depth + 1))
            }
            _ => true,
        }
    }
    let nodes = doc["nodes"].as_array().map_or(0, Vec::len);
    nodes <= 16
        && doc["nodes"]
            .as_array()
            .is_some_and(|nodes| nodes.iter().all(|n| small(&n["args"], 0) && small(&n["kwargs"], 0)))
}

/// Loads `text`, checks the graph, and runs it when it is well formed and cheap.
fn check(text: &str, rng_seed: u64) -> Verdict {
    let graph = match Graph::from_json(text) {
        Ok(graph) => graph,
        Err(e) if e.kind() == ErrorKind::Value && e.to_string().starts_with("from_json: ") => return Ok(false),
        Err(e) => return Err(format!("an error not from from_json: {:?}: {e}", e.kind())),
    };
    // Only registered functions: each one the registry gives for its name.
    for (_, node) in graph.nodes() {
        if let Some(func) = node.func() {
            let name = func.qualified_name();
            if !find_function(&name).is_some_and(|f| std::ptr::eq(f, func)) {
                return Err(format!(
                    "node {} calls {name}, which is not the function registered under that name",
                    node.name()
                ));
            }
        }
    }
    let _ = graph.to_string();
    let _ = graph.to_rust("forward");
    match graph.to_json() {
        Ok(json) => match Graph::from_json(&json) {
            Ok(back) if back == graph => {}
            Ok(_) => return Err("the graph loaded writes JSON that loads different".into()),
            Err(e) => return Err(format!("the graph loaded writes JSON that does not load: {e}")),
        },
        Err(e) if e.kind() == ErrorKind::Value => {}
        Err(e) => return Err(format!("to_json fails with a {:?}: {e}", e.kind())),
    }
    if graph.lint().is_err() {
        return Ok(true);
    }
    let mut pruned = graph.clone();
    pruned.eliminate_dead_code();
    pruned.lint().map_err(|e| format!("eliminating dead code breaks the graph: {e}"))?;
    let doc: Json = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Ok(gm) = GraphModule::new(NoModule, graph) else { return Ok(true) };
    if !cheap(&doc) {
        return Ok(true);
    }
    let mut rng = Rng(rng_seed);
    let placeholders = gm.graph().placeholders().len();
    let count = if rng.percent(10) { rng.below(3) } else { placeholders };
    let inputs: Vec<Value> = (0..count)
        .map(|_| {
            let t = if rng.percent(60) {
                Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.0, 3.5, -2.5], [2, 3])
            } else {
                Ok(random_tensor(&mut rng))
            };
            Value::Tensor(t.expect("the data fits the shape"))
        })
        .collect();
    let ran = gm.call(&inputs);
    if let Ok(out) = &ran {
        let _ = out.to_string();
    }
    RAN.with(|r| r.set((r.get().0 + 1, r.get().1 + usize::from(ran.is_ok()))));
    Ok(true)
}

#[test]
fn graphs_from_json_never_panic_and_call_only_registered_functions() {
    // Random functions among the calls draw from the default generator, which seeded tests share.
    let _seeded = crate::seeded();
    let funcs = functions();
    fuzz(
        "fx_json",
        INPUTS,
        |rng| {
            let seed = rng.next();
            (text(rng, &funcs), seed)
        },
        |(text, _)| escaped(text.as_bytes(), 4000),
        |(text, seed)| check(text, *seed),
    );
    let (ran, ok) = RAN.with(Cell::get);
    eprintln!("untrusted::fx_json: {ran} graphs ran, {ok} of them to a result");
}

#[test]
fn the_common_operations_are_registered() {
    for (op, target) in COMMON {
        let func = find_function(target).unwrap_or_else(|| panic!("{target} is not registered"));
        assert_eq!(func.kind() == FuncKind::Method, op == "call_method", "{target}");
    }
}

/// A graph of one placeholder `x`, then `node`, then an output of `x`.
fn graph_with(node: Json) -> String {
    json!({"format": "torchfn.fx.graph", "version": 1, "nodes": [
        {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": []},
        node,
        {"name": "output", "op": "output", "target": "output", "args": [{"node": "x"}], "kwargs": []},
    ]})
    .to_string()
}

#[test]
fn a_graph_from_json_calls_only_registered_functions_and_names_an_unknown_one() {
    let load = |op: &str, target: Json| {
        let args = if op == "get_attr" { json!([]) } else { json!([{"node": "x"}]) };
        let node = json!({"name": "a", "op": op, "target": target, "args": args, "kwargs": []});
        Graph::from_json(&graph_with(node))
    };
    let err = |op: &str, target: &str| {
        let e = load(op, json!(target)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{e}");
        e.to_string()
    };
    assert_eq!(err("call_function", "torchfn.nope"), "from_json: node a: no function 'torchfn.nope' is registered");
    assert_eq!(err("call_method", "Tensor.nope"), "from_json: node a: no function 'Tensor.nope' is registered");
    assert_eq!(err("call_function", "torchfn.add "), "from_json: node a: no function 'torchfn.add ' is registered");
    assert_eq!(err("call_function", "os.system"), "from_json: node a: no function 'os.system' is registered");
    assert_eq!(err("call_method", "torchfn.add"), "from_json: node a: 'torchfn.add' is not a call_method");
    assert_eq!(err("call_function", "Tensor.add"), "from_json: node a: 'Tensor.add' is not a call_function");
    assert_eq!(err("call", "torchfn.add"), "from_json: node a: unknown op 'call'");
    let e = load("call_function", json!(["torchfn.add"])).unwrap_err();
    assert!(e.to_string().starts_with("from_json: a node without 'target'"), "{e}");
    // A registered function loads as the very function the registry has under that name.
    let graph = load("call_function", json!("torchfn.neg")).unwrap();
    let node = graph.node(graph.find("a").unwrap());
    assert!(std::ptr::eq(node.func().unwrap(), find_function("torchfn.neg").unwrap()));
    // Attributes and submodules are looked up in the module the graph runs on.
    let graph = load("get_attr", json!("secret")).unwrap();
    let e = GraphModule::new(NoModule, graph).unwrap_err();
    assert_eq!(e.to_string(), "GraphModule has no parameter, buffer or constant 'secret'");
    let graph = load("call_module", json!("evil")).unwrap();
    let e = GraphModule::new(NoModule, graph).unwrap_err();
    assert!(e.to_string().contains("'evil'"), "{e}");
}

#[test]
fn node_names_must_be_identifiers_and_unique() {
    let node = |name: &str| json!({"name": name, "op": "call_function", "target": "torchfn.neg", "args": [{"node": "x"}], "kwargs": []});
    let e = Graph::from_json(&graph_with(node("x"))).unwrap_err();
    assert_eq!(e.to_string(), "from_json: the name x is used twice");
    let e = Graph::from_json(&graph_with(node("a b"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "from_json: the node name \"a b\" is not an identifier (letters, digits and '_', not starting with a digit)"
    );
}

/// An input the fuzzer found: a node after an output node was put before it, where the node
/// it uses had not run, so the graph loaded wrote JSON that did not load.
#[test]
fn nodes_after_an_output_node_load_in_the_files_order() {
    let text = r#"{"format":"torchfn.fx.graph","nodes":[{"args":[],"kwargs":"x","name":"x","op":"placeholder","target":"x"},{"args":[{"node":"x"}],"kwargs":[],"meta":{"shape":5},"name":"n0","op":"output","target":"torchfn.cat"},{"args":[{"node":"n0"}],"kwargs":[],"name":"output","op":"output","target":"output"}],"version":1}"#;
    let graph = Graph::from_json(text).unwrap();
    let names: Vec<&str> = graph.nodes().map(|(_, n)| n.name()).collect();
    assert_eq!(names, ["x", "n0", "output"]);
    assert!(Graph::from_json(&graph.to_json().unwrap()).unwrap() == graph);
    assert_eq!(graph.lint().unwrap_err().to_string(), "the output node n0 is not the last node");
}

/// An input the fuzzer found: a 44-digit integer read as the float 4.0000000000000006e43, which
/// was written back as it is, and read back one unit in the last place off (serde_json's
/// default float parser is not exact), so the graph loaded wrote JSON that loaded different.
#[test]
fn float_constants_keep_every_bit_through_json() {
    let text = r#"{"format":"torchfn.fx.graph","nodes":[{"args":[],"kwargs":[],"name":"x","op":"placeholder","target":"x"},{"args":[39999999999999999999999999999999999999999911],"kwargs":[["dim",2]],"name":"n1","op":"call_method","target":"Tensor.square"},{"args":[{"node":"n1"}],"kwargs":[],"name":"output","op":"output","target":"output"}],"version":1}"#;
    let graph = Graph::from_json(text).unwrap();
    let json = graph.to_json().unwrap();
    // The nearest float to the integer, as Rust reads it.
    let nearest: f64 = "39999999999999999999999999999999999999999911".parse().unwrap();
    let n1 = graph.node(graph.find("n1").unwrap());
    assert!(matches!(n1.args[..], [torchfn::fx::Argument::Const(Value::Float(x))] if x.to_bits() == nearest.to_bits()));
    assert!(Graph::from_json(&json).unwrap() == graph);
    for x in [4.0000000000000006e43, 0.1 + 0.2, 1e-310, f64::MAX, f64::MIN_POSITIVE, -2.2250738585072014e-308] {
        let mut graph = Graph::new();
        let input = graph.create_node(torchfn::fx::Op::Placeholder("x".into()), vec![], vec![], "x");
        let args = vec![torchfn::fx::Argument::Node(input), torchfn::fx::Argument::Const(Value::Float(x))];
        let add = graph.create_node(torchfn::fx::Op::call(find_function("torchfn.add").unwrap()), args, vec![], "add");
        graph.create_node(torchfn::fx::Op::Output, vec![torchfn::fx::Argument::Node(add)], vec![], "output");
        let back = Graph::from_json(&graph.to_json().unwrap()).unwrap();
        assert!(back == graph, "{x:e} changed");
    }
}
