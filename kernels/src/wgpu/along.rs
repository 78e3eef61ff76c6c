//! Operations along one dimension: scan and softmax on the GPU (`gpu-shaders/scan.wgsl` and
//! `softmax.wgsl`), each one template specialised by kinds (and, for scans, operation and mode).
//!
//! Both work on lanes, the elements along the dimension at one position of the others, as
//! [`Along`] describes them: the other dimensions with size-one ones dropped and neighbours that
//! step as one merged, and threads sharing the lanes so that neighbouring threads read
//! neighbouring elements: several threads along a lane whose elements are contiguous (or when
//! there are few lanes), one thread a lane (neighbouring threads on neighbouring lanes) when
//! the lane runs across the innermost dimension. The results are contiguous in the input's
//! shape.

use std::sync::Arc;

use crate::backend::{Array, Device, Scan};
use crate::error::Result;
use crate::types::{DType, Shape};

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{GROUP, Kernel, groups_for, unsupported, word, words};
use super::memory::{memory_of, storage};

/// The scan family's WGSL template.
const SCAN: &str = include_str!("../../../gpu-shaders/scan.wgsl");

/// The softmax family's WGSL template.
const SOFTMAX: &str = include_str!("../../../gpu-shaders/softmax.wgsl");

/// The elements of one block of a block scan (four per thread).
const BLOCK: usize = 1024;

/// The lanes along one dimension of `x`, for a result contiguous in `x`'s shape: `lanes` of `n`
/// elements; the other dimensions (size, input stride, output stride), merged where both step
/// as one; the strides along the dimension.
#[derive(Clone, Debug)]
struct Along {
    lanes: usize,
    n: usize,
    offset: usize,
    in_step: usize,
    out_step: usize,
    kept: Vec<[usize; 3]>,
}

impl Along {
    /// The lanes along `dim` of `x` (one lane of one element for a zero-dimensional `x`).
    fn of(x: &Array, dim: usize) -> Along {
        let (shape, strides) = (&x.layout.shape, &x.layout.strides);
        let out_strides = shape.contiguous_strides();
        if dim >= shape.len() {
            // A zero-dimensional tensor: one lane of one element.
            return Along { lanes: 1, n: 1, offset: x.layout.offset, in_step: 0, out_step: 0, kept: Vec::new() };
        }
        let mut kept: Vec<[usize; 3]> = Vec::new();
        for d in (0..shape.len()).filter(|&d| d != dim && shape[d] != 1) {
            let (size, s, o) = (shape[d], strides[d], out_strides[d]);
            match kept.last_mut() {
                Some(last) if last[1] == s * size && last[2] == o * size => *last = [last[0] * size, s, o],
                _ => kept.push([size, s, o]),
            }
        }
        let lanes = (0..shape.len()).filter(|&d| d != dim).map(|d| shape[d]).product();
        Along { lanes, n: shape[dim], offset: x.layout.offset, in_step: strides[dim], out_step: out_strides[dim], kept }
    }

    /// Whether the lane's elements lie closer together than neighbouring lanes do, or there are
    /// too few lanes to keep the GPU busy one thread a lane.
    fn along_lanes(&self) -> bool {
        let nearest = self.kept.iter().map(|k| k[1]).min();
        self.lanes < 1024 || nearest.is_none_or(|k| self.in_step <= k)
    }

    /// The launch parameters, with `extra` (blocks or threads) as word 2.
    fn params(&self, extra: usize) -> Result<Vec<u32>> {
        let mut params =
            words([self.lanes, self.n, extra, self.kept.len(), self.offset, self.in_step, self.out_step, 0])?;
        for field in 0..3 {
            params.extend(words(self.kept.iter().map(|k| k[field]))?);
        }
        Ok(params)
    }
}

/// The three ways the scan kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One thread runs along each lane.
    Lane,
    /// One workgroup scans each block of a lane, writing the block's total when there are
    /// several.
    Block,
    /// Each block but a lane's first combines the running total of the blocks before it.
    AddPrefix,
}

/// The scan kernel for the running `op` in `acc` of elements stored as `input`, run in `mode`.
fn scan_kernel(op: Scan, acc: Kind, input: Kind, mode: Mode) -> Kernel {
    Kernel {
        name: "scan",
        template: SCAN,
        defines: vec![
            ("IN", input.stored().to_string()),
            ("ACC", acc.stored().to_string()),
            ("OP", if op == Scan::Sum { "+" } else { "*" }.to_string()),
            ("ONE", if op == Scan::Sum { "0" } else { "1" }.to_string()),
            ("LOAD", input.convert("src[p]", acc)),
            (
                "MODE",
                match mode {
                    Mode::Lane => "lane_scan",
                    Mode::Block => "block_scan",
                    Mode::AddPrefix => "add_prefix",
                }
                .to_string(),
            ),
        ],
        writes: vec![false, true, true],
    }
}

/// The running `op` along `dim` of `x`, in `dtype` (float32 or int32): a contiguous array of
/// `x`'s shape.
///
/// Along a dimension whose lanes are contiguous (or when there are few lanes), each block of
/// 1024 elements of a lane is scanned by one workgroup; when a lane has more than one block,
/// the blocks' totals are scanned (by this same function) and each block then combines the
/// total of the blocks before it. Otherwise one thread runs along each lane.
pub fn scan(context: &Arc<Context>, device: Device, x: &Array, dim: usize, op: Scan, dtype: DType) -> Result<Array> {
    let acc = Kind::of(dtype);
    if acc == Kind::Bool {
        return Err(unsupported("scan", "a scan of bools"));
    }
    let func = if op == Scan::Sum { "cumsum" } else { "cumprod" };
    let shape = x.layout.shape.clone();
    let numel = shape.checked_numel().ok_or_else(|| unsupported("scan", "a shape too large"))?;
    let out = context.alloc(func, numel)?;
    let result = Array::contiguous(storage(device, out), shape, acc.dtype());
    if numel == 0 {
        return Ok(result);
    }
    let along = Along::of(x, dim);
    let input = Kind::of(x.dtype);
    let source = memory_of(&x.storage)?.buffer();
    let target = memory_of(&result.storage)?.buffer();
    let blocks = along.n.div_ceil(BLOCK);
    if along.n <= 32 || !along.along_lanes() {
        let scratch = context.alloc(func, 1)?;
        let kernel = scan_kernel(op, acc, input, Mode::Lane);
        let buffers = [source, target, scratch.buffer()];
        context.launch(&kernel, &along.params(blocks)?, &buffers, groups_for(along.lanes, GROUP)?)?;
        return Ok(result);
    }
    let groups = along.lanes.checked_mul(blocks).ok_or_else(|| unsupported("scan", "too many blocks"))?;
    let params = along.params(blocks)?;
    let totals = context.alloc(func, if blocks > 1 { groups } else { 1 })?;
    let buffers = [source, target, totals.buffer()];
    context.launch(&scan_kernel(op, acc, input, Mode::Block), &params, &buffers, word(groups)?)?;
    if blocks > 1 {
        let totals = Array::contiguous(storage(device, totals), Shape::from([along.lanes, blocks]), acc.dtype());
        let running = scan(context, device, &totals, 1, op, acc.dtype())?;
        let buffers = [source, target, memory_of(&running.storage)?.buffer()];
        let groups = word(along.lanes * (blocks - 1))?;
        context.launch(&scan_kernel(op, acc, input, Mode::AddPrefix), &params, &buffers, groups)?;
    }
    Ok(result)
}

/// The softmax kernel for elements stored as `input` (a log-softmax when `log`).
fn softmax_kernel(input: Kind, log: bool) -> Kernel {
    Kernel {
        name: "softmax",
        template: SOFTMAX,
        defines: vec![
            ("IN", input.stored().to_string()),
            ("LOAD", input.convert("src[p]", Kind::F32)),
            ("LOG", log.to_string()),
        ],
        writes: vec![false, true],
    }
}

/// The softmax (`log` false) or log-softmax of `x` along `dim`, in float32: a contiguous array
/// of `x`'s shape. Each lane is one workgroup's (or, along a dimension that is not the
/// innermost, one thread's, neighbouring threads on neighbouring lanes).
pub fn softmax(
    context: &Arc<Context>,
    device: Device,
    x: &Array,
    dim: usize,
    log: bool,
    dtype: DType,
) -> Result<Array> {
    let kind = Kind::of(dtype);
    if kind != Kind::F32 {
        return Err(unsupported("softmax", format!("a softmax in {dtype}")));
    }
    let func = if log { "log_softmax" } else { "softmax" };
    let shape = x.layout.shape.clone();
    let numel = shape.checked_numel().ok_or_else(|| unsupported("softmax", "a shape too large"))?;
    let out = context.alloc(func, numel)?;
    let result = Array::contiguous(storage(device, out), shape, DType::Float32);
    if numel == 0 {
        return Ok(result);
    }
    let along = Along::of(x, dim);
    let threads = if along.along_lanes() { along.n.next_power_of_two().clamp(1, GROUP as usize) } else { 1 };
    let total = along.lanes.checked_mul(threads).ok_or_else(|| unsupported("softmax", "too many lanes"))?;
    let buffers = [memory_of(&x.storage)?.buffer(), memory_of(&result.storage)?.buffer()];
    let kernel = softmax_kernel(Kind::of(x.dtype), log);
    context.launch(&kernel, &along.params(threads)?, &buffers, groups_for(total, GROUP)?)?;
    Ok(result)
}

/// Every specialisation scan and softmax can make, for the shader validation test.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    let kinds = [Kind::F32, Kind::I32, Kind::Bool];
    let mut kernels = Vec::new();
    for op in [Scan::Sum, Scan::Prod] {
        for acc in [Kind::F32, Kind::I32] {
            for input in kinds {
                for mode in [Mode::Lane, Mode::Block, Mode::AddPrefix] {
                    kernels.push(scan_kernel(op, acc, input, mode));
                }
            }
        }
    }
    for input in kinds {
        for log in [false, true] {
            kernels.push(softmax_kernel(input, log));
        }
    }
    kernels
}

/// Scans and softmax against the CPU backend, on whatever adapter the machine has (Mesa's
/// lavapipe without a GPU); skipped where there is none.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::backend::host::array;
    use crate::cpu::CPU;
    use crate::types::Layout;
    use crate::wgpu::context_of;
    use crate::wgpu::testing::{
        assert_close, bools, draws, gentle_floats, gpu, layout, small_floats, small_ints, to_gpu, values, views,
    };

    /// The running `op` along `dim` of the view, on the GPU and on the CPU: same shape, dtype and
    /// values.
    fn check_scan(device: Device, host: &Array, gpu: &Array, dim: usize, op: Scan, dtype: DType) {
        let context = context_of(device).unwrap();
        let what = format!("{op:?} along {dim} of {:?} {:?} as {dtype}", host.dtype, host.layout);
        let want = CPU.scan(host, dim, op, dtype).unwrap();
        let got = scan(&context, device, gpu, dim, op, dtype).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.layout.shape, host.layout.shape, "{what}: shape");
        assert_eq!(got.dtype, Kind::of(dtype).dtype(), "{what}: dtype");
        assert_close(&values(&got), &values(&want), 0.0, &what);
    }

    #[test]
    fn scans_along_each_dimension_match_the_cpu() {
        let Some(device) = gpu() else { return };
        let n = 5 * 7 * 300;
        let floats = array(small_floats(n, 13), Shape::from([n]));
        let gentle = array(gentle_floats(n, 14, 30), Shape::from([n]));
        let ints = array(small_ints(n, 15), Shape::from([n]));
        let flags = array(bools(n, 16, 2), Shape::from([n]));
        let layouts = [
            Layout::contiguous(Shape::from([5, 7, 300])),
            layout(&[300, 5, 7], &[1, 2100, 300], 0),
            layout(&[5, 3, 300], &[2100, 0, 1], 0),
            layout(&[4, 7, 250], &[2100, 300, 1], 2150),
        ];
        for layout in &layouts {
            let (hf, gf) = views(device, &floats, layout);
            let (hg, gg) = views(device, &gentle, layout);
            let (hi, gi) = views(device, &ints, layout);
            let (hb, gb) = views(device, &flags, layout);
            for dim in 0..3 {
                check_scan(device, &hf, &gf, dim, Scan::Sum, DType::Float32);
                check_scan(device, &hg, &gg, dim, Scan::Prod, DType::Float32);
                check_scan(device, &hi, &gi, dim, Scan::Sum, DType::Int32);
                check_scan(device, &hi, &gi, dim, Scan::Prod, DType::Int32);
                check_scan(device, &hb, &gb, dim, Scan::Sum, DType::Int32);
                check_scan(device, &hi, &gi, dim, Scan::Sum, DType::Float32);
            }
        }
    }

    #[test]
    fn long_scans_combine_the_totals_of_their_blocks() {
        let Some(device) = gpu() else { return };
        for (shape, dim) in [([3usize, 5000], 1), ([2, 1_100_000], 1), ([5000, 3], 0), ([1, 40], 1)] {
            let n = shape[0] * shape[1];
            let layout = Layout::contiguous(Shape::from(shape));
            let ints = array(small_ints(n, 17), Shape::from([n]));
            let (h, g) = views(device, &ints, &layout);
            check_scan(device, &h, &g, dim, Scan::Sum, DType::Int32);
            check_scan(device, &h, &g, dim, Scan::Prod, DType::Int32);
            let floats = array(draws(n, 3, 18).into_iter().map(|d| d as f32).collect(), Shape::from([n]));
            let (h, g) = views(device, &floats, &layout);
            check_scan(device, &h, &g, dim, Scan::Sum, DType::Float32);
        }
        let context = context_of(device).unwrap();
        let empty = to_gpu(device, &array(Vec::<i32>::new(), Shape::from([0, 3])));
        assert_eq!(scan(&context, device, &empty, 1, Scan::Sum, DType::Int32).unwrap().layout.shape, [0, 3]);
    }

    /// The softmax (or log-softmax) along `dim` of the view, on the GPU and on the CPU: same
    /// shape and dtype, values within 2e-6.
    fn check_softmax(device: Device, host: &Array, gpu: &Array, dim: usize, log: bool) {
        let context = context_of(device).unwrap();
        let what = format!("softmax (log: {log}) along {dim} of {:?}", host.layout);
        let want = CPU.softmax(host, dim, log, DType::Float32).unwrap();
        let got = softmax(&context, device, gpu, dim, log, DType::Float32).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.layout.shape, host.layout.shape, "{what}: shape");
        assert_eq!(got.dtype, DType::Float32);
        assert_close(&values(&got), &values(&want), 2e-6, &what);
    }

    #[test]
    fn softmax_along_every_dimension_matches_the_cpu() {
        let Some(device) = gpu() else { return };
        let n = 4 * 6 * 50;
        let mut data: Vec<f32> = draws(n, 2001, 19).into_iter().map(|d| (d as f32 - 1000.0) / 100.0).collect();
        // Lanes along the last dimension: one with -inf elements, one with NaN, one with +inf,
        // one of -inf only, one of large values; the others meet them along other dimensions.
        data[10] = f32::NEG_INFINITY;
        data[17] = f32::NEG_INFINITY;
        data[60] = f32::NAN;
        data[130] = f32::INFINITY;
        data[150..200].fill(f32::NEG_INFINITY);
        for (k, v) in data[200..250].iter_mut().enumerate() {
            *v = 1000.0 - k as f32 * 0.5;
        }
        data[1111] = f32::NEG_INFINITY;
        let base = array(data, Shape::from([n]));
        let ints = array(small_ints(n, 20), Shape::from([n]));
        let layouts = [
            Layout::contiguous(Shape::from([4, 6, 50])),
            layout(&[50, 4, 6], &[1, 300, 50], 0),
            layout(&[4, 3, 50], &[300, 0, 1], 0),
        ];
        for layout in &layouts {
            let (h, g) = views(device, &base, layout);
            let (hi, gi) = views(device, &ints, layout);
            for dim in 0..3 {
                for log in [false, true] {
                    check_softmax(device, &h, &g, dim, log);
                    check_softmax(device, &hi, &gi, dim, log);
                }
            }
        }
        // Long lanes (a workgroup a lane) and many short ones across the innermost dimension.
        let long = array(draws(20_000, 1000, 21).into_iter().map(|d| d as f32 / 10.0).collect(), Shape::from([20_000]));
        for (shape, dim) in [([2usize, 10_000], 1), ([2, 10_000], 0), ([2000, 10], 0), ([10, 2000], 1)] {
            let (h, g) = views(device, &long, &Layout::contiguous(Shape::from(shape)));
            check_softmax(device, &h, &g, dim, false);
            check_softmax(device, &h, &g, dim, true);
        }
    }
}
