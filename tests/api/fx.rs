//! torch.fx for Rust: tracing through the protocol, the graph and its printouts, running,
//! editing and saving it, and conformance (every sampled operation, the two real models).

use torchfn::ErrorKind;
use torchfn::fx::{self, Argument, GraphModule, Interpreter, Op, Position, Run, ShapeProp, Tracer};
use torchfn::nn::{Forward, GELU, Layer, LayerNorm, Linear, Module};
use torchfn::overrides::{get_ignored_functions, get_overridable_functions};
use torchfn::prelude::*;
use torchfn::testing::samples;

use crate::examples::train_gpt::gpt;
use crate::function::Log;
use crate::workloads::{file, gpt_config, meta, resnet};

#[allow(dead_code, unused_imports)]
#[path = "fx_emitted.rs"]
mod fx_emitted;

/// `tanh(x) * k`: a user's overridable function, one node when traced.
#[torch_function(module = "fxtest")]
pub fn scaled_tanh(x: &Tensor, k: f64) -> Result<Tensor> {
    &x.tanh()? * k
}

/// The small model of the golden printouts: leaf layers, a user function, a constructor and a
/// method.
#[derive(torchfn::nn::Module)]
struct Small {
    fc1: Linear,
    act: GELU,
    norm: LayerNorm,
    fc2: Linear,
}

impl Small {
    fn new() -> Small {
        let g = Generator::new().manual_seed(3);
        Small {
            fc1: Linear::new(4, 8, true, &g).unwrap(),
            act: GELU::new("none").unwrap(),
            norm: LayerNorm::new(&[8], 1e-5).unwrap(),
            fc2: Linear::new(8, 3, true, &g).unwrap(),
        }
    }
}

impl Forward for Small {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.act.call(&self.fc1.call(x)?)?;
        let h = scaled_tanh(&self.norm.call(&h)?, 0.5)?;
        let y = self.fc2.call(&h)?;
        let bias = torchfn::ones([3], None, None)?;
        (&y + &bias)?.view(vec![-1])
    }
}

fn input() -> Tensor {
    torchfn::randn([2, 4], Generator::new().manual_seed(1), None, None).unwrap()
}

/// Bit-for-bit equality of two results (tensors by dtype, shape and element bits).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => same_tensor(x, y),
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a.to_string() == b.to_string(),
    }
}

fn same_tensor(x: &Tensor, y: &Tensor) -> bool {
    let (x, y) = (x.detach().unwrap().contiguous().unwrap(), y.detach().unwrap().contiguous().unwrap());
    if x.shape().unwrap() != y.shape().unwrap() || x.dtype().unwrap() != y.dtype().unwrap() {
        return false;
    }
    match x.dtype().unwrap() {
        DType::Float32 => x.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).eq(y
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())),
        DType::Float64 => x.to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).eq(y
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())),
        DType::Int64 => x.to_vec::<i64>().unwrap() == y.to_vec::<i64>().unwrap(),
        DType::Int32 => x.to_vec::<i32>().unwrap() == y.to_vec::<i32>().unwrap(),
        DType::Bool => x.to_vec::<bool>().unwrap() == y.to_vec::<bool>().unwrap(),
        // Every other dtype's elements are exactly their values in f64.
        _ => x.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).eq(y
            .to(DType::Float64, false, false)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())),
    }
}

fn golden_path(name: &str) -> String {
    format!("{}/tests/golden/fx/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Compares `text` with a golden file; `TORCHFN_BLESS=1` rewrites the file instead.
fn check_golden(path: &str, text: &str) {
    if std::env::var_os("TORCHFN_BLESS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e} (run with TORCHFN_BLESS=1)"));
    assert_eq!(text, want, "{path} differs; review the change and rerun with TORCHFN_BLESS=1");
}

#[test]
fn a_module_traces_into_fx_s_node_kinds_keeping_leaves_and_user_functions() {
    let model = Small::new();
    let x = input();
    let eager = model.forward(&x).unwrap();
    let gm = fx::symbolic_trace(model).unwrap();
    let kinds: Vec<(&str, String)> = gm.graph().nodes().map(|(_, n)| (n.op.kind(), n.op.target())).collect();
    assert_eq!(
        kinds,
        [
            ("placeholder", "input".to_string()),
            ("call_module", "fc1".into()),
            ("call_module", "act".into()),
            ("call_module", "norm".into()),
            ("call_function", "fxtest.scaled_tanh".into()),
            ("call_module", "fc2".into()),
            ("call_function", "torchfn.ones".into()),
            ("call_function", "Tensor.__add__".into()),
            ("call_method", "view".into()),
            ("output", "output".into()),
        ]
    );
    assert!(same_tensor(&gm.forward(&x).unwrap(), &eager));
    check_golden(&golden_path("small_model.txt"), &format!("{}\n{}", gm.graph(), gm.graph().tabular()));
    check_golden(&golden_path("small_model.dot"), &gm.graph().to_dot("Small"));
}

#[test]
fn leaf_policy_and_trace_through_choose_the_level_of_the_graph() {
    let x = input();
    let model = Small::new();
    let eager = model.forward(&x).unwrap();
    let flat = Tracer::new().leaf_modules(|_, _| false).trace_through(SCALED_TANH).trace(model).unwrap();
    let targets: Vec<String> = flat.graph().nodes().map(|(_, n)| n.op.target()).collect();
    assert!(
        targets.contains(&"fc1.weight".to_string()) && targets.contains(&"torchfn.nn.functional.linear".to_string())
    );
    assert!(targets.contains(&"torchfn.nn.functional.layer_norm".to_string()));
    assert!(targets.contains(&"tanh".to_string()), "scaled_tanh is traced through: {targets:?}");
    assert!(!flat.graph().nodes().any(|(_, n)| matches!(n.op, Op::CallModule(_))));
    assert!(same_tensor(&flat.forward(&x).unwrap(), &eager));
    // Only `fc2` is a leaf.
    let one = Tracer::new().leaf_modules(|_, path| path == "fc2").trace(Small::new()).unwrap();
    let modules: Vec<String> =
        one.graph().nodes().filter(|(_, n)| matches!(n.op, Op::CallModule(_))).map(|(_, n)| n.op.target()).collect();
    assert_eq!(modules, ["fc2"]);
}

#[test]
fn constants_and_constructors_are_recorded() {
    let c = torchfn::tensor([10.0f32, 20.0]).unwrap();
    let gm = fx::symbolic_trace_fn(&["x"], |x| {
        let z = torchfn::zeros([2], None, None)?;
        &(&x[0] + &c)? + &z
    })
    .unwrap();
    assert_eq!(
        gm.graph().to_string(),
        "graph():
    %x : [num_users=1] = placeholder[target=x]
    %zeros : [num_users=1] = call_function[target=torchfn.zeros](args = ((2,), None, None), kwargs = {})
    %_tensor_constant0 : [num_users=1] = get_attr[target=_tensor_constant0]
    %add : [num_users=1] = call_function[target=Tensor.__add__](args = (%x, %_tensor_constant0), kwargs = {})
    %add_1 : [num_users=1] = call_function[target=Tensor.__add__](args = (%add, %zeros), kwargs = {})
    return add_1
"
    );
    let y = gm.call(&[torchfn::tensor([1.0f32, 2.0]).unwrap().into()]).unwrap();
    assert_eq!(y.as_tensor().unwrap().to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(gm.state_dict().keys().collect::<Vec<_>>(), ["_tensor_constant0"]);
}

#[test]
fn reading_a_proxy_is_a_trace_error_naming_the_operation_and_the_way_out() {
    type Program = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
    let cases: Vec<(&str, Program)> = vec![
        ("Tensor.item", Box::new(|x: &Tensor| x.sum()?.item().map(|_| x.clone()))),
        ("to_vec()", Box::new(|x: &Tensor| x.to_vec::<f32>().map(|_| x.clone()))),
        ("Tensor.shape.__get__", Box::new(|x: &Tensor| x.shape().map(|_| x.clone()))),
        ("Tensor.dtype.__get__", Box::new(|x: &Tensor| x.dtype().map(|_| x.clone()))),
    ];
    for (op, f) in cases {
        let err = fx::symbolic_trace_fn(&["x"], |x| f(&x[0])).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Trace, "{op}: {err}");
        let text = err.to_string();
        assert!(text.contains(op) && text.contains("concrete_args") && text.contains("example_inputs"), "{text}");
    }
    // With example inputs the shape is known (the graph is specialised to it); data still is not.
    let example = torchfn::ones([2, 3], None, None).unwrap();
    let gm = Tracer::new()
        .example_inputs([example.clone()])
        .trace_fn(&["x"], |x| {
            let n = x[0].shape()?[1] as i64;
            x[0].reshape(&[n, -1])
        })
        .unwrap();
    assert_eq!(gm.call(&[example.clone().into()]).unwrap().as_tensor().unwrap().shape().unwrap().to_vec(), [3, 2]);
    let err = Tracer::new().example_inputs([example.clone()]).trace_fn(&["x"], |x| x[0].sum()?.item()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trace);
    // A concrete argument may be read: it is a real tensor, baked into the graph.
    let gm = Tracer::new()
        .concrete_args(1, torchfn::tensor([2.0f32]).unwrap())
        .trace_fn(&["x", "k"], |x| {
            let k = x[1].item()?.to_f64();
            &x[0] * k
        })
        .unwrap();
    let y = gm.call(&[torchfn::tensor([3.0f32]).unwrap().into(), Value::None]).unwrap();
    assert_eq!(y.as_tensor().unwrap().to_vec::<f32>().unwrap(), [6.0]);
}

#[test]
fn interpreting_runs_through_the_protocol_so_modes_see_each_call() {
    let gm = fx::symbolic_trace_fn(&["x"], |x| scaled_tanh(&(&x[0] * 3.0)?, 2.0)).unwrap();
    let x = torchfn::tensor([0.5f32]).unwrap();
    let log = push_mode(Log::default());
    let y = Run(&gm).run(&[x.into()]).unwrap();
    assert_eq!(*log.0.borrow(), ["Tensor.__mul__", "fxtest.scaled_tanh"]);
    drop(log);
    assert_eq!(y.as_tensor().unwrap().to_vec::<f32>().unwrap(), [(1.5f32).tanh() * 2.0]);
    let err = gm.call(&[]).unwrap_err();
    assert_eq!(err.to_string(), "forward() takes 1 positional arguments but 0 were given");
}

#[test]
fn shape_prop_fills_shapes_and_dtypes() {
    let mut gm = fx::symbolic_trace(Small::new()).unwrap();
    ShapeProp::propagate(&mut gm, &[input().into()]).unwrap();
    let shape = |name: &str| gm.graph().node(gm.graph().find(name).unwrap()).meta.shape.as_ref().unwrap().to_vec();
    assert_eq!(shape("input"), [2, 4]);
    assert_eq!(shape("fc1"), [2, 8]);
    assert_eq!(shape("view"), [6]);
    assert!(gm.graph().to_dot("Small").contains("torch.float32[2, 8]"));
}

#[test]
fn graphs_are_edited_with_insert_replace_erase_and_dead_code_elimination() {
    let mut gm = fx::symbolic_trace_fn(&["x"], |x| {
        let _unused = x[0].exp()?;
        x[0].relu()
    })
    .unwrap();
    let graph = gm.graph_mut();
    let relu = graph.find("relu").unwrap();
    let x = graph.find("x").unwrap();
    // relu(x) becomes relu(x) + 1, by inserting after it and moving its uses.
    let add = graph
        .insert(
            Position::After(relu),
            Op::CallFunction(torchfn::ADD),
            vec![Argument::Node(relu), Argument::Const(Value::Int(1))],
            vec![],
            "add",
        )
        .unwrap();
    assert_eq!(graph.replace_all_uses_with(relu, add), [graph.output().unwrap()]);
    let err = graph.erase_node(x).unwrap_err();
    assert!(err.to_string().starts_with("Tried to erase Node x but it still had 2 users"), "{err}");
    assert!(graph.eliminate_dead_code());
    assert!(graph.find("exp").is_none());
    gm.lint().unwrap();
    let y = gm.call(&[torchfn::tensor([-1.0f32, 2.0]).unwrap().into()]).unwrap();
    assert_eq!(y.as_tensor().unwrap().to_vec::<f32>().unwrap(), [1.0, 3.0]);
    // A use before the definition is caught.
    let graph = gm.graph_mut();
    let early = graph
        .insert(Position::Before(x), Op::CallMethod(Tensor::RELU), vec![Argument::Node(x)], vec![], "early")
        .unwrap();
    let err = graph.lint().unwrap_err();
    assert_eq!(err.to_string(), "Argument x of Node early was used before it was defined!");
    graph.erase_node(early).unwrap();
    graph.lint().unwrap();
    let gone = graph.insert(Position::After(early), Op::Output, vec![], vec![], "again").unwrap_err();
    assert_eq!(gone.to_string(), "insert: the anchor node is not in this graph");
}

#[test]
fn graphs_save_to_json_and_graph_modules_round_trip_through_files() {
    let model = Small::new();
    let x = input();
    let gm = fx::symbolic_trace(model).unwrap();
    let json = gm.graph().to_json().unwrap();
    let back = torchfn::fx::Graph::from_json(&json).unwrap();
    assert!(back == *gm.graph());
    // A graph module made by hand checks that what the graph names exists.
    let err = GraphModule::new(fx::NoModule, back.clone()).unwrap_err();
    assert_eq!(err.to_string(), "Module has no submodule 'fc1' ('fc1' is missing)");
    GraphModule::new(Small::new(), back).unwrap();
    let dir = std::env::temp_dir().join(format!("torchfn-fx-{}", std::process::id()));
    gm.save(&dir).unwrap();
    // Another model of the same type, other weights: loading puts the saved ones in.
    let mut other = Small::new();
    other.fc1 = Linear::new(4, 8, true, &Generator::new().manual_seed(99)).unwrap();
    let loaded = GraphModule::load(&dir, other).unwrap();
    assert!(same_tensor(&loaded.forward(&x).unwrap(), &gm.forward(&x).unwrap()));
    std::fs::remove_dir_all(&dir).ok();
    let err = torchfn::fx::Graph::from_json("{\"format\": \"torchfn.fx.graph\", \"version\": 1, \"nodes\": [{\"name\": \"a\", \"op\": \"call_function\", \"target\": \"nope.f\"}]}").unwrap_err();
    assert_eq!(err.to_string(), "from_json: node a: no function 'nope.f' is registered");
}

#[test]
fn the_graph_as_rust_source_compiles_and_gives_the_same_result() {
    let model = Small::new();
    let x = input();
    let eager = model.forward(&x).unwrap();
    let gm = fx::symbolic_trace(model).unwrap();
    let source = gm.to_rust("small_forward").unwrap();
    check_golden(&format!("{}/tests/api/fx_emitted.rs", env!("CARGO_MANIFEST_DIR")), &source);
    // `fx_emitted.rs` is that source, compiled into this test.
    let out = fx_emitted::small_forward(gm.root(), &[x.into()]).unwrap();
    assert!(same_tensor(out.as_tensor().unwrap(), &eager));
}

/// The tensors of a sample's arguments, in order, and the arguments with each replaced by
/// `make(i)`.
fn replace_tensors(value: &Value, found: &mut Vec<Tensor>, make: &dyn Fn(usize) -> Value) -> Value {
    match value {
        Value::Tensor(t) => {
            found.push(t.clone());
            make(found.len() - 1)
        }
        Value::List(items) => Value::List(items.iter().map(|v| replace_tensors(v, found, make)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| replace_tensors(v, found, make)).collect()),
        other => other.clone(),
    }
}

/// Traces sample `i` of `func` with every tensor made an input, interprets the graph on a
/// fresh copy of the sample, and describes how the result differs from the eager call's, if
/// it does.
fn traced_differs(func: &'static Func, i: usize) -> Option<String> {
    // Eager, on one fresh copy of the sample.
    let s = samples(func).swap_remove(i);
    torchfn::manual_seed(5);
    let eager = func.call(&s.args, &s.kwargs);
    // Traced, on another: every tensor becomes an input.
    let s = samples(func).swap_remove(i);
    let mut tensors = Vec::new();
    let keep = |_: usize| Value::None;
    for v in s.args.iter().chain(s.kwargs.iter().map(|(_, v)| v)) {
        replace_tensors(v, &mut tensors, &keep);
    }
    let names: Vec<String> = (0..tensors.len()).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let traced = fx::symbolic_trace_fn(&names, |proxies| {
        let mut seen = Vec::new();
        let put = |i: usize| Value::Tensor(proxies[i].clone());
        let args: Vec<Value> = s.args.iter().map(|v| replace_tensors(v, &mut seen, &put)).collect();
        let mut kwargs = Kwargs::new();
        for (k, v) in s.kwargs.iter() {
            kwargs.insert(k, replace_tensors(v, &mut seen, &put));
        }
        func.call(&args, &kwargs)
    });
    let run = traced.and_then(|gm| {
        torchfn::manual_seed(5);
        gm.call(&tensors.iter().map(|t| Value::Tensor(t.clone())).collect::<Vec<_>>())
    });
    // An address is the same only for the same tensor: compare with the traced run's own.
    let eager = if func == Tensor::DATA_PTR {
        Tensor::DATA_PTR.call(&[tensors[0].clone().into()], &Kwargs::new())
    } else {
        eager
    };
    let ok = match (&eager, &run) {
        (Ok(a), Ok(b)) => same(a, b),
        (Err(a), Err(b)) => a.kind() == b.kind() && a.to_string() == b.to_string(),
        _ => false,
    };
    (!ok).then(|| format!("{func} sample {i}: eager {eager:?}, traced {run:?}"))
}

#[test]
fn every_sampled_operation_traces_and_interprets_to_the_eager_result_bit_for_bit() {
    let _seeded = crate::seeded();
    let mut funcs: Vec<&'static Func> =
        get_overridable_functions().into_values().flatten().filter(|f| !crate::coverage::is_printing(f)).collect();
    funcs.extend(get_ignored_functions().iter().filter_map(|f| torchfn::overrides::find_function(f.qualified_name())));
    let (mut checked, mut functions) = (0, 0);
    let mut failures = Vec::new();
    for func in funcs {
        let count = samples(func).len();
        if count > 0 {
            functions += 1;
        }
        for i in 0..count {
            // Tests that draw from the process-wide default generator without seeding it may run
            // between a seed and a draw here; a genuine difference shows on every attempt.
            let mut failure = traced_differs(func, i);
            for _ in 0..2 {
                if failure.is_some() {
                    failure = traced_differs(func, i);
                }
            }
            failures.extend(failure);
            checked += 1;
        }
    }
    println!("fx conformance: {checked} samples of {functions} functions traced and interpreted");
    assert!(failures.is_empty(), "{} of {checked} differ:\n{}", failures.len(), failures.join("\n"));
    assert!(functions > 250, "only {functions} functions have samples");
}

#[test]
fn traced_gpt_tiny_and_resnet_tiny_give_the_eager_logits_and_gradients_bit_for_bit() {
    // GPT reads its input's shape, so it is traced with an example (fixing B and T).
    let meta_gpt = meta("gpt_tiny");
    let inputs = file("gpt_tiny", "inputs");
    let ids = inputs.get("input_ids").unwrap().clone();
    let make = || {
        let m = gpt::GPT2LMHeadModel::new(gpt_config(&meta_gpt), &Generator::new().manual_seed(0)).unwrap();
        m.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
        m
    };
    let eager = make();
    let gm = Tracer::new().example_inputs([ids.clone()]).input_name("input_ids").trace(make()).unwrap();
    let modules = gm.graph().nodes().filter(|(_, n)| matches!(n.op, Op::CallModule(_))).count();
    assert!(modules >= 10, "Embedding, Dropout, LayerNorm and the tied head stay call_module nodes");
    let (want, got) = (eager.forward(&ids).unwrap(), gm.forward(&ids).unwrap());
    assert!(same_tensor(&want, &got), "GraphModule logits differ from eager");
    let targets = inputs.get("labels").or(inputs.get("targets")).cloned();
    let targets = targets.unwrap_or_else(|| ids.clone());
    gpt::GPT2LMHeadModel::loss(&want, &targets).unwrap().backward().unwrap();
    gpt::GPT2LMHeadModel::loss(&got, &targets).unwrap().backward().unwrap();
    let traced_grads = gm.named_parameters();
    for ((name, p), (traced_name, q)) in eager.named_parameters().into_iter().zip(traced_grads) {
        assert_eq!(name, traced_name);
        assert!(same_tensor(&p.grad().unwrap().unwrap(), &q.grad().unwrap().unwrap()), "gradient of {name} differs");
    }
    // ResNet reads no shape: plain symbolic tracing; BatchNorm stays a leaf (eval mode).
    let meta_r = meta("resnet_tiny");
    let images = file("resnet_tiny", "inputs").get("images").unwrap().clone();
    let make = || {
        let m = resnet(&meta_r);
        m.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
        m.eval();
        m
    };
    let eager = make();
    let gm = fx::symbolic_trace(make()).unwrap();
    assert!(gm.graph().nodes().any(|(_, n)| n.op.target() == "layer1.0.bn1"));
    assert!(same_tensor(&eager.forward(&images).unwrap(), &gm.forward(&images).unwrap()));
}

#[test]
fn replace_pattern_rewrites_every_self_contained_occurrence() {
    let pattern = fx::symbolic_trace_fn(&["a"], |a| (&a[0].exp()? + 1.0)?.log()).unwrap();
    let fused = fx::symbolic_trace_fn(&["a"], |a| a[0].exp()?.log1p()).unwrap();
    let x = torchfn::tensor([0.5f32, -2.0]).unwrap();
    // Two occurrences, one feeding the other.
    let softplus2 = |x: &Tensor| -> Result<Tensor> {
        let y = (&x.exp()? + 1.0)?.log()?;
        (&y.exp()? + 1.0)?.log()
    };
    let mut gm = fx::symbolic_trace_fn(&["x"], |x| softplus2(&x[0])).unwrap();
    assert_eq!(fx::replace_pattern(gm.graph_mut(), pattern.graph(), fused.graph()).unwrap().len(), 2);
    gm.lint().unwrap();
    let targets: Vec<String> = gm.graph().nodes().map(|(_, n)| n.op.target()).collect();
    assert_eq!(targets, ["x", "exp", "log1p", "exp", "log1p", "output"]);
    let got = gm.call(&[x.clone().into()]).unwrap();
    let want = softplus2(&x).unwrap().to_vec::<f32>().unwrap();
    for (g, w) in got.as_tensor().unwrap().to_vec::<f32>().unwrap().iter().zip(want) {
        assert!((g - w).abs() < 1e-6);
    }
    // An intermediate used outside the occurrence keeps it from being replaced.
    let mut gm = fx::symbolic_trace_fn(&["x"], |x| {
        let e = x[0].exp()?;
        &(&e + 1.0)?.log()? + &e
    })
    .unwrap();
    assert!(fx::replace_pattern(gm.graph_mut(), pattern.graph(), fused.graph()).unwrap().is_empty());
    // A different constant does not match.
    let mut gm = fx::symbolic_trace_fn(&["x"], |x| (&x[0].exp()? + 2.0)?.log()).unwrap();
    assert!(fx::replace_pattern(gm.graph_mut(), pattern.graph(), fused.graph()).unwrap().is_empty());
}

#[test]
fn a_graph_of_another_format_version_is_refused_by_name() {
    let json = r#"{"format": "torchfn.fx.graph", "version": 2, "nodes": []}"#;
    let err = torchfn::fx::Graph::from_json(json).unwrap_err();
    assert!(err.to_string().contains("version 2 of the graph format"), "{err}");
}
