//! Sliding-window kernels over the last two dimensions of `[batch, channels, height, width]`
//! data: convolution and its gradients (im2col, then one matrix product per group for as many
//! samples as fit) and max pooling. The operations check every size; these only compute.

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::backend::{Array, Buffer, Window};
use crate::error::{Error, Result};
use crate::types::{Element, Shape};

use super::{Number, array, map, pool, threads, with_elements};

/// The error of a size that overflowed.
fn too_big(func: &str) -> Error {
    Error::runtime_error(format!("{func}(): the result is too large to allocate"))
}

/// `n` zeros (default values), from the buffer pool when it has one, or a `RuntimeError` when
/// they cannot be had.
fn zeros<T: Element>(func: &str, n: Option<usize>) -> Result<Vec<T>> {
    map::zeroed(func, n.ok_or_else(|| too_big(func))?)
}

/// `n` elements for a result whose every element is written: from the buffer pool when it
/// has one, else fresh.
fn output<T: Element>(func: &str, n: Option<usize>) -> Result<Vec<T>> {
    map::output(func, n.ok_or_else(|| too_big(func))?)
}

/// Working memory whose every element is written before it is read (im2col columns, a
/// product's result): taken from the buffer pool when it has one of the size, and given back
/// to it when dropped, so that the next convolution's pages are mapped already.
struct Scratch<T: Element>(Vec<T>);

impl<T: Element> Scratch<T> {
    fn new(func: &str, n: Option<usize>) -> Result<Scratch<T>> {
        output(func, n).map(Scratch)
    }
}

impl<T: Element> std::ops::Deref for Scratch<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Element> std::ops::DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Element> Drop for Scratch<T> {
    fn drop(&mut self) {
        pool::give(Buffer::from_vec(std::mem::take(&mut self.0)));
    }
}

fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error in the convolution kernel: {what}"))
}

/// Elements of im2col columns one matrix product takes at most: the samples of a batch are
/// convolved together (one product per group for as many samples as fit), so that a small
/// image makes a wide product rather than many narrow ones.
const COLUMNS: usize = 1 << 21;

/// The sizes of one convolution of `[n, c, h, w]` by `[o, c / groups, kh, kw]` over a window,
/// and how its im2col columns are laid out: one row per tap (channel, kernel row, kernel
/// column), one column per (sample, output position), for `batch` samples at a time.
struct Conv {
    n: usize,
    c: usize,
    o: usize,
    groups: usize,
    taps: usize,
    positions: usize,
    batch: usize,
    win: Window,
}

/// A run of samples of one group: the first sample, how many, and the group.
#[derive(Clone, Copy)]
struct Chunk {
    first: usize,
    samples: usize,
    group: usize,
}

impl Conv {
    /// The convolution of `input` by `weight`; an error when its buffers could not be counted.
    fn new(func: &str, input: &Array, weight: &Array, groups: usize, win: &Window) -> Result<Conv> {
        let too_big = || Error::runtime_error(format!("{func}(): the result is too large to allocate"));
        let (n, c) = (input.layout.shape[0], input.layout.shape[1]);
        let o = weight.layout.shape.first().copied().unwrap_or(0);
        let taps = (c / groups).checked_mul(win.kernel[0] * win.kernel[1]).ok_or_else(too_big)?;
        let positions = win.out[0].checked_mul(win.out[1]).ok_or_else(too_big)?;
        let per_sample = taps.checked_mul(positions).ok_or_else(too_big)?;
        // As many samples as fit in COLUMNS (at least one).
        let batch = (COLUMNS / per_sample.max(1)).clamp(1, n.max(1));
        Ok(Conv { n, c, o, groups, taps, positions, batch, win: *win })
    }

    /// Output channels per group.
    fn filters(&self) -> usize {
        self.o / self.groups
    }

    /// Every run of samples of every group, in order.
    fn chunks(&self) -> impl Iterator<Item = Chunk> + use<> {
        let (n, batch, groups) = (self.n, self.batch, self.groups);
        (0..n)
            .step_by(batch)
            .flat_map(move |first| (0..groups).map(move |group| Chunk { first, samples: batch.min(n - first), group }))
    }

    /// The columns of a chunk: `samples` × `positions`.
    fn width(&self, chunk: Chunk) -> usize {
        chunk.samples * self.positions
    }

    /// Where the input plane that im2col row `row` of `chunk` reads for its sample `s` starts
    /// in the input, and the row's kernel tap.
    fn source(&self, chunk: Chunk, row: usize, s: usize) -> (usize, [usize; 2]) {
        let [kh, kw] = self.win.kernel;
        let (ch, i, j) = (row / (kh * kw), row / kw % kh, row % kw);
        let plane = self.win.input[0] * self.win.input[1];
        (((chunk.first + s) * self.c + chunk.group * (self.c / self.groups) + ch) * plane, [i, j])
    }

    /// For each filter of `chunk`'s group and each of its samples: the part of a
    /// `[filters, width]` product it is, and the same positions in the `[n, o, out_h, out_w]`
    /// result.
    fn regrouped(
        &self,
        chunk: Chunk,
    ) -> impl Iterator<Item = (std::ops::Range<usize>, std::ops::Range<usize>)> + use<> {
        let (o, og, positions, width) = (self.o, self.filters(), self.positions, self.width(chunk));
        (0..og).flat_map(move |f| {
            (0..chunk.samples).map(move |s| {
                let (p, r) = (f * width + s * positions, ((chunk.first + s) * o + chunk.group * og + f) * positions);
                (p..p + positions, r..r + positions)
            })
        })
    }

    /// The im2col columns of `chunk` of the input `x`, runs of rows on the CPU's threads.
    fn im2col<T: Element>(&self, x: &[T], chunk: Chunk, columns: &mut [T]) {
        let (width, plane) = (self.width(chunk), self.win.input[0] * self.win.input[1]);
        if width == 0 {
            return;
        }
        let rows = (threads::GRAIN / width).max(1);
        let tasks = columns[..self.taps * width].chunks_mut(rows * width).enumerate();
        threads::for_each(tasks, |(t, lines)| {
            for (r, line) in lines.chunks_mut(width).enumerate() {
                for (s, part) in line.chunks_mut(self.positions).enumerate() {
                    let (start, tap) = self.source(chunk, t * rows + r, s);
                    unfold(&x[start..][..plane], part, &self.win, tap);
                }
            }
        });
    }

    /// The adjoint of [`Conv::im2col`]: each input plane of `chunk` in `dx` set to the sum of
    /// the column elements read from it. Each plane (which no other chunk has) gathers its
    /// channel's rows in order, planes on the CPU's threads.
    fn col2im<T: Number>(&self, columns: &[T], chunk: Chunk, dx: &mut [T]) {
        let ([kh, kw], plane, width) = (self.win.kernel, self.win.input[0] * self.win.input[1], self.width(chunk));
        if plane == 0 {
            return;
        }
        let (c, cg) = (self.c, self.c / self.groups);
        // The planes of the chunk's samples and group's channels: (sample, channel, plane).
        let mut planes: Vec<(usize, usize, &mut [T])> = dx
            .chunks_mut(plane)
            .enumerate()
            .filter_map(|(p, dst)| {
                let s = (p / c).checked_sub(chunk.first).filter(|&s| s < chunk.samples)?;
                let ch = (p % c).checked_sub(chunk.group * cg).filter(|&ch| ch < cg)?;
                Some((s, ch, dst))
            })
            .collect();
        let per_task = (threads::GRAIN / (kh * kw * self.positions).max(1)).max(1);
        threads::for_each(planes.chunks_mut(per_task), |planes| {
            for (s, ch, dst) in planes {
                dst.fill(T::default());
                for tap in 0..kh * kw {
                    let at = (*ch * kh * kw + tap) * width + *s * self.positions;
                    fold(&columns[at..at + self.positions], dst, &self.win, [tap / kw, tap % kw]);
                }
            }
        });
    }
}

/// A matrix view of `data`'s first `rows × cols` elements.
fn matrix<T>(data: &[T], rows: usize, cols: usize) -> Result<ArrayView2<'_, T>> {
    ArrayView2::from_shape((rows, cols), data.get(..rows * cols).ok_or_else(|| internal("a matrix"))?)
        .map_err(|_| internal("a matrix"))
}

/// A mutable matrix view of `data`'s first `rows × cols` elements.
fn matrix_mut<T>(data: &mut [T], rows: usize, cols: usize) -> Result<ArrayViewMut2<'_, T>> {
    ArrayViewMut2::from_shape((rows, cols), data.get_mut(..rows * cols).ok_or_else(|| internal("a matrix"))?)
        .map_err(|_| internal("a matrix"))
}

/// The 2-D convolution (cross-correlation, as PyTorch's) of `input` (`[n, c, h, w]`) with
/// `weight` (`[o, c / groups, kh, kw]`), plus `bias` (`o` elements): the `[n, o, out_h, out_w]`
/// result. Per chunk of samples and group: im2col, one product by the group's filters, and
/// the product's rows put in place.
pub(super) fn conv2d<T: Number>(
    input: &Array,
    weight: &Array,
    bias: Option<&Array>,
    groups: usize,
    win: &Window,
) -> Result<Array> {
    let func = "conv2d";
    let conv = Conv::new(func, input, weight, groups, win)?;
    let (taps, og, width) = (conv.taps, conv.filters(), conv.batch * conv.positions);
    let mut out = output::<T>(func, conv.n.checked_mul(conv.o).and_then(|x| x.checked_mul(conv.positions)))?;
    let mut columns = Scratch::<T>::new(func, taps.checked_mul(width))?;
    let mut products = Scratch::<T>::new(func, og.checked_mul(width))?;
    with_elements(input, |x: &[T]| {
        with_elements(weight, |wt: &[T]| -> Result<()> {
            for chunk in conv.chunks() {
                let width = conv.width(chunk);
                conv.im2col(x, chunk, &mut columns);
                let filters = matrix(&wt[chunk.group * og * taps..], og, taps)?;
                T::matmul(filters, matrix(&columns, taps, width)?, &mut matrix_mut(&mut products, og, width)?);
                for (product, result) in conv.regrouped(chunk) {
                    out[result].copy_from_slice(&products[product]);
                }
            }
            Ok(())
        })
    })???;
    if let Some(bias) = bias {
        with_elements(bias, |bs: &[T]| {
            for (plane, &add) in out.chunks_mut(conv.positions.max(1)).zip(bs.iter().cycle()) {
                plane.iter_mut().for_each(|v| *v = v.add(add));
            }
        })?;
    }
    Ok(array(out, Shape::from([conv.n, conv.o, win.out[0], win.out[1]])))
}

/// The gradients of [`conv2d`]'s input and weight (where `which` asks for them) from the
/// gradient `grad` of its result. Per chunk of samples and group, with `grad`'s rows gathered
/// into a `[filters, width]` matrix G: the weight's gradient adds G times the transposed
/// im2col columns of the input, and the input's is the col2im of the group's filters
/// transposed times G.
pub(super) fn conv2d_backward<T: Number>(
    input: &Array,
    weight: &Array,
    grad: &Array,
    groups: usize,
    win: &Window,
    which: [bool; 2],
) -> Result<[Option<Array>; 2]> {
    let func = "conv2d_backward";
    let conv = Conv::new(func, input, weight, groups, win)?;
    let (taps, og, width) = (conv.taps, conv.filters(), conv.batch * conv.positions);
    // col2im sets every plane of the input's gradient (each in one chunk).
    let mut dx = if which[0] { Some(output::<T>(func, input.layout.shape.checked_numel())?) } else { None };
    // Each group's first chunk writes its part of the weight's gradient and later chunks add
    // to it: no zeros to write first, unless there are no samples (and so no chunks).
    let dw_size = weight.layout.shape.checked_numel();
    let mut dw = match (which[1], conv.n) {
        (false, _) => None,
        (true, 0) => Some(zeros::<T>(func, dw_size)?),
        (true, _) => Some(output::<T>(func, dw_size)?),
    };
    let mut columns = Scratch::<T>::new(func, taps.checked_mul(width))?;
    let mut gathered = Scratch::<T>::new(func, og.checked_mul(width))?;
    let later_chunks = which[1] && conv.batch < conv.n;
    let mut product = Scratch::<T>::new(func, if later_chunks { og.checked_mul(taps) } else { Some(0) })?;
    with_elements(input, |x: &[T]| {
        with_elements(weight, |wt: &[T]| {
            with_elements(grad, |gr: &[T]| -> Result<()> {
                for chunk in conv.chunks() {
                    let width = conv.width(chunk);
                    for (part, result) in conv.regrouped(chunk) {
                        gathered[part].copy_from_slice(&gr[result]);
                    }
                    let g = matrix(&gathered, og, width)?;
                    if let Some(dw) = dw.as_mut() {
                        conv.im2col(x, chunk, &mut columns);
                        let columns = matrix(&columns, taps, width)?.reversed_axes();
                        let sums = &mut dw[chunk.group * og * taps..][..og * taps];
                        if chunk.first == 0 {
                            T::matmul(g, columns, &mut matrix_mut(sums, og, taps)?);
                        } else {
                            T::matmul(g, columns, &mut matrix_mut(&mut product, og, taps)?);
                            sums.iter_mut().zip(product.iter()).for_each(|(s, &p)| *s = s.add(p));
                        }
                    }
                    if let Some(dx) = dx.as_mut() {
                        let filters = matrix(&wt[chunk.group * og * taps..], og, taps)?;
                        T::matmul(filters.t(), g, &mut matrix_mut(&mut columns, taps, width)?);
                        conv.col2im(&columns, chunk, dx);
                    }
                }
                Ok(())
            })
        })
    })????;
    let finish = |data: Option<Vec<T>>, shape: &Shape| data.map(|d| array(d, shape.clone()));
    Ok([finish(dx, &input.layout.shape), finish(dw, &weight.layout.shape)])
}

/// The output columns `first..last` whose input column (`z · stride + shift - padding`, for
/// kernel column `j`) lies inside the plane.
fn inside(win: &Window, j: usize) -> (usize, usize, usize) {
    let [w, ow] = [win.input[1], win.out[1]];
    let (stride, pad) = (win.stride[1], win.padding[1]);
    let shift = j * win.dilation[1];
    let first = pad.saturating_sub(shift).div_ceil(stride).min(ow);
    let last = (w + pad).saturating_sub(shift).div_ceil(stride).clamp(first, ow);
    // The input column of `first` (meaningful only when first < last).
    (first, last, (first * stride + shift).saturating_sub(pad))
}

/// One im2col row of one input plane: what kernel tap `[i, j]` reads at each output position
/// (row-major), zero where it falls in the padding.
fn unfold<T: Element>(plane: &[T], out: &mut [T], win: &Window, [i, j]: [usize; 2]) {
    let (w, stride) = (win.input[1], win.stride[1]);
    let (first, last, column) = inside(win, j);
    for (y, line) in out.chunks_exact_mut(win.out[1].max(1)).enumerate() {
        match win.source(0, y, i) {
            Some(r) if first < last => {
                let source = &plane[r * w + column..][..=(last - first - 1) * stride];
                line[..first].fill(T::default());
                line[last..].fill(T::default());
                line[first..last].iter_mut().zip(source.iter().step_by(stride)).for_each(|(o, &v)| *o = v);
            }
            _ => line.fill(T::default()),
        }
    }
}

/// The adjoint of [`unfold`]: each element of the row added to the element of `plane` it was
/// read from (those read from the padding are dropped).
fn fold<T: Number>(row: &[T], plane: &mut [T], win: &Window, [i, j]: [usize; 2]) {
    let (w, stride) = (win.input[1], win.stride[1]);
    let (first, last, column) = inside(win, j);
    if first == last {
        return;
    }
    for (y, line) in row.chunks_exact(win.out[1].max(1)).enumerate() {
        if let Some(r) = win.source(0, y, i) {
            let target = &mut plane[r * w + column..][..=(last - first - 1) * stride];
            target.iter_mut().step_by(stride).zip(&line[first..last]).for_each(|(t, &v)| *t = t.add(v));
        }
    }
}

/// Max pooling of `input` (`[planes, h, w]`): the largest element of each window (NaN wins, as
/// in PyTorch) and its position in its plane (`row * w + column`), both `[planes, out_h, out_w]`.
pub(super) fn max_pool2d<T: Element>(input: &Array, win: &Window) -> Result<(Array, Array)> {
    let func = "max_pool2d";
    let planes = input.layout.shape[0];
    let [h, w] = win.input;
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let total = planes.checked_mul(oh).and_then(|x| x.checked_mul(ow));
    let (mut values, mut indices) = (output::<T>(func, total)?, output::<i64>(func, total)?);
    let (area, out_area) = ((h * w).max(1), (oh * ow).max(1));
    with_elements(input, |x: &[T]| {
        // Runs of planes on the CPU's threads, each about `threads::GRAIN` window elements.
        let per_task = (threads::GRAIN / (out_area * kh * kw).max(1)).max(1);
        let tasks = values.chunks_mut(per_task * out_area).zip(indices.chunks_mut(per_task * out_area)).enumerate();
        threads::for_each(tasks, |(t, (values, indices))| {
            let outputs = values.chunks_mut(out_area).zip(indices.chunks_mut(out_area));
            for (p, (values, indices)) in outputs.enumerate() {
                // (A plane of no elements has no window positions to read.)
                let plane = x.get((t * per_task + p) * area..).and_then(|x| x.get(..area)).unwrap_or(&[]);
                let windows = (0..oh).flat_map(|y| (0..ow).map(move |z| (y, z)));
                for ((y, z), (value, index)) in windows.zip(values.iter_mut().zip(indices.iter_mut())) {
                    let mut best: Option<(f64, T, usize)> = None;
                    for r in (0..kh).filter_map(|i| win.source(0, y, i)) {
                        for s in (0..kw).filter_map(|j| win.source(1, z, j)) {
                            let at = r * w + s;
                            let v = plane[at];
                            let f = v.to_f64();
                            if best.is_none_or(|(m, ..)| f > m || f.is_nan()) {
                                best = Some((f, v, at));
                            }
                        }
                    }
                    let (_, v, at) = best.unwrap_or((f64::NEG_INFINITY, T::from_f64(f64::NEG_INFINITY), 0));
                    *value = v;
                    *index = at as i64;
                }
            }
        });
    })?;
    let shape = Shape::from([planes, oh, ow]);
    Ok((array(values, shape.clone()), array(indices, shape)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::elements;

    #[test]
    fn samples_too_large_to_share_a_product_are_convolved_one_by_one() {
        // Each sample's columns exceed half of COLUMNS: three products, one per sample.
        let (n, h, w) = (3, 1024, 1100);
        assert!(2 * h * w > COLUMNS);
        let input = array((0..n * h * w).map(|i| (i % 7) as f32).collect::<Vec<_>>(), Shape::from([n, 1, h, w]));
        let weight = array(vec![2.0f32, -1.0], Shape::from([2, 1, 1, 1]));
        let bias = array(vec![0.5f32, 0.0], Shape::from([2]));
        let win =
            Window { kernel: [1, 1], stride: [1, 1], padding: [0, 0], dilation: [1, 1], input: [h, w], out: [h, w] };
        let out = elements::<f32>("test", &conv2d::<f32>(&input, &weight, Some(&bias), 1, &win).unwrap()).unwrap();
        for (b, sample) in out.chunks(2 * h * w).enumerate() {
            let x = |p: usize| ((b * h * w + p) % 7) as f32;
            assert!(sample[..h * w].iter().enumerate().all(|(p, &v)| v == 2.0 * x(p) + 0.5));
            assert!(sample[h * w..].iter().enumerate().all(|(p, &v)| v == -x(p)));
        }
    }

    #[test]
    fn weight_gradients_sum_over_products_of_one_sample_each_and_are_zero_without_samples() {
        // Three products, one per sample: the first writes the weight's gradient, the others
        // add to it.
        let (h, w) = (1024, 1100);
        let win =
            Window { kernel: [1, 1], stride: [1, 1], padding: [0, 0], dilation: [1, 1], input: [h, w], out: [h, w] };
        let weight = array(vec![2.0f64, -1.0], Shape::from([2, 1, 1, 1]));
        for n in [3, 0] {
            let input = array((0..n * h * w).map(|i| (i % 7) as f64).collect::<Vec<_>>(), Shape::from([n, 1, h, w]));
            let grad = array(vec![1.0f64; n * 2 * h * w], Shape::from([n, 2, h, w]));
            let [dx, dw] = conv2d_backward::<f64>(&input, &weight, &grad, 1, &win, [true, true]).unwrap();
            let sum: f64 = (0..n * h * w).map(|i| (i % 7) as f64).sum();
            assert_eq!(elements::<f64>("test", &dw.unwrap()).unwrap(), [sum, sum]);
            assert!(elements::<f64>("test", &dx.unwrap()).unwrap().iter().all(|&v| v == 1.0));
        }
    }

    #[test]
    fn the_backward_kernel_gives_the_gradients_of_the_definition() {
        // Groups, stride, padding and dilation, in both dimensions, over three samples.
        let (n, c, o, groups, [h, w], [kh, kw]) = (3, 4, 6, 2, [7, 6], [3, 2]);
        let win =
            Window { kernel: [kh, kw], stride: [2, 1], padding: [1, 2], dilation: [2, 3], input: [h, w], out: [0, 0] };
        let out = |a: usize| {
            (win.input[a] + 2 * win.padding[a] - win.dilation[a] * (win.kernel[a] - 1) - 1) / win.stride[a] + 1
        };
        let win = Window { out: [out(0), out(1)], ..win };
        let [oh, ow] = win.out;
        let (cg, og) = (c / groups, o / groups);
        let ramp = |k: usize, scale: f64| (0..k).map(|i| ((i * 37 % 11) as f64 - 5.0) * scale).collect::<Vec<_>>();
        let (x, wt, g) = (ramp(n * c * h * w, 0.5), ramp(o * cg * kh * kw, 0.25), ramp(n * o * oh * ow, 1.0));
        let (mut dx, mut dw) = (vec![0.0; x.len()], vec![0.0; wt.len()]);
        for (b, f, y, z, ch, i, j) in positions(n, o, oh, ow, cg, kh, kw) {
            let (Some(r), Some(s)) = (win.source(0, y, i), win.source(1, z, j)) else { continue };
            let xi = ((b * c + f / og * cg + ch) * h + r) * w + s;
            let (wi, gi) = (((f * cg + ch) * kh + i) * kw + j, ((b * o + f) * oh + y) * ow + z);
            dx[xi] += g[gi] * wt[wi];
            dw[wi] += g[gi] * x[xi];
        }
        let arr = |v: &Vec<f64>, s: &[usize]| array(v.clone(), Shape::new(s));
        let (xa, wa, ga) = (arr(&x, &[n, c, h, w]), arr(&wt, &[o, cg, kh, kw]), arr(&g, &[n, o, oh, ow]));
        let backward = |which| conv2d_backward::<f64>(&xa, &wa, &ga, groups, &win, which).unwrap();
        let [gx, gw] = backward([true, true]);
        let close = |got: Vec<f64>, want: &[f64]| got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9);
        assert!(close(elements::<f64>("test", &gx.unwrap()).unwrap(), &dx));
        assert!(close(elements::<f64>("test", &gw.unwrap()).unwrap(), &dw));
        let [none, gw] = backward([false, true]);
        assert!(none.is_none() && close(elements::<f64>("test", &gw.unwrap()).unwrap(), &dw));
    }

    /// Every (sample, filter, out row, out column, channel in group, kernel row, kernel column).
    fn positions(
        n: usize,
        o: usize,
        oh: usize,
        ow: usize,
        cg: usize,
        kh: usize,
        kw: usize,
    ) -> impl Iterator<Item = (usize, usize, usize, usize, usize, usize, usize)> {
        let total = n * o * oh * ow * cg * kh * kw;
        (0..total).map(move |k| {
            let (j, k) = (k % kw, k / kw);
            let (i, k) = (k % kh, k / kh);
            let (ch, k) = (k % cg, k / cg);
            let (z, k) = (k % ow, k / ow);
            let (y, k) = (k % oh, k / oh);
            let (f, b) = (k % o, k / o);
            (b, f, y, z, ch, i, j)
        })
    }

    #[test]
    fn unfolding_pads_strides_and_dilates() {
        // A 3 x 4 plane, kernel 3 x 3 with stride 2, padding 1, dilation 1: out 2 x 2.
        let plane: Vec<i64> = (1..=12).collect();
        let win =
            Window { kernel: [3, 3], stride: [2, 2], padding: [1, 1], dilation: [1, 1], input: [3, 4], out: [2, 2] };
        let unfolded = |tap| {
            let mut out = vec![-1i64; 4];
            unfold(&plane, &mut out, &win, tap);
            out
        };
        assert_eq!(unfolded([0, 0]), [0, 0, 0, 6]);
        assert_eq!(unfolded([1, 1]), [1, 3, 9, 11]);
        assert_eq!(unfolded([2, 2]), [6, 8, 0, 0]);
    }
}
