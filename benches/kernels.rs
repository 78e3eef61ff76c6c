//! The CPU kernels against the machine's memory bandwidth and PyTorch's figures (issue 3).
//!
//! `cargo bench --bench kernels` runs the criterion benchmarks on 1e7-element float32 tensors
//! and square matmuls, then prints a table. Bandwidth counts the bytes an operation must move
//! (`add`: two reads and a write, 12 bytes per element). The baselines are plain parallel Rust
//! loops over preallocated vectors on the same thread pool, measured in the same run, which is
//! the only fair comparison on a noisy machine.

mod common;
use common::mean_ns;

use std::hint::black_box;

use criterion::Criterion;
use rayon::prelude::*;
use torchfn::prelude::*;

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

/// Runs [`fma_rounds`] on two threads of their own.
fn peak() -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: `fma_rounds` only needs AVX2 and FMA, which the processor has (checked above).
        let run = || unsafe { fma_rounds(PEAK_ROUNDS) };
        return std::thread::scope(|s| [s.spawn(run), s.spawn(run)].map(|t| t.join().unwrap_or(f32::NAN)).iter().sum());
    }
    f32::NAN
}

/// (criterion id, what, bytes or flops per call, unit, target, PyTorch 2.15 on this machine).
const ROWS: &[(&str, &str, f64, &str, &str, &str)] = &[
    ("kernels/baseline_add", "baseline: parallel loop c = a + b", 12.0 * N as f64, "GB/s", "", "22 (STREAM)"),
    ("kernels/baseline_copy", "baseline: parallel loop c = a", 8.0 * N as f64, "GB/s", "", ""),
    ("kernels/baseline_read", "baseline: parallel loop sum(a)", 4.0 * N as f64, "GB/s", "", ""),
    ("kernels/baseline_fma", "baseline: peak FMA throughput (AVX2)", PEAK_FLOPS, "GFLOP/s", "", ""),
    ("kernels/add_out", "add into a preallocated output", 12.0 * N as f64, "GB/s", ">= 90% of add baseline", "21.4"),
    ("kernels/add_alloc", "add allocating its result", 12.0 * N as f64, "GB/s", ">= 15.4 (2x PyTorch)", "7.7"),
    ("kernels/exp_out", "exp into a preallocated output", 8.0 * N as f64, "GB/s", ">= 90% of copy baseline", "19.6"),
    ("kernels/exp_alloc", "exp allocating its result", 8.0 * N as f64, "GB/s", "", ""),
    ("kernels/sum", "sum", 4.0 * N as f64, "GB/s", ">= 90% of read baseline", "23.2"),
    (
        "kernels/matmul_1024",
        "matmul float32 1024",
        2.0 * 1024.0 * 1024.0 * 1024.0,
        "GFLOP/s",
        ">= 164 (90% of FMA peak)",
        "235",
    ),
    (
        "kernels/matmul_2048",
        "matmul float32 2048",
        2.0 * 2048.0 * 2048.0 * 2048.0,
        "GFLOP/s",
        ">= 164 (90% of FMA peak)",
        "253",
    ),
    ("kernels/add_1", "add of 1-element tensors", 0.0, "ns", "< 100 ns", "2,100 ns"),
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
            vc.par_chunks_mut(CHUNK).zip(va.par_chunks(CHUNK)).zip(vb.par_chunks(CHUNK)).for_each(|((c, a), b)| {
                c.iter_mut().zip(a).zip(b).for_each(|((c, a), b)| *c = a + b);
            })
        })
    });
    g.bench_function("baseline_copy", |x| {
        x.iter(|| vc.par_chunks_mut(CHUNK).zip(va.par_chunks(CHUNK)).for_each(|(c, a)| c.copy_from_slice(a)))
    });
    g.bench_function("baseline_read", |x| {
        x.iter(|| {
            black_box(
                va.par_chunks(CHUNK)
                    .map(|a| {
                        let mut acc = [0.0f32; 16];
                        a.chunks_exact(16).for_each(|c| acc.iter_mut().zip(c).for_each(|(s, v)| *s += v));
                        acc.iter().sum::<f32>()
                    })
                    .sum::<f32>(),
            )
        })
    });
    g.sample_size(10);
    g.bench_function("baseline_fma", |x| x.iter(|| black_box(peak())));
    g.sample_size(20);
    g.bench_function("add_out", |x| x.iter(|| torchfn::add_out(&a, &b, &out, 1).unwrap()));
    g.bench_function("add_alloc", |x| x.iter(|| torchfn::add(&a, &b, 1).unwrap()));
    g.bench_function("exp_out", |x| x.iter(|| torchfn::exp_out(&a, &out).unwrap()));
    g.bench_function("exp_alloc", |x| x.iter(|| torchfn::exp(&a).unwrap()));
    g.bench_function("sum", |x| x.iter(|| torchfn::sum(&a).unwrap()));
    g.sample_size(10);
    g.bench_function("matmul_1024", |x| x.iter(|| torchfn::matmul(&m1024, &m1024).unwrap()));
    g.bench_function("matmul_2048", |x| x.iter(|| torchfn::matmul(&m2048, &m2048).unwrap()));
    g.sample_size(100);
    g.bench_function("add_1", |x| x.iter(|| torchfn::add(black_box(&one), black_box(&two), 1).unwrap()));
    g.finish();
}

fn print_table() {
    let rate = |id: &str, amount: f64| amount / mean_ns(id); // bytes per ns = GB/s; flops per ns = GFLOP/s
    let baseline =
        |kind: &str| rate(&format!("kernels/baseline_{kind}"), ROWS.iter().find(|r| r.0.ends_with(kind)).unwrap().2);
    println!("\n{} threads\n", rayon::current_num_threads());
    println!("| operation | time | rate | of baseline | target | PyTorch 2.15 |");
    println!("|---|---:|---:|---:|---|---:|");
    for &(id, what, amount, unit, target, pytorch) in ROWS {
        let t = mean_ns(id);
        let (rate_text, share) = match unit {
            "ns" => (String::new(), String::new()),
            _ => {
                let r = rate(id, amount);
                let base = match id {
                    "kernels/add_out" | "kernels/add_alloc" => Some(baseline("add")),
                    "kernels/exp_out" | "kernels/exp_alloc" => Some(baseline("copy")),
                    "kernels/sum" => Some(baseline("read")),
                    "kernels/matmul_1024" | "kernels/matmul_2048" => Some(baseline("fma")),
                    _ => None,
                };
                (format!("{r:.1} {unit}"), base.map_or(String::new(), |b| format!("{:.0}%", 100.0 * r / b)))
            }
        };
        let time = if t < 1e4 { format!("{t:.0} ns") } else { format!("{:.2} ms", t / 1e6) };
        println!("| {what} | {time} | {rate_text} | {share} | {target} | {pytorch} |");
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
