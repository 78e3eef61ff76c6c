//! torch.fx for Rust on the tiny GPT of the conformance suite: trace it, look at the graph,
//! draw it, check the traced module computes the same logits, and run two passes: one swaps
//! every `gelu` for `relu`, one fuses `linear` + `relu` into a function of our own.
//!
//! Run it with `cargo run --release --example fx_gpt`; it writes `target/fx_gpt/gpt.dot` and,
//! when Graphviz is installed (`apt-get install graphviz`), renders `target/fx_gpt/gpt.svg`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

use torchfn::fx::{self, Graph, Op, Tracer};
use torchfn::nn::functional as F;
use torchfn::nn::{Forward, Layer, Linear, ReLU};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "models/gpt.rs"]
pub mod gpt;

/// `relu(linear(input, weight, bias))` in one call: what [`fuse_linear_relu`] puts in place
/// of the pair.
#[torch_function(module = "fx_gpt")]
pub fn linear_relu(input: &Tensor, weight: &Tensor, #[default(None)] bias: Option<&Tensor>) -> Result<Tensor> {
    F::relu(&F::linear(input, weight, bias)?, false)
}

/// A pass: every `gelu(x, approximate)` becomes `relu(x)`. Returns how many it changed.
pub fn gelu_to_relu(graph: &mut Graph) -> usize {
    let gelus: Vec<_> = graph.nodes().filter(|(_, n)| n.func() == Some(F::GELU)).map(|(id, _)| id).collect();
    for &id in &gelus {
        let node = graph.get_mut(id).expect("a live node");
        node.op = Op::CallFunction(F::RELU);
        node.args.truncate(1);
        node.kwargs.clear();
    }
    gelus.len()
}

/// A pass written as a pattern: each `relu(linear(x, w, b))` becomes one
/// `linear_relu(x, w, b)` node. Returns how many pairs it fused.
pub fn fuse_linear_relu(graph: &mut Graph) -> Result<usize> {
    let names = ["x", "w", "b"];
    let pattern = fx::symbolic_trace_fn(&names, |a| F::relu(&F::linear(&a[0], &a[1], Some(&a[2]))?, false))?;
    let fused = fx::symbolic_trace_fn(&names, |a| linear_relu(&a[0], &a[1], Some(&a[2])))?;
    Ok(fx::replace_pattern(graph, pattern.graph(), fused.graph())?.len())
}

/// A two-layer perceptron, for the fusion pass.
#[derive(torchfn::nn::Module)]
pub struct Mlp {
    fc1: Linear,
    act: ReLU,
    fc2: Linear,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.call(&self.act.call(&self.fc1.call(x)?)?)
    }
}

/// The largest absolute difference between two tensors.
fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    torchfn::max(&(a - b)?.abs()?)?.item().map(|s| s.to_f64())
}

/// The whole story, as text; the files go to `out` when given.
pub fn run(out: Option<&Path>) -> Result<String> {
    let mut text = String::new();
    let config = gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0))?;
    let ids = torchfn::randint(128, [2, 16], Generator::new().manual_seed(1), None, None)?;
    let eager = model.forward(&ids)?;

    // GPT reads its input's shape, so it is traced with an example: the graph is specialised
    // to [2, 16]. torchfn's own layers (Embedding, LayerNorm, Dropout, Linear) stay leaves.
    let start = Instant::now();
    let gm = Tracer::new().example_inputs([ids.clone()]).input_name("input_ids").trace(model)?;
    let elapsed = start.elapsed();
    let mut kinds = BTreeMap::new();
    for (_, node) in gm.graph().nodes() {
        *kinds.entry(node.op.kind()).or_insert(0) += 1;
    }
    writeln!(
        text,
        "traced GPT-2 (2 layers) in {:.1} ms: {} nodes {kinds:?}",
        elapsed.as_secs_f64() * 1e3,
        gm.graph().len()
    )
    .ok();
    let printout = gm.graph().to_string();
    for line in printout.lines().take(12) {
        writeln!(text, "{line}").ok();
    }
    writeln!(text, "    ... ({} lines)", printout.lines().count()).ok();
    let traced = gm.forward(&ids)?;
    writeln!(text, "GraphModule vs eager logits: max |diff| = {}", max_diff(&traced, &eager)?).ok();

    // Pass 1: gelu -> relu (the model is another one now, so the logits move).
    let mut gm = gm;
    let swapped = gelu_to_relu(gm.graph_mut());
    gm.lint()?;
    writeln!(
        text,
        "gelu -> relu: {swapped} nodes swapped, logits now differ by {:.3}",
        max_diff(&gm.forward(&ids)?, &eager)?
    )
    .ok();

    // Pass 2: linear + relu fused, on a perceptron traced down to functions.
    let g = Generator::new().manual_seed(2);
    let mlp = Mlp { fc1: Linear::new(8, 16, true, &g)?, act: ReLU::default(), fc2: Linear::new(16, 4, true, &g)? };
    let x = torchfn::randn([3, 8], &g, None, None)?;
    let want = mlp.forward(&x)?;
    let mut flat = Tracer::new().leaf_modules(|_, _| false).trace(mlp)?;
    let fused = fuse_linear_relu(flat.graph_mut())?;
    flat.lint()?;
    writeln!(text, "linear + relu fused {fused} time(s); the graph is now:\n{}", flat.graph()).ok();
    writeln!(text, "fused vs eager: max |diff| = {}", max_diff(&flat.forward(&x)?, &want)?).ok();

    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|e| Error::os_error(format!("{}: {e}", out.display())))?;
        let mut gm = gm;
        fx::ShapeProp::propagate(&mut gm, &[ids.into()])?;
        let dot = out.join("gpt.dot");
        std::fs::write(&dot, gm.graph().to_dot("gpt_tiny")).map_err(|e| Error::os_error(e.to_string()))?;
        let svg = out.join("gpt.svg");
        let rendered = std::process::Command::new("dot").arg("-Tsvg").arg(&dot).arg("-o").arg(&svg).status();
        match rendered {
            Ok(status) if status.success() => writeln!(text, "wrote {} and {}", dot.display(), svg.display()),
            _ => writeln!(text, "wrote {} (install graphviz to render it: dot -Tsvg)", dot.display()),
        }
        .ok();
    }
    Ok(text)
}

fn main() -> Result<()> {
    print!("{}", run(Some(Path::new("target/fx_gpt")))?);
    Ok(())
}
