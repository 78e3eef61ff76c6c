//! Matrix products on the GPU (`gpu-shaders/matmul.wgsl`): batched, broadcast over the batch,
//! each operand read through its strides (a transposed view needs no copy), in float32 or
//! int32. Workgroups compute 128 x 128 (or, for products too small to fill a GPU with those,
//! 64 x 64) output blocks tiled through workgroup memory, each thread a square block of
//! registers (a [`Blocking`]).

use std::sync::Arc;

use crate::backend::{Array, Device};
use crate::error::Result;
use crate::types::{DType, Shape};

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{Kernel, unsupported, word, words};
use super::memory::{memory_of, storage};

/// The family's WGSL template.
const TEMPLATE: &str = include_str!("../../../gpu-shaders/matmul.wgsl");

/// Threads along each side of a workgroup (`SIDE` in the shader).
const SIDE: u32 = 16;

/// How a workgroup computes its block of the result: each of its threads a square of this many
/// results along each side, 8 or 4 (`HALVES` of four in the shader).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocking(u32);

impl Blocking {
    /// The side of the workgroup's block of results.
    fn tile(self) -> usize {
        (SIDE * self.0) as usize
    }
}

/// Large blocks: 8 x 8 results a thread, 128 x 128 a workgroup.
const LARGE: Blocking = Blocking(8);

/// Small blocks: 4 x 4 results a thread, 64 x 64 a workgroup. On an H200 at 1024 (one lease,
/// each layout forced for every size): 116 us, against 156 us with 8 x 8 threads of 8 x 8
/// results (a quarter of the threads to hide the latency) and 151 us with 8 x 8 of 4 x 4 (32 x 32
/// outputs); large blocks took 176 us there, and these 755 us at 2048 where large ones take 663.
const SMALL: Blocking = Blocking(4);

/// Every blocking the shader is built with (the validation test builds each).
#[cfg(test)]
const BLOCKINGS: [Blocking; 2] = [LARGE, SMALL];

/// The fewest large blocks a product is computed in with them: below this many, small blocks
/// (four times as many workgroups) keep more of a large GPU busy.
const LARGE_FROM: usize = 128;

/// The blocking for `count` products of `n x m` results: large blocks when there are enough
/// of them and they are not mostly past the matrix edges.
fn blocking_for(n: usize, m: usize, count: usize) -> Blocking {
    let (small, large) = (SMALL.tile(), LARGE.tile());
    let blocks = n.div_ceil(large).saturating_mul(m.div_ceil(large)).saturating_mul(count);
    if n > small && m > small && blocks >= LARGE_FROM { LARGE } else { SMALL }
}

/// What the text of one matmul kernel depends on.
#[derive(Clone, Copy, Debug)]
struct Spec {
    /// The element kind (float32 or int32).
    kind: Kind,
    /// The workgroup's layout.
    blocking: Blocking,
    /// Whether `a` is fetched along k (its k stride is the smaller), else along its rows.
    a_along_k: bool,
    /// Whether `b` is fetched along k, else along its columns.
    b_along_k: bool,
}

impl Spec {
    /// The kernel of this specialisation.
    fn kernel(&self) -> Kernel {
        Kernel {
            name: "matmul",
            template: TEMPLATE,
            defines: vec![
                ("ELEMENT", self.kind.stored().to_string()),
                ("SIDE", SIDE.to_string()),
                ("HALVES", (self.blocking.0 / 4).to_string()),
                ("A_ALONG_K", self.a_along_k.to_string()),
                ("B_ALONG_K", self.b_along_k.to_string()),
            ],
            writes: vec![false, false, true],
        }
    }
}

/// Whether an operand is best fetched along k: its k stride is the smaller of its two matrix
/// strides (a dimension of one element has no stride to speak of).
fn along_k((size, stride): (usize, usize), (k_size, k_stride): (usize, usize)) -> bool {
    let effective = |size: usize, stride: usize| if size > 1 { stride } else { usize::MAX };
    effective(k_size, k_stride) <= effective(size, stride)
}

/// The two matrix dimensions of `x` (sizes and strides), after checking it has `batch`'s
/// dimensions before them, each of `batch`'s size or one.
fn matrix(x: &Array, batch: &Shape, name: &str) -> Result<[(usize, usize); 2]> {
    let layout = &x.layout;
    let fits = layout.ndim() == batch.len() + 2
        && batch.iter().zip(layout.shape.iter()).all(|(&whole, &size)| size == whole || size == 1);
    if !fits {
        return Err(unsupported("matmul", format!("{name} of shape {:?} for a batch of {batch:?}", layout.shape)));
    }
    let d = batch.len();
    Ok([(layout.shape[d], layout.strides[d]), (layout.shape[d + 1], layout.strides[d + 1])])
}

/// The strides of `x`'s batch dimensions, 0 where it is broadcast.
fn batch_strides(x: &Array, batch: &Shape) -> Vec<usize> {
    batch
        .iter()
        .enumerate()
        .map(|(d, &whole)| if x.layout.shape[d] == whole && whole > 1 { x.layout.strides[d] } else { 0 })
        .collect()
}

/// `a @ b` (`[*batch, n, k]` and `[*batch, k, m]`, batch sizes of one broadcast) in `dtype`:
/// a new contiguous `[*batch, n, m]` array.
pub fn matmul(
    context: &Arc<Context>,
    device: Device,
    a: &Array,
    b: &Array,
    batch: &Shape,
    dtype: DType,
) -> Result<Array> {
    multiply(context, device, a, b, batch, dtype, &blocking_for)
}

/// [`matmul`] in the blocking `choose` gives for `count` products of `n x m` results.
fn multiply(
    context: &Arc<Context>,
    device: Device,
    a: &Array,
    b: &Array,
    batch: &Shape,
    dtype: DType,
    choose: &dyn Fn(usize, usize, usize) -> Blocking,
) -> Result<Array> {
    let kind = Kind::of(dtype);
    if kind == Kind::Bool || Kind::of(a.dtype) != kind || Kind::of(b.dtype) != kind {
        return Err(unsupported("matmul", format!("{} @ {} in {dtype}", a.dtype, b.dtype)));
    }
    let [(n, a_rows), (depth, a_k)] = matrix(a, batch, "a")?;
    let [(depth_b, b_k), (m, b_cols)] = matrix(b, batch, "b")?;
    if depth_b != depth {
        return Err(unsupported("matmul", format!("a with {depth} columns and b with {depth_b} rows")));
    }
    let shape: Shape = batch.iter().copied().chain([n, m]).collect();
    let total = shape.checked_numel().ok_or_else(|| unsupported("matmul", "a result too large"))?;
    word(total)?;
    let memory = context.alloc("matmul", total)?;
    let count = batch.checked_numel().ok_or_else(|| unsupported("matmul", "a batch too large"))?;
    if total > 0 {
        let blocking = choose(n, m, count);
        let tile = blocking.tile();
        let cols = m.div_ceil(tile);
        let per_matrix = n.div_ceil(tile) * cols;
        let groups = per_matrix.checked_mul(count).ok_or_else(|| unsupported("matmul", "too many blocks"))?;
        let spec = Spec {
            kind,
            blocking,
            a_along_k: along_k((n, a_rows), (depth, a_k)),
            b_along_k: along_k((m, b_cols), (depth, b_k)),
        };
        let header = [
            n,
            depth,
            m,
            cols,
            per_matrix,
            groups,
            batch.len(),
            a.layout.offset,
            b.layout.offset,
            a_rows,
            a_k,
            b_k,
            b_cols,
        ];
        let params = words(
            header
                .into_iter()
                .chain(batch.iter().copied())
                .chain(batch_strides(a, batch))
                .chain(batch_strides(b, batch)),
        )?;
        let buffers = [memory_of(&a.storage)?.buffer(), memory_of(&b.storage)?.buffer(), memory.buffer()];
        context.launch(&spec.kernel(), &params, &buffers, word(groups)?)?;
    }
    Ok(Array::contiguous(storage(device, memory), shape, kind.dtype()))
}

/// Every specialisation `matmul` can make, for the shader validation test: each kind, block
/// size and way of fetching each operand.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    let mut kernels = Vec::new();
    for kind in [Kind::F32, Kind::I32] {
        for blocking in BLOCKINGS {
            for a_along_k in [false, true] {
                for b_along_k in [false, true] {
                    kernels.push(Spec { kind, blocking, a_along_k, b_along_k }.kernel());
                }
            }
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::super::WGPU;
    use super::super::testing::{gpu, to_gpu, values};
    use super::*;
    use crate::backend::{Backend, Layout};

    /// `count` numbers in [-1, 1) (whole numbers in [-4, 4] for int32), the same every run.
    fn numbers(count: usize, dtype: DType) -> Array {
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        match dtype {
            DType::Int32 => {
                crate::backend::host::array((0..count).map(|_| (next() % 9) as i32 - 4).collect(), Shape::from([count]))
            }
            _ => crate::backend::host::array(
                (0..count).map(|_| (next() as f32 / (1u32 << 23) as f32) - 1.0).collect(),
                Shape::from([count]),
            ),
        }
    }

    /// The same view, `shape` with `strides` from `offset`, of fresh numbers on the host and on
    /// the GPU.
    fn viewed(device: Device, dtype: DType, shape: &[usize], strides: &[usize], offset: usize) -> (Array, Array) {
        let last = shape.iter().zip(strides).map(|(&n, &s)| n.saturating_sub(1) * s).sum::<usize>();
        let count = if shape.contains(&0) { offset } else { offset + last + 1 };
        let host = numbers(count, dtype);
        let layout = Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset };
        (host.with_layout(layout.clone()), to_gpu(device, &host).with_layout(layout))
    }

    /// A row-major layout of `shape`.
    fn rows(shape: &[usize]) -> Vec<usize> {
        Shape::new(shape).contiguous_strides().to_vec()
    }

    /// Checks the GPU's product of two views against the CPU's.
    fn check((a, ga): (Array, Array), (b, gb): (Array, Array), batch: &[usize], dtype: DType) {
        let batch = Shape::new(batch);
        let expected = crate::cpu::CPU.matmul(&a, &b, &batch, dtype).unwrap();
        let got = WGPU.matmul(&ga, &gb, &batch, dtype).unwrap();
        assert_eq!(got.layout.shape, expected.layout.shape);
        assert_eq!(got.dtype, expected.dtype);
        let depth = a.layout.shape[a.layout.ndim() - 1] as f64;
        for (i, (g, e)) in values(&got).into_iter().zip(values(&expected)).enumerate() {
            assert!(
                (g - e).abs() <= 1e-6 * depth * (1.0 + e.abs()),
                "element {i}: {g} != {e} (shape {:?})",
                got.layout.shape
            );
        }
    }

    /// Row-major operands of `n x k` and `k x m`, each transposed when asked.
    fn product(
        device: Device,
        (n, k, m): (usize, usize, usize),
        batch: &[usize],
        (ta, tb): (bool, bool),
        dtype: DType,
    ) {
        let operand = |r: usize, c: usize, transposed: bool| {
            let mut shape = batch.to_vec();
            let mut strides: Vec<usize> = rows(batch).iter().map(|s| s * r * c).collect();
            shape.extend([r, c]);
            strides.extend(if transposed { [1, r] } else { [c, 1] });
            viewed(device, dtype, &shape, &strides, 3)
        };
        check(operand(n, k, ta), operand(k, m, tb), batch, dtype);
    }

    #[test]
    fn blocks_and_fetch_orders_suit_the_shapes() {
        assert_eq!(blocking_for(130, 129, 32), LARGE);
        assert_eq!(blocking_for(2048, 2048, 1), LARGE);
        assert_eq!(blocking_for(1024, 1024, 1), SMALL, "64 large blocks leave most of a big GPU idle");
        assert_eq!(blocking_for(4096, 64, 8), SMALL, "large blocks would be mostly past the edge");
        assert!(along_k((5, 7), (7, 1)), "row-major a");
        assert!(!along_k((5, 1), (7, 5)), "transposed a");
        assert!(along_k((1, 1), (7, 3)), "a single row is read along k, whatever its strides");
        assert!(along_k((1, 9), (1, 9)), "a 1 x 1 matrix");
    }

    #[test]
    fn products_match_the_cpu_at_block_edges_in_every_layout() {
        let Some(device) = gpu() else { return };
        for dims in [(1, 1, 1), (3, 5, 7), (65, 130, 67)] {
            for transposed in [(false, false), (true, false), (false, true), (true, true)] {
                product(device, dims, &[], transposed, DType::Float32);
            }
        }
    }

    #[test]
    fn every_blocking_matches_the_cpu_at_block_edges() {
        let Some(device) = gpu() else { return };
        let context = super::super::context_of(device).unwrap();
        for blocking in BLOCKINGS {
            let tile = blocking.tile();
            for transposed in [(false, false), (true, false), (false, true), (true, true)] {
                let operand = |r: usize, c: usize, transposed: bool| {
                    let strides = if transposed { [1, r] } else { [c, 1] };
                    viewed(device, DType::Float32, &[2, r, c], &[r * c, strides[0], strides[1]], 1)
                };
                let (n, k, m) = (tile + 3, 2 * tile + 5, tile - 1);
                let ((a, ga), (b, gb)) = (operand(n, k, transposed.0), operand(k, m, transposed.1));
                let batch = Shape::new(&[2]);
                let expected = crate::cpu::CPU.matmul(&a, &b, &batch, DType::Float32).unwrap();
                let got = multiply(&context, device, &ga, &gb, &batch, DType::Float32, &|_, _, _| blocking).unwrap();
                for (g, e) in values(&got).into_iter().zip(values(&expected)) {
                    assert!((g - e).abs() <= 1e-6 * k as f64 * (1.0 + e.abs()), "{blocking:?}: {g} != {e}");
                }
            }
        }
    }

    #[test]
    fn large_blocks_match_the_cpu() {
        let Some(device) = gpu() else { return };
        // 32 matrices of 2 x 2 large blocks: enough blocks for the 128 x 128 kernel.
        for transposed in [(false, false), (true, true), (false, true)] {
            product(device, (130, 20, 129), &[32], transposed, DType::Float32);
        }
    }

    #[test]
    fn int32_products_are_exact() {
        let Some(device) = gpu() else { return };
        product(device, (17, 33, 70), &[2], (false, true), DType::Int32);
        product(device, (130, 9, 129), &[32], (true, false), DType::Int32);
    }

    #[test]
    fn batches_broadcast() {
        let Some(device) = gpu() else { return };
        let (n, k, m) = (5, 6, 7);
        let a = viewed(device, DType::Float32, &[2, 1, n, k], &rows(&[2, 1, n, k]), 1);
        let b = viewed(device, DType::Float32, &[1, 3, k, m], &rows(&[1, 3, k, m]), 0);
        check(a, b, &[2, 3], DType::Float32);
        // An expanded batch (stride 0, full size) and a permuted one.
        let a = viewed(device, DType::Float32, &[3, n, k], &[0, k, 1], 2);
        let b = viewed(device, DType::Float32, &[3, k, m], &[m, 3 * m, 1], 0);
        check(a, b, &[3], DType::Float32);
    }

    #[test]
    fn empty_products() {
        let Some(device) = gpu() else { return };
        // k = 0 gives zeros; n = 0 and m = 0 give empty results; an empty batch too.
        for (n, k, m, batch) in [(3, 0, 4, 2), (0, 5, 4, 1), (3, 5, 0, 1), (3, 5, 4, 0)] {
            let a = viewed(device, DType::Float32, &[batch, n, k], &rows(&[batch, n, k]), 0);
            let b = viewed(device, DType::Float32, &[batch, k, m], &rows(&[batch, k, m]), 0);
            check(a, b, &[batch], DType::Float32);
        }
        let a = viewed(device, DType::Float32, &[3, 0], &[1, 3], 0);
        let b = viewed(device, DType::Float32, &[0, 2], &[2, 1], 0);
        let got = WGPU.matmul(&a.1, &b.1, &Shape::new(&[]), DType::Float32).unwrap();
        assert_eq!(values(&got), [0.0; 6]);
    }

    #[test]
    fn bools_and_mismatched_shapes_are_errors() {
        let Some(device) = gpu() else { return };
        let (_, a) = viewed(device, DType::Float32, &[2, 3], &[3, 1], 0);
        let (_, b) = viewed(device, DType::Float32, &[4, 2], &[2, 1], 0);
        let err = WGPU.matmul(&a, &b, &Shape::new(&[]), DType::Float32).unwrap_err();
        assert!(err.to_string().contains("a with 3 columns and b with 4 rows"), "{err}");
        let err = WGPU.matmul(&a, &a, &Shape::new(&[]), DType::Bool).unwrap_err();
        assert!(err.to_string().contains("internal error in the wgpu matmul kernel"), "{err}");
    }
}
