//! `torchfn::utils::flop_counter`: PyTorch 2.15's FLOP counts for one training step of the two
//! reference models (`tests/golden/flops.json`), its table layout, and formulas users register.

use serde_json::Value as Json;
use torchfn::dispatch::{Operator, aten, push_dispatch_mode};
use torchfn::nn::{Layer, Module};
use torchfn::prelude::*;
use torchfn::utils::flop_counter::{FlopCounterMode, register_flop_formula};

use crate::examples::train_gpt::gpt;
use crate::workloads::{file, gpt_config, meta, resnet};

fn golden(workload: &str) -> Json {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/flops.json")).unwrap();
    serde_json::from_str::<Json>(&text).unwrap()["workloads"][workload].clone()
}

/// PyTorch's counts under `Global`, by operator.
fn pytorch_global(workload: &str, op: &str) -> u64 {
    golden(workload)["by_module"]["Global"][op].as_u64().unwrap_or(0)
}

/// Each module's total against PyTorch's: the same modules, the same FLOPs (operator names
/// differ: torchfn's batched `matmul` is PyTorch's mm, addmm and bmm).
fn assert_module_totals(counter: &FlopCounterMode, workload: &str) {
    let ours = module_totals(counter);
    let theirs: std::collections::BTreeMap<String, u64> = golden(workload)["by_module"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(m, ops)| (m.clone(), ops.as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum()))
        .collect();
    assert_eq!(ours, theirs);
    // The table's module rows (not its operator rows, whose names differ) are PyTorch's.
    let modules = |table: &str| -> Vec<String> {
        table.lines().filter(|l| !l.trim_start().starts_with("- ")).map(str::to_string).collect()
    };
    let table = counter.get_table(Some(2));
    let want = golden(workload)["table_depth_2"].as_str().unwrap().to_string();
    let width = |t: &str| t.lines().nth(1).unwrap().find("  ").unwrap();
    // Columns are as wide as their widest cell: PyTorch's operator names are wider or narrower.
    let trimmed = |t: &str| -> Vec<String> {
        modules(t)
            .into_iter()
            .skip(2)
            .map(|l| {
                let (name, rest) = l.split_at(width(t));
                format!("{} {}", name.trim_end(), rest.split_whitespace().collect::<Vec<_>>().join(" "))
            })
            .collect()
    };
    assert_eq!(trimmed(&table), trimmed(&want), "{table}");
}

/// One training step (forward, loss, backward; no optimizer) under a FLOP counter.
fn counted(step: impl FnOnce() -> Tensor) -> std::rc::Rc<FlopCounterMode> {
    let counter = push_dispatch_mode(FlopCounterMode::new());
    step().backward().unwrap();
    counter.mode()
}

#[test]
fn a_gpt_tiny_step_counts_pytorch_s_flops() {
    let meta = meta("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    model.train(true);
    let inputs = file("gpt_tiny", "inputs");
    let counter = counted(|| {
        let logits = model.call(inputs.get("input_ids").unwrap()).unwrap();
        gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap()
    });
    assert_eq!(counter.get_total_flops(), golden("gpt_tiny")["total"].as_u64().unwrap());
    // torchfn's batched matmul is PyTorch's mm, addmm and bmm.
    let products: u64 = ["aten.mm", "aten.addmm", "aten.bmm"].iter().map(|op| pytorch_global("gpt_tiny", op)).sum();
    assert_eq!(counter.get_flop_counts()["Global"]["aten.matmul"], products);
    assert_module_totals(&counter, "gpt_tiny");
}

#[test]
fn a_resnet_tiny_step_counts_pytorch_s_flops() {
    let meta = meta("resnet_tiny");
    let model = resnet(&meta);
    model.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
    model.train(true);
    let inputs = file("resnet_tiny", "inputs");
    let counter = counted(|| {
        let logits = model.call(inputs.get("images").unwrap()).unwrap();
        crate::workloads::resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap()
    });
    assert_eq!(counter.get_total_flops(), golden("resnet_tiny")["total"].as_u64().unwrap());
    let counts = &counter.get_flop_counts()["Global"];
    for op in ["aten.convolution", "aten.convolution_backward"] {
        assert_eq!(counts[op], pytorch_global("resnet_tiny", op), "{op}");
    }
    let products: u64 = ["aten.mm", "aten.addmm"].iter().map(|op| pytorch_global("resnet_tiny", op)).sum();
    assert_eq!(counts["aten.matmul"], products);
    assert_module_totals(&counter, "resnet_tiny");
}

#[test]
fn the_table_is_laid_out_as_pytorch_s() {
    // PyTorch 2.15 on the same program: `FlopCounterMode(display=False)` around
    // `conv2d(ones(2, 3, 8, 8), ones(4, 3, 3, 3), padding=1).sum().backward()`, both inputs
    // requiring grad, then `get_table()`.
    let x = torchfn::ones([2, 3, 8, 8], None, None).unwrap().requires_grad_(true).unwrap();
    let w = torchfn::ones([4, 3, 3, 3], None, None).unwrap().requires_grad_(true).unwrap();
    let counter = counted(|| torchfn::nn::functional::conv2d(&x, &w, None, 1, 1, 1, 1).unwrap().sum().unwrap());
    assert_eq!(counter.get_total_flops(), 82944);
    assert_eq!(
        counter.get_table(None),
        "Module                          FLOP    % Total\n\
         ---------------------------  -------  ---------\n\
         Global                       82.944K    100.00%\n\
         - aten.convolution           27.648K     33.33%\n\
         - aten.convolution_backward  55.296K     66.67%"
    );
    // Over a billion FLOPs stays in millions, as PyTorch prints it.
    let a = torchfn::ones([200, 300], None, None).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::ones([300, 4000], None, None).unwrap().requires_grad_(true).unwrap();
    let counter = counted(|| a.matmul(&b).unwrap().sum().unwrap());
    assert_eq!(counter.get_table(None).lines().nth(2).unwrap(), "Global         1440.000M    100.00%");
    // Nothing counted (PyTorch's `FlopCounterMode().get_table()`).
    assert_eq!(
        FlopCounterMode::new().get_table(None),
        "Module      FLOP    % Total\n--------  ------  ---------\nGlobal         0         0%"
    );
}

#[test]
fn a_forward_ad_level_on_another_thread_leaves_this_backward_s_operators_alone() {
    // The level is the process's, as PyTorch's: while another thread holds one (a jvp running
    // beside this program), conv2d's backward here still calls convolution_backward, not the
    // composite formulation (convolutions and views) that tangents would need. The forward-AD
    // tests, which check that no level exists, wait meanwhile.
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (entered, wait) = (held.0, release.1);
    let holder = std::thread::spawn(move || {
        let _level = torchfn::autograd::forward_ad::dual_level().unwrap();
        entered.send(()).unwrap();
        wait.recv().unwrap();
    });
    held.1.recv().unwrap();
    let x = torchfn::ones([2, 3, 8, 8], None, None).unwrap().requires_grad_(true).unwrap();
    let w = torchfn::ones([4, 3, 3, 3], None, None).unwrap().requires_grad_(true).unwrap();
    let counter = counted(|| torchfn::nn::functional::conv2d(&x, &w, None, 1, 1, 1, 1).unwrap().sum().unwrap());
    release.0.send(()).unwrap();
    holder.join().unwrap();
    let ops: Vec<(String, u64)> = counter.get_flop_counts()["Global"].clone().into_iter().collect();
    assert_eq!(ops, [("aten.convolution".to_string(), 27648), ("aten.convolution_backward".to_string(), 55296)]);
}

/// A made-up cost: one FLOP per element of the result.
fn per_element(_: &[Value], _: &Kwargs, out: &Value) -> torchfn::Result<u64> {
    Ok(out.as_tensor().unwrap().shape()?.iter().product::<usize>() as u64)
}

#[test]
fn a_registered_formula_counts_its_operator() {
    // Registration is for the whole program, as PyTorch's: an operator the other tests of this
    // binary never count.
    let op: &'static Operator = &aten::ATAN2;
    register_flop_formula(op, per_element);
    let x = torchfn::ones([3, 4], None, None).unwrap();
    let counter = push_dispatch_mode(FlopCounterMode::new());
    let _ = torchfn::atan2(&x, &x).unwrap();
    assert_eq!(counter.get_flop_counts()["Global"]["aten.atan2"], 12);
}

#[cfg(feature = "wgpu")]
#[test]
fn gpu_tensors_are_counted_the_same() {
    let Some(device) = crate::gpu::gpu() else { return };
    let a = torchfn::ones([4, 3], None, device).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::ones([3, 5], None, device).unwrap();
    let counter = counted(|| a.matmul(&b).unwrap().sum().unwrap());
    assert_eq!(counter.get_total_flops(), 240);
}

// The example includes the model file that `train_gpt` includes too: a second copy of it, with
// types of its own, which the test builds through the example.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../examples/flop_counter.rs"]
mod example;

#[test]
fn the_example_counts_pytorch_s_flops_on_fake_tensors() {
    // gpt_tiny's configuration and batch: the count on fake tensors is the real one.
    let meta = meta("gpt_tiny");
    let ids = file("gpt_tiny", "inputs").get("input_ids").unwrap().shape().unwrap();
    let c = gpt_config(&meta);
    let config = example::gpt::GptConfig {
        n_layer: c.n_layer,
        n_head: c.n_head,
        n_embd: c.n_embd,
        vocab_size: c.vocab_size,
        n_positions: c.n_positions,
        dropout: 0.0,
    };
    let (total, table, peak) = example::count(config, ids[0], ids[1]).unwrap();
    assert_eq!(total, golden("gpt_tiny")["total"].as_u64().unwrap());
    assert!(table.starts_with("Module"), "{table}");
    assert!(peak > 0);
}

#[test]
fn formulas_read_arguments_given_by_keyword() {
    let (a, b) = (torchfn::ones([2, 3], None, None).unwrap(), torchfn::ones([3, 4], None, None).unwrap());
    let counter = push_dispatch_mode(FlopCounterMode::new());
    let kwargs = Kwargs::from([("self", Value::Tensor(a)), ("other", Value::Tensor(b))]);
    aten::MATMUL.call(&[], &kwargs).unwrap();
    assert_eq!(counter.get_total_flops(), 2 * 2 * 3 * 4);
}

/// Every module's total of one training step, by name.
fn module_totals(counter: &FlopCounterMode) -> std::collections::BTreeMap<String, u64> {
    counter.get_flop_counts().into_iter().map(|(m, ops)| (m, ops.values().sum())).collect()
}

/// Checks every module's total against PyTorch's for `model`; a difference shows the
/// operators counted in each module that differs.
fn same_totals(counter: &FlopCounterMode, model: &str) {
    let totals = module_totals(counter);
    let expected = pytorch_totals(model);
    if totals != expected {
        let differ = totals.keys().filter(|m| totals.get(*m) != expected.get(*m));
        let counts = counter.get_flop_counts();
        let detail: Vec<String> = differ.map(|m| format!("{m}: {:?}", counts[m])).collect();
        panic!("per-module totals differ from PyTorch's:\n{totals:?}\n{expected:?}\n{}", detail.join("\n"));
    }
}

/// PyTorch's per-module totals of a model in `tests/golden/flops_more.json`.
fn pytorch_totals(model: &str) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/flops_more.json")).unwrap();
    let json: Json = serde_json::from_str(&text).unwrap();
    json[model].as_object().unwrap().iter().map(|(m, n)| (m.clone(), n.as_u64().unwrap())).collect()
}

#[test]
fn a_bigger_gpt_with_dropout_counts_pytorch_s_flops_per_module() {
    let config = gpt::GptConfig { n_layer: 3, n_head: 4, n_embd: 64, vocab_size: 256, n_positions: 64, dropout: 0.1 };
    let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0)).unwrap();
    model.train(true);
    let ids = torchfn::randint(256, [2, 32], None, None, None).unwrap();
    let counter = counted(|| gpt::GPT2LMHeadModel::loss(&model.call(&ids).unwrap(), &ids).unwrap());
    same_totals(&counter, "gpt2_3layer_dropout");
}

#[test]
fn a_resnet_of_two_blocks_per_stage_counts_pytorch_s_flops_per_module() {
    let model = resnet::NarrowResNet::new([2, 2, 2, 2], [8, 16, 32, 64], 10, &Generator::new().manual_seed(0)).unwrap();
    model.train(true);
    let (images, labels) =
        (torchfn::randn([2, 3, 32, 32], None, None, None).unwrap(), torchfn::tensor([1i64, 3]).unwrap());
    let counter = counted(|| resnet::NarrowResNet::loss(&model.call(&images).unwrap(), &labels).unwrap());
    same_totals(&counter, "resnet_2222");
}

/// A float32 LSTM's fused layer counts its recurrence's products, forward and backward, as the
/// float64 (composed) layer's per-step products count them.
#[test]
fn a_fused_lstm_layer_counts_the_composed_layer_s_flops() {
    let total = |dtype: DType| {
        let g = Generator::new().manual_seed(1);
        let r = |shape: &[usize]| {
            let x = torchfn::randn(shape.to_vec(), g.clone(), None, None).unwrap().to(dtype, false, false).unwrap();
            x.requires_grad_(true).unwrap()
        };
        let (x, state) = (r(&[5, 3, 4]), [r(&[1, 3, 6]), r(&[1, 3, 6])]);
        let params = [r(&[24, 4]), r(&[24, 6]), r(&[24]), r(&[24])];
        let counter = counted(|| {
            let (out, _, _) = torchfn::lstm(&x, &state, &params, true, 1, 0.0, false, false, false).unwrap();
            out.sum().unwrap()
        });
        (counter.get_total_flops(), counter.get_flop_counts()["Global"].clone())
    };
    let ((fused, by_op), (composed, _)) = (total(DType::Float32), total(DType::Float64));
    assert_eq!(fused, composed);
    // Forward and backward: 2 · T · N · 4H · H each.
    assert_eq!(by_op["aten._lstm_layer"] + by_op["aten._lstm_layer_backward"], 2 * 2 * 5 * 3 * 24 * 6);
}
