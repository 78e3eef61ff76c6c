//! Automatic mixed precision against PyTorch 2.15 (`tests/golden/amp.json` and gpt_tiny's
//! `autocast_bf16.safetensors`, written by `bench/golden/gen_amp.py`): every catalogue case
//! inside `autocast("cpu", bfloat16)`, with float32 and with bfloat16 tensors; a GradScaler
//! through finite and overflowing steps; and gpt_tiny's first training step under autocast.

use torchfn::ErrorKind;
use torchfn::amp::{Autocast, GradScaler, GradScalerState};
use torchfn::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
use torchfn::nn::{Forward, Module};
use torchfn::optim::{Optimizer, SGD, SgdOptions};
use torchfn::prelude::*;

use crate::examples::train_gpt::gpt;
use crate::golden::{Place, load, run_at, tensor};
use crate::workloads::{file, gpt_config, meta};

#[test]
fn every_catalogue_case_matches_pytorch_under_autocast() {
    let amp = load("amp.json");
    let cases = amp["cases"].as_array().unwrap();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let _autocast = torchfn::autocast("cpu", DType::BFloat16).unwrap();
            run_at(case, Place::Cpu).err().map(|why| format!("{}: {why}", case["id"].as_str().unwrap()))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(cases.len() > 500);
}

#[test]
fn autocast_regions_nest_restore_and_refuse_what_pytorch_refuses() {
    let x = torchfn::ones([2, 2], None, None).unwrap();
    assert!(!torchfn::amp::is_autocast_enabled("cpu"));
    {
        let _outer = torchfn::autocast("cpu", DType::Float16).unwrap();
        assert_eq!(x.matmul(&x).unwrap().dtype().unwrap(), DType::Float16);
        {
            let _inner = Autocast::new("cpu").unwrap().enabled(false).enter().unwrap();
            assert_eq!(x.matmul(&x).unwrap().dtype().unwrap(), DType::Float32);
        }
        assert_eq!(torchfn::amp::get_autocast_dtype("cpu").unwrap(), DType::Float16);
        assert_eq!(x.matmul(&x).unwrap().dtype().unwrap(), DType::Float16);
    }
    assert!(!torchfn::amp::is_autocast_enabled("cpu"));
    assert_eq!(x.matmul(&x).unwrap().dtype().unwrap(), DType::Float32);
    let err = torchfn::autocast("cpu", DType::Float64).err().unwrap();
    assert!(err.to_string().contains("CPU autocast only supports torch.bfloat16 and torch.float16"), "{err}");
    assert_eq!(torchfn::autocast("tpu", DType::Float16).err().unwrap().kind(), ErrorKind::Runtime);
    // A GPU region is its own: it leaves the CPU's tensors alone, and its default is float16.
    {
        let _gpu = Autocast::new("wgpu").unwrap().enter().unwrap();
        assert!(torchfn::amp::is_autocast_enabled("wgpu") && !torchfn::amp::is_autocast_enabled("cpu"));
        assert_eq!(torchfn::amp::get_autocast_dtype("wgpu").unwrap(), DType::Float16);
        assert_eq!(x.matmul(&x).unwrap().dtype().unwrap(), DType::Float32);
    }
    assert!(!torchfn::amp::is_autocast_enabled("wgpu"));
    let err = torchfn::autocast("wgpu", DType::Float32).err().unwrap();
    assert!(err.to_string().contains("wgpu autocast only supports torch.bfloat16 and torch.float16"), "{err}");
}

/// On the GPU, autocast follows PyTorch's GPU lists: products in float16, sums and softmax in
/// float32, binary_cross_entropy refused; the values are the CPU's in the same dtypes, and the
/// parameters' gradients float32.
#[cfg(feature = "wgpu")]
#[test]
fn autocast_on_the_gpu_casts_its_tensors_by_pytorch_s_gpu_lists() {
    use torchfn::nn::functional as F;
    let Some(gpu) = crate::gpu::gpu() else { return };
    let x = torchfn::randn([4, 8], None, None, None).unwrap();
    let w = torchfn::randn([16, 8], None, None, None).unwrap();
    let (xg, wg) = (x.to_device(gpu, None, false, false).unwrap(), w.to_device(gpu, None, false, false).unwrap());
    let wg = wg.requires_grad_(true).unwrap();
    let _autocast = torchfn::autocast("wgpu", DType::Float16).unwrap();
    let y = F::linear(&xg, &wg, None).unwrap();
    assert_eq!((y.dtype().unwrap(), y.device().unwrap()), (DType::Float16, gpu));
    // The same product on the CPU in float16 (float32 accumulation, one rounding).
    let want =
        F::linear(&x.to(DType::Float16, false, false).unwrap(), &w.to(DType::Float16, false, false).unwrap(), None)
            .unwrap();
    let got = y.to_device(torchfn::Device::CPU, Some(DType::Float32), false, false).unwrap().to_vec::<f32>().unwrap();
    let want = want.to(DType::Float32, false, false).unwrap().to_vec::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 2e-3 * (1.0 + w.abs()), "{got:?}\n{want:?}");
    }
    let p = F::softmax(&y, 1, 3, None).unwrap();
    assert_eq!(p.dtype().unwrap(), DType::Float32);
    let total = y.sum().unwrap();
    assert_eq!(total.dtype().unwrap(), DType::Float32);
    let err = F::binary_cross_entropy(&p, &p.detach().unwrap(), None, None, None, "mean").unwrap_err();
    assert!(err.to_string().contains("unsafe to autocast"), "{err}");
    (&total * &total).unwrap().backward().unwrap();
    let grad = wg.grad().unwrap().unwrap();
    assert_eq!((grad.dtype().unwrap(), grad.device().unwrap()), (DType::Float32, gpu));
}

/// Counts the conversions that reach the operators below autograd.
#[derive(Default)]
struct Conversions(std::cell::Cell<usize>);
impl TorchDispatchMode for Conversions {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        if func.overload_packet() == "aten._to_copy" {
            self.0.set(self.0.get() + 1);
        }
        func.call(args, kwargs)
    }
}

#[test]
fn a_parameter_is_cast_once_per_region_and_its_gradient_stays_float32() {
    let w = torchfn::randn([3, 3], None, None, None).unwrap().requires_grad_(true).unwrap();
    let x = torchfn::randn([2, 3], None, None, None).unwrap();
    let run = |cache: bool| {
        let conversions = push_dispatch_mode(Conversions::default());
        let _autocast = Autocast::new("cpu").unwrap().cache_enabled(cache).enter().unwrap();
        let a = torchfn::nn::functional::linear(&x, &w, None).unwrap();
        let b = torchfn::nn::functional::linear(&a, &w, None).unwrap();
        assert_eq!(b.dtype().unwrap(), DType::BFloat16);
        (b, conversions.0.get())
    };
    // x and w for the first product, w again only without the cache.
    let (b, cached) = run(true);
    assert_eq!((cached, run(false).1), (2, 3));
    b.sum().unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().unwrap().dtype().unwrap(), DType::Float32);
}

#[test]
fn grad_scaler_matches_pytorch_step_by_step() {
    let amp = load("amp.json");
    let spec = &amp["grad_scaler"];
    let f = |k: &str| spec[k].as_f64().unwrap();
    let w = tensor(&spec["w"]["tensor"]).requires_grad_(true).unwrap();
    let mut sgd = SGD::new(vec![w.clone()], SgdOptions::new(f("lr"))).unwrap();
    let interval = spec["growth_interval"].as_i64().unwrap();
    let mut scaler =
        GradScaler::with_options(f("init_scale"), f("growth_factor"), f("backoff_factor"), interval, true).unwrap();
    for (i, step) in spec["steps"].as_array().unwrap().iter().enumerate() {
        sgd.zero_grad(true).unwrap();
        let c = tensor(&step["c"][0]["tensor"]);
        let loss = (&w * &c).unwrap().sum().unwrap();
        scaler.scale(&loss).unwrap().backward().unwrap();
        let stepped = scaler.step(&mut sgd).unwrap();
        scaler.update(None).unwrap();
        assert_eq!(stepped, step["stepped"].as_bool().unwrap(), "step {i}");
        let state = scaler.state_dict();
        assert_eq!(state.scale, step["scale"].as_f64().unwrap(), "scale after step {i}");
        assert_eq!(state.growth_tracker, step["growth_tracker"].as_i64().unwrap(), "tracker after step {i}");
        let want = tensor(&step["w"]["tensor"]).to_vec::<f32>().unwrap();
        assert_eq!(w.detach().unwrap().to_vec::<f32>().unwrap(), want, "w after step {i}");
    }
}

#[test]
fn grad_scaler_refuses_misuse_and_round_trips_its_state() {
    let w = torchfn::tensor([1.0f32]).unwrap().requires_grad_(true).unwrap();
    let mut sgd = SGD::new(vec![w.clone()], SgdOptions::new(0.1)).unwrap();
    let mut scaler = GradScaler::new();
    assert!(scaler.update(None).unwrap_err().to_string().contains("No inf checks were recorded"));
    scaler.scale(&(&w * 2.0).unwrap().sum().unwrap()).unwrap().backward().unwrap();
    scaler.unscale_(&mut sgd).unwrap();
    assert_eq!(w.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [2.0]);
    assert!(scaler.unscale_(&mut sgd).unwrap_err().to_string().contains("already been called"));
    assert!(scaler.step(&mut sgd).unwrap());
    assert!(scaler.step(&mut sgd).unwrap_err().to_string().contains("step() has already been called"));
    scaler.update(None).unwrap();
    let state = scaler.state_dict();
    assert_eq!(
        state,
        GradScalerState {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            growth_tracker: 1
        }
    );
    let mut other = GradScaler::new();
    other.load_state_dict(&state).unwrap();
    assert_eq!(other.state_dict(), state);
    assert!(GradScaler::with_options(1.0, 0.5, 0.5, 1, true).is_err());
    // Float16 gradients cannot be unscaled exactly: PyTorch's ValueError.
    let h = torchfn::tensor([1.0f32]).unwrap().to(DType::Float16, false, false).unwrap().requires_grad_(true).unwrap();
    let mut sgd16 = SGD::new(vec![h.clone()], SgdOptions::new(0.1)).unwrap();
    scaler.scale(&h.sum().unwrap()).unwrap().backward().unwrap();
    assert_eq!(scaler.unscale_(&mut sgd16).unwrap_err().kind(), ErrorKind::Value);
    // ... checked before any gradient is changed: a float32 one beside it keeps its value.
    let f = torchfn::tensor([3.0f32]).unwrap().requires_grad_(true).unwrap();
    f.sum().unwrap().backward().unwrap();
    let mut mixed = SGD::new(vec![f.clone(), h.clone()], SgdOptions::new(0.1)).unwrap();
    let mut fresh = GradScaler::new();
    assert_eq!(fresh.unscale_(&mut mixed).unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(f.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [1.0]);
    // Disabled, it passes through.
    let off = GradScaler::with_options(65536.0, 2.0, 0.5, 2000, false).unwrap();
    assert_eq!(off.get_scale(), 1.0);
    assert!(off.scale(&w).unwrap().is(&w));
}

/// `||got - want|| / ||want||`, in float64.
fn rel_l2(got: &Tensor, want: &Tensor) -> f64 {
    let v = |t: &Tensor| {
        t.detach().unwrap().to(DType::Float64, false, false).unwrap().contiguous().unwrap().to_vec::<f64>().unwrap()
    };
    let (g, w) = (v(got), v(want));
    let diff: f64 = g.iter().zip(&w).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    diff / w.iter().map(|w| w * w).sum::<f64>().sqrt()
}

#[test]
fn gpt_tiny_step_under_bf16_autocast_gives_pytorch_s_logits_loss_and_gradients() {
    let meta = meta("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    model.train(true);
    let inputs = file("gpt_tiny", "inputs");
    let expect = file("gpt_tiny", "autocast_bf16");
    let (logits, loss) = {
        let _autocast = torchfn::autocast("cpu", DType::BFloat16).unwrap();
        let logits = model.forward(inputs.get("input_ids").unwrap()).unwrap();
        let loss = gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap();
        (logits, loss)
    };
    // PyTorch's dtypes: bfloat16 logits (the head is a linear layer), a float32 loss.
    let want_logits = expect.get("logits").unwrap();
    assert_eq!(want_logits.dtype().unwrap(), DType::BFloat16, "the file holds PyTorch's bfloat16 logits");
    assert_eq!(logits.dtype().unwrap(), DType::BFloat16);
    assert_eq!(loss.dtype().unwrap(), DType::Float32);
    let logits_error = rel_l2(&logits, want_logits);
    let loss_error = rel_l2(&loss, expect.get("loss").unwrap());
    loss.backward().unwrap();
    let mut worst = (0.0f64, String::new());
    for (name, p) in model.named_parameters() {
        let g = p.grad().unwrap().unwrap();
        assert_eq!(g.dtype().unwrap(), DType::Float32, "{name}'s gradient");
        let e = rel_l2(&g, expect.get(&format!("grad/{name}")).unwrap());
        if e > worst.0 {
            worst = (e, name);
        }
    }
    println!(
        "gpt_tiny under bf16 autocast: logits rel_l2 {logits_error:.2e}, loss {loss_error:.2e}, worst grad {:.2e} ({})",
        worst.0, worst.1
    );
    // bfloat16 keeps 8 bits: one rounding is 0.4% at most, and the step rounds many times.
    assert!(logits_error < 1e-2, "logits differ: {logits_error}");
    assert!(loss_error < 1e-3, "loss differs: {loss_error}");
    assert!(worst.0 < 3e-2, "the gradient of {} differs: {}", worst.1, worst.0);
}
