//! The CPU kernels against the machine's memory bandwidth and PyTorch's (issues 3 and 24).
//!
//! `cargo bench --bench kernels` runs the criterion benchmarks on 1e7-element float32 tensors
//! and square matmuls, then prints a table. Bandwidth counts the bytes an operation must move
//! (`add`: two reads and a write, 12 bytes per element). The baselines are plain parallel Rust
//! loops over preallocated vectors on the same thread pool, measured in the same run, which is
//! the only fair comparison on a noisy machine. With `PYTORCH_PYTHON` naming a Python that has
//! torch, the bench also runs `bench/pytorch_kernels.py` on the same data right after its own
//! runs and prints PyTorch's times beside torchfn's.

mod common;
use common::{mean_ns, pytorch};

use std::hint::black_box;

use criterion::Criterion;
use torchfn::nn::functional as F;
use torchfn::prelude::*;
use torchfn_kernels::cpu::threads;

const N: usize = 10_000_000;
const CHUNK: usize = 1 << 16;

/// Rounds of the peak-throughput loop per thread, and the flops they make on two threads:
/// 12 independent 8-lane fused multiply-adds (2 flops each) per round.
const PEAK_ROUNDS: usize = 20_000_000;
const PEAK_FLOPS: f64 = 2.0 * (PEAK_ROUNDS * 12 * 8 * 2) as f64;

/// The processor's float32 arithmetic ceiling: 12 independent chains of 8-lane fused
/// multiply-adds, enough to fill both FMA units whatever their latency. Matmul cannot beat it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_rounds(rounds: usize) -> f32 {
    let mut acc = [[1.0f32; 8]; 12];
    let (m, a) = (black_box([0.999_999_9f32; 8]), black_box([1e-7f32; 8]));
    for _ in 0..rounds {
        for chain in acc.iter_mut() {
            for ((x, m), a) in chain.iter_mut().zip(m).zip(a) {
                *x = x.mul_add(m, a);
            }
        }
    }
    acc.iter().flatten().sum()
}

/// [`fma_rounds`] with 16-lane (512-bit) vectors: as many flops in half the rounds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_rounds_512(rounds: usize) -> f32 {
    use std::arch::x86_64::{__m512, _mm512_fmadd_ps, _mm512_reduce_add_ps, _mm512_set1_ps};
    let mut acc: [__m512; 12] = [_mm512_set1_ps(1.0); 12];
    let (m, a) = (_mm512_set1_ps(black_box(0.999_999_9)), _mm512_set1_ps(black_box(1e-7)));
    for _ in 0..rounds / 2 {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, m, a);
        }
    }
    acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
}

/// Runs [`fma_rounds`] (or [`fma_rounds_512`] when `wide`) on two threads of their own; NaN
/// where the processor lacks the instructions.
fn peak(wide: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let rounds: fn() -> f32 = if wide && has!("avx512f") {
            // SAFETY: `fma_rounds_512` only needs AVX-512 F, which the processor has (checked).
            || unsafe { fma_rounds_512(PEAK_ROUNDS) }
        } else if !wide && has!("avx2") && has!("fma") {
            // SAFETY: `fma_rounds` only needs AVX2 and FMA, which the processor has (checked).
            || unsafe { fma_rounds(PEAK_ROUNDS) }
        } else {
            return f32::NAN;
        };
        std::thread::scope(|s| [s.spawn(rounds), s.spawn(rounds)].map(|t| t.join().unwrap_or(f32::NAN)).iter().sum())
    }
    #[cfg(not(target_arch = "x86_64"))]
    f32::NAN
}

/// (criterion id, what, bytes or flops per call, unit, target, PyTorch's key in
/// `bench/pytorch_kernels.py`'s output).
const ROWS: &[(&str, &str, f64, &str, &str, &str)] = &[
    ("kernels/baseline_add", "baseline: parallel loop c = a + b", 12.0 * N as f64, "GB/s", "", ""),
    ("kernels/baseline_copy", "baseline: parallel loop c = a", 8.0 * N as f64, "GB/s", "", ""),
    ("kernels/baseline_read", "baseline: parallel loop sum(a)", 4.0 * N as f64, "GB/s", "", ""),
    ("kernels/baseline_fma", "baseline: peak FMA throughput (AVX2)", PEAK_FLOPS, "GFLOP/s", "", ""),
    ("kernels/baseline_fma512", "baseline: peak FMA throughput (AVX-512)", PEAK_FLOPS, "GFLOP/s", "", ""),
    ("kernels/add_out", "add into a preallocated output", 12.0 * N as f64, "GB/s", ">= 90% of add baseline", "add_out"),
    ("kernels/add_alloc", "add allocating its result", 12.0 * N as f64, "GB/s", ">= 15.4 (2x PyTorch)", "add_alloc"),
    ("kernels/exp_out", "exp into a preallocated output", 8.0 * N as f64, "GB/s", ">= 90% of copy baseline", "exp_out"),
    ("kernels/exp_alloc", "exp allocating its result", 8.0 * N as f64, "GB/s", "", "exp_alloc"),
    ("kernels/sum", "sum", 4.0 * N as f64, "GB/s", ">= 90% of read baseline", "sum"),
    (
        "kernels/matmul_1024",
        "matmul float32 1024",
        2.0 * 1024.0 * 1024.0 * 1024.0,
        "GFLOP/s",
        ">= 90% of the widest FMA peak",
        "matmul_1024",
    ),
    (
        "kernels/matmul_2048",
        "matmul float32 2048",
        2.0 * 2048.0 * 2048.0 * 2048.0,
        "GFLOP/s",
        ">= 90% of the widest FMA peak",
        "matmul_2048",
    ),
    (
        "kernels/matmul_64",
        "matmul float32 64 x 64 @ 64 x 64",
        2.0 * 64.0 * 64.0 * 64.0,
        "GFLOP/s",
        ">= PyTorch",
        "matmul_64",
    ),
    (
        "kernels/bmm_attention",
        "bmm float32 32 x (64 x 64 @ 64 x 64), attention scores",
        2.0 * 32.0 * 64.0 * 64.0 * 64.0,
        "GFLOP/s",
        ">= PyTorch",
        "bmm_attention",
    ),
    (
        "kernels/matmul_skinny",
        "matmul float32 512 x 4608 @ 4608 x 8 (resnet layer4 conv)",
        2.0 * 512.0 * 4608.0 * 8.0,
        "GFLOP/s",
        ">= PyTorch",
        "matmul_skinny",
    ),
    (
        "kernels/matmul_mlp",
        "matmul float32 128 x 512 @ 512 x 128 (gpt_small's MLP projection)",
        2.0 * 128.0 * 512.0 * 128.0,
        "GFLOP/s",
        ">= PyTorch",
        "matmul_mlp",
    ),
    ("kernels/add_1", "add of 1-element tensors", 0.0, "ns", "< 100 ns", "add_1"),
    ("kernels/math_exp", "exp of -5..5 into an output", 8.0 * N as f64, "GB/s", "copy's speed", "math_exp"),
    ("kernels/math_log", "log of 0..1 into an output", 8.0 * N as f64, "GB/s", "copy's speed", "math_log"),
    ("kernels/math_tanh", "tanh of -5..5 into an output", 8.0 * N as f64, "GB/s", "copy's speed", "math_tanh"),
    ("kernels/math_sigmoid", "sigmoid of -5..5 into an output", 8.0 * N as f64, "GB/s", "copy's speed", "math_sigmoid"),
    ("kernels/math_erf", "erf of -5..5 into an output", 8.0 * N as f64, "GB/s", "copy's speed", "math_erf"),
    ("kernels/math_gelu", "gelu of -5..5, allocating", 8.0 * N as f64, "GB/s", "copy's speed", "math_gelu"),
    (
        "kernels/math_gelu_tanh",
        "gelu (tanh) of -5..5, allocating",
        8.0 * N as f64,
        "GB/s",
        "copy's speed",
        "math_gelu_tanh",
    ),
    ("kernels/math_silu", "silu of -5..5, allocating", 8.0 * N as f64, "GB/s", "copy's speed", "math_silu"),
    (
        "kernels/math_softmax",
        "softmax of -5..5 along rows of 1000, allocating",
        8.0 * N as f64,
        "GB/s",
        "copy's speed",
        "math_softmax",
    ),
    (
        "kernels/math_softmax_columns",
        "softmax of -5..5 along columns of 1000 (dim 0), allocating",
        8.0 * N as f64,
        "GB/s",
        "copy's speed",
        "math_softmax_columns",
    ),
];

fn ramp(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i % 1000) as f32 * 1e-3).collect::<Vec<f32>>(), shape).unwrap()
}

fn benches(c: &mut Criterion) {
    let (va, vb) = (vec![1.0f32; N], vec![2.0f32; N]);
    let mut vc = vec![0.0f32; N];
    let (a, b, out) = (ramp(&[N]), ramp(&[N]), torchfn::zeros([N], None, None).unwrap());
    let (m1024, m2048) = (ramp(&[1024, 1024]), ramp(&[2048, 2048]));
    let (one, two) = (torchfn::tensor([1.0f32]).unwrap(), torchfn::tensor([2.0f32]).unwrap());

    let mut g = c.benchmark_group("kernels");
    g.sample_size(20);
    g.bench_function("baseline_add", |x| {
        x.iter(|| {
            threads::for_each(vc.chunks_mut(CHUNK).zip(va.chunks(CHUNK)).zip(vb.chunks(CHUNK)), |((c, a), b)| {
                c.iter_mut().zip(a).zip(b).for_each(|((c, a), b)| *c = a + b);
            })
        })
    });
    g.bench_function("baseline_copy", |x| {
        x.iter(|| threads::for_each(vc.chunks_mut(CHUNK).zip(va.chunks(CHUNK)), |(c, a)| c.copy_from_slice(a)))
    });
    g.bench_function("baseline_read", |x| {
        x.iter(|| {
            black_box(
                threads::map(va.chunks(CHUNK), |a| {
                    let mut acc = [0.0f32; 16];
                    a.chunks_exact(16).for_each(|c| acc.iter_mut().zip(c).for_each(|(s, v)| *s += v));
                    acc.iter().sum::<f32>()
                })
                .iter()
                .sum::<f32>(),
            )
        })
    });
    g.sample_size(10);
    g.bench_function("baseline_fma", |x| x.iter(|| black_box(peak(false))));
    g.bench_function("baseline_fma512", |x| x.iter(|| black_box(peak(true))));
    g.sample_size(20);
    g.bench_function("add_out", |x| x.iter(|| torchfn::add_out(&a, &b, &out, 1).unwrap()));
    g.bench_function("add_alloc", |x| x.iter(|| torchfn::add(&a, &b, 1).unwrap()));
    g.bench_function("exp_out", |x| x.iter(|| torchfn::exp_out(&a, &out).unwrap()));
    g.bench_function("exp_alloc", |x| x.iter(|| torchfn::exp(&a).unwrap()));
    g.bench_function("sum", |x| x.iter(|| torchfn::sum(&a).unwrap()));
    g.sample_size(10);
    g.bench_function("matmul_1024", |x| x.iter(|| torchfn::matmul(&m1024, &m1024).unwrap()));
    g.bench_function("matmul_2048", |x| x.iter(|| torchfn::matmul(&m2048, &m2048).unwrap()));
    g.sample_size(50);
    let (m64, q, skinny_a, skinny_b) = (ramp(&[64, 64]), ramp(&[32, 64, 64]), ramp(&[512, 4608]), ramp(&[4608, 8]));
    g.bench_function("matmul_64", |x| x.iter(|| torchfn::matmul(&m64, &m64).unwrap()));
    g.bench_function("bmm_attention", |x| x.iter(|| torchfn::bmm(&q, &q).unwrap()));
    g.bench_function("matmul_skinny", |x| x.iter(|| torchfn::matmul(&skinny_a, &skinny_b).unwrap()));
    let (mlp_a, mlp_b) = (ramp(&[128, 512]), ramp(&[512, 128]));
    g.bench_function("matmul_mlp", |x| x.iter(|| torchfn::matmul(&mlp_a, &mlp_b).unwrap()));
    g.sample_size(100);
    g.bench_function("add_1", |x| x.iter(|| torchfn::add(black_box(&one), black_box(&two), 1).unwrap()));
    g.sample_size(20);
    // The transcendental functions read values over their interesting range: -5 to 5.
    let t = Tensor::from_vec((0..N).map(|i| (i % 1000) as f32 * 1e-2 - 5.0).collect::<Vec<f32>>(), [N]).unwrap();
    g.bench_function("math_exp", |x| x.iter(|| torchfn::exp_out(&t, &out).unwrap()));
    g.bench_function("math_log", |x| x.iter(|| torchfn::log_out(&a, &out).unwrap()));
    g.bench_function("math_tanh", |x| x.iter(|| torchfn::tanh_out(&t, &out).unwrap()));
    g.bench_function("math_sigmoid", |x| x.iter(|| torchfn::sigmoid_out(&t, &out).unwrap()));
    g.bench_function("math_erf", |x| x.iter(|| torchfn::erf_out(&t, &out).unwrap()));
    g.bench_function("math_gelu", |x| x.iter(|| F::gelu(&t, "none").unwrap()));
    g.bench_function("math_gelu_tanh", |x| x.iter(|| F::gelu(&t, "tanh").unwrap()));
    g.bench_function("math_silu", |x| x.iter(|| F::silu(&t, false).unwrap()));
    let rows = t.reshape(&[(N / 1000) as i64, 1000]).unwrap();
    g.bench_function("math_softmax", |x| x.iter(|| rows.softmax(1, None).unwrap()));
    let columns = t.reshape(&[1000, (N / 1000) as i64]).unwrap();
    g.bench_function("math_softmax_columns", |x| x.iter(|| columns.softmax(0, None).unwrap()));
    g.finish();
}

fn print_table() {
    let rate = |id: &str, amount: f64| amount / mean_ns(id); // bytes per ns = GB/s; flops per ns = GFLOP/s
    let baseline =
        |kind: &str| rate(&format!("kernels/baseline_{kind}"), ROWS.iter().find(|r| r.0.ends_with(kind)).unwrap().2);
    let theirs = pytorch("bench/pytorch_kernels.py");
    println!("\n{} threads; {}\n", torchfn::get_num_threads(), common::processor());
    println!("| operation | time | rate | of baseline | target | PyTorch (same sitting) | torchfn / PyTorch time |");
    println!("|---|---:|---:|---:|---|---:|---:|");
    for &(id, what, amount, unit, target, key) in ROWS {
        let t = mean_ns(id);
        let (rate_text, share) = match unit {
            "ns" => (String::new(), String::new()),
            _ => {
                let r = rate(id, amount);
                let base = match id {
                    "kernels/add_out" | "kernels/add_alloc" => Some(baseline("add")),
                    _ if id.starts_with("kernels/exp") || id.starts_with("kernels/math") => Some(baseline("copy")),
                    "kernels/sum" => Some(baseline("read")),
                    _ if id.starts_with("kernels/matmul") || id.starts_with("kernels/bmm") => {
                        Some(baseline("fma").max(baseline("fma512")))
                    }
                    _ => None,
                };
                (format!("{r:.1} {unit}"), base.map_or(String::new(), |b| format!("{:.0}%", 100.0 * r / b)))
            }
        };
        let time = |t: f64| if t < 1e4 { format!("{t:.0} ns") } else { format!("{:.2} ms", t / 1e6) };
        let (pytorch_time, ratio) = match theirs.as_ref().and_then(|p| p[key].as_f64()) {
            Some(p) => (time(p), format!("{:.2}", t / p)),
            None => (String::new(), String::new()),
        };
        println!("| {what} | {} | {rate_text} | {share} | {target} | {pytorch_time} | {ratio} |", time(t));
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
