use std::time::Instant;
use torchfn::prelude::*;
#[derive(TensorSubclass)]
struct Sub;
impl TorchFunction for Sub {}
#[derive(Debug, DuckTensor)]
struct Ready;
static READY: std::sync::LazyLock<Tensor> = std::sync::LazyLock::new(|| torchfn::tensor([1.0f32]).unwrap());
impl TorchFunction for Ready {
    fn torch_function(_: &'static Class, f: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        if f == Tensor::NDIM { Ok(Value::Int(1)) } else { Ok(Value::Tensor(READY.clone())) }
    }
}
struct Pass;
impl TorchFunctionMode for Pass {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}
fn time(name: &str, mut f: impl FnMut()) {
    for _ in 0..10_000 {
        f();
    }
    let n = 400_000;
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    println!("{name:<28} {:8.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
}
fn main() {
    let a = torchfn::tensor([1.0f32]).unwrap();
    let b = torchfn::tensor([2.0f32]).unwrap();
    let s = a.as_subclass(Sub).unwrap();
    let d = Tensor::from_duck(Ready);

    time("ndim plain (first)", || {
        std::hint::black_box(std::hint::black_box(&a).ndim().unwrap());
    });
    time("ndim impl", || {
        std::hint::black_box(Tensor::__impl_ndim(std::hint::black_box(&a)).unwrap());
    });
    time("ndim plain", || {
        std::hint::black_box(std::hint::black_box(&a).ndim().unwrap());
    });
    time("ndim sub", || {
        std::hint::black_box(std::hint::black_box(&s).ndim()).unwrap();
    });
    time("ndim duck", || {
        std::hint::black_box(std::hint::black_box(&d).ndim()).unwrap();
    });
    {
        let _m = push_mode(Pass);
        time("ndim mode", || {
            std::hint::black_box(std::hint::black_box(&a).ndim().unwrap());
        });
    }
    time("ndim impl again", || {
        std::hint::black_box(Tensor::__impl_ndim(std::hint::black_box(&a)).unwrap());
    });
    time("ndim plain again", || {
        std::hint::black_box(std::hint::black_box(&a).ndim().unwrap());
    });
    time("add impl", || {
        std::hint::black_box(Tensor::__impl_add(std::hint::black_box(&a), std::hint::black_box(&b), 1)).unwrap();
    });
    time("add plain", || {
        std::hint::black_box(std::hint::black_box(&a).add(std::hint::black_box(&b), 1)).unwrap();
    });
    time("add sub", || {
        std::hint::black_box(std::hint::black_box(&s).add(std::hint::black_box(&s), 1)).unwrap();
    });
    time("add duck", || {
        std::hint::black_box(torchfn::add(std::hint::black_box(&d), std::hint::black_box(&d), 1)).unwrap();
    });
    {
        let _m = push_mode(Pass);
        time("add mode", || {
            std::hint::black_box(std::hint::black_box(&a).add(std::hint::black_box(&b), 1)).unwrap();
        });
    }
}
