//! The GPU backend through the public API: devices and moving tensors, the parity suite (every
//! operation's samples give the CPU's results on wgpu), the golden cases on wgpu, overrides of
//! GPU tensors, and faults that must come back as errors.
//!
//! Built with the `wgpu` feature (the default) only. Without a GPU (no Vulkan, Metal or DX12
//! adapter) these tests print one line saying so and pass, unless `TORCHFN_REQUIRE_GPU=1` (as
//! CI sets, on Mesa's software Vulkan driver), which makes them fail.

use std::io::Write;
use std::sync::Once;

use torchfn::overrides::get_overridable_functions;
use torchfn::prelude::*;
use torchfn::testing::samples;
use torchfn::{Device, ErrorKind};

use super::golden::{Place, cases, dtypes, elements, run_at};

/// The GPU the tests run on: the default wgpu adapter, or `None` on a machine without one.
pub(crate) fn gpu() -> Option<Device> {
    match Device::wgpu() {
        Ok(device) => Some(device),
        Err(e) if std::env::var("TORCHFN_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("TORCHFN_REQUIRE_GPU=1, but the GPU tests found no GPU: {e}")
        }
        Err(e) => {
            static SKIP: Once = Once::new();
            // Written to the process's stderr (not the test's captured output): one line, once.
            SKIP.call_once(|| {
                let _ =
                    writeln!(std::io::stderr(), "GPU tests skipped (set TORCHFN_REQUIRE_GPU=1 to fail instead): {e}");
            });
            None
        }
    }
}

/// `t` on `device`.
fn on(t: Tensor, device: Device) -> Tensor {
    t.to_device(device, None, false, false).unwrap()
}

#[test]
fn devices_print_and_parse_like_pytorch() {
    let Some(gpu) = gpu() else { return };
    assert_eq!(Device::parse(&gpu.to_string()).unwrap(), gpu);
    assert_eq!(gpu.to_string(), format!("wgpu:{}", gpu.index()));
    assert_eq!(format!("{gpu:?}"), format!("device(type='wgpu', index={})", gpu.index()));
    assert_eq!(Device::parse("wgpu").unwrap(), gpu, "the default adapter");
    assert!(!gpu.describe().is_empty());
    let count = torchfn::wgpu::adapters().len();
    let err = Device::parse(&format!("wgpu:{count}")).unwrap_err();
    assert!(err.to_string().contains(&format!("this machine has {count} wgpu device")), "{err}");
    let err = Device::parse("wgpu:x").unwrap_err();
    assert!(err.to_string().contains("Invalid device string"), "{err}");
    assert_eq!(gpu.index_dtype(), DType::Int32);
    assert!(!gpu.supports(DType::Float64) && !gpu.supports(DType::Int64) && gpu.supports(DType::Bool));
    // By name, a device is a `torch.device` or its text.
    let t = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let moved = Tensor::TO.call(&[t.into(), Value::Str("wgpu".into())], &Kwargs::new()).unwrap();
    assert_eq!(moved.to::<Tensor>().unwrap().device().unwrap(), gpu);
}

#[test]
fn tensors_move_between_devices_and_keep_their_values() {
    let Some(gpu) = gpu() else { return };
    let f = torchfn::tensor([[1.5f32, -2.0], [f32::NAN, f32::INFINITY]]).unwrap();
    let g = on(f.clone(), gpu);
    assert_eq!(g.device().unwrap(), gpu);
    assert_eq!(g.shape().unwrap(), [2, 2]);
    let back = g.cpu().unwrap();
    assert!(back.device().unwrap().is_cpu());
    let values = back.to_vec::<f32>().unwrap();
    assert_eq!(values[..2], [1.5, -2.0]);
    assert!(values[2].is_nan() && values[3] == f32::INFINITY);
    assert!(g.to_device(gpu, None, false, false).unwrap().is(&g), "already there: the same tensor");
    let i = on(torchfn::tensor([i32::MIN, 0, i32::MAX]).unwrap(), gpu);
    assert_eq!(i.to_vec::<i32>().unwrap(), [i32::MIN, 0, i32::MAX]);
    let b = on(torchfn::tensor([true, false, true]).unwrap(), gpu);
    assert_eq!(b.to_vec::<bool>().unwrap(), [true, false, true]);
    // A view moves as its elements.
    let transposed = on(f.t().unwrap(), gpu).to_vec::<f32>().unwrap();
    assert_eq!((transposed[0], transposed[2], transposed[3]), (1.5, -2.0, f32::INFINITY));
    assert!(transposed[1].is_nan());
    // 64-bit tensors do not fit: an error says so, and a dtype given converts on the way.
    for t in [torchfn::tensor([1.0f64]).unwrap(), torchfn::tensor([1i64]).unwrap()] {
        let err = t.to_device(gpu, None, false, false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().contains("is not supported on wgpu"), "{err}");
    }
    let narrowed = torchfn::tensor([7i64, -8]).unwrap().to_device(gpu, Some(DType::Int32), false, false).unwrap();
    assert_eq!(narrowed.to_vec::<i32>().unwrap(), [7, -8]);
    assert_eq!(g.to(DType::Int32, false, false).unwrap().device().unwrap(), gpu);
    assert!(g.to(DType::Float64, false, false).is_err(), "float64 has no place on the GPU");
}

#[test]
fn fmod_and_remainder_are_exact_for_large_quotients() {
    let Some(gpu) = gpu() else { return };
    let a = torchfn::tensor([1e10f32, -1e10, 3.0e38, 7.5, -0.0, 5.0, f32::INFINITY, 2.0]).unwrap();
    let b = torchfn::tensor([3.0f32, 3.0, 1e-3, -2.0, 1.0, f32::INFINITY, 1.0, 0.0]).unwrap();
    // Bit for bit, any NaN as one.
    let bits = |t: Tensor| -> Vec<u32> {
        t.to_vec::<f32>().unwrap().iter().map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() }).collect()
    };
    for f in [torchfn::fmod, torchfn::remainder] {
        let got = bits(f(&on(a.clone(), gpu), &on(b.clone(), gpu)).unwrap());
        assert_eq!(got, bits(f(&a, &b).unwrap()), "the CPU's results");
    }
    assert_eq!(bits(torchfn::fmod(&a, &b).unwrap())[..2], [1.0f32.to_bits(), (-1.0f32).to_bits()]);
}

#[test]
fn sine_cosine_and_tangent_are_accurate_away_from_zero() {
    // NVIDIA's built-in sine and cosine lost 1.5e-5 at 255, and its tangent 1e-4 near pi/2
    // (tan(11)): the shaders reduce the argument themselves.
    let Some(gpu) = gpu() else { return };
    let mut x: Vec<f32> = (-300..=300).map(|i| i as f32).collect();
    x.extend((0..2000).map(|i| (i as f32 - 1000.0) * 0.01 + 1e-3));
    x.extend((1..=40).map(|k| k as f32 * std::f32::consts::FRAC_PI_2));
    x.extend([-0.0, 1e-30, 6000.5]);
    let t = torchfn::tensor(x.clone()).unwrap();
    type Op = fn(&Tensor) -> Result<Tensor>;
    type Real = fn(f64) -> f64;
    // Each function, its exact value and the size of its derivative.
    let cases: [(&str, Op, Real, Real); 3] = [
        ("sin", torchfn::sin, f64::sin, |x| x.cos().abs()),
        ("cos", torchfn::cos, f64::cos, |x| x.sin().abs()),
        ("tan", torchfn::tan, f64::tan, |x| 1.0 + x.tan().powi(2)),
    ];
    for (name, f, exact, slope) in cases {
        let got = f(&on(t.clone(), gpu)).unwrap().to_vec::<f32>().unwrap();
        for (&x, &g) in x.iter().zip(&got) {
            let x64 = f64::from(x);
            let want = exact(x64);
            // A few float32 ulps of the result, and what the reduced argument's error moves it:
            // n multiples of pi/2 taken away in float32 parts are off by about 6e-15 each.
            let ulps = if name == "tan" { 8.0 } else { 4.0 };
            let reduction = (x64 / std::f64::consts::FRAC_PI_2).round().abs() * 6e-15;
            let tolerance = ulps * f64::from(f32::EPSILON) * want.abs() + slope(x64) * reduction + 1e-30;
            assert!((f64::from(g) - want).abs() <= tolerance, "{name}({x}) = {g} on the GPU, exactly {want}");
        }
    }
    let zero = on(torchfn::tensor([-0.0f32]).unwrap(), gpu);
    assert!(zero.sin().unwrap().to_vec::<f32>().unwrap()[0].is_sign_negative(), "sin(-0) is -0");
}

#[test]
fn integer_division_by_zero_is_an_error_on_the_gpu_too() {
    let Some(gpu) = gpu() else { return };
    let a = on(torchfn::tensor([7i32, -7, 3]).unwrap(), gpu);
    let with_zero = on(torchfn::tensor([2i32, 0, 1]).unwrap(), gpu);
    let err = torchfn::div(&a, &with_zero, Some("floor")).unwrap_err();
    assert!(err.to_string().contains("ZeroDivisionError"), "{err}");
    assert!(torchfn::fmod(&a, &with_zero).is_err());
    let nonzero = on(torchfn::tensor([2i32, -2, 1]).unwrap(), gpu);
    assert_eq!(torchfn::div(&a, &nonzero, Some("floor")).unwrap().to_vec::<i32>().unwrap(), [3, 3, 3]);
}

#[test]
fn empty_tensors_with_huge_dimensions_compute_nothing() {
    let Some(gpu) = gpu() else { return };
    let empty = torchfn::zeros([1usize << 40, 0], None, gpu).unwrap();
    assert_eq!(empty.neg().unwrap().shape().unwrap(), [1usize << 40, 0]);
    assert_eq!(torchfn::add(&empty, &empty, 1).unwrap().to_vec::<f32>().unwrap(), Vec::<f32>::new());
}

#[test]
fn operations_on_two_devices_are_an_error_naming_both() {
    let Some(gpu) = gpu() else { return };
    let cpu = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let g = on(cpu.clone(), gpu);
    let err = torchfn::add(&cpu, &g, 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let message = err.to_string();
    assert!(message.contains("cpu") && message.contains(&gpu.to_string()), "{message}");
    assert!(message.contains("'input'") && message.contains("'other'"), "{message}");
    assert!(torchfn::matmul(&g, &cpu).is_err());
    assert!(torchfn::cat(&[g.clone(), cpu.clone()], 0).is_err());
    // A Python number, or a zero-dimensional CPU tensor, joins the GPU as PyTorch's do.
    let scaled = (&g * 3.0).unwrap();
    assert_eq!(scaled.device().unwrap(), gpu);
    assert_eq!(scaled.to_vec::<f32>().unwrap(), [3.0, 6.0]);
    let zero_dim = torchfn::tensor(2.0f32).unwrap();
    assert_eq!(torchfn::add(&g, &zero_dim, 1).unwrap().to_vec::<f32>().unwrap(), [3.0, 4.0]);
    // copy_ moves across devices, as PyTorch's does.
    let target = torchfn::zeros([2], None, gpu).unwrap();
    target.copy_(&cpu).unwrap();
    assert_eq!(target.to_vec::<f32>().unwrap(), [1.0, 2.0]);
}

#[test]
fn creation_functions_take_a_device() {
    let _seeded = crate::seeded();
    let Some(gpu) = gpu() else { return };
    let z = torchfn::zeros([2, 3], None, gpu).unwrap();
    assert_eq!((z.device().unwrap(), z.dtype().unwrap()), (gpu, DType::Float32));
    assert_eq!(z.to_vec::<f32>().unwrap(), [0.0; 6]);
    assert_eq!(torchfn::ones([3], DType::Bool, gpu).unwrap().to_vec::<bool>().unwrap(), [true; 3]);
    assert_eq!(
        torchfn::full([2], 7, None, gpu).unwrap().to_vec::<i32>().unwrap(),
        [7, 7],
        "int defaults to int32 there"
    );
    assert_eq!(torchfn::eye(2, None, None, gpu).unwrap().to_vec::<f32>().unwrap(), [1.0, 0.0, 0.0, 1.0]);
    let r = torchfn::arange(4, None, gpu).unwrap();
    assert_eq!((r.dtype().unwrap(), r.to_vec::<i32>().unwrap()), (DType::Int32, vec![0, 1, 2, 3]));
    assert_eq!(torchfn::linspace(0.0, 1.0, 3, None, gpu).unwrap().to_vec::<f32>().unwrap(), [0.0, 0.5, 1.0]);
    let err = torchfn::zeros([2], DType::Float64, gpu).unwrap_err();
    assert!(err.to_string().contains("torch.float64 is not supported on wgpu"), "{err}");
    // Random numbers are drawn on the host: a seed gives the same tensor on every device.
    torchfn::manual_seed(5);
    let cpu = torchfn::randn([4], None, None, None).unwrap();
    torchfn::manual_seed(5);
    let there = torchfn::randn([4], None, None, gpu).unwrap();
    assert_eq!(there.device().unwrap(), gpu);
    assert_eq!(there.to_vec::<f32>().unwrap(), cpu.to_vec::<f32>().unwrap());
    let ints = torchfn::randint(5, [100], None, None, gpu).unwrap();
    assert_eq!(ints.dtype().unwrap(), DType::Int32);
    assert!(ints.to_vec::<i32>().unwrap().iter().all(|x| (0..5).contains(x)));
    let like = torchfn::zeros_like(&ints, None).unwrap();
    assert_eq!(like.device().unwrap(), gpu, "*_like follow their input");
}

#[test]
fn gpu_tensors_print_their_device() {
    let Some(gpu) = gpu() else { return };
    let t = on(torchfn::tensor([1.0f32, 2.0]).unwrap(), gpu);
    assert_eq!(t.to_string(), format!("tensor([1., 2.], device='{gpu}')"));
    let i = on(torchfn::tensor([1i32]).unwrap(), gpu);
    assert_eq!(i.to_string(), format!("tensor([1], device='{gpu}', dtype=torch.int32)"));
}

#[test]
fn tensors_too_large_for_the_device_are_an_error_not_a_crash() {
    let Some(gpu) = gpu() else { return };
    let err = torchfn::zeros([1 << 20, 1 << 20], None, gpu).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("is larger than wgpu"), "{err}");
    // The device still works afterwards.
    assert_eq!(torchfn::ones([2], None, gpu).unwrap().sum().unwrap().item().unwrap().to_f64(), 2.0);
}

/// A subclass that carries a unit: through GPU operations it keeps its class and attributes.
#[derive(TensorSubclass)]
struct Meters(&'static str);

/// A mode that records the functions it sees.
struct Recorder(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl TorchFunctionMode for Recorder {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.lock().unwrap().push(func.qualified_name().to_string());
        func.call(args, kwargs)
    }
}

#[test]
fn overrides_work_unchanged_for_gpu_tensors() {
    let Some(gpu) = gpu() else { return };
    let d = on(torchfn::tensor([1.0f32, 2.0]).unwrap(), gpu).as_subclass(Meters("m")).unwrap();
    let e = (&(&d + &d).unwrap() * 3.0).unwrap().sum().unwrap();
    assert!(e.is_instance::<Meters>());
    assert_eq!(e.attrs::<Meters>().unwrap().0, "m");
    assert_eq!(e.device().unwrap(), gpu);
    assert_eq!(e.item().unwrap().to_f64(), 18.0);
    assert!(e.to_string().starts_with("Meters(18., device='wgpu:"), "{e}");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let _mode = push_mode(Recorder(seen.clone()));
        let x = on(torchfn::tensor([1.0f32, -1.0]).unwrap(), gpu);
        let y = torchfn::relu(&x).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 0.0]);
    }
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|f| f == "torchfn.relu"), "{seen:?}");
    assert!(seen.iter().any(|f| f == "Tensor.to"), "{seen:?}");
}

#[test]
fn the_seeds_examples_work_with_gpu_tensors() {
    use super::examples::logging_tensor::LoggingTensor;
    use super::examples::metadata_tensor::MetadataTensor;
    use super::examples::subclass::SubTensor;
    let Some(gpu) = gpu() else { return };
    let suffix = format!(", device='{gpu}', dtype=torch.int32");
    // MetadataTensor (the "Extending torch" note): a wrapper duck around a GPU tensor keeps its
    // metadata through GPU operations, from either side.
    let metadata = std::collections::BTreeMap::from([("owner".to_string(), "Ministry of Silly Walks".to_string())]);
    let m = MetadataTensor::tensor_like(on(torchfn::tensor([[1i32, 2], [3, 4]]).unwrap(), gpu), metadata);
    let t = on(torchfn::tensor([[1i32, 2], [1, 2]]).unwrap(), gpu);
    let sum = torchfn::add(&t, &m, 1).unwrap();
    assert!(sum.duck::<MetadataTensor>().is_some());
    let expected = format!(
        "Metadata:\n{{'owner': 'Ministry of Silly Walks'}}\n\ndata:\ntensor([[2, 4],\n        [4, 6]]{suffix})"
    );
    assert_eq!(sum.to_string(), expected);
    assert!((&(&m * 10).unwrap() + &t).unwrap().to_string().contains("[[11, 22],\n        [31, 42]]"));
    // LoggingTensor (RFC-0001): the hook sees every call on a GPU tensor, and `super` keeps it.
    let l = on(torchfn::tensor([1.0f32]).unwrap(), gpu).as_subclass(LoggingTensor).unwrap();
    let doubled = (&l * 2.0).unwrap().sum().unwrap();
    assert!(doubled.is_instance::<LoggingTensor>());
    assert_eq!(doubled.to_string(), format!("LoggingTensor(2., device='{gpu}')"));
    // SubTensor (RFC-0001): the subclass and its attribute survive functions, methods, indexing
    // and operators from either side, on the GPU.
    let s = on(torchfn::tensor([1i32]).unwrap(), gpu).as_subclass(SubTensor { a: 1 }).unwrap();
    let plain = on(torchfn::tensor([1i32]).unwrap(), gpu);
    for result in [s.sum().unwrap(), s.get(0).unwrap(), (&s + &plain).unwrap(), (&plain + &s).unwrap()] {
        assert!(result.is_instance::<SubTensor>() && result.attrs::<SubTensor>().unwrap().a == 1, "{result}");
        assert_eq!(result.device().unwrap(), gpu);
    }
}

/// A sample argument as the parity suite gives it to the GPU: float64 tensors and dtypes as
/// float32, int64 as int32 (the dtypes a GPU holds), moved to `device` with their gradients.
pub(crate) fn prepared(value: &Value, device: Device) -> Value {
    let narrow = |d: DType| match d {
        DType::Float64 => DType::Float32,
        DType::Int64 => DType::Int32,
        d => d,
    };
    match value {
        Value::Tensor(t) if !t.is_duck() => {
            let dtype = narrow(t.dtype().unwrap());
            let mut moved = t.to_device(device, Some(dtype), false, true).unwrap();
            // A leaf stays a leaf (hooks on leaves, such as post-accumulate-grad hooks, need one).
            if t.requires_grad().unwrap() && t.is_leaf().unwrap() {
                moved = moved.detach().unwrap().requires_grad_(true).unwrap();
            }
            // A gradient goes along (gradient clipping's parameters have one).
            if let Some(g) = t.grad().unwrap() {
                moved
                    .set_grad(Some(&g.to_device(device, Some(narrow(g.dtype().unwrap())), false, true).unwrap()))
                    .unwrap();
            }
            Value::Tensor(moved)
        }
        Value::DType(d) => Value::DType(narrow(*d)),
        Value::List(items) => Value::List(items.iter().map(|v| prepared(v, device)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| prepared(v, device)).collect()),
        other => other.clone(),
    }
}

/// Whether the GPU's result matches the CPU's: the same structure, tensors of the same shape
/// and dtype (64-bit on the CPU is 32-bit on the GPU) on the GPU, values within the golden
/// tolerances of float32 (rtol 1e-5, atol 1e-6; NaN matches NaN).
fn same(cpu: &Value, gpu: &Value, device: Device, moves: bool) -> Result<(), String> {
    match (cpu, gpu) {
        (Value::Tensor(c), Value::Tensor(g)) => {
            if !moves && g.device().unwrap() != device {
                return Err(format!("the result is on {}, not {device}", g.device().unwrap()));
            }
            let (cd, gd) = (c.dtype().unwrap(), g.dtype().unwrap());
            let narrowed = matches!((cd, gd), (DType::Int64, DType::Int32) | (DType::Float64, DType::Float32));
            if !(cd == gd || narrowed) {
                return Err(format!("dtype {gd} on the GPU, {cd} on the CPU"));
            }
            if c.shape().unwrap() != g.shape().unwrap() {
                return Err(format!("shape {:?} on the GPU, {:?} on the CPU", g.shape().unwrap(), c.shape().unwrap()));
            }
            for (i, (w, x)) in elements(c).into_iter().zip(elements(g)).enumerate() {
                let close = (w.is_nan() && x.is_nan()) || w == x || (x - w).abs() <= 1e-6 + 1e-5 * w.abs();
                if !close {
                    return Err(format!("element {i} is {x} on the GPU, {w} on the CPU:\nGPU: {g}\nCPU: {c}"));
                }
            }
            Ok(())
        }
        (Value::List(a) | Value::Tuple(a), Value::List(b) | Value::Tuple(b)) if a.len() == b.len() => {
            a.iter().zip(b).try_for_each(|(a, b)| same(a, b, device, moves))
        }
        (Value::Device(_), Value::Device(d)) if *d == device => Ok(()),
        (Value::Float(a), Value::Float(b)) if (a - b).abs() <= 1e-6 + 1e-5 * a.abs() || (a.is_nan() && b.is_nan()) => {
            Ok(())
        }
        (a, b) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!("{b} on the GPU, {a} on the CPU")),
    }
}

/// The functions whose results are not comparable across devices: addresses.
const INCOMPARABLE: &[&str] = &["Tensor.data_ptr"];

/// The functions whose result is a 64-bit dtype, or the size of one, which a wgpu device has
/// not: refused there (as PyTorch's MPS refuses float64), or told of the 32-bit form the device
/// holds for it.
const SIXTY_FOUR_BIT: &[&str] = &["Tensor.double", "Tensor.long", "Tensor.element_size"];

/// The functions whose results may leave the GPU: moves, and gradient clipping, whose norm of
/// no gradients at all is PyTorch's `torch.tensor(0.)`, on the CPU whatever the parameters'
/// device.
const MOVES: &[&str] = &["Tensor.to", "Tensor.cpu", "torchfn.nn.utils.clip_grad_norm_"];

#[test]
fn every_operation_gives_the_cpu_s_results_on_the_gpu() {
    let _seeded = crate::seeded();
    let Some(device) = gpu() else { return };
    let mut failures = Vec::new();
    let mut compared = 0;
    let operations = get_overridable_functions()
        .into_iter()
        .filter(|(ns, _)| *ns == "Tensor" || *ns == "torchfn" || ns.starts_with("torchfn."))
        .flat_map(|(_, funcs)| funcs)
        .filter(|f| !crate::coverage::is_printing(f));
    for func in operations {
        let name = func.qualified_name();
        for (k, sample) in samples(func).iter().enumerate() {
            // Random operations draw the same numbers on both devices from the same seed.
            torchfn::manual_seed(42);
            let cpu = func.call(&sample.args, &sample.kwargs);
            // The sample again (in-place operations changed the first one's tensors), on the GPU.
            let sample = &samples(func)[k];
            let args: Vec<Value> = sample.args.iter().map(|v| prepared(v, device)).collect();
            let kwargs: Kwargs = sample.kwargs.iter().map(|(n, v)| (n.to_string(), prepared(v, device))).collect();
            torchfn::manual_seed(42);
            let gpu = func.call(&args, &kwargs);
            let verdict = match (&cpu, &gpu) {
                (Ok(_), Ok(_)) if INCOMPARABLE.contains(&name.as_str()) => Ok(()),
                _ if SIXTY_FOUR_BIT.contains(&name.as_str()) => Ok(()),
                (Ok(c), Ok(g)) => same(c, g, device, MOVES.contains(&name.as_str())),
                (Err(c), Err(g)) if c.kind() == g.kind() => Ok(()),
                (Err(c), Err(g)) => Err(format!("the GPU raised {g:?}, the CPU {c:?}")),
                (Ok(c), Err(g)) => Err(format!("the GPU raised {g:?}; the CPU gave {c}")),
                (Err(c), Ok(g)) => Err(format!("the GPU gave {g}; the CPU raised {c:?}")),
            };
            compared += 1;
            if let Err(why) = verdict {
                failures.push(format!("{name} sample {k}: {why}"));
            }
        }
    }
    assert!(compared > 300, "only {compared} samples compared");
    assert!(
        failures.is_empty(),
        "{} of {compared} samples differ on {device}:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Whether a golden case runs on the GPU: its tensors are of dtypes the GPU holds (float32,
/// int32, bool; int64 inputs run as int32), and it has at least one tensor argument
/// (constructors without one run on the CPU).
pub(crate) fn runs_on_the_gpu(case: &serde_json::Value) -> bool {
    let dtypes = dtypes(case);
    !dtypes.is_empty() && !dtypes.contains(&DType::Float64) && case["args"].to_string().contains("\"tensor\"")
}

#[test]
fn the_golden_cases_pass_on_the_gpu_for_its_dtypes() {
    let Some(device) = gpu() else { return };
    let cases = cases();
    let eligible: Vec<_> = cases.iter().filter(|c| runs_on_the_gpu(c)).collect();
    let failures: Vec<String> = eligible
        .iter()
        .filter_map(|case| {
            run_at(case, Place::Gpu(device)).err().map(|why| format!("{}: {why}", case["id"].as_str().unwrap()))
        })
        .collect();
    assert!(eligible.len() > 150, "only {} golden cases for the GPU", eligible.len());
    assert!(
        failures.is_empty(),
        "{} of {} golden cases fail on {device}:\n{}",
        failures.len(),
        eligible.len(),
        failures.join("\n")
    );
}

/// A sample argument with its floating-point tensors as float32 leaves that require grad, on
/// `device` (with the GPU's narrower integers there); the leaves are collected in order.
fn with_leaves(value: &Value, device: Device, leaves: &mut Vec<Tensor>) -> Value {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap().is_floating_point() => {
            let leaf = t.to_device(device, Some(DType::Float32), false, true).unwrap().requires_grad_(true).unwrap();
            leaves.push(leaf.clone());
            Value::Tensor(leaf)
        }
        Value::List(items) => Value::List(items.iter().map(|v| with_leaves(v, device, leaves)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| with_leaves(v, device, leaves)).collect()),
        other if device.is_cpu() => other.clone(),
        other => prepared(other, device),
    }
}

/// The gradients of the leaves of `sample` on `device` for `Σ sum(output_i * w_i)` (fixed
/// weights), or `None` when no output is differentiable or the call fails.
fn gradients(func: &'static Func, sample: &torchfn::testing::Sample, device: Device) -> Option<Vec<Option<Tensor>>> {
    let mut leaves = Vec::new();
    let args: Vec<Value> = sample.args.iter().map(|v| with_leaves(v, device, &mut leaves)).collect();
    let kwargs: Kwargs =
        sample.kwargs.iter().map(|(n, v)| (n.to_string(), with_leaves(v, device, &mut leaves))).collect();
    torchfn::manual_seed(42);
    let out = func.call(&args, &kwargs).ok()?;
    let outputs: Vec<Tensor> = match out {
        Value::Tensor(t) => vec![t],
        Value::List(items) | Value::Tuple(items) => items.into_iter().filter_map(|v| v.as_tensor().cloned()).collect(),
        _ => return None,
    };
    let mut total: Option<Tensor> = None;
    for out in outputs.iter().filter(|t| !t.is_duck() && t.requires_grad().unwrap()) {
        let n: usize = out.shape().unwrap().iter().product();
        let w: Vec<f32> = (0..n).map(|i| ((i * 7 + 3) % 5) as f32 - 1.5).collect();
        let w = Tensor::from_vec(w, out.shape().unwrap())
            .unwrap()
            .to_device(out.device().unwrap(), None, false, false)
            .unwrap();
        let term = (out * &w).unwrap().sum().unwrap();
        total = Some(match total {
            Some(t) => (&t + &term).unwrap(),
            None => term,
        });
    }
    let total = total?;
    if leaves.is_empty() {
        return None;
    }
    torchfn::autograd::grad(&[total], &leaves, None, None, false, true).ok()
}

/// Gradients are computed on the GPU, and match the CPU's, for every differentiable sample.
#[test]
fn every_operation_gives_the_cpu_s_gradients_on_the_gpu() {
    let _seeded = crate::seeded();
    let Some(device) = gpu() else { return };
    let (mut failures, mut compared) = (Vec::new(), 0);
    let operations = get_overridable_functions()
        .into_iter()
        .filter(|(ns, _)| *ns == "Tensor" || *ns == "torchfn" || ns.starts_with("torchfn."))
        .flat_map(|(_, funcs)| funcs)
        .filter(|f| !f.qualified_name().ends_with('_') && !f.signature().params().iter().any(|p| p.name() == "out"))
        .filter(|f| !SIXTY_FOUR_BIT.contains(&f.qualified_name().as_str()))
        .filter(|f| !crate::coverage::is_printing(f));
    for func in operations {
        for (k, sample) in samples(func).iter().enumerate() {
            let Some(cpu) = gradients(func, sample, Device::CPU) else { continue };
            let Some(gpu) = gradients(func, sample, device) else {
                failures.push(format!("{} sample {k}: no gradient on the GPU", func.qualified_name()));
                continue;
            };
            compared += 1;
            for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
                let verdict = match (c, g) {
                    (Some(c), Some(g)) => same(&Value::Tensor(c.clone()), &Value::Tensor(g.clone()), device, false),
                    (None, None) => Ok(()),
                    _ => Err("a gradient on one device only".to_string()),
                };
                if let Err(why) = verdict {
                    failures.push(format!("{} sample {k}, input {i}: {why}", func.qualified_name()));
                }
            }
        }
    }
    assert!(compared > 150, "only {compared} samples compared");
    assert!(failures.is_empty(), "{} gradients differ on {device}:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn an_optimizer_built_before_its_module_moved_is_an_error_at_its_step() {
    use torchfn::nn::{Forward, Linear, Module};
    use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
    let Some(gpu) = gpu() else { return };
    let mut model = Linear::new(3, 2, true, &Generator::new().manual_seed(0)).unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new(0.1)).unwrap();
    // Forward on the CPU, then the module moves before the step (mid-step).
    let x = torchfn::ones([4, 3], None, None).unwrap();
    model.forward(&x).unwrap().sum().unwrap().backward().unwrap();
    let before: Vec<Vec<f32>> = model.parameters().iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
    model.to_device(gpu).unwrap();
    let err = opt.step().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("parameter 0 was moved to wgpu"), "{err}");
    assert!(err.to_string().contains("build the optimizer"), "{err}");
    // Nothing changed, and an optimizer built after the move trains the moved module.
    let after: Vec<Vec<f32>> = model.parameters().iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
    assert_eq!(before, after);
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new(0.1)).unwrap();
    let x = torchfn::ones([4, 3], None, gpu).unwrap();
    model.forward(&x).unwrap().sum().unwrap().backward().unwrap();
    opt.step().unwrap();
    let stepped: Vec<Vec<f32>> = model.parameters().iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
    assert_ne!(stepped, after);
}

#[test]
fn operations_keep_the_reduced_dimensions_when_asked() {
    let Some(device) = gpu() else { return };
    let x = torchfn::tensor([[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]])
        .unwrap()
        .to_device(device, None, false, false)
        .unwrap();
    let kept = x.sum_dim(vec![1i64, 2], true).unwrap();
    assert_eq!(kept.shape().unwrap(), [1, 1, 1]);
    assert_eq!(kept.cpu().unwrap().to_vec::<f32>().unwrap(), [21.0]);
    let dropped = x.sum_dim(1i64, false).unwrap();
    assert_eq!(dropped.shape().unwrap(), [1, 2]);
    assert_eq!(dropped.cpu().unwrap().to_vec::<f32>().unwrap(), [9.0, 12.0]);
    let arg = torchfn::argmax(&x, Some(1), true).unwrap();
    assert_eq!(arg.shape().unwrap(), [1, 1, 2]);
    assert_eq!(arg.dtype().unwrap(), DType::Int32, "indices are int32 on a wgpu device");
    assert_eq!(arg.cpu().unwrap().to_vec::<i32>().unwrap(), [2, 2]);
}

#[test]
fn a_reduction_into_a_dtype_the_gpu_lacks_is_refused_not_narrowed() {
    let Some(device) = gpu() else { return };
    let x = torchfn::ones([3, 4], None, None).unwrap().to_device(device, None, false, false).unwrap();
    for result in [
        torchfn::sum_dim_dtype(&x, 0, false, DType::Float64),
        torchfn::cumsum(&x, 0, Some(DType::Float64)),
        torchfn::mean_dtype(&x, DType::Float64),
    ] {
        let err = result.unwrap_err();
        assert!(err.to_string().contains("torch.float64 is not supported on wgpu"), "{err}");
    }
    assert_eq!(torchfn::sum_dtype(&x, DType::Float32).unwrap().item().unwrap(), torchfn::Scalar::Float(12.0));
}
