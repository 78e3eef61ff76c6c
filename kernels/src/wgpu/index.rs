//! `index_select` and `gather` on the GPU (`gpu-shaders/index.wgsl`): one kernel, specialised
//! by the element kind, that reads `x` at positions an int32 index tensor holds. Selection is
//! gathering with the index vector expanded (stride 0) to the result's shape.
//!
//! `scatter_add`, gathering's reverse (`gpu-shaders/scatter.wgsl`): WGSL has no float atomics,
//! so one thread per output element finds and adds its own contributions, in order along the
//! scattered dimension.

use std::sync::Arc;

use crate::backend::{Array, Device};
use crate::error::{Error, Result};
use crate::types::Shape;

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{GROUP, Kernel, groups_for, unsupported, words};
use super::memory::{memory_of, storage};

const TEMPLATE: &str = include_str!("../../../gpu-shaders/index.wgsl");
const SCATTER: &str = include_str!("../../../gpu-shaders/scatter.wgsl");

/// The kernel that copies elements of `kind`.
fn kernel(kind: Kind) -> Kernel {
    Kernel {
        name: "index",
        template: TEMPLATE,
        defines: vec![("ELEMENT", kind.stored().to_string())],
        writes: vec![false, false, true],
    }
}

/// The kernel that scatter-adds elements of `kind` (bools as logical or).
fn scatter_kernel(kind: Kind) -> Kernel {
    let add = if kind == Kind::Bool { "|" } else { "+" };
    Kernel {
        name: "scatter_add",
        template: SCATTER,
        defines: vec![("ELEMENT", kind.stored().to_string()), ("ADD", add.to_string())],
        writes: vec![false, false, true],
    }
}

/// The positions `index` (a vector of int32 positions, any strides) of dimension `dim` of `x`:
/// a new contiguous tensor of `x`'s shape with `dim`'s size the number of indices.
pub fn index_select(context: &Arc<Context>, device: Device, x: &Array, dim: usize, index: &Array) -> Result<Array> {
    const FUNC: &str = "index_select";
    if dim >= x.layout.ndim() || index.layout.ndim() > 1 {
        return Err(unsupported(
            "index",
            format!(
                "{FUNC} along dimension {dim} of {:?} by an index of shape {:?}",
                x.layout.shape, index.layout.shape
            ),
        ));
    }
    let step = index.layout.strides.first().copied().unwrap_or(0);
    let shape: Shape =
        x.layout.shape.iter().enumerate().map(|(d, &s)| if d == dim { index.numel() } else { s }).collect();
    let index_strides = (0..shape.len()).map(|d| if d == dim { step } else { 0 }).collect();
    run(context, device, FUNC, (x, dim, index), shape, index_strides)
}

/// `out[i] = x[i with its dim-th coordinate replaced by index[i]]` for every position `i` of
/// `index` (int32, as many dimensions as `x`, no larger except along `dim`): a new contiguous
/// tensor of `index`'s shape.
pub fn gather(context: &Arc<Context>, device: Device, x: &Array, dim: usize, index: &Array) -> Result<Array> {
    const FUNC: &str = "gather";
    let (xs, is) = (&x.layout.shape, &index.layout.shape);
    let fits = xs.len() == is.len() && (0..xs.len()).all(|d| d == dim || is[d] <= xs[d]);
    if dim >= xs.len() || !fits {
        return Err(unsupported(
            "index",
            format!("{FUNC} along dimension {dim} of {xs:?} by an index of shape {is:?}"),
        ));
    }
    run(context, device, FUNC, (x, dim, index), is.clone(), index.layout.strides.to_vec())
}

/// Records the kernel writing a new contiguous tensor of `shape` whose element `i` is `x` at
/// `i`'s coordinates with the `dim`-th replaced by `index` read at `index_strides` (over
/// `shape`) from its offset.
fn run(
    context: &Arc<Context>,
    device: Device,
    func: &str,
    (x, dim, index): (&Array, usize, &Array),
    shape: Shape,
    index_strides: Vec<usize>,
) -> Result<Array> {
    let kind = Kind::of(x.dtype);
    if Kind::of(index.dtype) != Kind::I32 {
        return Err(unsupported("index", format!("{func} by a {} index (int32 expected)", index.dtype)));
    }
    for a in [x, index] {
        if a.device() != device {
            return Err(unsupported("index", format!("{func} of a tensor on {} on {device}", a.device())));
        }
    }
    let n = shape.checked_numel().ok_or_else(|| unsupported("index", format!("{func} to a shape too large")))?;
    let memory = context.alloc(func, n)?;
    if n > 0 {
        let size = x.layout.shape[dim];
        if size == 0 || i32::try_from(size).is_err() {
            return Err(Error::runtime_error(format!(
                "{func}(): cannot index dimension {dim} of size {size} on a wgpu device (indices are int32 and in range)"
            )));
        }
        // The output's dimensions with x's strides (zero along dim: its coordinate comes from
        // the index) and the index's, less those of size one (their coordinate is always 0).
        let (mut sizes, mut x_strides, mut strides) = (Vec::new(), Vec::new(), Vec::new());
        for d in (0..shape.len()).filter(|&d| shape[d] != 1) {
            sizes.push(shape[d]);
            x_strides.push(if d == dim { 0 } else { x.layout.strides[d] });
            strides.push(index_strides[d]);
        }
        if sizes.is_empty() {
            (sizes, x_strides, strides) = (vec![1], vec![0], vec![0]);
        }
        let header = [n, sizes.len(), size, x.layout.strides[dim], x.layout.offset, index.layout.offset];
        let params = words(header.into_iter().chain(sizes).chain(x_strides).chain(strides))?;
        let buffers = [memory_of(&x.storage)?.buffer(), memory_of(&index.storage)?.buffer(), memory.buffer()];
        context.launch(&kernel(kind), &params, &buffers, groups_for(n, GROUP)?)?;
    }
    Ok(Array::contiguous(storage(device, memory), shape, kind.dtype()))
}

/// A new contiguous tensor of `shape` in `src`'s kind, zero except that `src[i]` is added at
/// `i`'s coordinates with the `dim`-th replaced by `index[i]`, for every position `i` of `index`
/// (int32, any strides, as many dimensions as `shape`, no larger except along `dim`; `src` of
/// its shape). Each element adds its contributions in increasing order along `dim`; an index
/// out of range contributes nowhere.
pub fn scatter_add(
    context: &Arc<Context>,
    device: Device,
    shape: &Shape,
    dim: usize,
    (index, src): (&Array, &Array),
) -> Result<Array> {
    const FUNC: &str = "scatter_add";
    let is = &index.layout.shape;
    let fits = is.len() == shape.len() && (0..is.len()).all(|d| d == dim || is[d] <= shape[d]);
    if dim >= shape.len() || !fits || src.layout.shape != *is {
        let what = format!(
            "{FUNC} along dimension {dim} into {shape:?} by an index {is:?} and a source {:?}",
            src.layout.shape
        );
        return Err(unsupported("scatter_add", what));
    }
    let kind = Kind::of(src.dtype);
    if Kind::of(index.dtype) != Kind::I32 {
        return Err(unsupported("scatter_add", format!("{FUNC} by a {} index (int32 expected)", index.dtype)));
    }
    for a in [index, src] {
        if a.device() != device {
            return Err(unsupported("scatter_add", format!("{FUNC} of a tensor on {} on {device}", a.device())));
        }
    }
    let n = shape.checked_numel().ok_or_else(|| unsupported("scatter_add", format!("{FUNC} to a shape too large")))?;
    let memory = context.alloc(FUNC, n)?;
    if n > 0 {
        let size = shape[dim];
        if i32::try_from(size).is_err() {
            return Err(Error::runtime_error(format!(
                "{FUNC}(): cannot scatter along dimension {dim} of size {size} on a wgpu device (indices are int32)"
            )));
        }
        // An empty index contributes nothing: no step along dim (its other sizes may be zero).
        let count = if index.numel() == 0 { 0 } else { is[dim] };
        let inner = shape[dim + 1..].iter().product::<usize>();
        let along = |strides: &[usize]| -> Vec<usize> {
            strides.iter().enumerate().map(|(d, &s)| if d == dim { 0 } else { s }).collect()
        };
        let limits = (0..shape.len()).map(|d| if d == dim { shape[d] } else { is[d] });
        let (i_strides, s_strides) = (&index.layout.strides, &src.layout.strides);
        let header = [
            n,
            shape.len(),
            count,
            i_strides[dim],
            s_strides[dim],
            index.layout.offset,
            src.layout.offset,
            inner,
            size,
        ];
        let params = words(
            header
                .into_iter()
                .chain(shape.iter().copied())
                .chain(limits)
                .chain(along(i_strides))
                .chain(along(s_strides)),
        )?;
        let buffers = [memory_of(&index.storage)?.buffer(), memory_of(&src.storage)?.buffer(), memory.buffer()];
        context.launch(&scatter_kernel(kind), &params, &buffers, groups_for(n, GROUP)?)?;
    }
    Ok(Array::contiguous(storage(device, memory), shape.clone(), kind.dtype()))
}

/// Every specialisation this family can make, for the shader validation test: gathering and
/// scatter-adding, one of each per kind.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    let kinds = [Kind::F32, Kind::I32, Kind::Bool];
    kinds.into_iter().map(kernel).chain(kinds.into_iter().map(scatter_kernel)).collect()
}

#[cfg(test)]
mod tests {
    use super::super::WGPU;
    use super::super::testing::{gpu, to_gpu, to_host, values};
    use super::*;
    use crate::backend::Backend;
    use crate::backend::host::array;
    use crate::cpu::CPU;
    use crate::types::{DType, Layout};

    /// A host array of `shape` and `dtype` holding varied values (NaN and infinities among the
    /// floats).
    fn host(dtype: DType, shape: &[usize]) -> Array {
        let n = shape.iter().product::<usize>();
        let shape = Shape::from(shape);
        match dtype {
            DType::Float32 => {
                let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0];
                array((0..n).map(|i| if i % 11 == 5 { special[i % 4] } else { i as f32 * 0.5 - 3.0 }).collect(), shape)
            }
            DType::Int32 => array((0..n).map(|i| (i as i32 * 7919) % 1009 - 500).collect(), shape),
            _ => array((0..n).map(|i| i % 3 == 0).collect(), shape),
        }
    }

    /// A host int32 array of `shape` holding `values`.
    fn indices(values: &[i32], shape: &[usize]) -> Array {
        array(values.to_vec(), Shape::from(shape))
    }

    /// `x` seen through `shape`, `strides` and `offset`.
    fn view(x: &Array, shape: &[usize], strides: &[usize], offset: usize) -> Array {
        x.with_layout(Layout { shape: Shape::from(shape), strides: strides.iter().copied().collect(), offset })
    }

    /// Which operation a case runs.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Select,
        Gather,
    }

    /// A view of a host array: its shape, strides and offset (`None` for its own layout).
    type View<'a> = Option<(&'a [usize], &'a [usize], usize)>;

    /// The views of `x` and of the index a case runs on.
    type Views<'a> = (View<'a>, View<'a>);

    /// Runs `op` along `dim` on the GPU and on the CPU (the same views of the same elements)
    /// and asserts the results are identical, bit for bit.
    fn check(device: Device, op: Op, (x, index): (&Array, &Array), dim: usize, (x_view, index_view): Views<'_>) {
        let seen = |a: &Array, v: View<'_>| match v {
            Some((shape, strides, offset)) => view(a, shape, strides, offset),
            None => a.clone(),
        };
        let (gx, gi) = (seen(&to_gpu(device, x), x_view), seen(&to_gpu(device, index), index_view));
        let (cx, ci) = (seen(x, x_view), seen(index, index_view));
        let (got, want) = match op {
            Op::Select => (WGPU.index_select(&gx, dim, &gi), CPU.index_select(&cx, dim, &ci)),
            Op::Gather => (WGPU.gather(&gx, dim, &gi), CPU.gather(&cx, dim, &ci)),
        };
        let (got, want) = (got.expect("the GPU kernel runs"), want.expect("the CPU kernel runs"));
        let case = format!("{op:?} along {dim} of {:?} {:?} by {:?}", cx.dtype, cx.layout, ci.layout);
        assert_eq!(got.layout, Layout::contiguous(want.layout.shape.clone()), "{case}");
        assert_eq!(got.dtype, want.dtype, "{case}");
        let (got, want) = (values(&got), values(&want));
        let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same && got.len() == want.len(), "{case}:\n got {got:?}\nwant {want:?}");
    }

    const DTYPES: [DType; 3] = [DType::Float32, DType::Int32, DType::Bool];

    #[test]
    fn selection_along_each_dimension_of_each_kind() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            let x = host(dtype, &[3, 4, 5]);
            for dim in 0..3 {
                let n: i32 = [3, 4, 5][dim];
                let repeated = [n - 1, 0, n - 1, 1, 0, 0];
                let reversed: Vec<i32> = (0..n).rev().collect();
                for index in [&repeated[..], &reversed, &[1], &[]] {
                    check(device, Op::Select, (&x, &indices(index, &[index.len()])), dim, (None, None));
                }
            }
        }
    }

    #[test]
    fn selection_reads_any_layout() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            let x = host(dtype, &[60]);
            // [3, 4, 5] permuted to [5, 3, 4]; [4, 5] at offset 7 with rows 12 apart; [4, 5]
            // expanded from one row; [3, 4] from a column expanded across rows.
            let layouts: [(&[usize], &[usize], usize); 4] =
                [(&[5, 3, 4], &[1, 20, 5], 0), (&[4, 5], &[12, 1], 7), (&[4, 5], &[0, 1], 3), (&[3, 4], &[1, 0], 2)];
            // The index as it is; every other element from the third; one element repeated.
            let index_views: [View<'_>; 3] = [None, Some((&[4], &[2], 2)), Some((&[6], &[0], 1))];
            for (shape, strides, offset) in layouts {
                for dim in 0..shape.len() {
                    let n = shape[dim] as i32;
                    let index = indices(&[9, 2, 0, 3, 3, 1, 2, 0, 1, 2].map(|i| i % n), &[10]);
                    for index_view in index_views {
                        check(device, Op::Select, (&x, &index), dim, (Some((shape, strides, offset)), index_view));
                    }
                }
            }
        }
    }

    #[test]
    fn gathering_along_each_dimension_of_each_kind() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            let x = host(dtype, &[3, 4, 5]);
            for dim in 0..3 {
                let n: i32 = [3, 4, 5][dim];
                // Smaller than x along the other dimensions, larger along dim.
                let mut shape = [2, 3, 4];
                shape[dim] = 7;
                let count: usize = shape.iter().product();
                let values: Vec<i32> = (0..count as i32).map(|i| (i * 5 + i / 3) % n).collect();
                check(device, Op::Gather, (&x, &indices(&values, &shape)), dim, (None, None));
                let reversed: Vec<i32> = (0..60).map(|i| (n - 1) - ((i / [20, 5, 1][dim]) % n)).collect();
                check(device, Op::Gather, (&x, &indices(&reversed, &[3, 4, 5])), dim, (None, None));
                shape[dim] = 0;
                check(device, Op::Gather, (&x, &indices(&[], &shape)), dim, (None, None));
            }
        }
    }

    #[test]
    fn gathering_reads_any_layout() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            let x = host(dtype, &[80]);
            let index = indices(&(0..40).map(|i| (i * 7) % 3).collect::<Vec<_>>(), &[40]);
            // x: [4, 3, 5] permuted from [3, 4, 5] at offset 10; [3, 4, 5] expanded along its
            // middle dimension. The index: [3, 2, 4] permuted and offset; expanded along two
            // dimensions.
            let x_views: [(&[usize], &[usize], usize); 2] =
                [(&[4, 3, 5], &[5, 20, 1], 10), (&[3, 4, 5], &[6, 0, 1], 3)];
            let index_views: [(&[usize], &[usize], usize); 3] =
                [(&[3, 2, 4], &[1, 12, 3], 5), (&[3, 2, 4], &[0, 4, 1], 0), (&[2, 3, 1], &[0, 1, 0], 30)];
            for x_view in x_views {
                for index_view in index_views {
                    for dim in 0..3 {
                        check(device, Op::Gather, (&x, &index), dim, (Some(x_view), Some(index_view)));
                    }
                }
            }
        }
    }

    #[test]
    fn many_workgroups_and_flips() {
        let Some(device) = gpu() else { return };
        // A flip of every dimension in turn (as `torchfn::flip` does), over many workgroups.
        let x = host(DType::Float32, &[37, 41, 29]);
        for dim in 0..3 {
            let n = [37, 41, 29][dim];
            let reversed: Vec<i32> = (0..n).rev().collect();
            check(device, Op::Select, (&x, &indices(&reversed, &[n as usize])), dim, (None, None));
        }
        let index: Vec<i32> = (0..37 * 41 * 29).map(|i| (i * 13) % 41).collect();
        check(device, Op::Gather, (&x, &indices(&index, &[37, 41, 29])), 1, (None, None));
        // More workgroups than one dispatch dimension holds (65535): split over two.
        let n = 65_536 * 256 + 77;
        let x = to_gpu(device, &array((0..n as i32).collect(), Shape::from([n])));
        let reversed = to_gpu(device, &indices(&(0..n as i32).rev().collect::<Vec<_>>(), &[n]));
        let out = to_host(&WGPU.index_select(&x, 0, &reversed).expect("the GPU kernel runs"));
        let out = crate::backend::host::elements::<i32>("test", &out).expect("host elements");
        assert!(out.iter().enumerate().all(|(i, &v)| v as usize == n - 1 - i));
    }

    #[test]
    fn indices_out_of_range_are_clamped() {
        let Some(device) = gpu() else { return };
        let x = to_gpu(device, &array(vec![10i32, 11, 12, 13], Shape::from([4])));
        let index = to_gpu(device, &indices(&[-5, 100, 2, i32::MIN, i32::MAX], &[5]));
        let out = WGPU.index_select(&x, 0, &index).expect("the GPU kernel runs");
        assert_eq!(values(&out), [10.0, 13.0, 12.0, 10.0, 13.0]);
        let out = WGPU.gather(&x, 0, &index).expect("the GPU kernel runs");
        assert_eq!(values(&out), [10.0, 13.0, 12.0, 10.0, 13.0]);
    }

    /// Runs `scatter_add` into `shape` along `dim` on the GPU and on the CPU (the same views
    /// of the same index and source) and asserts the results are identical, bit for bit.
    fn check_scatter(device: Device, shape: &[usize], dim: usize, (index, src): (&Array, &Array), views: Views<'_>) {
        let seen = |a: &Array, v: View<'_>| match v {
            Some((shape, strides, offset)) => view(a, shape, strides, offset),
            None => a.clone(),
        };
        let (gi, gs) = (seen(&to_gpu(device, index), views.0), seen(&to_gpu(device, src), views.1));
        let (ci, cs) = (seen(index, views.0), seen(src, views.1));
        let shape = Shape::from(shape);
        let got = WGPU.scatter_add(&shape, dim, &gi, &gs).expect("the GPU kernel runs");
        let want = CPU.scatter_add(&shape, dim, &ci, &cs).expect("the CPU kernel runs");
        let case =
            format!("scatter_add into {shape:?} along {dim} of {:?} {:?} by {:?}", cs.dtype, cs.layout, ci.layout);
        assert_eq!(got.layout, Layout::contiguous(shape.clone()), "{case}");
        assert_eq!((got.dtype, want.dtype), (cs.dtype, cs.dtype), "{case}");
        let (got, want) = (values(&got), values(&want));
        let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same && got.len() == want.len(), "{case}:\n got {got:?}\nwant {want:?}");
    }

    #[test]
    fn scatter_add_along_each_dimension_of_each_kind() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            for dim in 0..3 {
                let n: i32 = [3, 4, 5][dim];
                // Smaller than the result along the other dimensions, larger along dim (repeated
                // indices), and the same shape as the result.
                let mut shape = [2, 3, 4];
                shape[dim] = 7;
                let count: usize = shape.iter().product();
                let index: Vec<i32> = (0..count as i32).map(|i| (i * 5 + i / 3) % n).collect();
                let src = host(dtype, &shape);
                check_scatter(device, &[3, 4, 5], dim, (&indices(&index, &shape), &src), (None, None));
                let reversed: Vec<i32> = (0..60).map(|i| (n - 1) - ((i / [20, 5, 1][dim]) % n)).collect();
                let src = host(dtype, &[3, 4, 5]);
                check_scatter(device, &[3, 4, 5], dim, (&indices(&reversed, &[3, 4, 5]), &src), (None, None));
                // Empty: along dim, and along another dimension.
                shape[dim] = 0;
                check_scatter(device, &[3, 4, 5], dim, (&indices(&[], &shape), &host(dtype, &shape)), (None, None));
                let mut shape = [3, 4, 5];
                shape[(dim + 1) % 3] = 0;
                check_scatter(device, &[3, 4, 5], dim, (&indices(&[], &shape), &host(dtype, &shape)), (None, None));
            }
        }
    }

    #[test]
    fn scatter_add_reads_any_layout() {
        let Some(device) = gpu() else { return };
        for dtype in DTYPES {
            let src = host(dtype, &[80]);
            let index = indices(&(0..40).map(|i| (i * 7) % 3).collect::<Vec<_>>(), &[40]);
            // The index: [3, 2, 4] permuted and offset; expanded along two dimensions; [3, 4]
            // as index_select's backward passes it (a vector expanded over the other
            // dimension), along each. The source: [3, 2, 4] permuted and offset; expanded.
            let index_views: [(&[usize], &[usize], usize); 3] =
                [(&[3, 2, 4], &[1, 12, 3], 5), (&[3, 2, 4], &[0, 4, 1], 0), (&[3, 2, 4], &[0, 1, 0], 30)];
            let src_views: [(&[usize], &[usize], usize); 2] =
                [(&[3, 2, 4], &[1, 24, 3], 7), (&[3, 2, 4], &[8, 0, 1], 2)];
            for index_view in index_views {
                for src_view in src_views {
                    for dim in 0..3 {
                        let views = (Some(index_view), Some(src_view));
                        check_scatter(device, &[3, 3, 5], dim, (&index, &src), views);
                    }
                }
            }
            let selected = indices(&[2, 0, 2, 1], &[4]);
            let grad = host(dtype, &[12]);
            check_scatter(
                device,
                &[3, 3],
                0,
                (&selected, &grad),
                (Some((&[4, 3], &[1, 0], 0)), Some((&[4, 3], &[3, 1], 0))),
            );
            check_scatter(
                device,
                &[3, 3],
                1,
                (&selected, &grad),
                (Some((&[3, 4], &[0, 1], 0)), Some((&[3, 4], &[1, 3], 0))),
            );
        }
    }

    #[test]
    fn scatter_add_over_many_workgroups_adds_in_order() {
        let Some(device) = gpu() else { return };
        let src = host(DType::Float32, &[37, 41, 29]);
        for dim in 0..3 {
            let n = [37, 41, 29][dim];
            let index: Vec<i32> = (0..37 * 41 * 29).map(|i| (i * 13) % n).collect();
            check_scatter(device, &[37, 41, 29], dim, (&indices(&index, &[37, 41, 29]), &src), (None, None));
        }
        // (0 + 1) + 1e8 rounds to 1e8, less 1e8 is 0; in the other order it would be 1.
        let src = array(vec![1.0f32, 0.5, 1e8, -1e8], Shape::from([4]));
        let index = indices(&[0, 1, 0, 0], &[4]);
        check_scatter(device, &[2], 0, (&index, &src), (None, None));
        let out = WGPU.scatter_add(&Shape::from([2]), 0, &to_gpu(device, &index), &to_gpu(device, &src));
        assert_eq!(values(&out.expect("the GPU kernel runs")), [0.0, 0.5]);
    }

    #[test]
    fn scatter_add_of_bad_arguments_is_an_error() {
        let Some(device) = gpu() else { return };
        let index = to_gpu(device, &indices(&[0, 1, 2, 0], &[2, 2]));
        let src = to_gpu(device, &host(DType::Float32, &[2, 2]));
        let shape = Shape::from([3, 2]);
        assert!(WGPU.scatter_add(&shape, 0, &index, &src).is_ok());
        assert!(WGPU.scatter_add(&shape, 2, &index, &src).is_err(), "no dimension 2");
        assert!(WGPU.scatter_add(&Shape::from([3, 1]), 0, &index, &src).is_err(), "index wider than the result");
        assert!(WGPU.scatter_add(&Shape::from([6]), 0, &index, &src).is_err(), "fewer dimensions");
        let other = to_gpu(device, &host(DType::Float32, &[2, 1]));
        assert!(WGPU.scatter_add(&shape, 0, &index, &other).is_err(), "src of another shape");
        let floats = to_gpu(device, &host(DType::Float32, &[2, 2]));
        assert!(WGPU.scatter_add(&shape, 0, &floats, &src).is_err(), "float indices");
        // Indices out of range contribute nowhere (the operation refuses them first).
        let wild = to_gpu(device, &indices(&[-1, 1, 3, i32::MAX], &[2, 2]));
        let ones = to_gpu(device, &array(vec![1i32; 4], Shape::from([2, 2])));
        let out = WGPU.scatter_add(&shape, 0, &wild, &ones).expect("the GPU kernel runs");
        assert_eq!(values(&out), [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let Some(device) = gpu() else { return };
        let x = to_gpu(device, &host(DType::Float32, &[3, 4]));
        let index = to_gpu(device, &indices(&[0, 1, 2, 0, 1, 2], &[1, 6]));
        let floats = to_gpu(device, &array(vec![0.0f32], Shape::from([1])));
        assert!(WGPU.gather(&x, 0, &index).is_err(), "larger than x along dimension 1");
        assert!(WGPU.gather(&x, 2, &index).is_err(), "no dimension 2");
        assert!(WGPU.index_select(&x, 0, &index).is_err(), "a matrix of indices");
        assert!(WGPU.index_select(&x, 0, &floats).is_err(), "float indices");
        let empty = to_gpu(device, &host(DType::Float32, &[0, 4]));
        let err = WGPU.index_select(&empty, 0, &to_gpu(device, &indices(&[0], &[1]))).unwrap_err();
        assert!(err.to_string().contains("size 0"), "{err}");
        let none = WGPU.index_select(&empty, 0, &to_gpu(device, &indices(&[], &[0]))).expect("nothing to select");
        assert_eq!(none.layout.shape, [0, 4]);
    }
}
