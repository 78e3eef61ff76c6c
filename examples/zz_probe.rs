use std::hint::black_box;
use torchfn::prelude::*;

#[derive(TensorSubclass)]
struct Sub;

#[derive(Debug, DuckTensor)]
struct Ready;
impl TorchFunction for Ready {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(if func == Tensor::NDIM { Value::Int(1) } else { Value::None })
    }
}
struct PassThrough;
impl TorchFunctionMode for PassThrough {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}

fn main() {
    let case = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let a = Tensor::from_vec(vec![1.0f32], [1]).unwrap();
    let b = Tensor::from_vec(vec![2.0f32], [1]).unwrap();
    let s = a.as_subclass(Sub).unwrap();
    let d = Tensor::from_duck(Ready);
    let _m = if case.starts_with("mode") { Some(push_mode(PassThrough)) } else { None };
    for _ in 0..n {
        match case.as_str() {
            "none" => {}
            "plain_ndim" | "mode_ndim" => {
                black_box(black_box(&a).ndim().unwrap());
            }
            "sub_ndim" => {
                black_box(black_box(&s).ndim().unwrap());
            }
            "duck_ndim" => {
                black_box(black_box(&d).ndim().unwrap());
            }
            "plain_add" | "mode_add" => {
                black_box(black_box(&a).add(black_box(&b), 1).unwrap());
            }
            _ => panic!(),
        }
    }
}
