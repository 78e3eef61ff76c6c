//! Modules (`torchfn::nn`): the derive, parameters and buffers, shared parameters, train/eval,
//! state_dict and an all-or-nothing load, safetensors files, moving devices, and bad input.

use torchfn::nn::{self, BatchNorm2d, Buffer, Dropout, Forward, Linear, Module, Parameter, Sequential, Training};
use torchfn::prelude::*;
use torchfn::{ErrorKind, safetensors};

fn g() -> Generator {
    Generator::new().manual_seed(0)
}

#[derive(Module)]
struct Tied {
    embed: Linear,
    head: Linear,
    blocks: Vec<Linear>,
    pair: [Dropout; 2],
    extra: Option<Linear>,
    none: Option<Linear>,
    scale: Buffer,
    cache: Buffer,
    training: Training,
    #[module(skip)]
    _width: usize,
}

fn tied() -> Tied {
    let embed = Linear::new(3, 4, false, &g()).unwrap();
    let head = Linear { weight: embed.weight.clone(), bias: None };
    Tied {
        embed,
        head,
        blocks: vec![Linear::new(4, 4, true, &g()).unwrap(), Linear::new(4, 4, true, &g()).unwrap()],
        pair: [Dropout::new(0.5).unwrap(), Dropout::new(0.1).unwrap()],
        extra: Some(Linear::new(4, 1, true, &g()).unwrap()),
        none: None,
        scale: Buffer::new(torchfn::ones([1], None, None).unwrap()),
        cache: Buffer::non_persistent(torchfn::zeros([2], None, None).unwrap()),
        training: Training::default(),
        _width: 4,
    }
}

#[test]
fn names_follow_pytorch_and_shared_parameters_are_listed_once() {
    let m = tied();
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "embed.weight",
            "blocks.0.weight",
            "blocks.0.bias",
            "blocks.1.weight",
            "blocks.1.bias",
            "extra.weight",
            "extra.bias"
        ]
    );
    assert_eq!(m.parameters().len(), 7);
    let keys: Vec<&str> = m.state_dict().keys().map(|k| Box::leak(k.to_string().into_boxed_str()) as &str).collect();
    assert!(keys.contains(&"head.weight") && keys.contains(&"scale") && !keys.contains(&"cache"), "{keys:?}");
    let buffers: Vec<String> = m.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(buffers, ["scale", "cache"]);
    let modules: Vec<String> = m.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(modules, ["", "embed", "head", "blocks", "blocks.0", "blocks.1", "pair", "pair.0", "pair.1", "extra"]);
    let children: Vec<String> = m.named_children().into_iter().map(|(n, _)| n).collect();
    assert_eq!(children, ["embed", "head", "blocks", "pair", "extra"]);
}

#[test]
fn parameters_are_leaves_whose_operations_give_plain_tensors() {
    let p = Parameter::new(&torchfn::tensor([1.0f32, 2.0]).unwrap()).unwrap();
    assert!(p.requires_grad().unwrap() && p.is_leaf().unwrap());
    assert!(p.is_instance::<nn::ParameterClass>());
    let y = (&*p * 2.0).unwrap();
    assert!(!y.is_instance::<nn::ParameterClass>(), "results of operations are plain tensors");
    let frozen = Parameter::with_requires_grad(&torchfn::tensor([1.0f32]).unwrap(), false).unwrap();
    assert!(!frozen.requires_grad().unwrap());
}

#[test]
fn train_eval_zero_grad_requires_grad_and_apply_reach_every_module() {
    let m = tied();
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    let x = torchfn::ones([1, 4], None, None).unwrap();
    assert_eq!(m.pair[0].forward(&x).unwrap().to_vec::<f32>().unwrap(), [1.0; 4], "dropout is off in eval");
    m.train(true);
    assert!(m.is_training());
    let out = m.blocks[0].forward(&x).unwrap().sum().unwrap();
    out.backward().unwrap();
    assert!(m.blocks[0].weight.grad().unwrap().is_some());
    m.zero_grad().unwrap();
    assert!(m.blocks[0].weight.grad().unwrap().is_none());
    m.requires_grad_(false).unwrap();
    assert!(m.parameters().iter().all(|p| !p.requires_grad().unwrap()));
    let mut visited = Vec::new();
    m.apply(&mut |module| visited.push(module.type_name()));
    assert_eq!(visited.last(), Some(&"Tied"), "children first, then the module");
    assert_eq!(visited.len(), 10);
}

#[test]
fn load_state_dict_reports_keys_and_refuses_bad_tensors_without_writing_anything() {
    let m = tied();
    let before = m.blocks[0].weight.to_vec::<f32>().unwrap();
    let mut state = m.state_dict();
    state.insert("blocks.0.weight", torchfn::zeros([4, 4], None, None).unwrap());
    state.insert("bogus", torchfn::zeros([1], None, None).unwrap());
    let err = m.load_state_dict(&state, true).unwrap_err();
    assert!(err.to_string().contains("Unexpected key(s) in state_dict: \"bogus\"."), "{err}");
    assert_eq!(m.blocks[0].weight.to_vec::<f32>().unwrap(), before, "a failed strict load writes nothing");
    let report = m.load_state_dict(&state, false).unwrap();
    assert_eq!(report.unexpected_keys, ["bogus"]);
    assert_eq!(m.blocks[0].weight.to_vec::<f32>().unwrap(), [0.0; 16]);

    let mut missing = nn::StateDict::new();
    missing.insert("scale", torchfn::ones([1], None, None).unwrap());
    let err = m.load_state_dict(&missing, true).unwrap_err();
    assert!(err.to_string().contains("Missing key(s) in state_dict: \"embed.weight\""), "{err}");

    let mut wrong = m.state_dict();
    wrong.insert("extra.bias", torchfn::zeros([2], None, None).unwrap());
    wrong.insert("scale", torchfn::ones([1], DType::Float64, None).unwrap());
    let err = m.load_state_dict(&wrong, true).unwrap_err().to_string();
    assert!(err.contains("size mismatch for extra.bias: copying a param with shape torch.Size([2])"), "{err}");
    assert!(err.contains("dtype mismatch for scale"), "{err}");
}

#[test]
fn state_dicts_round_trip_through_safetensors_files_and_bad_files_are_errors() {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("torchfn-modules-{}.safetensors", std::process::id()));
    let m = tied();
    safetensors::save_file(&m.state_dict(), &path).unwrap();
    let other = tied();
    other.blocks[1].weight.detach().unwrap().zero_().unwrap();
    other.load_state_dict(&safetensors::load_file(&path).unwrap(), true).unwrap();
    assert_eq!(other.blocks[1].weight.to_vec::<f32>().unwrap(), m.blocks[1].weight.to_vec::<f32>().unwrap());

    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = safetensors::load_file(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("is not a valid safetensors file"), "{err}");
    std::fs::write(&path, b"garbage").unwrap();
    assert_eq!(safetensors::load_file(&path).unwrap_err().kind(), ErrorKind::Value);
    std::fs::remove_file(&path).ok();
    assert_eq!(safetensors::load_file(&path).unwrap_err().kind(), ErrorKind::Os);
}

#[test]
fn sequential_chains_layers_and_prints_like_pytorch() {
    let seq = Sequential::new(vec![
        Box::new(Linear::new(2, 3, true, &g()).unwrap()),
        Box::new(nn::ReLU::default()),
        Box::new(nn::GELU::new("tanh").unwrap()),
        Box::new(nn::Flatten::default()),
    ]);
    assert_eq!(seq.forward(&torchfn::ones([4, 2], None, None).unwrap()).unwrap().shape().unwrap(), [4, 3]);
    assert_eq!(
        seq.to_string(),
        "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n  (2): GELU(approximate='tanh')\n  (3): Flatten(start_dim=1, end_dim=-1)\n)"
    );
    assert_eq!(
        BatchNorm2d::new(3).unwrap().to_string(),
        "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    );
}

#[test]
fn default_initialisations_follow_pytorch_s_bounds() {
    let l = Linear::new(16, 8, true, &g()).unwrap();
    let bound = 1.0 / 4.0;
    assert!(l.weight.to_vec::<f32>().unwrap().iter().all(|w| w.abs() <= bound));
    assert!(l.bias.as_ref().unwrap().to_vec::<f32>().unwrap().iter().all(|b| b.abs() <= bound));
    let w = torchfn::zeros([10, 20], None, None).unwrap();
    nn::init::xavier_uniform_(&w, 1.0, &g()).unwrap();
    let bound = (6.0f32 / 30.0).sqrt();
    assert!(w.to_vec::<f32>().unwrap().iter().all(|x| x.abs() <= bound));
    assert_eq!(
        nn::init::calculate_fan_in_and_fan_out(&torchfn::zeros([8, 4, 3, 3], None, None).unwrap()).unwrap(),
        (36, 72)
    );
    assert_eq!(
        nn::init::calculate_fan_in_and_fan_out(&torchfn::zeros([3], None, None).unwrap()).unwrap_err().kind(),
        ErrorKind::Value
    );
    assert!(nn::Dropout::new(1.5).is_err());
    assert!(nn::GELU::new("fast").is_err());
}

#[test]
#[cfg(feature = "wgpu")]
fn to_device_moves_everything_and_keeps_shared_parameters_shared() {
    let Some(device) = crate::gpu::gpu() else { return };
    let mut m = tied();
    m.to_device(device).unwrap();
    assert!(m.parameters().iter().all(|p| p.device().unwrap() == device && p.is_leaf().unwrap()));
    assert!(m.head.weight.is(&m.embed.weight), "the tie survives the move");
    assert_eq!(m.scale.device().unwrap(), device);
}

/// `nn.GroupNorm(2, 4)` as PyTorch 2.15 makes it: weight and bias parameters (ones, zeros), its
/// repr, and the functional form with them.
#[test]
fn group_norm_module_is_pytorchs() {
    let norm = nn::GroupNorm::new(2, 4, 1e-5).unwrap();
    let names: Vec<String> = norm.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_eq!(norm.to_string(), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)");
    let x = torchfn::tensor([[[1.0f32], [3.0], [10.0], [30.0]]]).unwrap();
    assert_eq!(
        norm.forward(&x).unwrap().to_vec::<f32>().unwrap().iter().map(|v| v.signum()).collect::<Vec<_>>(),
        [-1.0, 1.0, -1.0, 1.0]
    );
    assert_eq!(nn::GroupNorm::new(3, 4, 1e-5).err().unwrap().kind(), ErrorKind::Value);
}

/// `nn.Embedding(5, 3, padding_idx=-1)` as PyTorch 2.15 makes it: the row normalised to 4 and
/// zeroed, in the repr, and never given a gradient; an index out of range is an error.
#[test]
fn embedding_padding_idx_is_zero_prints_and_gets_no_gradient() {
    let embedding = nn::Embedding::new(5, 3, &g()).unwrap().with_padding_idx(-1).unwrap();
    assert_eq!(embedding.to_string(), "Embedding(5, 3, padding_idx=4)");
    let rows = embedding.weight.detach().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(rows[12..], [0.0; 3]);
    assert!(rows[..12].iter().all(|v| *v != 0.0));
    let ids = torchfn::tensor([4i64, 1, 4]).unwrap();
    embedding.forward(&ids).unwrap().sum().unwrap().backward().unwrap();
    let grad = embedding.weight.grad().unwrap().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(grad, [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let err = nn::Embedding::new(5, 3, &g()).unwrap().with_padding_idx(5).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("padding_idx 5"), "{err}");
}

/// The activation modules print as PyTorch 2.15's and call their functions.
#[test]
fn activation_modules_print_and_compute_as_pytorch() {
    use torchfn::nn::{Forward, Hardsigmoid, Hardswish, LeakyReLU, SiLU};
    assert_eq!(SiLU::new(false).to_string(), "SiLU()");
    assert_eq!(Hardswish::new(true).to_string(), "Hardswish(inplace=True)");
    assert_eq!(Hardsigmoid::default().to_string(), "Hardsigmoid()");
    assert_eq!(LeakyReLU::default().to_string(), "LeakyReLU(negative_slope=0.01)");
    assert_eq!(LeakyReLU::new(0.2, true).to_string(), "LeakyReLU(negative_slope=0.2, inplace=True)");
    let x = torchfn::tensor([-4.0f32, 0.0, 1.5]).unwrap();
    assert_eq!(Hardswish::default().forward(&x).unwrap().to_vec::<f32>().unwrap(), [-0.0, 0.0, 1.125]);
    assert_eq!(LeakyReLU::new(0.5, false).forward(&x).unwrap().to_vec::<f32>().unwrap(), [-2.0, 0.0, 1.5]);
    let inplace = Hardsigmoid::new(true);
    assert!(inplace.forward(&x).unwrap().is(&x));
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0, 0.5, 0.75]);
}

/// `nn.Conv1d` and `nn.ConvTranspose2d` initialise as PyTorch 2.15's do: Kaiming-uniform
/// weights and uniform biases within `1/sqrt(fan_in)`, where a transposed convolution's fan-in
/// counts its output channels (`weight.size(1) * kernel`), and print as PyTorch's. (The
/// generator's stream is not PyTorch's, so the bounds are what can be compared.)
#[test]
fn conv1d_and_conv_transpose2d_initialise_and_print_as_pytorch() {
    use torchfn::nn::{Conv1d, ConvTranspose2d};
    let within = |t: &Tensor, bound: f32| {
        let v = t.to_vec::<f32>().unwrap();
        let largest = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(largest <= bound && largest > 0.5 * bound, "{v:?} against {bound}");
    };
    // ConvTranspose2d(2, 3, 2): fan-in 3 * 2 * 2 = 12.
    let up = ConvTranspose2d::new(2, 3, [2, 2], [1, 1], [0, 0], [0, 0], 1, true, [1, 1], &g()).unwrap();
    assert_eq!(up.weight.shape().unwrap(), [2, 3, 2, 2]);
    within(&up.weight, 1.0 / 12f32.sqrt());
    assert_eq!(up.bias.as_ref().unwrap().shape().unwrap(), [3]);
    assert_eq!(up.to_string(), "ConvTranspose2d(2, 3, kernel_size=(2, 2), stride=(1, 1))");
    // Conv1d(2, 3, 2): fan-in 2 * 2 = 4; the bias within the same bound.
    let conv = Conv1d::new(2, 3, 2, 1, 0, 1, 1, true, &g()).unwrap();
    within(&conv.weight, 0.5);
    let b = conv.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
    assert!(b.iter().all(|x| x.abs() <= 0.5), "{b:?}");
    let strided = Conv1d::new(4, 4, 3, 2, 1, 2, 2, false, &g()).unwrap();
    assert_eq!(
        strided.to_string(),
        "Conv1d(4, 4, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), groups=2, bias=False)"
    );
    let odd = ConvTranspose2d::new(3, 4, [1, 1], [1, 1], [0, 0], [0, 0], 2, true, [1, 1], &g());
    assert_eq!(odd.err().map(|e| e.kind()), Some(ErrorKind::Value));
}

/// An LSTM over an empty batch gives empty outputs, as PyTorch's (its input projection is one
/// product for the whole sequence).
#[test]
fn lstm_over_an_empty_batch_is_empty() {
    let lstm = nn::LSTM::new(3, 4, 2, true, true, 0.0, false, &g()).unwrap();
    let x = torchfn::zeros([0, 5, 3], None, None).unwrap();
    let (out, (h, c)) = lstm.forward(&x, None).unwrap();
    assert_eq!(out.shape().unwrap().to_vec(), [0, 5, 4]);
    assert_eq!((h.shape().unwrap().to_vec(), c.shape().unwrap().to_vec()), (vec![2, 0, 4], vec![2, 0, 4]));
}

/// One LSTM's outputs and every gradient (input, states, parameters) of a loss that uses the
/// output, `h_n` and `c_n`, computed in `dtype` from the same float32 values.
fn lstm_run(
    dtype: DType,
    [t, n, i, h]: [usize; 4],
    layers: i64,
    bidirectional: bool,
    batch_first: bool,
    create_graph: bool,
) -> Vec<Vec<f64>> {
    let g = Generator::new().manual_seed(7);
    let directions = if bidirectional { 2 } else { 1 };
    let input = if batch_first { [n, t, i] } else { [t, n, i] };
    let mut leaves = vec![torchfn::randn(input, g.clone(), None, None).unwrap()];
    let states = [layers as usize * directions, n, h];
    leaves.push(torchfn::randn(states, g.clone(), None, None).unwrap());
    leaves.push(torchfn::randn(states, g.clone(), None, None).unwrap());
    for layer in 0..layers as usize {
        let width = if layer == 0 { i } else { h * directions };
        for _ in 0..directions {
            for shape in [vec![4 * h, width], vec![4 * h, h], vec![4 * h], vec![4 * h]] {
                leaves.push((&torchfn::randn(shape, g.clone(), None, None).unwrap() * 0.4).unwrap());
            }
        }
    }
    let leaves: Vec<Tensor> =
        leaves.iter().map(|x| x.to(dtype, false, true).unwrap().requires_grad_(true).unwrap()).collect();
    let (out, h_n, c_n) =
        torchfn::lstm(&leaves[0], &leaves[1..3], &leaves[3..], true, layers, 0.0, false, bidirectional, batch_first)
            .unwrap();
    let weights = torchfn::randn(out.shape().unwrap(), g.clone(), None, None).unwrap().to(dtype, false, false).unwrap();
    let terms = [(&out * &weights).unwrap(), (&h_n * 2.0).unwrap(), (&c_n * &c_n).unwrap()];
    let loss = terms.iter().map(|t| t.sum().unwrap()).reduce(|a, b| (&a + &b).unwrap()).unwrap();
    let f64s = |x: &Tensor| x.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap();
    let mut values: Vec<Vec<f64>> = [out, h_n, c_n].iter().map(f64s).collect();
    let grads = torchfn::autograd::grad(&[loss], &leaves, None, None, create_graph, false).unwrap();
    let grads: Vec<Tensor> = grads.into_iter().map(Option::unwrap).collect();
    if create_graph {
        // The second derivative along the first gradient: d/dleaves of sum(grad(input)²).
        let again = (&grads[0] * &grads[0]).unwrap().sum().unwrap();
        let second = torchfn::autograd::grad(&[again], &leaves, None, None, false, true).unwrap();
        values.extend(second.into_iter().map(|g| g.map_or_else(Vec::new, |g| f64s(&g))));
    }
    values.extend(grads.iter().map(f64s));
    values
}

/// Float32 LSTMs on the CPU run each layer fused (`aten::_lstm_layer` and its backward), float64
/// ones composed of operations; from the same values, both give the same outputs and gradients
/// (to float32's precision), over layers, directions and `batch_first`, and over a batch that
/// the fused passes over the gates split between threads (40 rows of 128 hidden units: pieces
/// of 32 and 8 rows).
#[test]
fn the_fused_lstm_layer_gives_the_composed_layer_s_values_and_gradients() {
    for (sizes, layers, bidirectional, batch_first) in [
        ([6, 3, 5, 4], 1, false, false),
        ([5, 2, 3, 8], 2, true, true),
        ([1, 4, 2, 3], 1, true, false),
        ([3, 40, 5, 128], 1, false, true),
    ] {
        let fused = lstm_run(DType::Float32, sizes, layers, bidirectional, batch_first, false);
        let composed = lstm_run(DType::Float64, sizes, layers, bidirectional, batch_first, false);
        for (k, (a, b)) in fused.iter().zip(&composed).enumerate() {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 2e-5 * (1.0 + y.abs()), "result {k} of {sizes:?}: {x} against {y}");
            }
        }
    }
}

/// A float32 layer's recurrence is one node, named as PyTorch's CPU LSTM names it.
#[test]
fn the_fused_lstm_layer_s_node_has_pytorch_s_name() {
    let lstm = nn::LSTM::new(3, 4, 1, true, false, 0.0, false, &g()).unwrap();
    let (out, _) = lstm.forward(&torchfn::ones([5, 2, 3], None, None).unwrap(), None).unwrap();
    let mut names = Vec::new();
    let mut nodes: Vec<_> = out.grad_fn().unwrap().into_iter().collect();
    while let Some(node) = nodes.pop() {
        names.push(node.name().to_string());
        nodes.extend(node.next_functions().into_iter().flatten().map(|(next, _)| next));
    }
    assert_eq!(names.iter().filter(|n| *n == "MkldnnRnnLayerBackward0").count(), 1, "{names:?}");
}

/// The fused layer differentiates twice (`create_graph`): its backward then recomputes the
/// composed layer and differentiates that, as the float64 (composed) LSTM does.
#[test]
fn the_fused_lstm_layer_differentiates_twice() {
    let fused = lstm_run(DType::Float32, [4, 2, 3, 5], 1, true, false, true);
    let composed = lstm_run(DType::Float64, [4, 2, 3, 5], 1, true, false, true);
    for (k, (a, b)) in fused.iter().zip(&composed).enumerate() {
        assert_eq!(a.len(), b.len(), "result {k}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "result {k}: {x} against {y}");
        }
    }
}

/// A sequence of no steps is refused with PyTorch's error.
#[test]
fn an_lstm_over_no_steps_is_refused() {
    let lstm = nn::LSTM::new(3, 4, 1, true, false, 0.0, false, &g()).unwrap();
    let err = lstm.forward(&torchfn::zeros([0, 2, 3], None, None).unwrap(), None).unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string()),
        (ErrorKind::Runtime, "Expected sequence length to be larger than 0 in RNN".into())
    );
}

/// Differentiating twice through fused layers whose weights are shared (one tensor as both
/// layers' `weight_hh` and the second layer's `weight_ih`): every path's gradient counted once,
/// as through the composed (float64) layers.
#[test]
fn the_fused_lstm_layer_differentiates_twice_through_shared_weights() {
    let run = |dtype: DType| -> Vec<Vec<f64>> {
        let g = Generator::new().manual_seed(11);
        let r = |shape: &[usize], scale: f64| {
            let x = (&torchfn::randn(shape.to_vec(), g.clone(), None, None).unwrap() * scale).unwrap();
            x.to(dtype, false, true).unwrap().requires_grad_(true).unwrap()
        };
        let (x, shared, w_ih, b) = (r(&[3, 2, 4], 1.0), r(&[16, 4], 0.4), r(&[16, 4], 0.4), r(&[16], 0.4));
        let state = [r(&[2, 2, 4], 1.0), r(&[2, 2, 4], 1.0)];
        let params =
            [w_ih.clone(), shared.clone(), b.clone(), b.clone(), shared.clone(), shared.clone(), b.clone(), b.clone()];
        let (out, _, _) = torchfn::lstm(&x, &state, &params, true, 2, 0.0, false, false, false).unwrap();
        let leaves = [x, shared, w_ih, b];
        let loss = (&out * &out).unwrap().sum().unwrap();
        let first = torchfn::autograd::grad(&[loss], &leaves, None, None, true, false).unwrap();
        let again = first.iter().flatten().map(|g| (g * g).unwrap().sum().unwrap()).reduce(|a, b| (&a + &b).unwrap());
        let second = torchfn::autograd::grad(&[again.unwrap()], &leaves, None, None, false, true).unwrap();
        let f64s = |x: &Tensor| x.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap();
        first.iter().chain(&second).map(|g| g.as_ref().map_or_else(Vec::new, f64s)).collect()
    };
    let (fused, composed) = (run(DType::Float32), run(DType::Float64));
    for (k, (a, b)) in fused.iter().zip(&composed).enumerate() {
        assert_eq!(a.len(), b.len(), "result {k}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "result {k}: {x} against {y}");
        }
    }
}
