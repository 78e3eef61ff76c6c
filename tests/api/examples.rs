//! Every example runs and prints what the seeds show.

use std::io;
use std::sync::{Arc, Mutex};

#[allow(dead_code)]
#[path = "../../examples/quickstart.rs"]
mod quickstart;

#[allow(dead_code)]
#[path = "../../examples/scalar_tensor.rs"]
mod scalar_tensor;

#[allow(dead_code)]
#[path = "../../examples/metadata_tensor.rs"]
pub(crate) mod metadata_tensor;

#[allow(dead_code)]
#[path = "../../examples/logging_tensor.rs"]
pub(crate) mod logging_tensor;

#[allow(dead_code)]
#[path = "../../examples/logging_mode.rs"]
mod logging_mode;

#[allow(dead_code)]
#[path = "../../examples/nan_check.rs"]
mod nan_check;

// It loads gpt_tiny's model file as other examples here do.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../examples/per_sample_grads.rs"]
mod per_sample_grads;

#[allow(dead_code)]
#[path = "../../examples/units.rs"]
mod units;

#[allow(dead_code)]
#[path = "../../examples/subclass.rs"]
pub(crate) mod subclass;

#[allow(dead_code)]
#[path = "../../examples/registry.rs"]
mod registry;

#[allow(dead_code)]
#[path = "../../examples/linear_function.rs"]
mod linear_function;

#[allow(dead_code)]
#[path = "../../examples/mul_constant.rs"]
mod mul_constant;

#[allow(dead_code)]
#[path = "../../examples/my_cube.rs"]
mod my_cube;

#[allow(dead_code)]
#[path = "../../examples/train_gpt.rs"]
pub(crate) mod train_gpt;

/// A short run of the training example (the full one is `cargo run --release --example
/// train_gpt`): the loss falls from its start, and the model writes text of the vocabulary.
#[test]
fn train_gpt_learns_in_a_few_steps() {
    let trained = train_gpt::train(40, 4, 16, None, false, false, None).unwrap();
    let first: f64 = trained.losses[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = trained.losses[35..].iter().sum::<f64>() / 5.0;
    assert!(last < first - 0.3, "the loss went from {first} to {last}");
    assert_eq!(trained.sample.chars().count(), 208);
    assert!(trained.sample.chars().all(|c| train_gpt::TEXT.contains(c)));
}

/// The training example with `--precision bf16`: under bfloat16 autocast it learns as in
/// float32, and the parameters stay float32.
#[test]
fn train_gpt_learns_under_bf16_autocast() {
    let trained = train_gpt::train(40, 4, 16, None, false, false, Some(torchfn::DType::BFloat16)).unwrap();
    let first: f64 = trained.losses[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = trained.losses[35..].iter().sum::<f64>() / 5.0;
    assert!(last < first - 0.3, "the loss went from {first} to {last}");
    let float32 = train_gpt::train(40, 4, 16, None, false, false, None).unwrap();
    let last32: f64 = float32.losses[35..].iter().sum::<f64>() / 5.0;
    assert!((last - last32).abs() < 0.1, "bf16 ends at {last}, float32 at {last32}");
}

/// Seed 001's custom Functions: each example's transcript, gradcheck's verdicts included.
#[test]
fn seed_001_custom_functions_run_and_pass_gradcheck() {
    assert_eq!(
        linear_function::run().unwrap(),
        "\
>>> output.grad_fn
<LinearFunctionBackward object>
>>> output equals F.linear(input, weight, bias)
true
>>> bias.grad
tensor([2., 2., 2., 2.], dtype=torch.float64)
>>> linear(input, weight).shape
torch.Size([2, 4])
>>> gradcheck(linear, input, eps=1e-6, atol=1e-4)
true
>>> gradcheck(linear, (input, weight, bias), eps=1e-6, atol=1e-4)
true
>>> gradcheck(combined LinearFunction.apply, (input, weight, bias))
true
>>> Linear(20, 30)
Linear(input_features=20, output_features=30, bias=True)
>>> output.shape, parameters with a gradient
torch.Size([4, 30]) 2
"
    );
    assert_eq!(
        mul_constant::run().unwrap(),
        "\
>>> y = MulConstant.apply(x, 2.5)
tensor([2.5000, 5.0000, 7.5000], dtype=torch.float64)
>>> x.grad
tensor([2.5000, 2.5000, 2.5000], dtype=torch.float64)
>>> x.grad (set_materialize_grads(false))
tensor([  -1.,  -10., -100.], dtype=torch.float64)
>>> gradcheck of both forms
true
"
    );
    assert_eq!(
        my_cube::run().unwrap(),
        "\
>>> y, dy/dx, d2y/dx2 at x = 2
tensor([8.], dtype=torch.float64) tensor([12.], dtype=torch.float64) tensor([12.], dtype=torch.float64)
>>> gradcheck(my_cube, input)
true
>>> gradgradcheck(my_cube, input)
true
"
    );
}

#[test]
fn scalar_tensor_follows_the_extending_torch_note() {
    let out = scalar_tensor::run().unwrap();
    let expected = "\
>>> d
ScalarTensor(N=5, value=2)
>>> d.tensor()
tensor([[2., 0., 0., 0., 0.],
        [0., 2., 0., 0., 0.],
        [0., 0., 2., 0., 0.],
        [0., 0., 0., 2., 0.],
        [0., 0., 0., 0., 2.]])
>>> torchfn::mean(&d)
0.4
>>> torchfn::add(&s, &s, 1)
ScalarTensor(N=2, value=4)
>>> torchfn::add(&s, &t, 1)
tensor([[3., 1.],
        [1., 3.]])
>>> torchfn::add(&s, &s, 2)
TypeError: add() got an unexpected keyword argument 'alpha'
>>> torchfn::mul(&s, &s)
TypeError: no implementation found for 'torchfn.mul' on types that implement __torch_function__: [ScalarTensor]
>>> torchfn::mul(&c, &c)
tensor([[4., 0.],
        [0., 4.]])
";
    assert_eq!(out, expected);
}

#[test]
fn metadata_tensor_carries_its_metadata_through_operations() {
    let out = metadata_tensor::run().unwrap();
    let expected = "\
>>> torchfn::add(&t, &m, 1)
Metadata:
{'owner': 'Ministry of Silly Walks'}

data:
tensor([[2, 4],
        [4, 6]])
>>> torchfn::mul(&t, &m)
Metadata:
{'owner': 'Ministry of Silly Walks'}

data:
tensor([[1, 4],
        [3, 8]])
>>> &(&m * 10)? + &t
Metadata:
{'owner': 'Ministry of Silly Walks'}

data:
tensor([[11, 22],
        [31, 42]])
";
    assert_eq!(out, expected);
}

#[test]
fn subclass_keeps_the_class_and_its_attribute_everywhere() {
    let out = subclass::run().unwrap();
    assert_eq!(out.lines().count(), 6);
    for line in out.lines() {
        assert!(line.contains("isinstance(SubTensor) = true") && line.ends_with(".a = 1"), "{line}");
    }
    assert!(out.contains("s = t.sum()              SubTensor(1)"), "{out}");
    assert!(out.contains("s3 = &plain + &t         SubTensor([2])"), "{out}");
}

/// A `tracing` writer into memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[test]
fn logging_tensor_logs_every_function_method_and_operator() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt().with_writer(captured.clone()).without_time().with_target(false).finish();
    let out = tracing::subscriber::with_default(subscriber, logging_tensor::run).unwrap();
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let expected_log = [
        " INFO func: Tensor.sum, args: (LoggingTensor([1.]),), kwargs: {}",
        " INFO func: Tensor.__getitem__, args: (LoggingTensor([1.]), 0), kwargs: {}",
        " INFO func: torchfn.sum, args: (LoggingTensor([1.]),), kwargs: {}",
        " INFO func: Tensor.__mul__, args: (LoggingTensor([1.]), 2.0), kwargs: {}",
        " INFO func: Tensor.shape.__get__, args: (LoggingTensor([1.]),), kwargs: {}",
        " INFO func: Tensor.__format__, args: (LoggingTensor([1.]), '.1'), kwargs: {}",
        "",
    ]
    .join("\n");
    assert_eq!(log, expected_log);
    assert!(out.contains("&t * 2.0 = LoggingTensor([2.])"), "{out}");
    assert!(out.contains("t.shape() = torch.Size([1])"), "{out}");
    assert!(out.contains("t = LoggingTensor([1.])"), "{out}");
}

#[test]
fn logging_mode_logs_forward_and_backward_operators_in_pytorch_s_format() {
    let log = logging_mode::run().unwrap();
    let expected = [
        // forward
        "$2: f32[2] = aten.mul.Tensor($0, $1, dtype=torch.float32)",
        "$3: f32[] = aten.sum.dim_IntList($2, [0], False, dtype=torch.float32)",
        // backward: the seed gradient, spread back over the sum, times y, into x.grad
        "$4: f32[] = aten.new_full.default($3, [], 1, dtype=torch.float32, device=device(type='cpu'))",
        "$5: f32[1] = aten.as_strided.default($4, [1], [1], 0)",
        "$6: f32[2] = aten.as_strided.default($5, [2], [0], 0)",
        "$7: f32[2] = aten.mul.Tensor($6, $1, dtype=torch.float32)",
        "$8: f32[2] = aten.clone.default($7)",
        "",
    ]
    .join("\n");
    assert_eq!(log, expected);
}

#[test]
fn logging_tensors_log_forward_and_backward_operators_in_pytorch_s_format() {
    let log = logging_mode::run_tensor().unwrap();
    let expected = [
        "$2: f32[2] = aten.mul.Tensor($0, $1, dtype=torch.float32)",
        "$3: f32[] = aten.sum.dim_IntList($2, [0], False, dtype=torch.float32)",
        // backward: the seed gradient made like the output (PyTorch's `ones_like`), spread over
        // the sum, times y
        "$4: f32[] = aten.new_full.default($3, [], 1, dtype=torch.float32, device=device(type='cpu'))",
        "$5: f32[1] = aten.as_strided.default($4, [1], [1], 0)",
        "$7: f32[2] = aten.as_strided.default($6, [2], [0], 0)",
        "$9: f32[2] = aten.mul.Tensor($8, $1, dtype=torch.float32)",
        "$10: f32[2] = aten.clone.default($9)",
        "",
    ]
    .join("\n");
    assert_eq!(log, expected);
}

#[test]
fn nan_check_names_the_backward_operator_that_made_a_nan() {
    let out = nan_check::run().unwrap();
    assert_eq!(
        out,
        "forward: tensor(0.)\nbackward: aten.div.Tensor returned NaN in Net.root (backward); its inputs were: tensor([0., 0.]), tensor([0., \
         4.])\n"
    );
}

#[test]
fn units_keep_their_unit_through_the_backward_pass() {
    assert_eq!(
        units::run().unwrap(),
        "x = [2.0, 6.0] m, t = [1.0, 2.0] s\n\
         v = x / t = [2.0, 3.0] m/s\n\
         e = sum(v * v) = [13.0] m^2/s^2 (grad_fn SumBackward0)\n\
         de/dx = [4.0, 3.0] m/s^2\n\
         x + t: aten.add.Tensor: cannot combine m and s\n"
    );
}

#[test]
fn registry_lists_every_function_with_the_programs_own() {
    let out = registry::run().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    for expected in [
        "torchfn.add(input, other, *, alpha=1)",
        "Tensor.add(self, other, *, alpha=1)",
        "Tensor.__getitem__(self, index)",
        "Tensor.shape.__get__(self)",
        "mylib.shift(input, offset=1.0)",
    ] {
        assert!(lines.contains(&expected), "{expected} missing from:\n{out}");
    }
    assert!(out.contains("# mylib (2 functions)"), "quickstart's mylib.scale is in this binary too:\n{out}");
}

#[test]
fn quickstart_tells_the_whole_story() {
    let out = quickstart::run().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "subclass: scale(d + d, 10)[1:].sum() = Meters(100.)  (unit: m)");
    assert_eq!(lines[1], "duck:     scale(Lazy(x1), 3) = Lazy(x3)");
    assert_eq!(
        lines[2],
        "duck:     sum(lazy) fails: no implementation found for 'torchfn.sum' on types that implement __torch_function__: [Lazy]"
    );
    assert_eq!(lines[3], "mode:     traced torchfn.tensor, Tensor.matmul, Tensor.__sub__, Tensor.mean");
    assert!(
        lines[4].starts_with("registry: ") && lines[4].contains("mylib") && lines[4].contains("Tensor"),
        "{}",
        lines[4]
    );
    assert_eq!(lines[5], "registry: <function mylib.scale(input, factor=2.0)>");
}

#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../examples/fx_gpt.rs"]
mod fx_gpt;

/// The fx example: the traced GPT computes the eager logits exactly, the gelu pass swaps one
/// node per block, and the fused perceptron computes what it did.
#[test]
fn fx_gpt_traces_draws_and_transforms() {
    let text = fx_gpt::run(None).unwrap();
    assert!(text.contains("GraphModule vs eager logits: max |diff| = 0\n"), "{text}");
    assert!(text.contains("gelu -> relu: 2 nodes swapped"), "{text}");
    assert!(text.contains("linear + relu fused 1 time(s)"), "{text}");
    assert!(text.contains("call_function[target=fx_gpt.linear_relu]"), "{text}");
    assert!(text.contains("fused vs eager: max |diff| = 0\n"), "{text}");
}

#[test]
fn per_sample_gradients_by_vmap_of_grad_equal_the_loop_for_an_mlp_and_gpt_tiny() {
    use per_sample_grads::*;
    let g = torchfn::Generator::new().manual_seed(1);
    let mut model = mlp(&g).unwrap();
    let x = torchfn::randn([4, 784], g.clone(), None, None).unwrap();
    let y = torchfn::randint(10, [4], g.clone(), None, None).unwrap();
    let loss = |l: &torchfn::Tensor, y: &torchfn::Tensor| {
        torchfn::nn::functional::cross_entropy(l, y, None, None, -100, None, "mean", 0.0)
    };
    let (mapped, looped) = per_sample(&mut model, &x, &y, loss).unwrap();
    assert_eq!(mapped["0.weight"].shape().unwrap(), [4, 256, 784]);
    // The loop multiplies one example's row by dot products, vmap the batch's rows by the GEMM:
    // float32 sums in two orders (1.4e-6 apart on gradients up to 1.7).
    assert!(max_difference(&mapped, &looped).unwrap() < 1e-5);
    let mut gpt = gpt_tiny(&g).unwrap();
    let ids = torchfn::randint(128, [3, 9], g.clone(), None, None).unwrap();
    let (inputs, targets) = (ids.narrow(1, 0, 8).unwrap(), ids.narrow(1, 1, 8).unwrap());
    let (mapped, looped) = per_sample(&mut gpt, &inputs, &targets, gpt::GPT2LMHeadModel::loss).unwrap();
    assert_eq!(mapped.len(), 28);
    assert!(max_difference(&mapped, &looped).unwrap() < 1e-5);
}

#[test]
fn a_custom_function_works_under_vmap_grad_and_their_compositions() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    use torchfn::Tensor;
    use torchfn::func::{ARG0, grad, hessian, jacrev, vmap};
    let xs = torchfn::tensor(vec![1.0f64, -2.0, 0.5]).unwrap();
    let cube = |x: Tensor| my_cube::my_cube(&x);
    // vmap: the Function's forward runs once on the batch, through the batching rules
    assert_eq!(vmap(cube, 0, 0)(xs.clone()).unwrap().to_vec::<f64>().unwrap(), [1.0, -8.0, 0.125]);
    // per-example derivatives (3x²) through its backward, and second ones (6x) through the
    // backward's own graph
    let d = vmap(grad(cube, ARG0), 0, 0)(xs.clone()).unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), [3.0, 12.0, 0.75]);
    let d2 = vmap(grad(grad(cube, ARG0), ARG0), 0, 0)(xs.clone()).unwrap();
    assert_eq!(d2.to_vec::<f64>().unwrap(), [6.0, -12.0, 3.0]);
    let j = jacrev(|x: Tensor| my_cube::my_cube(&x), ARG0)(xs.clone()).unwrap();
    assert_eq!(j.to_vec::<f64>().unwrap(), [3.0, 0.0, 0.0, 0.0, 12.0, 0.0, 0.0, 0.0, 0.75]);
    let h = jacrev(jacrev(|x: Tensor| my_cube::my_cube(&x)?.sum(), ARG0), ARG0)(xs.clone()).unwrap();
    assert_eq!(h.to_vec::<f64>().unwrap(), [6.0, 0.0, 0.0, 0.0, -12.0, 0.0, 0.0, 0.0, 3.0]);
    // MyCube has no jvp: forward mode says so, as PyTorch does
    let err = hessian(|x: Tensor| my_cube::my_cube(&x)?.sum(), ARG0)(xs).unwrap_err().to_string();
    assert!(err.contains("jvp"), "{err}");
}
