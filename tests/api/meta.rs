//! The meta device: every sample of every operation on meta tensors gives the shape and dtype
//! the CPU gives, every operator call of every sample gives the CPU's shape, dtype and strides
//! on meta (PyTorch's cross-reference of meta and real kernels), and what needs values says so.

use torchfn::Device;
use torchfn::prelude::*;
use torchfn::testing::samples;

/// `value` with its tensors moved to the meta device.
fn to_meta(value: &Value) -> Value {
    match value {
        Value::Tensor(t) if !t.is_duck() => {
            // A leaf stays a leaf (a differentiable move would send gradients back to the CPU).
            let moved = t.detach().unwrap().to_device(Device::META, None, false, true).unwrap();
            Value::Tensor(moved.requires_grad_(t.requires_grad().unwrap()).unwrap())
        }
        Value::List(items) => Value::List(items.iter().map(to_meta).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(to_meta).collect()),
        other => other.clone(),
    }
}

/// Where the meta result differs from the CPU's in structure, shape or dtype.
fn same_shapes(cpu: &Value, meta: &Value) -> Result<(), String> {
    match (cpu, meta) {
        (Value::Tensor(c), Value::Tensor(m)) if !c.is_duck() && !m.is_duck() => {
            let (cs, ms) = (c.shape().unwrap().to_vec(), m.shape().unwrap().to_vec());
            let (cd, md) = (c.dtype().unwrap(), m.dtype().unwrap());
            if (cs.clone(), cd) != (ms.clone(), md) {
                return Err(format!("{md}{ms:?} on meta, {cd}{cs:?} on the CPU"));
            }
            Ok(())
        }
        (Value::List(a) | Value::Tuple(a), Value::List(b) | Value::Tuple(b)) if a.len() == b.len() => {
            a.iter().zip(b).try_for_each(|(a, b)| same_shapes(a, b))
        }
        (Value::Tensor(_), other) | (other, Value::Tensor(_)) => Err(format!("{other} where a tensor was")),
        _ => Ok(()),
    }
}

#[test]
fn every_sample_has_the_cpu_s_shapes_and_dtypes_on_meta() {
    let (mut compared, mut needs_data, mut differences) = (0, Vec::new(), Vec::new());
    for func in crate::coverage::operations() {
        for (k, sample) in samples(func).iter().enumerate() {
            let cpu = func.call(&sample.args, &sample.kwargs);
            let sample = &samples(func)[k];
            let args: Vec<Value> = sample.args.iter().map(to_meta).collect();
            let kwargs: Kwargs = sample.kwargs.iter().map(|(k, v)| (k.to_string(), to_meta(v))).collect();
            match (cpu, func.call(&args, &kwargs)) {
                (Ok(cpu), Ok(meta)) => {
                    if let Err(e) = same_shapes(&cpu, &meta) {
                        differences.push(format!("{func} sample {k}: {e}"));
                    }
                    compared += 1;
                }
                (Ok(_), Err(e)) => needs_data.push(format!("{func} sample {k}: {e}")),
                (Err(_), _) => {}
            }
        }
    }
    assert!(differences.is_empty(), "{} differ:\n{}", differences.len(), differences.join("\n"));
    println!("{compared} samples compared");
    assert!(compared > 450, "only {compared} samples compared");
    // What needs values: copies out of the device, `item` and Python's number conversions and
    // `in` (as in PyTorch), and `nonzero`, so a bool mask's positions (PyTorch has no meta
    // kernel for it either) and `masked_select`, `masked_scatter` and `unique`, which are
    // built on it.
    let expected = [
        "Tensor.__bool__ sample 0",
        "Tensor.__contains__ sample 0",
        "Tensor.__contains__ sample 1",
        "Tensor.__float__ sample 0",
        "Tensor.__float__ sample 1",
        "Tensor.__getitem__ sample 1",
        "Tensor.__index__ sample 0",
        "Tensor.__int__ sample 0",
        "Tensor.__int__ sample 1",
        "Tensor.__setitem__ sample 4",
        "Tensor.cpu sample 0",
        "Tensor.index_put sample 0",
        "Tensor.item sample 0",
        "Tensor.masked_scatter sample 0",
        "Tensor.masked_select sample 0",
        "Tensor.nonzero sample 0",
        "Tensor.to sample 2",
        "Tensor.unique sample 0",
        "torchfn.masked_scatter sample 0",
        "torchfn.masked_scatter sample 1",
        "torchfn.masked_select sample 0",
        "torchfn.masked_select sample 1",
        "torchfn.nonzero sample 0",
        "torchfn.nonzero sample 1",
        "torchfn.nonzero sample 2",
        // How many rounds the product takes: the most elements one position receives
        // (scatter's reduce="multiply" is that product).
        "torchfn.scatter sample 2",
        "torchfn.scatter_reduce sample 4",
        "torchfn.unique sample 0",
        "torchfn.unique sample 1",
        "torchfn.unique sample 2",
        // Residuals exist only when every matrix has full rank: a value read, as in PyTorch.
        "torchfn.linalg.lstsq sample 2",
    ];
    let failed: Vec<&str> = needs_data.iter().map(|n| n.split(": ").next().unwrap()).collect();
    assert_eq!(failed, expected, "{}", needs_data.join("\n"));
}

#[test]
fn the_meta_device_parses_prints_and_refuses_reads() {
    assert_eq!(Device::parse("meta").unwrap(), Device::META);
    assert_eq!(
        (Device::META.to_string(), format!("{:?}", Device::META)),
        ("meta".into(), "device(type='meta')".into())
    );
    let x = torchfn::zeros([2, 3], DType::Int64, Device::META).unwrap();
    assert_eq!(x.to_string(), "tensor(..., device='meta', size=(2, 3), dtype=torch.int64)");
    let err = x.to_vec::<i64>().unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string()),
        (torchfn::ErrorKind::NotImplemented, "Cannot copy out of meta tensor; no data!".into())
    );
    let err = x.cpu().unwrap_err();
    assert_eq!(err.to_string(), "Cannot copy out of meta tensor; no data!");
}

#[test]
fn a_model_step_runs_on_meta_tensors_without_data() {
    use torchfn::nn::{Forward, Module};
    let meta = crate::workloads::meta("gpt_tiny");
    let mut model = crate::examples::train_gpt::gpt::GPT2LMHeadModel::new(
        crate::workloads::gpt_config(&meta),
        &Generator::new().manual_seed(0),
    )
    .unwrap();
    model.to_device(Device::META).unwrap();
    let inputs = crate::workloads::file("gpt_tiny", "inputs");
    let ids = inputs.get("input_ids").unwrap().to_device(Device::META, None, false, true).unwrap();
    let targets = inputs.get("targets").unwrap().to_device(Device::META, None, false, true).unwrap();
    let logits = model.forward(&ids).unwrap();
    let loss = crate::examples::train_gpt::gpt::GPT2LMHeadModel::loss(&logits, &targets).unwrap();
    loss.backward().unwrap();
    assert_eq!(logits.shape().unwrap(), [ids.shape().unwrap()[0], ids.shape().unwrap()[1], 128]);
    assert_eq!(loss.device().unwrap(), Device::META);
    for (name, p) in model.named_parameters() {
        let g = p.grad().unwrap().unwrap_or_else(|| panic!("{name} has no gradient"));
        assert_eq!((g.shape().unwrap(), g.device().unwrap()), (p.shape().unwrap(), Device::META), "{name}");
    }
}

/// Runs each operator on the real arguments and on meta copies of them, and fails the call when
/// the results' shapes, dtypes or strides differ (PyTorch's `CrossRefFakeMode`).
/// Meta copies are made as fake tensors are (views stay views of their bases' fakes).
#[derive(Default)]
struct CrossRef(std::cell::Cell<usize>, torchfn::fake_tensor::FakeTensorMode);

impl CrossRef {
    fn fake(&self, value: &Value) -> torchfn::Result<Value> {
        Ok(match value {
            Value::Tensor(t) if !t.is_duck() => Value::Tensor(self.1.from_tensor(t)?),
            Value::List(items) => Value::List(items.iter().map(|v| self.fake(v)).collect::<torchfn::Result<_>>()?),
            Value::Tuple(items) => Value::Tuple(items.iter().map(|v| self.fake(v)).collect::<torchfn::Result<_>>()?),
            Value::Device(_) => Value::Device(Device::META),
            other => other.clone(),
        })
    }
}

fn layout(value: &Value) -> String {
    match value {
        Value::Tensor(t) if !t.is_duck() => {
            format!("{}{:?}/{:?}", t.dtype().unwrap(), t.shape().unwrap().to_vec(), t.stride().unwrap())
        }
        Value::Tuple(items) | Value::List(items) => items.iter().map(layout).collect::<Vec<_>>().join(", "),
        _ => String::new(),
    }
}

impl torchfn::dispatch::TorchDispatchMode for CrossRef {
    fn torch_dispatch(
        &self,
        func: &'static torchfn::dispatch::Operator,
        _: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> torchfn::Result<Value> {
        let real = func.call(args, kwargs)?;
        // Data-dependent operators and writes have nothing to compare on meta.
        let skip = func.has_tag(torchfn::dispatch::Tag::DataDependent)
            || func.has_tag(torchfn::dispatch::Tag::DynamicOutputShape)
            || func.schema().is_mutable();
        let on_meta = args.iter().chain(kwargs.iter().map(|(_, v)| v)).all(|v| match v {
            Value::Tensor(t) => t.device().is_ok_and(|d| d.is_cpu() || d.is_meta()),
            _ => true,
        });
        if !skip && on_meta {
            let meta_args: Vec<Value> = args.iter().map(|v| self.fake(v)).collect::<torchfn::Result<_>>()?;
            let mut meta_kwargs = Kwargs::new();
            for (k, v) in kwargs.iter() {
                meta_kwargs.insert(k, self.fake(v)?);
            }
            let meta = func
                .call(&meta_args, &meta_kwargs)
                .map_err(|e| torchfn::Error::runtime_error(format!("{func}: fails on meta: {e}")))?;
            if layout(&real) != layout(&meta) {
                return Err(torchfn::Error::runtime_error(format!(
                    "{func}: {} on the CPU, {} on meta",
                    layout(&real),
                    layout(&meta)
                )));
            }
            self.0.set(self.0.get() + 1);
        }
        Ok(real)
    }
}

#[test]
fn every_operator_of_every_sample_gives_the_cpu_s_shape_dtype_and_strides_on_meta() {
    let (mut calls, mut failures) = (0, Vec::new());
    for func in crate::coverage::operations() {
        for (k, sample) in samples(func).iter().enumerate() {
            let mode = torchfn::dispatch::push_dispatch_mode(CrossRef::default());
            if let Err(e) = func.call(&sample.args, &sample.kwargs)
                && e.to_string().contains(" on meta")
            {
                failures.push(format!("{func} sample {k}: {e}"));
            }
            calls += mode.0.get();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{calls} operator calls compared");
    assert!(calls > 1000, "only {calls} operator calls compared");
}
