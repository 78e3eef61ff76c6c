//! The attention, transformer and recurrent modules against PyTorch 2.15
//! (`tests/golden/modules.json`, written by `bench/golden/gen_modules.py`): each module loads
//! PyTorch's state dict, runs PyTorch's inputs, and gives its outputs and the gradients of
//! `sum(output * grad_output)` for the inputs and every parameter.

use serde_json::Value as Json;
use torchfn::nn::{
    Activation, Forward, GRU, LSTM, LayerNorm, Module, MultiheadAttention, StateDict, TransformerEncoder,
    TransformerEncoderLayer,
};
use torchfn::prelude::*;

use crate::golden::{Place, compare, value};

/// One of the case's modules, as `forward` runs it.
enum Built {
    Attention(MultiheadAttention),
    Layer(Box<TransformerEncoderLayer>),
    Encoder(TransformerEncoder),
    Lstm(LSTM),
    Gru(GRU),
}

impl Built {
    fn module(&self) -> &dyn Module {
        match self {
            Built::Attention(m) => m,
            Built::Layer(m) => m.as_ref(),
            Built::Encoder(m) => m,
            Built::Lstm(m) => m,
            Built::Gru(m) => m,
        }
    }
}

fn int(args: &Json, name: &str, default: usize) -> usize {
    args.get(name).and_then(Json::as_u64).map_or(default, |v| v as usize)
}

fn flag(args: &Json, name: &str, default: bool) -> bool {
    args.get(name).and_then(Json::as_bool).unwrap_or(default)
}

fn build(kind: &str, a: &Json) -> Built {
    let g = Generator::new();
    let layer = || {
        let activation = if a.get("activation").and_then(Json::as_str) == Some("gelu") {
            Activation::Gelu
        } else {
            Activation::Relu
        };
        let (d, heads, ff) = (int(a, "d_model", 0), int(a, "nhead", 0), int(a, "dim_feedforward", 0));
        let (batch_first, norm_first) = (flag(a, "batch_first", false), flag(a, "norm_first", false));
        TransformerEncoderLayer::new(d, heads, ff, 0.0, activation, 1e-5, batch_first, norm_first, true, &g).unwrap()
    };
    match kind {
        "MultiheadAttention" => {
            let e = int(a, "embed_dim", 0);
            let dims = |name: &str| a.get(name).and_then(Json::as_u64).map(|v| v as usize);
            let (kdim, vdim) = (dims("kdim"), dims("vdim"));
            let m = MultiheadAttention::new(
                e,
                int(a, "num_heads", 0),
                0.0,
                true,
                flag(a, "add_bias_kv", false),
                false,
                kdim,
                vdim,
                flag(a, "batch_first", false),
                &g,
            );
            Built::Attention(m.unwrap())
        }
        "TransformerEncoderLayer" => Built::Layer(Box::new(layer())),
        "TransformerEncoder" => {
            let norm = flag(a, "norm", false).then(|| LayerNorm::new(&[int(a, "d_model", 0)], 1e-5).unwrap());
            Built::Encoder(TransformerEncoder::new(layer(), int(a, "num_layers", 1), norm).unwrap())
        }
        "LSTM" | "GRU" => {
            let (i, h, layers) = (int(a, "input_size", 0), int(a, "hidden_size", 0), int(a, "num_layers", 1));
            let (bias, batch_first) = (flag(a, "bias", true), flag(a, "batch_first", false));
            let bidirectional = flag(a, "bidirectional", false);
            if kind == "LSTM" {
                Built::Lstm(LSTM::new(i, h, layers, bias, batch_first, 0.0, bidirectional, &g).unwrap())
            } else {
                Built::Gru(GRU::new(i, h, layers, bias, batch_first, 0.0, bidirectional, &g).unwrap())
            }
        }
        other => panic!("unknown module {other}"),
    }
}

/// The module's forward on the case's inputs, its tensor outputs flattened in order.
fn forward(built: &Built, inputs: &[Value], kwargs: &Json) -> torchfn::Result<Vec<Option<Tensor>>> {
    let tensor = |i: usize| inputs[i].as_tensor().unwrap().clone();
    let kw = |name: &str| kwargs.get(name).map(value).and_then(|v| v.as_tensor().cloned());
    let kw_flag = |name: &str, default: bool| match kwargs.get(name).map(value) {
        Some(Value::Bool(b)) => b,
        _ => default,
    };
    Ok(match built {
        Built::Attention(m) => {
            let (padding, mask) = (kw("key_padding_mask"), kw("attn_mask"));
            let average = kw_flag("average_attn_weights", true);
            let (out, weights) =
                m.forward(&tensor(0), &tensor(1), &tensor(2), padding.as_ref(), true, mask.as_ref(), average, false)?;
            vec![Some(out), weights]
        }
        Built::Layer(m) => vec![Some(m.forward(&tensor(0))?)],
        Built::Encoder(m) => vec![Some(m.forward(&tensor(0))?)],
        Built::Lstm(m) => {
            let states = match inputs.get(1) {
                Some(Value::Tuple(s)) => Some((s[0].as_tensor().unwrap().clone(), s[1].as_tensor().unwrap().clone())),
                _ => None,
            };
            let (out, (h, c)) = m.forward(&tensor(0), states.as_ref().map(|(h, c)| (h, c)))?;
            vec![Some(out), Some(h), Some(c)]
        }
        Built::Gru(m) => {
            let (out, h) = m.forward(&tensor(0), None)?;
            vec![Some(out), Some(h)]
        }
    })
}

fn run_case(case: &Json) -> Result<(), String> {
    let built = build(case["kind"].as_str().unwrap(), &case["args"]);
    let module = built.module();
    let mut state = StateDict::new();
    for (name, t) in case["state"].as_object().unwrap() {
        state.insert(name.as_str(), value(t).as_tensor().unwrap().clone());
    }
    module.load_state_dict(&state, true).map_err(|e| format!("load_state_dict: {e}"))?;
    module.eval();
    let grad_inputs: Vec<usize> = case["input_grads"].as_object().unwrap().keys().map(|k| k.parse().unwrap()).collect();
    let inputs: Vec<Value> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| match value(v) {
            Value::Tensor(t) if grad_inputs.contains(&i) => Value::Tensor(t.requires_grad_(true).unwrap()),
            other => other,
        })
        .collect();
    let outputs = forward(&built, &inputs, &case["kwargs"]).map_err(|e| format!("forward: {e}"))?;
    let tol = Some(1e-4);
    let mut total: Option<Tensor> = None;
    for (i, (want, got)) in case["outputs"].as_array().unwrap().iter().zip(&outputs).enumerate() {
        let Some(got) = got else { return Err(format!("output {i} is missing")) };
        compare(want, &Value::Tensor(got.clone()), tol, Place::Cpu).map_err(|e| format!("output {i}: {e}"))?;
        let g = value(&case["grad_outputs"][i]);
        let term = (got * g.as_tensor().unwrap()).and_then(|p| p.sum()).map_err(|e| e.to_string())?;
        total = Some(match total {
            Some(t) => (&t + &term).unwrap(),
            None => term,
        });
    }
    total.unwrap().backward().map_err(|e| format!("backward: {e}"))?;
    for (i, want) in case["input_grads"].as_object().unwrap() {
        let grad = inputs[i.parse::<usize>().unwrap()].as_tensor().unwrap().grad().unwrap();
        let grad = grad.ok_or(format!("input {i} has no gradient"))?;
        compare(want, &Value::Tensor(grad), tol, Place::Cpu).map_err(|e| format!("input {i}'s gradient: {e}"))?;
    }
    let params = module.named_parameters();
    for (name, want) in case["param_grads"].as_object().unwrap() {
        let (_, p) = params.iter().find(|(n, _)| n == name).ok_or(format!("no parameter {name}"))?;
        let grad = p.grad().unwrap().ok_or(format!("{name} has no gradient"))?;
        compare(want, &Value::Tensor(grad), tol, Place::Cpu).map_err(|e| format!("{name}'s gradient: {e}"))?;
    }
    Ok(())
}

#[test]
fn attention_transformer_and_recurrent_modules_match_pytorch() {
    let cases = crate::grads::golden_file("modules.json")["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 7);
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| run_case(c).err().map(|e| format!("case {i} ({}): {e}", c["kind"])))
        .collect();
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
