//! The wgpu backend's throughput and launch overhead (issue 4).
//!
//! `cargo bench --bench gpu_bench` runs the criterion benchmarks on the default adapter
//! (`TORCHFN_WGPU_ADAPTER` picks another), then prints a table with the device's name:
//! elementwise `add` (into a preallocated output and allocating; float16 and bfloat16 too) and
//! `exp` bandwidth, `sum` bandwidth, a plain copy as the bandwidth baseline, float32 matmul
//! GFLOP/s at 1024, 2048 and 4096 (float16 and bfloat16 at 2048), the time of one small
//! operation with launches batched (64 per submission) and submitted one by one, and one
//! training step (zero_grad, forward, loss, backward, AdamW) of the training bench's gpt_small
//! and resnet18 on the GPU. With `PYTORCH_PYTHON` naming a Python whose torch has CUDA (and
//! transformers and torchvision), it runs `bench/pytorch_gpu.py` right after: the same
//! measurements through PyTorch on the CUDA device, printed beside torchfn's.
//!
//! GPU work is asynchronous: each measurement launches `iters` operations and waits once for
//! the device, so the time is the device's, not the launch latency's (except for the launch
//! rows, which measure exactly that). On Mesa's software Vulkan driver the numbers mean
//! nothing; they are for real GPUs.

mod common;
use common::{mean_ns, pytorch};

#[allow(dead_code)]
#[path = "common/workloads.rs"]
mod workloads;
use workloads::Workload;

use std::time::{Duration, Instant};

use criterion::Criterion;
use torchfn::{DType, Device, Tensor};

const N: usize = 10_000_000;

/// (criterion id, what, bytes or flops per call, unit).
const ROWS: &[(&str, &str, f64, &str)] = &[
    ("gpu/copy", "baseline: contiguous copy (x.clone())", 8.0 * N as f64, "GB/s"),
    ("gpu/add_out", "add into a preallocated output", 12.0 * N as f64, "GB/s"),
    ("gpu/add", "add allocating its result", 12.0 * N as f64, "GB/s"),
    ("gpu/exp", "exp", 8.0 * N as f64, "GB/s"),
    ("gpu/sum", "sum", 4.0 * N as f64, "GB/s"),
    ("gpu/add_f16", "add float16 allocating its result", 6.0 * N as f64, "GB/s"),
    ("gpu/add_bf16", "add bfloat16 allocating its result", 6.0 * N as f64, "GB/s"),
    ("gpu/matmul_1024", "matmul float32 1024", 2.0 * 1024.0 * 1024.0 * 1024.0, "GFLOP/s"),
    ("gpu/matmul_2048", "matmul float32 2048", 2.0 * 2048.0 * 2048.0 * 2048.0, "GFLOP/s"),
    ("gpu/matmul_4096", "matmul float32 4096", 2.0 * 4096.0 * 4096.0 * 4096.0, "GFLOP/s"),
    ("gpu/matmul_f16_2048", "matmul float16 2048", 2.0 * 2048.0 * 2048.0 * 2048.0, "GFLOP/s"),
    ("gpu/matmul_bf16_2048", "matmul bfloat16 2048", 2.0 * 2048.0 * 2048.0 * 2048.0, "GFLOP/s"),
    ("gpu/launch_batched", "small add, 64 launches per submission", 0.0, "us"),
    ("gpu/launch_unbatched", "small add, one submission per launch", 0.0, "us"),
    ("gpu/gpt_small_step", "training step gpt_small (4 layers, 128 wide, batch 4 × 32)", 0.0, "ms"),
    ("gpu/resnet18_step", "training step resnet18 (batch 8 × 3×32×32)", 0.0, "ms"),
];

fn ramp(shape: &[usize], gpu: Device) -> Tensor {
    ramp_of(shape, gpu, DType::Float32)
}

/// `ramp` in `dtype` on the GPU (converted once, so the bench times no conversion).
fn ramp_of(shape: &[usize], gpu: Device, dtype: DType) -> Tensor {
    let n = shape.iter().product();
    let host = Tensor::from_vec((0..n).map(|i| (i % 1000) as f32 * 1e-3).collect::<Vec<f32>>(), shape).unwrap();
    host.to_device(gpu, Some(dtype), false, false).unwrap()
}

/// Times `iters` calls of `f` and one wait for the device at the end.
fn timed(gpu: Device, iters: u64, mut f: impl FnMut()) -> Duration {
    gpu.synchronize().unwrap();
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    gpu.synchronize().unwrap();
    start.elapsed()
}

fn benches(c: &mut Criterion, gpu: Device) {
    let (a, b, out) = (ramp(&[N], gpu), ramp(&[N], gpu), torchfn::zeros([N], None, gpu).unwrap());
    let mut g = c.benchmark_group("gpu");
    g.sample_size(20);
    g.bench_function("copy", |x| x.iter_custom(|iters| timed(gpu, iters, || drop(a.copy().unwrap()))));
    g.bench_function("add_out", |x| {
        x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::add_out(&a, &b, &out, 1).unwrap())))
    });
    g.bench_function("add", |x| x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::add(&a, &b, 1).unwrap()))));
    g.bench_function("exp", |x| x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::exp(&a).unwrap()))));
    g.bench_function("sum", |x| x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::sum(&a).unwrap()))));
    for (name, dtype) in [("f16", DType::Float16), ("bf16", DType::BFloat16)] {
        let (a, b) = (ramp_of(&[N], gpu, dtype), ramp_of(&[N], gpu, dtype));
        g.bench_function(format!("add_{name}"), |x| {
            x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::add(&a, &b, 1).unwrap())))
        });
    }
    g.sample_size(10);
    for (name, dtype) in [("f16", DType::Float16), ("bf16", DType::BFloat16)] {
        let m = ramp_of(&[2048, 2048], gpu, dtype);
        g.bench_function(format!("matmul_{name}_2048"), |x| {
            x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::matmul(&m, &m).unwrap())))
        });
    }
    for n in [1024, 2048, 4096] {
        let m = ramp(&[n, n], gpu);
        g.bench_function(format!("matmul_{n}"), |x| {
            x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::matmul(&m, &m).unwrap())))
        });
    }
    g.sample_size(50);
    let (one, two) = (ramp(&[4], gpu), ramp(&[4], gpu));
    for (name, limit) in [("launch_batched", 64), ("launch_unbatched", 1)] {
        torchfn::wgpu::set_batch_limit(limit);
        g.bench_function(name, |x| {
            x.iter_custom(|iters| timed(gpu, iters, || drop(torchfn::add(&one, &two, 1).unwrap())))
        });
    }
    torchfn::wgpu::set_batch_limit(64);
    g.sample_size(10);
    for name in ["gpt_small", "resnet18"] {
        let mut workload = Workload::new(name, gpu);
        g.bench_function(format!("{name}_step"), |x| x.iter_custom(|iters| timed(gpu, iters, || workload.step())));
    }
    g.finish();
}

fn print_table(gpu: Device) {
    let pytorch = pytorch("bench/pytorch_gpu.py");
    let device = pytorch.as_ref().and_then(|p| p["device"].as_str().map(String::from));
    println!("\n{gpu}: {}; PyTorch: {}\n", gpu.describe(), device.as_deref().unwrap_or("not run"));
    println!("| operation | torchfn time | rate | PyTorch time | rate | time ratio |");
    println!("|---|---:|---:|---:|---:|---:|");
    for &(id, what, amount, unit) in ROWS {
        let ours = mean_ns(id);
        let theirs = pytorch.as_ref().and_then(|p| p[&id["gpu/".len()..]].as_f64()).unwrap_or(f64::NAN);
        let cells = |t: f64| match unit {
            "us" => (format!("{:.1} us", t / 1e3), String::new()),
            "ms" => (format!("{:.2} ms", t / 1e6), String::new()),
            _ => (format!("{:.3} ms", t / 1e6), format!("{:.1} {unit}", amount / t)),
        };
        let (time, rate) = cells(ours);
        let (their_time, their_rate, ratio) = if theirs.is_nan() {
            ("—".to_string(), String::new(), "—".to_string())
        } else {
            let (t, r) = cells(theirs);
            (t, r, format!("{:.2}x", ours / theirs))
        };
        println!("| {what} | {time} | {rate} | {their_time} | {their_rate} | {ratio} |");
    }
}

fn main() {
    let gpu = match Device::wgpu() {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            std::process::exit(1);
        }
    };
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, gpu);
    c.final_summary();
    print_table(gpu);
}
