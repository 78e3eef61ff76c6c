use torchfn::prelude::*;
#[derive(TensorSubclass)]
struct Sub;
impl TorchFunction for Sub {}
#[derive(Debug, DuckTensor)]
struct Ready;
impl TorchFunction for Ready {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::Int(1))
    }
}
struct Pass;
impl TorchFunctionMode for Pass {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}
fn main() {
    let a = torchfn::tensor([1.0f32]).unwrap();
    let which = std::env::args().nth(1).unwrap_or_default();
    let n: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let _m = (which == "mode").then(|| push_mode(Pass));
    let t = match which.as_str() {
        "sub" => a.as_subclass(Sub).unwrap(),
        "duck" => Tensor::from_duck(Ready),
        _ => a,
    };
    let add = std::env::args().nth(3).is_some();
    for _ in 0..n {
        if add {
            std::hint::black_box(std::hint::black_box(&t).add(&t, 1).unwrap());
        } else {
            std::hint::black_box(std::hint::black_box(&t).ndim().unwrap());
        }
    }
}
