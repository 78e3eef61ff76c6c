//! Reductions on the GPU (`gpu-shaders/reduce.wgsl`): one template specialised by operation
//! and kinds.
//!
//! Each output element folds one lane: the elements of the reduced dimensions at one position
//! of the others. The host permutes the layout's sizes and strides (no copy) so the lane's
//! dimensions come last, drops size-one dimensions and merges neighbours that step as one, and
//! picks how threads share the lanes so that neighbouring threads read neighbouring elements:
//! several threads along a lane whose elements are contiguous, one thread a lane (neighbouring
//! threads on neighbouring lanes) when the lane runs across the innermost dimension.

use std::sync::Arc;

use crate::backend::{Array, Device, Reduce};
use crate::error::Result;
use crate::types::{DType, Shape};

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{GROUP, Kernel, groups_for, unsupported, words};
use super::memory::{GpuMemory, memory_of, storage};

/// The family's WGSL template.
const TEMPLATE: &str = include_str!("../../../gpu-shaders/reduce.wgsl");

/// The most threads that share one lane (the workgroup size).
const THREADS: usize = GROUP as usize;

/// Aim for at least this many threads in one reduction launch when splitting long lanes.
const OCCUPANCY: usize = 1 << 17;

/// WGSL converting `value`, an element stored as `from`, to the type `to` computes in here:
/// [`Kind::convert`]'s, except that bools compute as the `u32` 0 or 1.
fn converted(value: &str, from: Kind, to: Kind) -> String {
    match to {
        Kind::Bool => format!("select(0u, 1u, {})", from.convert(value, Kind::Bool)),
        Kind::F32 | Kind::I32 => from.convert(value, to),
    }
}

/// What a reduction folds with, once the operation and dtype are settled: bools turn sums and
/// maxima into `Any`, products and minima into `All`; a mean is a sum divided at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fold {
    Sum,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
    All,
    Any,
}

impl Fold {
    /// Whether the fold gives a position (argmax, argmin) rather than a value.
    fn is_arg(self) -> bool {
        matches!(self, Fold::ArgMax | Fold::ArgMin)
    }
}

/// The fold of `op` read as `kind`, the kind it accumulates in, and whether it is a mean.
fn plan(op: Reduce, kind: Kind) -> Result<(Fold, Kind, bool)> {
    Ok(match (op, kind) {
        (Reduce::All, _) => (Fold::All, Kind::Bool, false),
        (Reduce::Any, _) => (Fold::Any, Kind::Bool, false),
        (Reduce::Sum | Reduce::Max, Kind::Bool) => (Fold::Any, Kind::Bool, false),
        (Reduce::Prod | Reduce::Min, Kind::Bool) => (Fold::All, Kind::Bool, false),
        (Reduce::Mean, Kind::F32) => (Fold::Sum, Kind::F32, true),
        (Reduce::Mean, _) => return Err(unsupported("reduce", format!("the mean of {:?}", kind.dtype()))),
        (Reduce::Sum, _) => (Fold::Sum, kind, false),
        (Reduce::Prod, _) => (Fold::Prod, kind, false),
        (Reduce::Max, _) => (Fold::Max, kind, false),
        (Reduce::Min, _) => (Fold::Min, kind, false),
        (Reduce::ArgMax, _) => (Fold::ArgMax, kind, false),
        (Reduce::ArgMin, _) => (Fold::ArgMin, kind, false),
    })
}

/// What the text of one reduction kernel depends on.
#[derive(Clone, Copy, Debug)]
struct ReduceSpec {
    /// What values fold with.
    fold: Fold,
    /// The kind values fold in.
    acc: Kind,
    /// The kind the source stores (the accumulator's, for partials).
    input: Kind,
    /// Whether the source is the partials of an earlier launch.
    partial_in: bool,
    /// Whether this launch writes partials (another launch follows).
    partial_out: bool,
    /// Whether the result is divided by the lane length (a mean).
    mean: bool,
    /// Whether the lane is one (merged) dimension: no division to locate an element.
    simple: bool,
}

impl ReduceSpec {
    /// The kernel of this specialisation.
    fn kernel(&self) -> Kernel {
        let arg = self.fold.is_arg();
        let acc = self.acc;
        let mut bindings = vec![format!("var<storage, read> src: array<{}>;", self.input.stored())];
        if self.partial_in && arg {
            bindings.push("var<storage, read> src_index: array<u32>;".into());
        }
        let reads = bindings.len();
        let store = if self.partial_out {
            bindings.push(format!("var<storage, read_write> dst: array<{}>;", acc.stored()));
            if arg {
                bindings.push("var<storage, read_write> dst_index: array<u32>;".into());
                "dst[slot] = a.v;\n    dst_index[slot] = a.i;".to_string()
            } else {
                "dst[slot] = a.v;".to_string()
            }
        } else if arg {
            bindings.push("var<storage, read_write> dst: array<i32>;".into());
            "dst[slot] = select(i32(a.i), 0, a.i == NONE);".to_string()
        } else if self.mean {
            bindings.push("var<storage, read_write> dst: array<f32>;".into());
            "dst[slot] = select(a.v / f32(params[4]), nan(), params[4] == 0u);".to_string()
        } else {
            bindings.push(format!("var<storage, read_write> dst: array<{}>;", acc.stored()));
            "dst[slot] = a.v;".to_string()
        };
        let writes: Vec<bool> = (0..bindings.len()).map(|b| b >= reads).collect();
        let bindings: Vec<String> =
            bindings.iter().enumerate().map(|(b, text)| format!("@group(0) @binding({}) {text}", b + 1)).collect();
        let load = if self.partial_in {
            format!("return Pair(src[p], {});", if arg { "src_index[p]" } else { "i" })
        } else {
            format!("return Pair({}, i);", converted("src[p]", self.input, acc))
        };
        // `first_f32`, `first_i32` or `first_u32` (bools): the library function for the kind.
        let name = acc.stored();
        let combine = match (self.fold, acc) {
            (Fold::Sum, _) => "return Pair(a.v + b.v, 0u);".to_string(),
            (Fold::Prod, _) => "return Pair(a.v * b.v, 0u);".to_string(),
            (Fold::Max, Kind::F32) => "return Pair(max_f32(a.v, b.v), 0u);".to_string(),
            (Fold::Min, Kind::F32) => "return Pair(min_f32(a.v, b.v), 0u);".to_string(),
            (Fold::Max, _) => "return Pair(max(a.v, b.v), 0u);".to_string(),
            (Fold::Min, _) => "return Pair(min(a.v, b.v), 0u);".to_string(),
            (Fold::All, _) => "return Pair(a.v & b.v, 0u);".to_string(),
            (Fold::Any, _) => "return Pair(a.v | b.v, 0u);".to_string(),
            (Fold::ArgMax | Fold::ArgMin, _) => format!(
                "if (first_{name}(a.v, a.i, b.v, b.i, {})) {{\n        return a;\n    }}\n    return b;",
                self.fold == Fold::ArgMax
            ),
        };
        let identity = match (self.fold, acc) {
            (Fold::Sum, Kind::F32) => "0.0",
            (Fold::Sum, _) => "0",
            (Fold::Prod, Kind::F32) => "1.0",
            (Fold::Prod, _) => "1",
            (Fold::Max | Fold::ArgMax, Kind::F32) => "-infinity()",
            (Fold::Max | Fold::ArgMax, Kind::I32) => "bitcast<i32>(0x80000000u)",
            (Fold::Min | Fold::ArgMin, Kind::F32) => "infinity()",
            (Fold::Min | Fold::ArgMin, Kind::I32) => "bitcast<i32>(0x7fffffffu)",
            (Fold::Max | Fold::ArgMax | Fold::Any, Kind::Bool) => "0u",
            (Fold::Min | Fold::ArgMin | Fold::All, Kind::Bool) => "1u",
            (Fold::All | Fold::Any, _) => "0u",
        };
        let locate = if self.simple {
            "return vec2<u32>(base + j * params[r + 1u], j * params[r + 2u]);".to_string()
        } else {
            [
                "var rest = j;",
                "var p = base;",
                "var i = 0u;",
                "for (var d = rn; d > 0u; d = d - 1u) {",
                "    let size = params[r + d - 1u];",
                "    let c = rest % size;",
                "    rest = rest / size;",
                "    p = p + c * params[r + rn + d - 1u];",
                "    i = i + c * params[r + 2u * rn + d - 1u];",
                "}",
                "return vec2<u32>(p, i);",
            ]
            .join("\n    ")
        };
        Kernel {
            name: "reduce",
            template: TEMPLATE,
            defines: vec![
                ("BINDINGS", bindings.join("\n")),
                ("ACC", acc.stored().to_string()),
                ("IDENTITY", identity.to_string()),
                ("COMBINE", combine),
                ("LOAD", load),
                ("STORE", store),
                ("LOCATE", locate),
            ],
            writes,
        }
    }
}

/// The lanes of one reduction launch: `lanes` of `n` elements each, the kept dimensions
/// (size, stride; row-major order of the result) and the reduced ones (size, stride, stride
/// of the position in the lane), ordered by storage stride, largest first.
#[derive(Clone, Debug)]
struct Geometry {
    lanes: usize,
    n: usize,
    offset: usize,
    kept: Vec<[usize; 2]>,
    reduced: Vec<[usize; 3]>,
}

impl Geometry {
    /// The lanes of `dims` of `x`.
    fn of(x: &Array, dims: &[usize]) -> Result<Geometry> {
        let (shape, strides) = (&x.layout.shape, &x.layout.strides);
        let too_large = || unsupported("reduce", "a tensor with more elements than a usize counts");
        let mut kept: Vec<[usize; 2]> = Vec::new();
        let mut lanes = 1usize;
        for d in (0..shape.len()).filter(|d| !dims.contains(d)) {
            lanes = lanes.checked_mul(shape[d]).ok_or_else(too_large)?;
            if shape[d] == 1 {
                continue;
            }
            match kept.last_mut() {
                Some(last) if strides[d].checked_mul(shape[d]) == Some(last[1]) => {
                    *last = [last[0] * shape[d], strides[d]]
                }
                _ => kept.push([shape[d], strides[d]]),
            }
        }
        // The position of each reduced coordinate in the lane, row-major over `dims`.
        let mut reduced: Vec<[usize; 3]> = Vec::new();
        let mut n = 1usize;
        for &d in dims.iter().rev() {
            if shape[d] != 1 {
                reduced.push([shape[d], strides[d], n]);
            }
            n = n.checked_mul(shape[d]).ok_or_else(too_large)?;
        }
        if lanes == 0 {
            n = 0;
        }
        // Visit the lane in storage order (largest stride outermost): the position in the lane
        // travels with each element, so the order does not change the result.
        reduced.reverse();
        reduced.sort_by(|a, b| b[1].cmp(&a[1]));
        let mut merged: Vec<[usize; 3]> = Vec::new();
        for r in reduced {
            match merged.last_mut() {
                Some(last) if last[1] == r[1] * r[0] && last[2] == r[2] * r[0] => {
                    *last = [last[0] * r[0], r[1], r[2]];
                }
                _ => merged.push(r),
            }
        }
        if merged.is_empty() {
            merged.push([n, 0, 0]);
        }
        Ok(Geometry { lanes, n, offset: x.layout.offset, kept, reduced: merged })
    }

    /// The lanes of partials `[chunks, lanes]` written by an earlier launch.
    fn partials(lanes: usize, chunks: usize) -> Geometry {
        let kept = if lanes > 1 { vec![[lanes, 1]] } else { Vec::new() };
        Geometry { lanes, n: chunks, offset: 0, kept, reduced: vec![[chunks, lanes, 1]] }
    }

    /// Whether neighbouring threads should share a lane: its innermost elements lie closer
    /// together than neighbouring lanes do (or there is one lane).
    fn along_lanes(&self) -> bool {
        let inner = self.reduced.last().map_or(0, |r| r[1]);
        self.kept.last().is_none_or(|k| inner <= k[1])
    }

    /// Threads per lane piece and pieces per lane, with at most `per` elements a thread when a
    /// lane is split.
    fn split(&self, per: usize) -> (usize, usize) {
        let threads = if self.along_lanes() { self.n.next_power_of_two().clamp(1, THREADS) } else { 1 };
        if self.n.div_ceil(threads) <= per {
            return (threads, 1);
        }
        let each = self.lanes.saturating_mul(self.n).div_ceil(OCCUPANCY).clamp(16, per);
        (threads, self.n.div_ceil(threads * each))
    }

    /// The launch parameters.
    fn params(&self, chunks: usize, threads: usize, count: usize) -> Result<Vec<u32>> {
        let mut params =
            words([self.lanes, self.n, chunks, threads, count, self.kept.len(), self.reduced.len(), self.offset])?;
        params.extend(words(self.kept.iter().map(|k| k[0]))?);
        params.extend(words(self.kept.iter().map(|k| k[1]))?);
        for field in 0..3 {
            params.extend(words(self.reduced.iter().map(|r| r[field]))?);
        }
        Ok(params)
    }
}

/// The function name in error messages about `op`.
fn reduce_name(op: Reduce) -> &'static str {
    match op {
        Reduce::Sum => "sum",
        Reduce::Prod => "prod",
        Reduce::Mean => "mean",
        Reduce::Max => "amax",
        Reduce::Min => "amin",
        Reduce::ArgMax => "argmax",
        Reduce::ArgMin => "argmin",
        Reduce::All => "all",
        Reduce::Any => "any",
    }
}

/// `op` over the dimensions `dims` (sorted, distinct) of `x`, read as `dtype`: a contiguous
/// array of `x`'s other dimensions, of dtype `op.output(kind, int32)`.
///
/// Each output element folds one lane. Short lanes take one launch; long ones are split into
/// pieces folded by separate workgroups, whose partials (value and position, for arg
/// reductions) a second launch folds, and so on until one piece a lane is left.
pub fn reduce(
    context: &Arc<Context>,
    device: Device,
    x: &Array,
    dims: &[usize],
    op: Reduce,
    dtype: DType,
) -> Result<Array> {
    let kind = Kind::of(dtype);
    let (fold, acc, mean) = plan(op, kind)?;
    let out_dtype = op.output(kind.dtype(), DType::Int32);
    let func = reduce_name(op);
    if let Some(&d) = dims.iter().find(|&&d| d >= x.layout.ndim()) {
        return Err(unsupported("reduce", format!("dimension {d} of a {}-dimensional tensor", x.layout.ndim())));
    }
    let shape: Shape = x.layout.shape.iter().enumerate().filter(|(d, _)| !dims.contains(d)).map(|(_, &s)| s).collect();
    let mut geometry = Geometry::of(x, dims)?;
    let out = context.alloc(func, geometry.lanes)?;
    if geometry.lanes == 0 {
        return Ok(Array::contiguous(storage(device, out), shape, out_dtype));
    }
    let count = geometry.n;
    // Floats that add or multiply keep each thread's running fold short, for accuracy.
    let per = if acc == Kind::F32 && matches!(fold, Fold::Sum | Fold::Prod) { 64 } else { 256 };
    let arg = fold.is_arg();
    let source = memory_of(&x.storage)?;
    let mut partials: Option<(GpuMemory, Option<GpuMemory>)> = None;
    loop {
        let (threads, chunks) = geometry.split(per);
        let last = chunks == 1;
        let spec = ReduceSpec {
            fold,
            acc,
            input: if partials.is_some() { acc } else { Kind::of(x.dtype) },
            partial_in: partials.is_some(),
            partial_out: !last,
            mean,
            simple: geometry.reduced.len() == 1,
        };
        let slots = geometry.lanes.checked_mul(chunks).ok_or_else(|| unsupported("reduce", "too many partials"))?;
        let next = if last {
            None
        } else {
            Some((context.alloc(func, slots)?, if arg { Some(context.alloc(func, slots)?) } else { None }))
        };
        // What this launch reads, then what it writes: the input or the partials before, the
        // output or the partials after (values, and positions for arg reductions).
        let mut buffers: Vec<&wgpu::Buffer> = Vec::new();
        for (partial, whole) in [(&partials, source), (&next, &out)] {
            match partial {
                None => buffers.push(whole.buffer()),
                Some((values, indices)) => {
                    buffers.push(values.buffer());
                    buffers.extend(indices.as_ref().map(GpuMemory::buffer));
                }
            }
        }
        let total = slots.checked_mul(threads).filter(|&t| geometry.n.saturating_add(t) <= u32::MAX as usize);
        let total = total.ok_or_else(|| unsupported("reduce", "more threads than one launch can number"))?;
        let params = geometry.params(chunks, threads, count)?;
        context.launch(&spec.kernel(), &params, &buffers, groups_for(total, GROUP)?)?;
        if last {
            return Ok(Array::contiguous(storage(device, out), shape, out_dtype));
        }
        // The partials hold the pieces of each lane; the buffers they came from may be reused
        // (wgpu orders the launches that use them).
        partials = next;
        geometry = Geometry::partials(geometry.lanes, chunks);
    }
}

/// Every reduction, for the shader validation test and the kernel tests.
#[cfg(test)]
const EVERY_OP: [Reduce; 9] = [
    Reduce::Sum,
    Reduce::Prod,
    Reduce::Mean,
    Reduce::Max,
    Reduce::Min,
    Reduce::ArgMax,
    Reduce::ArgMin,
    Reduce::All,
    Reduce::Any,
];

/// Every specialisation this family can make, for the shader validation test.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    let kinds = [Kind::F32, Kind::I32, Kind::Bool];
    let mut kernels = Vec::new();
    for op in EVERY_OP {
        for kind in kinds {
            let Ok((fold, acc, mean)) = plan(op, kind) else { continue };
            for simple in [false, true] {
                for partial_out in [false, true] {
                    for input in kinds {
                        let spec = ReduceSpec { fold, acc, input, partial_in: false, partial_out, mean, simple };
                        kernels.push(spec.kernel());
                    }
                    let spec = ReduceSpec { fold, acc, input: acc, partial_in: true, partial_out, mean, simple };
                    kernels.push(spec.kernel());
                }
            }
        }
    }
    kernels
}

/// The reduction kernel against the CPU backend, on whatever adapter the machine has (Mesa's lavapipe
/// without a GPU); skipped where there is none.
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

    /// The reductions of float32: all of them.
    const FLOAT_OPS: [Reduce; 9] = EVERY_OP;
    /// The reductions of int32 and bool: all but the mean.
    const INT_OPS: [Reduce; 8] =
        [Reduce::Sum, Reduce::Prod, Reduce::Max, Reduce::Min, Reduce::ArgMax, Reduce::ArgMin, Reduce::All, Reduce::Any];

    /// `op` over `dims` of the view, on the GPU and on the CPU: same shape, dtype and values.
    fn check_reduce(device: Device, host: &Array, gpu: &Array, dims: &[usize], op: Reduce, dtype: DType, tol: f64) {
        let context = context_of(device).unwrap();
        let what = format!("{op:?} over {dims:?} of {:?} {:?} as {dtype}", host.dtype, host.layout);
        let want = CPU.reduce(host, dims, op, dtype).unwrap();
        let got = reduce(&context, device, gpu, dims, op, dtype).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.layout.shape, want.layout.shape, "{what}: shape");
        assert_eq!(got.dtype, op.output(Kind::of(dtype).dtype(), DType::Int32), "{what}: dtype");
        assert!(got.layout.is_contiguous(), "{what}: contiguous");
        assert_close(&values(&got), &values(&want), tol, &what);
    }

    /// Every subset of the dimensions `0..ndim`, sorted.
    fn subsets(ndim: usize) -> Vec<Vec<usize>> {
        (0..1usize << ndim).map(|m| (0..ndim).filter(|d| m & (1 << d) != 0).collect()).collect()
    }

    /// The views of a base of 120 elements the dims tests reduce: contiguous, permuted, with an
    /// offset, expanded along the leading and the middle dimension.
    fn layouts() -> Vec<Layout> {
        vec![
            Layout::contiguous(Shape::from([4, 5, 6])),
            layout(&[6, 4, 5], &[1, 30, 6], 0),
            layout(&[3, 5, 3], &[30, 6, 1], 32),
            layout(&[4, 5, 6], &[0, 6, 1], 0),
            layout(&[5, 3, 6], &[6, 0, 1], 0),
            layout(&[5, 2, 4], &[1, 60, 5], 3),
        ]
    }

    #[test]
    fn reductions_over_any_dimensions_of_any_layout_match_the_cpu() {
        let Some(device) = gpu() else { return };
        let floats = array(small_floats(120, 1), Shape::from([120]));
        let gentle = array(gentle_floats(120, 2, 20), Shape::from([120]));
        let ints = array(small_ints(120, 3), Shape::from([120]));
        let flags = array(bools(120, 4, 3), Shape::from([120]));
        for layout in layouts() {
            let (hf, gf) = views(device, &floats, &layout);
            let (hg, gg) = views(device, &gentle, &layout);
            let (hi, gi) = views(device, &ints, &layout);
            let (hb, gb) = views(device, &flags, &layout);
            for dims in subsets(3) {
                for op in FLOAT_OPS {
                    let (h, g) = if op == Reduce::Prod { (&hg, &gg) } else { (&hf, &gf) };
                    check_reduce(device, h, g, &dims, op, DType::Float32, 1e-6);
                }
                for op in INT_OPS {
                    check_reduce(device, &hi, &gi, &dims, op, DType::Int32, 0.0);
                    check_reduce(device, &hb, &gb, &dims, op, DType::Bool, 0.0);
                }
                // Bools read as int32: sums count them.
                for op in [Reduce::Sum, Reduce::Prod, Reduce::Max, Reduce::ArgMin] {
                    check_reduce(device, &hb, &gb, &dims, op, DType::Int32, 0.0);
                }
                // Ints read as float32, floats as int32.
                check_reduce(device, &hi, &gi, &dims, Reduce::Mean, DType::Float32, 1e-6);
                check_reduce(device, &hf, &gf, &dims, Reduce::Sum, DType::Int32, 0.0);
            }
        }
    }

    #[test]
    fn full_reductions_of_300_000_elements_take_two_launches_and_match_the_cpu() {
        let Some(device) = gpu() else { return };
        let n = 300_000;
        let shape = Shape::from([n]);
        let mut floats = small_floats(n, 5);
        let gentle = array(gentle_floats(n, 6, 20), shape.clone());
        let ints = array(small_ints(n, 7), shape.clone());
        let sparse = array(bools(n, 8, 100_000), shape.clone());
        let dense = array(bools(n, 9, 2), shape.clone());
        let trues = array(vec![true; n], shape.clone());
        let plain = array(floats.clone(), shape.clone());
        floats[123_456] = f32::NAN;
        floats[200_000] = f32::NAN;
        let nans = array(floats, shape.clone());
        let contiguous = Layout::contiguous(shape);
        let geometry = Geometry::of(&plain, &[0]).unwrap();
        assert!(geometry.split(64).1 > 1, "a lane of {n} is split");
        for op in FLOAT_OPS {
            let base = if op == Reduce::Prod { &gentle } else { &plain };
            let (h, g) = views(device, base, &contiguous);
            check_reduce(device, &h, &g, &[0], op, DType::Float32, 1e-6);
            let (h, g) = views(device, &nans, &contiguous);
            check_reduce(device, &h, &g, &[0], op, DType::Float32, 1e-6);
        }
        let (h, g) = views(device, &ints, &contiguous);
        for op in INT_OPS {
            check_reduce(device, &h, &g, &[0], op, DType::Int32, 0.0);
        }
        for base in [&sparse, &dense, &trues] {
            let (h, g) = views(device, base, &contiguous);
            for op in INT_OPS {
                check_reduce(device, &h, &g, &[0], op, DType::Bool, 0.0);
            }
            for op in [Reduce::Sum, Reduce::ArgMax, Reduce::ArgMin] {
                check_reduce(device, &h, &g, &[0], op, DType::Int32, 0.0);
            }
        }
    }

    #[test]
    fn long_and_short_lanes_along_and_across_the_innermost_dimension_match_the_cpu() {
        let Some(device) = gpu() else { return };
        let floats = array(small_floats(100_000, 10), Shape::from([100_000]));
        let ints = array(small_ints(100_000, 11), Shape::from([100_000]));
        let cases: Vec<(Layout, Vec<usize>)> = vec![
            (Layout::contiguous(Shape::from([3000, 7])), vec![0]),
            (Layout::contiguous(Shape::from([7, 3000])), vec![1]),
            (Layout::contiguous(Shape::from([10_000, 10])), vec![1]),
            (Layout::contiguous(Shape::from([10, 10_000])), vec![0]),
            (Layout::contiguous(Shape::from([3, 30_000])), vec![0]),
            (Layout::contiguous(Shape::from([3, 30_000])), vec![1]),
            (Layout::contiguous(Shape::from([32, 48, 40])), vec![0, 2]),
            (layout(&[40, 32, 48], &[1, 1920, 40], 0), vec![0, 1]),
            (layout(&[40, 32, 48], &[1, 1920, 40], 0), vec![1, 2]),
            (layout(&[2, 20_000, 3], &[0, 3, 1], 7), vec![0, 1]),
        ];
        for (layout, dims) in cases {
            let (hf, gf) = views(device, &floats, &layout);
            let (hi, gi) = views(device, &ints, &layout);
            for op in [Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::ArgMax, Reduce::ArgMin, Reduce::Any] {
                check_reduce(device, &hf, &gf, &dims, op, DType::Float32, 1e-6);
            }
            for op in [Reduce::Sum, Reduce::Prod, Reduce::Min, Reduce::ArgMin, Reduce::All] {
                check_reduce(device, &hi, &gi, &dims, op, DType::Int32, 0.0);
            }
        }
    }

    #[test]
    fn nan_wins_and_the_first_extreme_is_taken() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let x = array(vec![1.0f32, 3.0, 3.0, 2.0, 2.0, f32::NAN, -5.0, f32::NAN], Shape::from([2, 4]));
        let g = to_gpu(device, &x);
        let run = |dims: &[usize], op| values(&reduce(&context, device, &g, dims, op, DType::Float32).unwrap());
        assert_eq!(run(&[1], Reduce::ArgMax), [1.0, 1.0]);
        assert_eq!(run(&[1], Reduce::ArgMin), [0.0, 1.0]);
        assert_eq!(run(&[0, 1], Reduce::ArgMax), [5.0]);
        assert_eq!(run(&[0, 1], Reduce::ArgMin), [5.0]);
        assert_eq!(run(&[0], Reduce::ArgMax), [1.0, 1.0, 0.0, 1.0]);
        assert_eq!(run(&[0], Reduce::ArgMin), [0.0, 1.0, 1.0, 1.0]);
        let max = run(&[1], Reduce::Max);
        assert!(max[0] == 3.0 && max[1].is_nan(), "{max:?}");
        let min = run(&[1], Reduce::Min);
        assert!(min[0] == 1.0 && min[1].is_nan(), "{min:?}");
        // Whole rows of NaN and of -inf.
        let x = array(vec![f32::NAN, f32::NAN, f32::NEG_INFINITY, f32::NEG_INFINITY], Shape::from([2, 2]));
        let g = to_gpu(device, &x);
        let run = |dims: &[usize], op| values(&reduce(&context, device, &g, dims, op, DType::Float32).unwrap());
        assert_eq!(run(&[1], Reduce::ArgMax), [0.0, 0.0]);
        assert_eq!(run(&[1], Reduce::ArgMin), [0.0, 0.0]);
        assert_eq!(run(&[1], Reduce::Max)[1], f64::NEG_INFINITY);
        let ties = array(vec![7i32; 1000], Shape::from([1000]));
        let g = to_gpu(device, &ties);
        assert_eq!(values(&reduce(&context, device, &g, &[0], Reduce::ArgMax, DType::Int32).unwrap()), [0.0]);
        assert_eq!(values(&reduce(&context, device, &g, &[0], Reduce::ArgMin, DType::Int32).unwrap()), [0.0]);
    }

    #[test]
    fn empty_lanes_give_the_identity_and_empty_results_nothing() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let x = array(Vec::<f32>::new(), Shape::from([3, 0, 4]));
        let g = to_gpu(device, &x);
        let run = |dims: &[usize], op, dtype| reduce(&context, device, &g, dims, op, dtype).unwrap();
        let expect =
            [(Reduce::Sum, 0.0), (Reduce::Prod, 1.0), (Reduce::Mean, f64::NAN), (Reduce::All, 1.0), (Reduce::Any, 0.0)];
        for (op, value) in expect {
            let out = run(&[1], op, DType::Float32);
            assert_eq!(out.layout.shape, [3, 4]);
            assert!(values(&out).iter().all(|&v| v == value || (v.is_nan() && value.is_nan())), "{op:?}");
            let all = run(&[0, 1, 2], op, DType::Float32);
            assert_eq!(all.layout.shape, []);
            assert_eq!(values(&all).len(), 1);
        }
        // Lanes the operation refuses still finish.
        for op in [Reduce::Max, Reduce::Min, Reduce::ArgMax, Reduce::ArgMin] {
            assert_eq!(values(&run(&[1], op, DType::Float32)).len(), 12);
            assert_eq!(values(&run(&[0, 1, 2], op, DType::Int32)).len(), 1);
        }
        // No lanes at all: an empty result of the kept dimensions.
        let out = run(&[1], Reduce::Sum, DType::Float32);
        assert_eq!(out.layout.shape, [3, 4]);
        let none = run(&[0], Reduce::Sum, DType::Float32);
        assert_eq!(none.layout.shape, [0, 4]);
        assert!(values(&none).is_empty());
        let none = run(&[2], Reduce::ArgMax, DType::Float32);
        assert_eq!((none.layout.shape.clone(), none.dtype), (Shape::from([3, 0]), DType::Int32));
    }

    #[test]
    fn a_ten_million_element_float_sum_stays_accurate() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let n = 10_000_000;
        let data: Vec<f32> = draws(n, 1 << 20, 12).into_iter().map(|d| d as f32 / (1 << 20) as f32).collect();
        let exact: f64 = data.iter().map(|&v| f64::from(v)).sum();
        let g = to_gpu(device, &array(data, Shape::from([n])));
        let sum = values(&reduce(&context, device, &g, &[0], Reduce::Sum, DType::Float32).unwrap())[0];
        assert!(((sum - exact) / exact).abs() < 2e-6, "{sum} against {exact}");
        let mean = values(&reduce(&context, device, &g, &[0], Reduce::Mean, DType::Float32).unwrap())[0];
        let want = exact / n as f64;
        assert!(((mean - want) / want).abs() < 2e-6, "{mean} against {want}");
    }
}
