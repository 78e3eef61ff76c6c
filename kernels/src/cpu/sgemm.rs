//! torchfn's float32 matrix product, `out = a @ b`, for x86-64 processors with AVX2 and FMA,
//! and with 512-bit vectors where the processor has AVX-512.
//!
//! The classic packed, cache-blocked GEMM (Goto and van de Geijn), in four places:
//!
//! - **packing** ([`pack_b`], [`pack_a`]): `b` is copied into panels of `NR` columns and `a`
//!   into panels of `MR` rows, each laid out in the order the micro-kernel reads it and
//!   padded with zeros, so the kernel streams contiguous memory whatever the operands' strides
//!   (transposed, broadcast with stride 0, any row step) and element type (float16 and
//!   bfloat16 operands are widened to float32 as they are copied: [`MatmulOperand`]); a small
//!   contiguous float32 `b` whose rows are whole panels is read in place instead ([`Panels`],
//!   [`IN_PLACE_B_FLOATS`]);
//! - **the micro-kernel** ([`Kernel`]): an `MR × NR` tile of `out` held in registers, updated
//!   by one fused multiply-add per register per step along `k`: 6 × 16 in twelve 256-bit
//!   registers with AVX2 ([`Avx2Fma`]), 12 × 32 in twenty-four 512-bit ones with AVX-512
//!   ([`Avx512`]), which does twice the work per instruction; [`PackedB`]'s products of a
//!   few rows use the same kernels one row high ([`Avx2Row`], [`Avx512Row`]), and those of a
//!   few dozen rows that multiples of 8 fit better than multiples of 12 eight rows high
//!   ([`Avx512Short`]: a batch of 32 rows computes 32, not 36);
//! - **blocking** ([`run_tile`]): `k` goes in blocks of at most [`KC`] steps; a tile's rows
//!   (at most [`MC`]) of `a` are packed for one block and stay in the L2 cache while each panel of `b` is swept down them, the next panel of `b`
//!   pulled into L2 meanwhile; `b` is packed once for as many columns as [`PACKED_B_FLOATS`]
//!   allows;
//! - **threads** ([`tiles`]): `out` is cut into tiles of whole micro-tiles, a few per thread
//!   of the CPU's [`threads`], each packing its own rows of `a` and reading the shared packed `b`
//!   (a product of a few dozen rows is cut along its columns only, and its tiles share one
//!   packing of `a`: [`sweep_columns`]);
//!   products under [`PARALLEL_MIN`] multiply-adds stay on the calling thread.
//!
//! [`matmul`] takes the widest kernel [`instructions`](super::instructions) allows, and
//! computes a product much narrower than a tile (a matrix times a vector) as `bᵀ @ aᵀ`.
//!
//! bfloat16 products ([`matmul_bf16`]) run the same driver on processors with AVX512_BF16:
//! each float32 slot of the packed panels holds a pair of bfloat16s (two steps along `k`), and
//! the 12 × 32 kernel's fused multiply-add becomes `vdpbf16ps`, two products per lane and
//! instruction, accumulated in float32 ([`Avx512Bf16`]). The
//! README's performance section has its rates against the processor's peak and PyTorch's.

use std::arch::x86_64::{
    __m256, __m512, _MM_HINT_T0, _MM_HINT_T1, _mm_prefetch, _mm_storeu_ps, _mm256_add_ps, _mm256_castps256_ps128,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_maskstore_ps, _mm256_permute2f128_ps, _mm256_set1_ps,
    _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps, _mm512_add_ps,
    _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};
use std::cell::RefCell;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ndarray::{ArrayView2, ArrayViewMut2, Axis, s};

use super::Instructions;
use super::number::MatmulOperand;
use super::threads;

/// The most rows of a tile: its packed rows of `a` are at most `MC × KC` floats (384 KiB).
const MC: usize = 96;
/// Panels of `b` that one packing task copies.
const PACK_GROUP: usize = 4;
/// The most floats of packed `b` at once (16 MiB, or one panel where `k` is longer); wider
/// products pack `b` in column chunks.
const PACKED_B_FLOATS: usize = 1 << 22;
/// Products of at least this many multiply-adds (`m·n·k`) are split over threads: below it,
/// packing and splitting cost more than the second thread saves (64×256×256 takes 95 µs on
/// one thread, 72 on two; 128³ 45 and 36). Products of 1 to 2 million (gpt_tiny's MLP and
/// their gradients, 64×64×256) gained a little on two threads in a loop of the product alone
/// but lost inside a training step, where the other thread has gone idle between them: with
/// the bound at 2²¹ rather than 2²⁰, gpt_tiny's step went from 2.16-2.41 to 1.97-1.99 ms
/// (alternated five times; gpt_small and resnet_tiny unchanged).
const PARALLEL_MIN: usize = 1 << 21;
/// The most rows or columns of a micro-tile, of any kernel.
const MAX_TILE: usize = 32;
/// The most steps along `k` in one block: a packed panel of `b` is then at most 64 KiB with
/// AVX2, 128 KiB with AVX-512 (shorter blocks measured slower with AVX-512 too), and `out` is
/// read back and added to only when `k` exceeds it.
const KC: usize = 1024;

/// A micro-kernel, and the proof that the processor has the extensions it needs.
pub trait Kernel: Copy + Send + Sync {
    /// Rows of the micro-tile.
    const MR: usize;
    /// Columns of the micro-tile.
    const NR: usize;

    /// The proof of AVX2 and FMA, which every kernel's processor has (the packing uses them).
    fn avx2(self) -> Avx2Fma;

    /// The `MR × NR` product of a packed panel of `a` (`depth × MR`) and a panel of `b`
    /// (`depth` steps of `NR` floats, `b_step` floats apart from `b` on), written to the `size[0] × size[1]` top-left corner of the micro-tile at
    /// `out` (element `(i, j)` at `out + i * strides[0] + j * strides[1]`), or added to it when
    /// `accumulate`. The tile of `out` is pulled into the L1 cache first, so that it is there
    /// by the end, and the `depth * NR * MR / MC` floats from `ahead` on into the L2 cache (a
    /// prefetch never faults: any address will do).
    ///
    /// # Safety
    ///
    /// `out` addresses a `size[0] × size[1]` matrix through `strides` that the caller may read
    /// and write, `size` is at most `MR × NR`, and `b + s * b_step` is `NR` floats the caller
    /// may read for each step `s` of `a`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        self,
        a: &[f32],
        b: *const f32,
        b_step: usize,
        ahead: *const f32,
        out: *mut f32,
        strides: [isize; 2],
        size: [usize; 2],
        accumulate: bool,
    );
}

/// Proof that the processor has AVX2 and FMA (and F16C, which every such processor has): the
/// 6 × 16 kernel of 256-bit registers.
#[derive(Clone, Copy)]
pub struct Avx2Fma(());

impl Avx2Fma {
    /// The proof, when [`instructions`](super::instructions) allows AVX2 (which it does only
    /// where the processor has AVX2 and FMA).
    pub fn detect() -> Option<Avx2Fma> {
        (super::instructions() >= Instructions::Avx2).then_some(Avx2Fma(()))
    }
}

/// Proof that the processor has AVX-512 F (besides AVX2 and FMA): the 12 × 32 kernel of
/// 512-bit registers.
#[derive(Clone, Copy)]
pub struct Avx512(());

impl Avx512 {
    /// The proof, when [`instructions`](super::instructions) allows AVX-512 (which it does only
    /// where the processor has AVX-512 F, VL, BW and DQ, AVX2 and FMA).
    pub fn detect() -> Option<Avx512> {
        (super::instructions() >= Instructions::Avx512).then_some(Avx512(()))
    }
}

/// Proof that the processor has AVX512_BF16 besides AVX-512 F: the 12 × 32 kernel whose steps
/// are pairs of bfloat16s.
#[derive(Clone, Copy)]
pub struct Avx512Bf16(());

impl Avx512Bf16 {
    /// The proof, when [`instructions`](super::instructions) allows AVX-512 and the processor
    /// has AVX512_BF16.
    pub fn detect() -> Option<Avx512Bf16> {
        let bf16 = std::arch::is_x86_feature_detected!("avx512bf16");
        (super::instructions() >= Instructions::Avx512 && bf16).then_some(Avx512Bf16(()))
    }
}

/// Whether the AVX512_BF16 kernel outruns the float32 one on this processor, measured once per
/// process. Its instruction makes two products per lane, but processors run it at different
/// rates: on a Zen 4 whose 512-bit multiply-adds run at the 256-bit rate it gave 1.86x the
/// float32 kernel's rate, on a Xeon with full-rate ones (AVX512_FP16, no AMX) half of it. Each
/// kernel computes the same 96 x 512 @ 512 x 256 product five times, alternated, and the bfloat16
/// one must be a fifth faster at its best, so that a processor where the two are close keeps
/// the float32 kernel from run to run.
pub fn bf16_kernel_pays() -> bool {
    static PAYS: OnceLock<bool> = OnceLock::new();
    *PAYS.get_or_init(|| {
        if Avx512Bf16::detect().is_none() {
            return false;
        }
        let (m, k, n) = (96, 512, 256);
        // Whole numbers of a few bits: exact in bfloat16.
        let a = ndarray::Array2::from_shape_fn((m, k), |(i, j)| ((i * 7 + j * 3) % 13) as f32 - 6.0);
        let b = ndarray::Array2::from_shape_fn((k, n), |(i, j)| ((i * 5 + j) % 11) as f32 - 5.0);
        let mut out = ndarray::Array2::zeros((m, n));
        let (mut bf16, mut f32) = (Duration::MAX, Duration::MAX);
        for _ in 0..5 {
            let start = Instant::now();
            matmul_bf16(a.view(), b.view(), &mut out.view_mut());
            bf16 = bf16.min(start.elapsed());
            let start = Instant::now();
            matmul(a.view(), b.view(), &mut out.view_mut());
            f32 = f32.min(start.elapsed());
        }
        bf16.as_secs_f64() * 1.2 < f32.as_secs_f64()
    })
}

/// `out = a @ b` for operands holding bfloat16 values (as float32s, which hold them exactly;
/// other values are rounded to bfloat16 first), accumulated in float32, on the AVX512_BF16
/// kernel; `false`, with `out` untouched, where the processor has none.
pub fn matmul_bf16(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, out: &mut ArrayViewMut2<'_, f32>) -> bool {
    let Some(cpu) = Avx512Bf16::detect() else { return false };
    let ((m, k), n) = (a.dim(), b.dim().1);
    // Pairs along `k`: slot `p` holds steps `2p` (low half) and `2p + 1` (high half, zero past
    // the end). `a`'s pairs are neighbours along its rows; `b`'s, the same column of two rows.
    // Both go into this thread's buffers, reused from product to product (fresh pages cost
    // more than the pairing), a grain of floats at a time on the threads.
    let half = k.div_ceil(2);
    PAIRED.with(|paired| {
        let (a2, b2) = &mut *paired.borrow_mut();
        let (a2, b2) = (reserved(a2, m * half), reserved(b2, half * n));
        let rows = (threads::GRAIN / half.max(1)).max(1);
        threads::for_each(a2.chunks_mut(rows * half.max(1)).enumerate(), |(g, out)| {
            super::map::vectorised(
                #[inline(always)]
                || {
                    for (r, out) in out.chunks_mut(half.max(1)).enumerate() {
                        pair_neighbours(a.row(g * rows + r), out);
                    }
                },
            )
        });
        let steps = (threads::GRAIN / n.max(1)).max(1);
        threads::for_each(b2.chunks_mut(steps * n.max(1)).enumerate(), |(g, out)| {
            super::map::vectorised(
                #[inline(always)]
                || {
                    for (q, out) in out.chunks_mut(n.max(1)).enumerate() {
                        let p = g * steps + q;
                        let high = b.get((2 * p + 1, 0)).map(|_| b.row(2 * p + 1));
                        pair_rows(b.row(2 * p), high, out);
                    }
                },
            )
        });
        let a2 = ArrayView2::from_shape((m, half), &*a2).expect("m * half elements");
        let b2 = ArrayView2::from_shape((half, n), &*b2).expect("half * n elements");
        product(cpu, a2, b2, out);
    });
    true
}

thread_local! {
    /// Each thread's paired operands of its last bfloat16 product (`a`'s, `b`'s).
    static PAIRED: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The first `len` floats of `buf`, growing it if needed (the caller overwrites them).
fn reserved(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// `out[p]`: the pair of `row[2p]` and `row[2p + 1]` (zero past the end).
#[inline(always)]
fn pair_neighbours(row: ndarray::ArrayView1<'_, f32>, out: &mut [f32]) {
    match row.as_slice() {
        Some(row) => {
            let pairs = row.chunks_exact(2);
            let last = pairs.remainder().first().copied();
            for (o, c) in out.iter_mut().zip(pairs) {
                *o = pair(c[0], c[1]);
            }
            if let (Some(x), Some(o)) = (last, out.last_mut()) {
                *o = pair(x, 0.0);
            }
        }
        None => {
            for (p, o) in out.iter_mut().enumerate() {
                *o = pair(row[2 * p], row.get(2 * p + 1).copied().unwrap_or(0.0));
            }
        }
    }
}

/// `out[j]`: the pair of `low[j]` and `high[j]` (zero without a `high` row).
#[inline(always)]
fn pair_rows(low: ndarray::ArrayView1<'_, f32>, high: Option<ndarray::ArrayView1<'_, f32>>, out: &mut [f32]) {
    match (low.as_slice(), high.as_ref().map(|h| h.as_slice())) {
        (Some(low), Some(Some(high))) => {
            for ((o, &x), &y) in out.iter_mut().zip(low).zip(high) {
                *o = pair(x, y);
            }
        }
        (Some(low), None) => {
            for (o, &x) in out.iter_mut().zip(low) {
                *o = pair(x, 0.0);
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                *o = pair(low[j], high.as_ref().map_or(0.0, |h| h[j]));
            }
        }
    }
}

/// Two bfloat16s in the bits of one float32: `low` in the low half (the earlier step along
/// `k`), `high` in the high half, each rounded to bfloat16.
#[inline(always)]
fn pair(low: f32, high: f32) -> f32 {
    let bits = |x: f32| u32::from(crate::types::dtype_reduced::f32_to_bf16(x));
    f32::from_bits(bits(low) | (bits(high) << 16))
}

/// `out = a @ b` on the widest kernel the processor has (`out`'s old contents are never
/// read), in float32 for operands of float32, float16 or bfloat16 ([`MatmulOperand`]); `false`,
/// with `out` untouched, where it has no AVX2 and FMA.
pub fn matmul<E: MatmulOperand>(a: ArrayView2<'_, E>, b: ArrayView2<'_, E>, out: &mut ArrayViewMut2<'_, f32>) -> bool {
    if let Some(cpu) = Avx512::detect() {
        product(cpu, a, b, out);
    } else if let Some(cpu) = Avx2Fma::detect() {
        product(cpu, a, b, out);
    } else {
        return false;
    }
    true
}

/// The most floats of a contiguous `b` that products read in place, unpacked (1 MiB, the L2
/// cache of the processors measured): packing such a `b` cost 15% of a product of 128 rows,
/// and its rows are whole panels already when `n` is a multiple of `NR`.
const IN_PLACE_B_FLOATS: usize = 1 << 18;

/// The most rows of `a` for which a contiguous `b` is read in place: a taller product reads
/// each panel of `b` for more rows, and a panel read in place, its steps a row of `b` apart
/// (a few KiB, often a power of two: the same few cache sets), is slower to read than a packed
/// one. Measured on a 2-core AVX-512 Xeon, in place against packed, GFLOP/s: 128 × 256 × 1024
/// 184 / 174, 128 × 512 × 512 215 / 200; 512 × 512 × 512 246 / 262, 2048 × 256 × 1024 196 / 255.
const IN_PLACE_B_ROWS: usize = 256;

/// Whether a contiguous `b` of whole panels is read in place for a product of `m·k·n`.
const fn reads_b_in_place(m: usize, k: usize, n: usize) -> bool {
    k * n <= IN_PLACE_B_FLOATS && m <= IN_PLACE_B_ROWS
}

/// The panels of `b` that the micro-kernel reads, `NR` columns each: packed, each panel's
/// steps one after the other, or `b` itself, read in place.
#[derive(Clone, Copy)]
struct Panels<'b> {
    /// The floats the panels are read from.
    data: &'b [f32],
    /// Floats from one panel's first step to the next panel's.
    panel: usize,
    /// Floats from one step along `k` to the next, within a panel.
    step: usize,
}

impl Panels<'_> {
    /// The panels packed in `data` for `k` steps of `nr` columns.
    fn packed(data: &[f32], k: usize, nr: usize) -> Panels<'_> {
        Panels { data, panel: k * nr, step: nr }
    }

    /// Where step `s` of panel `j` starts (past the end for a prefetch's address: never read
    /// there).
    fn at(&self, j: usize, s: usize) -> *const f32 {
        self.data.as_ptr().wrapping_add(j * self.panel + s * self.step)
    }
}

/// The packed `b` of the last product, kept so that its pages stay mapped for the next one.
static PACKED_B: Mutex<Vec<f32>> = Mutex::new(Vec::new());

thread_local! {
    /// Each thread's packed rows of `a`.
    static PACKED_A: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `len` floats of `buf` starting on a 64-byte boundary (a cache line), growing `buf` if needed.
fn aligned(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len + 16 {
        buf.resize(len + 16, 0.0);
    }
    let start = buf.as_ptr().align_offset(64);
    &mut buf[start..start + len]
}

/// `k` cut into `count` blocks of `depth` steps, the last possibly shorter: as even as blocks
/// of at most [`KC`] steps can be, so that no block is a short leftover.
#[derive(Clone, Copy)]
struct Blocks {
    /// Steps along `k` in every block but the last.
    depth: usize,
    /// How many blocks.
    count: usize,
    /// The whole `k`.
    k: usize,
}

impl Blocks {
    /// The blocks of `k` (at least 1).
    fn new(k: usize) -> Blocks {
        let count = k.div_ceil(KC);
        Blocks { depth: k.div_ceil(count), count, k }
    }

    /// The steps of block `p`.
    fn range(&self, p: usize) -> Range<usize> {
        p * self.depth..((p + 1) * self.depth).min(self.k)
    }
}

/// `out = a @ b` on kernel `K` (`out`'s old contents are never read).
fn product<K: Kernel, E: MatmulOperand>(
    cpu: K,
    a: ArrayView2<'_, E>,
    b: ArrayView2<'_, E>,
    out: &mut ArrayViewMut2<'_, f32>,
) {
    let ((m, k), n) = (a.dim(), b.dim().1);
    assert_eq!((b.dim().0, out.dim()), (k, (m, n)), "matmul operands of mismatched shapes");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    // The kernel computes whole `MR × NR` tiles: a product much narrower than `NR` columns
    // (a matrix times a vector) computes less than half as much as `bᵀ @ aᵀ`.
    let (mr, nr) = (K::MR, K::NR);
    let tiles_area = |m: usize, n: usize| m.next_multiple_of(mr) * n.next_multiple_of(nr);
    if 2 * tiles_area(n, m) <= tiles_area(m, n) {
        return product(cpu, b.t(), a.t(), &mut out.view_mut().reversed_axes());
    }
    let threads = threads_for(m, n, k);
    let blocks = Blocks::new(k);
    if let Some(data) = b.as_slice().and_then(E::floats).filter(|_| n % nr == 0 && reads_b_in_place(m, k, n)) {
        // Rows of float32s of `b` one after the other, each whole panels: read in place.
        return sweep(cpu, a, Panels { data, panel: nr, step: n }, blocks, out.view_mut(), threads);
    }
    let chunk = (PACKED_B_FLOATS / (k * nr)).max(1) * nr;
    let mut packed = std::mem::take(&mut *PACKED_B.lock().unwrap_or_else(|e| e.into_inner()));
    for start in (0..n).step_by(chunk) {
        let cols = start..(start + chunk).min(n);
        let b_packed = aligned(&mut packed, cols.len().div_ceil(nr) * k * nr);
        pack_b(cpu.avx2(), b, cols.clone(), nr, b_packed, threads > 1);
        let out = if cols.len() == n { out.view_mut() } else { out.slice_mut(s![.., cols]) };
        sweep(cpu, a, Panels::packed(b_packed, k, nr), blocks, out, threads);
    }
    *PACKED_B.lock().unwrap_or_else(|e| e.into_inner()) = packed;
}

/// How many threads a product of `m·n·k` multiply-adds runs on.
fn threads_for(m: usize, n: usize, k: usize) -> usize {
    if m.saturating_mul(n).saturating_mul(k) >= PARALLEL_MIN { threads::get_num_threads() } else { 1 }
}

/// `out = a @ b` for the panels of `b` (all of `out`'s columns), on `threads` threads.
fn sweep<K: Kernel, E: MatmulOperand>(
    cpu: K,
    a: ArrayView2<'_, E>,
    b: Panels<'_>,
    blocks: Blocks,
    out: ArrayViewMut2<'_, f32>,
    threads: usize,
) {
    let m = out.dim().0;
    let tiles = tiles(out, threads, [K::MR, K::NR]);
    let run = |tile: Tile<'_>| run_tile(cpu, a, tile.rows, b, blocks, tile.panels, tile.out);
    if threads == 1 {
        tiles.into_iter().for_each(run);
    } else if tiles.iter().all(|tile| tile.rows.len() == m) {
        sweep_columns(cpu, a, b, blocks, tiles);
    } else {
        threads::for_each(tiles, run);
    }
}

/// [`sweep`] for tiles of all `a`'s rows, cut along the columns only (a few dozen rows of a
/// batch against a layer's weights): for each block of `k`, the rows of `a` are packed once,
/// by the threads together, and the tiles share them.
fn sweep_columns<K: Kernel, E: MatmulOperand>(
    cpu: K,
    a: ArrayView2<'_, E>,
    b: Panels<'_>,
    blocks: Blocks,
    mut tiles: Vec<Tile<'_>>,
) {
    let (m, mr) = (a.dim().0, K::MR);
    // Taken rather than borrowed: this thread may run other products while it waits.
    let mut buf = PACKED_A.with_borrow_mut(std::mem::take);
    for p in 0..blocks.count {
        let steps = blocks.range(p);
        let a_packed = aligned(&mut buf, m.div_ceil(mr) * mr * steps.len());
        threads::for_each(a_packed.chunks_mut(mr * steps.len()).enumerate(), |(i, panel)| {
            let rows = i * mr..((i + 1) * mr).min(m);
            // SAFETY: `pack_a` only needs AVX2, FMA and F16C, which `cpu` proves the processor has.
            unsafe { pack_a(cpu.avx2(), a, rows, steps.clone(), mr, panel) }
        });
        let a_packed = &*a_packed;
        threads::for_each(tiles.iter_mut(), |tile| {
            sweep_panels(cpu, a_packed, b, blocks, p, tile.panels.clone(), &mut tile.out)
        });
    }
    PACKED_A.with_borrow_mut(|kept| *kept = buf);
}

/// A matrix `b` packed once for many products `a @ b` with it: a recurrent layer's weights,
/// which multiply a new hidden state at every step, where [`matmul`] would pack them again
/// each time (as long as the product itself for a batch of a few dozen rows).
pub struct PackedB {
    /// The panels, from `start` on (a 64-byte boundary).
    buffer: Vec<f32>,
    start: usize,
    /// `b`'s shape.
    k: usize,
    n: usize,
    /// The micro-kernel's columns the panels were packed for.
    nr: usize,
}

impl PackedB {
    /// `b` packed for the widest kernel the processor has; `None` where it has no AVX2 and
    /// FMA, or memory runs out.
    pub fn new(b: ArrayView2<'_, f32>) -> Option<PackedB> {
        let cpu = Avx2Fma::detect()?;
        let nr = if Avx512::detect().is_some() { Avx512::NR } else { Avx2Fma::NR };
        let (k, n) = b.dim();
        let len = n.div_ceil(nr) * k * nr;
        let mut buffer = Vec::new();
        super::reserve_exact(&mut buffer, len + 16).ok()?;
        aligned(&mut buffer, len);
        let start = buffer.as_ptr().align_offset(64);
        // Packing is a copy: worth both threads only for a large `b`.
        pack_b(cpu, b, 0..n, nr, &mut buffer[start..start + len], k * n >= 1 << 20);
        Some(PackedB { buffer, start, k, n, nr })
    }

    /// `out = a @ b` (`out`'s old contents are never read).
    ///
    /// # Panics
    ///
    /// When the shapes do not agree, as [`matmul`]'s (a caller's bug).
    pub fn multiply(&self, a: ArrayView2<'_, f32>, out: &mut ArrayViewMut2<'_, f32>) {
        let (m, k) = a.dim();
        assert_eq!((k, out.dim()), (self.k, (m, self.n)), "matmul operands of mismatched shapes");
        if m == 0 || self.n == 0 {
            return;
        }
        if k == 0 {
            out.fill(0.0);
            return;
        }
        let packed = Panels::packed(&self.buffer[self.start..][..self.n.div_ceil(self.nr) * k * self.nr], k, self.nr);
        let (blocks, threads) = (Blocks::new(k), threads_for(m, self.n, k));
        // A few rows (an unbatched layer's one) on the kernel of one row, where the wide one
        // would compute 6 or 12 of them, most of them zeros.
        match Avx512::detect() {
            Some(_) if self.nr == Avx512::NR && m < Avx512::MR / 2 => {
                sweep(Avx512Row(()), a, packed, blocks, out.view_mut(), threads)
            }
            Some(_)
                if self.nr == Avx512::NR && m.next_multiple_of(Avx512Short::MR) < m.next_multiple_of(Avx512::MR) =>
            {
                sweep(Avx512Short(()), a, packed, blocks, out.view_mut(), threads)
            }
            Some(cpu) if self.nr == Avx512::NR => sweep(cpu, a, packed, blocks, out.view_mut(), threads),
            _ if m < Avx2Fma::MR / 2 => sweep(Avx2Row(()), a, packed, blocks, out.view_mut(), threads),
            _ => {
                let cpu = Avx2Fma::detect().expect("packed on a processor with AVX2 and FMA");
                sweep(cpu, a, packed, blocks, out.view_mut(), threads)
            }
        }
    }
}

/// The 1 × 16 kernel of 256-bit registers, for [`PackedB`]'s products of a few rows; made only
/// where the processor has AVX2 and FMA (where a [`PackedB`] of 16 columns exists).
#[derive(Clone, Copy)]
struct Avx2Row(());

/// The 1 × 32 kernel of 512-bit registers, for [`PackedB`]'s products of a few rows; made only
/// where the processor has AVX-512 (where a [`PackedB`] of 32 columns exists).
#[derive(Clone, Copy)]
struct Avx512Row(());

/// The 8 × 32 kernel of 512-bit registers, for [`PackedB`]'s products of a few dozen rows that
/// a multiple of 8 fits better than one of 12 (a batch of 32 rows: 36 rows computed by the 12-row
/// kernel, 32 by this one); made only where the processor has AVX-512.
#[derive(Clone, Copy)]
struct Avx512Short(());

/// A rectangle of `out` that one task computes.
struct Tile<'o> {
    /// Its rows (of `a` and `out`).
    rows: Range<usize>,
    /// Its panels of packed `b`.
    panels: Range<usize>,
    /// Its part of `out`.
    out: ArrayViewMut2<'o, f32>,
}

/// `out` cut into tiles of whole `mr × nr` micro-tiles (but at the edges) and at most [`MC`] rows: on
/// one thread as few as can be, else at least four per thread, as many for each thread and
/// even in size, so that threads finish together even when one of them is held up for a while.
/// Rows are cut first; columns too when there are too few rows (each tile then packs its rows
/// of `a` again); only columns when all the rows fit one tile and there are columns enough
/// (the tiles then share one packing of `a`: see [`sweep`]).
fn tiles(out: ArrayViewMut2<'_, f32>, threads: usize, [mr, nr]: [usize; 2]) -> Vec<Tile<'_>> {
    let (m, n) = out.dim();
    let (micro_rows, panels) = (m.div_ceil(mr), n.div_ceil(nr));
    let wanted = if threads == 1 { 1 } else { 4 * threads };
    let row_parts = if micro_rows <= MC / mr && panels >= wanted {
        1
    } else {
        micro_rows.div_ceil(MC / mr).max(wanted).next_multiple_of(threads).min(micro_rows)
    };
    let col_parts = wanted.div_ceil(row_parts).min(panels);
    let mut tiles = Vec::with_capacity(row_parts * col_parts);
    let mut rest = out;
    let mut row = 0;
    for r in 1..=row_parts {
        let end = (r * micro_rows / row_parts * mr).min(m);
        let (mut band, below) = rest.split_at(Axis(0), end - row);
        rest = below;
        let mut panel = 0;
        for c in 1..=col_parts {
            let last = c * panels / col_parts;
            let width = ((last - panel) * nr).min(band.dim().1);
            let (tile, right) = band.split_at(Axis(1), width);
            band = right;
            tiles.push(Tile { rows: row..end, panels: panel..last, out: tile });
            panel = last;
        }
        row = end;
    }
    tiles
}

/// Packs columns `cols` of `b` into `packed`, widened to float32: panels of `nr` columns one
/// after the other, each its `k` rows of `nr` floats (zero past the last column). On several threads when
/// `parallel` and there are two panels or more, in groups of at most [`PACK_GROUP`] panels
/// (while one thread packed the four panels of a product of 128 columns, the other waited:
/// 15% of the product's time).
fn pack_b<E: MatmulOperand>(
    cpu: Avx2Fma,
    b: ArrayView2<'_, E>,
    cols: Range<usize>,
    nr: usize,
    packed: &mut [f32],
    parallel: bool,
) {
    let k = b.dim().0;
    let panels = cols.len().div_ceil(nr);
    let parallel = parallel && panels >= 2;
    let group = if parallel { PACK_GROUP.min(panels.div_ceil(threads::get_num_threads())) } else { PACK_GROUP };
    let pack = |(g, dst): (usize, &mut [f32])| {
        let start = cols.start + g * group * nr;
        // SAFETY: `pack_b_panels` only needs AVX2, FMA and F16C, which `cpu` proves the
        // processor has.
        unsafe { pack_b_panels(cpu, b, start..(start + group * nr).min(cols.end), nr, dst) }
    };
    if parallel {
        threads::for_each(packed.chunks_mut(group * k * nr).enumerate(), pack);
    } else {
        packed.chunks_mut(group * k * nr).enumerate().for_each(pack);
    }
}

/// Copies a row of `b` cut into pieces of `N` elements (a multiple of 8) to row `r` of
/// consecutive panels of `k` rows in `dst`, widened: moves of whole vectors, where a copy of a
/// length known only at run time is a call to `memmove` (9% of a product of 128 columns).
#[target_feature(enable = "avx2,fma,f16c")]
fn scatter_row<E: MatmulOperand, const N: usize>(
    pieces: std::slice::ChunksExact<'_, E>,
    dst: &mut [f32],
    k: usize,
    r: usize,
) {
    for (j, piece) in pieces.enumerate() {
        let to: &mut [f32; N] = (&mut dst[(j * k + r) * N..][..N]).try_into().expect("a panel's row of N floats");
        let piece: &[E; N] = piece.try_into().expect("a piece of N elements");
        for c in (0..N).step_by(8) {
            // SAFETY: `c + 8 <= N` elements of `piece` are read and floats of `to` written;
            // the caller's `Avx2Fma` proves the instructions.
            unsafe { _mm256_storeu_ps(to.as_mut_ptr().add(c), E::load8(piece.as_ptr().add(c))) }
        }
    }
}

/// Packs columns `cols` of `b` (at most [`PACK_GROUP`] panels) into `dst`, widened. A `b` with rows
/// of contiguous elements is read row after row (a row of the group is a few whole cache
/// lines, where reading panel after panel would jump a row's length at every step), one with
/// contiguous columns (a transposed matrix) sixteen columns at a time; other layouts element
/// by element.
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_b_panels<E: MatmulOperand>(_: Avx2Fma, b: ArrayView2<'_, E>, cols: Range<usize>, nr: usize, dst: &mut [f32]) {
    let (k, w) = (b.dim().0, cols.len());
    let [rs, cs] = [b.strides()[0], b.strides()[1]];
    if cs == 1 {
        for r in 0..k {
            // SAFETY: row `r < k` of `b` holds columns `cols` one element apart (`cs == 1`),
            // all in the memory that `b` borrows.
            let row =
                unsafe { std::slice::from_raw_parts(b.as_ptr().offset(r as isize * rs + cols.start as isize), w) };
            let pieces = row.chunks_exact(nr);
            let rest = pieces.remainder();
            match nr {
                32 => scatter_row::<E, 32>(pieces, dst, k, r),
                16 => scatter_row::<E, 16>(pieces, dst, k, r),
                _ => {
                    for (j, piece) in pieces.enumerate() {
                        widen_into(piece, &mut dst[(j * k + r) * nr..][..nr]);
                    }
                }
            }
            if !rest.is_empty() {
                let to = &mut dst[(w / nr * k + r) * nr..][..nr];
                widen_into(rest, &mut to[..rest.len()]);
                to[rest.len()..].fill(0.0);
            }
        }
    } else {
        for (j, panel) in dst.chunks_exact_mut(k * nr).take(w.div_ceil(nr)).enumerate() {
            let first = cols.start + j * nr;
            if rs == 1 && first + nr <= cols.end {
                // SAFETY: columns `first..first + nr` of `b` (checked) each hold `k` elements
                // one step apart (`rs == 1`), all in the memory that `b` borrows.
                let columns: [&[E]; MAX_TILE] = std::array::from_fn(|c| {
                    if c < nr {
                        unsafe { std::slice::from_raw_parts(b.as_ptr().offset((first + c) as isize * cs), k) }
                    } else {
                        &[]
                    }
                });
                interleave(&columns[..nr], nr, panel);
                continue;
            }
            for c in 0..nr {
                for r in 0..k {
                    // SAFETY: `r < k` and `first + c < cols.end` (checked) are inside `b`.
                    panel[r * nr + c] =
                        if first + c < cols.end { unsafe { b.uget((r, first + c)).widen() } } else { 0.0 };
                }
            }
        }
    }
}

/// Packs rows `rows` and columns `steps` of `a` into `dst`, widened: panels of `mr` rows one
/// after the other, each its columns one after the other (`mr` floats each, zero past the last
/// row).
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_a<E: MatmulOperand>(
    _: Avx2Fma,
    a: ArrayView2<'_, E>,
    rows: Range<usize>,
    steps: Range<usize>,
    mr: usize,
    dst: &mut [f32],
) {
    let [rs, cs] = [a.strides()[0], a.strides()[1]];
    let depth = steps.len();
    for (i, panel) in dst.chunks_exact_mut(depth * mr).take(rows.len().div_ceil(mr)).enumerate() {
        let top = rows.start + i * mr;
        let live = (rows.end - top).min(mr);
        // Element (`i`, `j`) of `a`, at `i * rs + j * cs` from its first.
        let at = |i: usize, j: usize| a.as_ptr().wrapping_offset(i as isize * rs + j as isize * cs);
        if cs == 1 {
            let rows: [&[E]; MAX_TILE] = std::array::from_fn(|r| {
                // SAFETY: rows `top..top + live` of `a` hold columns `steps` one element apart
                // (`cs == 1`), in the memory that `a` borrows.
                if r < live { unsafe { std::slice::from_raw_parts(at(top + r, steps.start), depth) } } else { &[] }
            });
            interleave(&rows[..live], mr, panel);
        } else if live == mr && rs == 1 {
            for (p, col) in panel.chunks_exact_mut(mr).enumerate() {
                // SAFETY: column `steps.start + p` (`p < depth`) of `a` holds rows
                // `top..top + mr` (`live == mr`) one element apart (`rs == 1`), in the memory
                // that `a` borrows.
                widen_into(unsafe { std::slice::from_raw_parts(at(top, steps.start + p), mr) }, col);
            }
        } else {
            for (p, col) in panel.chunks_exact_mut(mr).enumerate() {
                for (r, x) in col.iter_mut().enumerate() {
                    // SAFETY: row `top + r` (`r < live`, checked) and column `steps.start + p`
                    // (`p < depth`) are inside `a`.
                    *x = if r < live { unsafe { a.uget((top + r, steps.start + p)).widen() } } else { 0.0 };
                }
            }
        }
    }
}

/// Eight lanes set, then eight clear: from `8 - live` on, a mask of the first `live` lanes.
static LIVE_LANES: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// `dst = src`, widened to float32.
#[inline(always)]
fn widen_into<E: MatmulOperand>(src: &[E], dst: &mut [f32]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = x.widen();
    }
}

/// Interleaves `count` streams of equal length, widened, into `dst`:
/// `dst[p * count + r] = streams[r][p]`, zero for the streams past the end of `streams` (at
/// least one, at most `count`), eight steps at a time through 8 × 8 transposes in registers.
#[target_feature(enable = "avx2,fma,f16c")]
fn interleave<E: MatmulOperand>(streams: &[&[E]], count: usize, dst: &mut [f32]) {
    let len = streams[0].len();
    let whole = len / 8 * 8;
    for p in (0..whole).step_by(8) {
        for g in (0..count).step_by(8) {
            let live = (count - g).min(8);
            let rows = std::array::from_fn(|r| match streams.get(g + r) {
                // SAFETY: stream `g + r` holds `len >= p + 8` elements; the caller's
                // `Avx2Fma` proves the instructions.
                Some(stream) if r < live => unsafe { E::load8(stream.as_ptr().add(p)) },
                _ => _mm256_setzero_ps(),
            });
            // SAFETY: `LIVE_LANES[8 - live..]` holds 8 lanes (`1 <= live <= 8`).
            let mask = unsafe { _mm256_loadu_si256(LIVE_LANES[8 - live..].as_ptr().cast()) };
            for (c, column) in transpose8(rows).into_iter().enumerate() {
                let to = dst[(p + c) * count + g..][..live].as_mut_ptr();
                // SAFETY: `to` starts `live` floats of `dst`: all 8 lanes are stored when
                // `live == 8`, the low 4 when `live == 4`, else the first `live`, which `mask`
                // selects (a masked store touches no memory of the lanes it leaves out).
                unsafe {
                    match live {
                        8 => _mm256_storeu_ps(to, column),
                        4 => _mm_storeu_ps(to, _mm256_castps256_ps128(column)),
                        _ => _mm256_maskstore_ps(to, mask, column),
                    }
                }
            }
        }
    }
    for p in whole..len {
        for r in 0..count {
            dst[p * count + r] = streams.get(r).map_or(0.0, |stream| stream[p].widen());
        }
    }
}

/// The columns of the 8 × 8 matrix whose rows are `r`.
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // Pairs of rows interleaved, then quadruples (each 128-bit half on its own), then halves.
    let t = [0, 2, 4, 6].map(|i| [_mm256_unpacklo_ps(r[i], r[i + 1]), _mm256_unpackhi_ps(r[i], r[i + 1])]);
    let q = [0, 2].map(|i| {
        [
            _mm256_shuffle_ps::<0x44>(t[i][0], t[i + 1][0]),
            _mm256_shuffle_ps::<0xEE>(t[i][0], t[i + 1][0]),
            _mm256_shuffle_ps::<0x44>(t[i][1], t[i + 1][1]),
            _mm256_shuffle_ps::<0xEE>(t[i][1], t[i + 1][1]),
        ]
    });
    std::array::from_fn(|c| {
        if c < 4 {
            _mm256_permute2f128_ps::<0x20>(q[0][c], q[1][c])
        } else {
            _mm256_permute2f128_ps::<0x31>(q[0][c - 4], q[1][c - 4])
        }
    })
}

/// Computes one tile on kernel `K`: `out = a @ b` for rows `rows` of `a` and `panels` of the
/// packed `b`.
///
/// The blocking loops: for each block of `k`, pack the tile's rows of `a` for that block (at
/// most `MC × KC` floats, which stay in L2), then [`sweep_panels`]. The first block writes
/// `out`, the others add to it.
fn run_tile<K: Kernel, E: MatmulOperand>(
    cpu: K,
    a: ArrayView2<'_, E>,
    rows: Range<usize>,
    b: Panels<'_>,
    blocks: Blocks,
    panels: Range<usize>,
    mut out: ArrayViewMut2<'_, f32>,
) {
    PACKED_A.with_borrow_mut(|buf| {
        let a_packed = aligned(buf, rows.len().div_ceil(K::MR) * K::MR * blocks.depth);
        for p in 0..blocks.count {
            // SAFETY: `pack_a` only needs AVX2, FMA and F16C, which `cpu` proves the processor has.
            unsafe { pack_a(cpu.avx2(), a, rows.clone(), blocks.range(p), K::MR, a_packed) };
            sweep_panels(cpu, a_packed, b, blocks, p, panels.clone(), &mut out);
        }
    })
}

/// Block `p` of `k` for `out`'s rows, packed in `a_packed`, and `panels` of the packed `b`:
/// each panel of `b` swept down all the packed panels of `a`, one micro-tile of `out` at a
/// time, written for the first block and added to for the others.
fn sweep_panels<K: Kernel>(
    cpu: K,
    a_packed: &[f32],
    b: Panels<'_>,
    blocks: Blocks,
    p: usize,
    panels: Range<usize>,
    out: &mut ArrayViewMut2<'_, f32>,
) {
    let (m, n) = out.dim();
    let (o, [rs, cs]) = (out.as_mut_ptr(), [out.strides()[0], out.strides()[1]]);
    let (first, (mr, nr)) = (panels.start, (K::MR, K::NR));
    let steps = blocks.range(p);
    let depth = steps.len();
    for j in panels.clone() {
        let b_panel = b.at(j, steps.start);
        // The panel after this one, which the kernels pull into L2 meanwhile, a stretch of
        // `depth * nr * mr / MC` floats each.
        let next = if j + 1 < panels.end { (j + 1, steps.start) } else { (first, steps.end) };
        let next = b.at(next.0, next.1);
        let col = (j - first) * nr;
        for (i, a_panel) in a_packed.chunks_exact(depth * mr).take(m.div_ceil(mr)).enumerate() {
            let row = i * mr;
            // SAFETY: the micro-tile at (`row`, `col`), of `min(mr, m - row)` rows and
            // `min(nr, n - col)` columns, lies inside `out`, which this function borrows
            // mutably: nothing else reads or writes it meanwhile. `a_panel` holds `depth` steps,
            // and so does panel `j < panels.end` of `b` from step `steps.start` on, `NR`
            // floats each inside `b.data` (packed, or the rows of a `b` read in place).
            unsafe {
                cpu.tile(
                    a_panel,
                    b_panel,
                    b.step,
                    next.wrapping_add(i * depth * nr * mr / MC),
                    o.offset(row as isize * rs + col as isize * cs),
                    [rs, cs],
                    [(m - row).min(mr), (n - col).min(nr)],
                    p > 0,
                )
            }
        }
    }
}

/// One micro-kernel body for each register width: the tile lives in `2 * MR` registers of
/// `$lanes` floats (two per row of `NR = 2 * $lanes` columns); per step along `k`, two loads of
/// `b`, `MR` broadcasts of `a` and `2 * MR` fused multiply-adds. The prefetches are as
/// [`Kernel::tile`] says: one cache line every `16 * MC / (MR * NR)` steps.
macro_rules! micro_kernel {
    ($kernel:ident, $features:literal, $mr:literal, $lanes:literal, $vector:ty,
     $zero:ident, $load:ident, $store:ident, $broadcast:ident, $fma:ident, $add:ident) => {
        impl Kernel for $kernel {
            const MR: usize = $mr;
            const NR: usize = 2 * $lanes;

            fn avx2(self) -> Avx2Fma {
                Avx2Fma(())
            }

            unsafe fn tile(
                self,
                a: &[f32],
                b: *const f32,
                b_step: usize,
                ahead: *const f32,
                out: *mut f32,
                strides: [isize; 2],
                size: [usize; 2],
                accumulate: bool,
            ) {
                // SAFETY: `self` proves the processor has what `tile` is compiled for; the
                // caller upholds the rest.
                unsafe { tile(a, b, b_step, ahead, out, strides, size, accumulate) }
            }
        }

        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn tile(
            a: &[f32],
            b: *const f32,
            b_step: usize,
            ahead: *const f32,
            out: *mut f32,
            strides: [isize; 2],
            size: [usize; 2],
            accumulate: bool,
        ) {
            const MR: usize = $mr;
            const NR: usize = 2 * $lanes;
            const PREFETCH_EVERY: usize = 16 * MC / (MR * NR);
            let [rs, cs] = strides;
            for r in 0..size[0] as isize {
                _mm_prefetch::<_MM_HINT_T0>(out.wrapping_offset(r * rs).cast());
                _mm_prefetch::<_MM_HINT_T0>(out.wrapping_offset(r * rs + (NR - 1) as isize * cs).cast());
            }
            let mut acc: [$vector; 2 * MR] = [$zero(); 2 * MR];
            for (step, a) in a.chunks_exact(MR).enumerate() {
                if step % PREFETCH_EVERY == 0 {
                    _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(step * 16 / PREFETCH_EVERY).cast());
                }
                // SAFETY: the caller lends `NR` floats from `b + step * b_step` on, so both
                // loads of half of them are inside them.
                let (b0, b1) = unsafe {
                    let b = b.add(step * b_step);
                    ($load(b), $load(b.add($lanes)))
                };
                for r in 0..MR {
                    let ar = $broadcast(a[r]);
                    acc[2 * r] = $fma(ar, b0, acc[2 * r]);
                    acc[2 * r + 1] = $fma(ar, b1, acc[2 * r + 1]);
                }
            }
            if size[1] == NR && cs == 1 {
                for r in (0..MR).filter(|&r| r < size[0]) {
                    // SAFETY: row `r < size[0]` of the tile is `NR` contiguous floats
                    // (`cs == 1`) that the caller lets us read and write.
                    unsafe {
                        let row = out.offset(r as isize * rs);
                        let (mut lo, mut hi) = (acc[2 * r], acc[2 * r + 1]);
                        if accumulate {
                            lo = $add(lo, $load(row));
                            hi = $add(hi, $load(row.add($lanes)));
                        }
                        $store(row, lo);
                        $store(row.add($lanes), hi);
                    }
                }
            } else {
                let mut tile = [[0.0f32; NR]; MR];
                for (row, v) in tile.iter_mut().zip(acc.chunks_exact(2)) {
                    // SAFETY: `row` is `NR` floats, room for both stores of half of them.
                    unsafe {
                        $store(row.as_mut_ptr(), v[0]);
                        $store(row.as_mut_ptr().add($lanes), v[1]);
                    }
                }
                for (i, row) in tile.iter().enumerate().take(size[0]) {
                    for (j, &v) in row.iter().enumerate().take(size[1]) {
                        // SAFETY: `i < size[0]` and `j < size[1]`: inside the tile the caller lends.
                        unsafe {
                            let x = out.offset(i as isize * rs + j as isize * cs);
                            *x = if accumulate { *x + v } else { v };
                        }
                    }
                }
            }
        }
    };
}

/// [`micro_kernel!`] on 256-bit registers, `$mr` rows high.
macro_rules! avx2_kernel {
    ($kernel:ident, $mr:literal) => {
        micro_kernel!(
            $kernel,
            "avx2,fma",
            $mr,
            8,
            __m256,
            _mm256_setzero_ps,
            _mm256_loadu_ps,
            _mm256_storeu_ps,
            _mm256_set1_ps,
            _mm256_fmadd_ps,
            _mm256_add_ps
        );
    };
}

/// [`micro_kernel!`] on 512-bit registers, `$mr` rows high, with `$fma` as its step.
macro_rules! avx512_kernel {
    ($kernel:ident, $features:literal, $mr:literal, $fma:ident) => {
        micro_kernel!(
            $kernel,
            $features,
            $mr,
            16,
            __m512,
            _mm512_setzero_ps,
            _mm512_loadu_ps,
            _mm512_storeu_ps,
            _mm512_set1_ps,
            $fma,
            _mm512_add_ps
        );
    };
}

mod avx2 {
    use super::*;
    avx2_kernel!(Avx2Fma, 6);
}

mod avx2_row {
    use super::*;
    avx2_kernel!(Avx2Row, 1);
}

mod avx512 {
    use super::*;
    avx512_kernel!(Avx512, "avx512f,avx2,fma", 12, _mm512_fmadd_ps);
}

mod avx512_row {
    use super::*;
    avx512_kernel!(Avx512Row, "avx512f,avx2,fma", 1, _mm512_fmadd_ps);
}

mod avx512_short {
    use super::*;
    avx512_kernel!(Avx512Short, "avx512f,avx2,fma", 8, _mm512_fmadd_ps);
}

mod avx512_bf16 {
    use std::arch::x86_64::{__m512bh, _mm512_dpbf16_ps};

    use super::*;

    /// `acc + a.lo * b.lo + a.hi * b.hi` in each lane, where each float32 lane of `a` and `b`
    /// holds a pair of bfloat16s.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn dot_pairs(a: __m512, b: __m512, acc: __m512) -> __m512 {
        // SAFETY: `__m512` and `__m512bh` are both 64 bytes of plain lanes; every bit pattern is
        // a valid value of either.
        let pairs = |x: __m512| unsafe { std::mem::transmute::<__m512, __m512bh>(x) };
        let (a, b) = (pairs(a), pairs(b));
        _mm512_dpbf16_ps(acc, a, b)
    }

    avx512_kernel!(Avx512Bf16, "avx512f,avx512bf16,avx2,fma", 12, dot_pairs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, ShapeBuilder};

    /// The sizes the shapes are drawn from: around the tile sizes and a block of `k`.
    const SIZES: [usize; 14] = [0, 1, 2, 5, 6, 7, 15, 16, 17, 31, 33, 64, 100, 257];

    /// A matrix of small integers over 8, varied by `seed` (exact in float32).
    fn matrix(rows: usize, cols: usize, seed: usize) -> Array2<f32> {
        Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 7 + j * 13 + seed * 5) % 17) as f32 / 8.0 - 1.0)
    }

    /// Checks the product of `a` and `b` on every kernel the processor has against a float64
    /// reference, within `k` roundings of the sum of the products' magnitudes; `out` starts as
    /// NaN, so reading it would show.
    fn check(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, out: &mut ArrayViewMut2<'_, f32>) {
        if let Some(cpu) = Avx2Fma::detect() {
            check_on(cpu, a, b, out);
        }
        if let Some(cpu) = Avx512::detect() {
            check_on(cpu, a, b, out);
        }
    }

    fn check_on<K: Kernel>(cpu: K, a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, out: &mut ArrayViewMut2<'_, f32>) {
        let ((m, k), n) = (a.dim(), b.dim().1);
        out.fill(f32::NAN);
        product(cpu, a, b, out);
        let (a64, b64): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|&x| x as f64).collect(), b.iter().map(|&x| x as f64).collect());
        for ((i, j), &got) in out.indexed_iter() {
            let (mut sum, mut size) = (0.0, 0.0);
            for p in 0..k {
                let term = a64[i * k + p] * b64[p * n + j];
                (sum, size) = (sum + term, size + term.abs());
            }
            let tolerance = k as f64 * f32::EPSILON as f64 * size;
            assert!((got as f64 - sum).abs() <= tolerance, "({m}, {k}, {n}) at ({i}, {j}): {got} against {sum}");
        }
    }

    #[test]
    fn products_of_every_size_match_the_reference() {
        for m in SIZES {
            for n in SIZES {
                for k in SIZES.into_iter().filter(|&k| m * n * k <= 1 << 18) {
                    let mut out = Array2::zeros((m, n));
                    check(matrix(m, k, 1).view(), matrix(k, n, 2).view(), &mut out.view_mut());
                }
            }
        }
    }

    #[test]
    fn transposed_strided_and_broadcast_operands_are_read_through_their_strides() {
        let (m, k, n) = (33, 257, 31);
        let mut out = Array2::zeros((m, n));
        let (a_t, b_t) = (matrix(k, m, 1), matrix(n, k, 2));
        check(a_t.t(), b_t.t(), &mut out.view_mut());
        let (a_wide, b_wide) = (matrix(2 * m, 3 * k, 3), matrix(3 * k, 2 * n, 4));
        check(a_wide.slice(s![..;2, ..;3]), b_wide.slice(s![..;3, ..;2]), &mut out.view_mut());
        let (row, col) = (matrix(1, k, 5), matrix(k, 1, 6));
        check(row.broadcast((m, k)).unwrap(), col.broadcast((k, n)).unwrap(), &mut out.view_mut());
        let values: Vec<f32> = (0..m).map(|i| i as f32).collect();
        let column = ArrayView2::from_shape((m, k).strides((1, 0)), &values).unwrap();
        check(column, b_t.t(), &mut out.view_mut());
    }

    #[test]
    fn a_strided_output_is_written_in_place_and_nowhere_else() {
        let (m, k, n) = (17, 100, 33);
        let mut big = Array2::from_elem((2 * m, 3 * n), 7.0f32);
        check(matrix(m, k, 1).view(), matrix(k, n, 2).view(), &mut big.slice_mut(s![..;2, ..;3]));
        let mut t = Array2::zeros((n, m));
        check(matrix(m, k, 3).view(), matrix(k, n, 4).view(), &mut t.view_mut().reversed_axes());
        assert!(big.indexed_iter().all(|((i, j), &v)| (i % 2 == 0 && j % 3 == 0) || v == 7.0));
    }

    #[test]
    fn bfloat16_products_of_every_size_accumulate_exactly_enough() {
        // Values of eighths are exact in bfloat16, and their products and sums in float32.
        for m in SIZES {
            for n in SIZES {
                for k in SIZES.into_iter().filter(|&k| m * n * k <= 1 << 18) {
                    let (a, b) = (matrix(m, k, 1), matrix(k, n, 2));
                    let mut out = Array2::from_elem((m, n), f32::NAN);
                    if !matmul_bf16(a.view(), b.view(), &mut out.view_mut()) {
                        return; // no AVX512_BF16 here
                    }
                    assert_eq!(out, a.dot(&b), "({m}, {k}, {n})");
                }
            }
        }
        // Operands whose rows are not contiguous: `b` transposed, then `a`.
        let (a, b) = (matrix(33, 257, 3), matrix(31, 257, 4));
        let mut out = Array2::zeros((33, 31));
        if matmul_bf16(a.view(), b.t(), &mut out.view_mut()) {
            assert_eq!(out, a.dot(&b.t()));
        }
        let a_t = matrix(257, 33, 5);
        let mut out = Array2::zeros((33, 31));
        if matmul_bf16(a_t.t(), b.t(), &mut out.view_mut()) {
            assert_eq!(out, a_t.t().dot(&b.t()));
        }
    }

    /// Checks that the product of `a` and `b` in `E` is, bit for bit, the float32 product of
    /// their float32 copies: the kernel widens them as it packs them, exactly.
    fn check_widened<E: MatmulOperand>(a: ArrayView2<'_, E>, b: ArrayView2<'_, E>) {
        let ((m, k), n) = (a.dim(), b.dim().1);
        let mut got = Array2::from_elem((m, n), f32::NAN);
        let mut want = Array2::from_elem((m, n), f32::NAN);
        if !matmul(a, b, &mut got.view_mut()) {
            return; // no AVX2 and FMA here
        }
        assert!(matmul(a.mapv(E::widen).view(), b.mapv(E::widen).view(), &mut want.view_mut()));
        assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "({m}, {k}, {n})");
    }

    /// Runs `check_widened` on float16 and bfloat16 roundings of `a` and `b`.
    fn check_half(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>) {
        use crate::types::half::{bf16, f16};
        check_widened(a.mapv(f16::from_f32).view(), b.mapv(f16::from_f32).view());
        check_widened(a.mapv(bf16::from_f32).view(), b.mapv(bf16::from_f32).view());
    }

    #[test]
    fn half_precision_operands_are_widened_exactly_as_they_are_packed() {
        // Values of many bits, rounded differently by the two types.
        let matrix = |rows, cols, seed| matrix(rows, cols, seed).mapv(|x| x * 1.2345 + 0.0101);
        for m in SIZES {
            for n in SIZES {
                for k in SIZES.into_iter().filter(|&k| m * n * k <= 1 << 16) {
                    check_half(matrix(m, k, 1).view(), matrix(k, n, 2).view());
                }
            }
        }
        // Transposed, strided and broadcast operands; a product on both threads in two
        // blocks of `k`, whose float32 `b` would be read in place.
        let (m, k, n) = (33, 257, 31);
        let (a_t, b_t) = (matrix(k, m, 1), matrix(n, k, 2));
        check_half(a_t.t(), b_t.t());
        let (a_wide, b_wide) = (matrix(2 * m, 3 * k, 3), matrix(3 * k, 2 * n, 4));
        check_half(a_wide.slice(s![..;2, ..;3]), b_wide.slice(s![..;3, ..;2]));
        let (row, col) = (matrix(1, k, 5), matrix(k, 1, 6));
        check_half(row.broadcast((m, k)).unwrap(), col.broadcast((k, n)).unwrap());
        const { assert!(50 * 1100 * 64 >= PARALLEL_MIN && 1100 > KC && reads_b_in_place(50, 1100, 64)) };
        check_half(matrix(50, 1100, 9).view(), matrix(1100, 64, 10).view());
    }

    #[test]
    fn products_with_a_packed_b_match_the_reference_for_every_number_of_rows() {
        for (k, n) in [(1, 1), (17, 33), (300, 260), (1100, 40)] {
            let b = matrix(k, n, 7);
            let Some(packed) = PackedB::new(b.view()) else { return }; // no AVX2 and FMA here
            for m in [0, 1, 2, 3, 5, 6, 7, 8, 12, 13, 16, 24, 32, 40] {
                let a = matrix(m, k, 8);
                let mut out = Array2::from_elem((m, n), f32::NAN);
                packed.multiply(a.view(), &mut out.view_mut());
                let (a64, b64) = (a.mapv(f64::from), b.mapv(f64::from));
                let tolerance = a64.mapv(f64::abs).dot(&b64.mapv(f64::abs)) * k as f64 * f32::EPSILON as f64;
                let error = (out.mapv(f64::from) - a64.dot(&b64)).mapv(f64::abs);
                assert!(error.iter().zip(&tolerance).all(|(e, t)| e <= t), "({m}, {k}, {n})");
            }
        }
    }

    #[test]
    fn large_products_split_over_threads_and_column_chunks() {
        const { assert!(257 * 129 * 257 >= PARALLEL_MIN) };
        let mut out = Array2::zeros((257, 257));
        check(matrix(257, 129, 1).view(), matrix(129, 257, 2).view(), &mut out.view_mut());
        // A contiguous `b` of whole panels, read in place: in two blocks of `k`, and with the
        // tiles cut along columns only.
        const { assert!(50 * 1100 * 64 >= PARALLEL_MIN && 1100 > KC && reads_b_in_place(50, 1100, 64)) };
        let mut out = Array2::zeros((50, 64));
        check(matrix(50, 1100, 9).view(), matrix(1100, 64, 10).view(), &mut out.view_mut());
        const { assert!(33 * 700 * 320 >= PARALLEL_MIN && reads_b_in_place(33, 700, 320)) };
        let mut out = Array2::zeros((33, 320));
        check(matrix(33, 700, 11).view(), matrix(700, 320, 12).view(), &mut out.view_mut());
        // Four panels of `b` (the last one partial), packed two by two on the threads.
        const { assert!(130 * 520 * 100 >= PARALLEL_MIN) };
        let mut out = Array2::zeros((130, 100));
        check(matrix(130, 520, 7).view(), matrix(520, 100, 8).view(), &mut out.view_mut());
        // A few rows against many columns, in two blocks of `k`: tiles of columns sharing `a`.
        const { assert!(33 * 300 * 1100 >= PARALLEL_MIN && 33 <= MC && 1100 > KC) };
        let mut out = Array2::zeros((33, 300));
        check(matrix(33, 1100, 5).view(), matrix(1100, 300, 6).view(), &mut out.view_mut());
        let wide = PACKED_B_FLOATS / 256 + 40;
        let mut out = Array2::zeros((2, wide));
        check(matrix(2, 256, 3).view(), matrix(256, wide, 4).view(), &mut out.view_mut());
    }
}
