//! `index_select` and `gather` on the GPU (`gpu-shaders/index.wgsl`): one kernel, specialised
//! by the element kind, that reads `x` at positions an int32 index tensor holds. Selection is
//! gathering with the index vector expanded (stride 0) to the result's shape.

use std::sync::Arc;

use crate::backend::{Array, Device};
use crate::error::{Error, Result};
use crate::tensor::Shape;

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{GROUP, Kernel, groups_for, unsupported, words};
use super::memory::{memory_of, storage};

const TEMPLATE: &str = include_str!("../../../gpu-shaders/index.wgsl");

/// The kernel that copies elements of `kind`.
fn kernel(kind: Kind) -> Kernel {
    Kernel {
        name: "index",
        template: TEMPLATE,
        defines: vec![("ELEMENT", kind.stored().to_string())],
        writes: vec![false, false, true],
    }
}

/// The positions `index` (a vector of int32 positions, any strides) of dimension `dim` of `x`:
/// a new contiguous tensor of `x`'s shape with `dim`'s size the number of indices.
pub(crate) fn index_select(
    context: &Arc<Context>,
    device: Device,
    x: &Array,
    dim: usize,
    index: &Array,
) -> Result<Array> {
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
pub(crate) fn gather(context: &Arc<Context>, device: Device, x: &Array, dim: usize, index: &Array) -> Result<Array> {
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

/// Every specialisation this family can make, for the shader validation test: one per kind.
#[cfg(test)]
pub(crate) fn variants() -> Vec<Kernel> {
    [Kind::F32, Kind::I32, Kind::Bool].into_iter().map(kernel).collect()
}

#[cfg(test)]
mod tests {
    use super::super::WGPU;
    use super::super::testing::{gpu, to_gpu, to_host, values};
    use super::*;
    use crate::backend::Backend;
    use crate::cpu::{CPU, array};
    use crate::tensor::{DType, Layout};

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
        let out = crate::cpu::elements::<i32>("test", &out).expect("host elements");
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
