//! Walking several strided layouts in step: the loop behind every elementwise kernel and copy.
//! The dimensions of the loop are simplified first (size-one dimensions dropped, neighbours
//! that every operand steps through evenly merged), so that the elements come in runs along
//! the last dimension: one run for same-shape contiguous operands, one per row for a bias
//! broadcast over rows. Each run is then one tight loop, which the compiler vectorises.

use smallvec::SmallVec;

use crate::types::Layout;

/// The step of an operand read through `layout` in a loop over `shape` that is one run: 1
/// when it is contiguous over exactly `shape`, 0 when it is a single element (such as a Python
/// number), `None` otherwise. (For a `shape` with elements.)
#[inline]
pub(super) fn flat_step(shape: &[usize], layout: &Layout) -> Option<usize> {
    let (dims, strides) = (&layout.shape[..], &layout.strides[..]);
    if dims.len() <= shape.len() && dims.iter().all(|&d| d == 1) {
        return Some(0);
    }
    if dims.len() != shape.len() {
        return None;
    }
    // Compared size by size: a call to `memcmp` costs more than these few.
    let mut expected = 1;
    for ((&size, &d), &s) in shape.iter().zip(dims).zip(strides).rev() {
        if size != d || (d != 1 && s != expected) {
            return None;
        }
        expected *= d;
    }
    Some(1)
}

/// The loop over `N` operands: merged dimensions, outermost first, each with its size and the
/// step of every operand along it (0 where the operand is broadcast).
#[derive(Debug, PartialEq)]
pub(super) struct Walk<const N: usize> {
    /// Two inline: the common loops merge to one dimension (contiguous operands) or two (a
    /// row broadcast, a transpose), and a walk this small moves without `memcpy` (with six,
    /// the copies were 7% of a one-element `add`'s instructions).
    dims: SmallVec<[(usize, [usize; N]); 2]>,
    offsets: [usize; N],
}

impl<const N: usize> Walk<N> {
    /// The loop over the elements of `shape`, in row-major order, reading each operand through
    /// its layout broadcast to `shape` (dimensions aligned from the last, size-one dimensions
    /// and missing leading ones repeated). `None` when a layout does not broadcast to `shape`.
    #[inline]
    pub(super) fn new(shape: &[usize], layouts: [&Layout; N]) -> Option<Walk<N>> {
        Walk::one_run(shape, layouts).or_else(|| Walk::merged(shape, layouts))
    }

    /// The loop of [`new`](Walk::new) in general: the dimensions of `shape` aligned, size-one
    /// ones dropped, and neighbours that every operand steps through evenly merged.
    fn merged(shape: &[usize], layouts: [&Layout; N]) -> Option<Walk<N>> {
        let ndim = shape.len();
        if layouts.iter().any(|l| l.ndim() > ndim) {
            return None;
        }
        let mut dims: SmallVec<[(usize, [usize; N]); 2]> = SmallVec::new();
        for (d, &size) in shape.iter().enumerate() {
            let mut steps = [0; N];
            for (step, layout) in steps.iter_mut().zip(layouts) {
                let Some(k) = (d + layout.ndim()).checked_sub(ndim) else { continue };
                match layout.shape[k] {
                    n if n == size => *step = layout.strides[k],
                    1 => {}
                    _ => return None,
                }
            }
            if size == 1 {
                continue;
            }
            match dims.last_mut() {
                // The previous dimension steps over exactly `size` of these, for every operand.
                // (Checked: an empty tensor's other dimensions may multiply past usize; it reads
                // nothing, so a saturated size is never walked.)
                Some((outer, outer_steps)) if (0..N).all(|i| steps[i].checked_mul(size) == Some(outer_steps[i])) => {
                    *outer = outer.saturating_mul(size);
                    *outer_steps = steps;
                }
                _ => dims.push((size, steps)),
            }
        }
        Some(Walk { dims, offsets: layouts.map(|l| l.offset) })
    }

    /// The loop in the common case that needs no merging, or `None`: `shape` has elements and
    /// every operand is either contiguous over exactly `shape` (step 1) or a single element
    /// (step 0, such as a Python number): one run covers everything, with what
    /// [`merged`](Walk::merged) would find, found without walking the dimensions.
    #[inline]
    fn one_run(shape: &[usize], layouts: [&Layout; N]) -> Option<Walk<N>> {
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).filter(|&n| n > 0)?;
        let mut steps = [0; N];
        for (step, layout) in steps.iter_mut().zip(layouts) {
            *step = flat_step(shape, layout)?;
        }
        let dims = if n == 1 { SmallVec::new() } else { SmallVec::from_elem((n, steps), 1) };
        Some(Walk { dims, offsets: layouts.map(|l| l.offset) })
    }

    /// One past the furthest position the loop reads of operand `i` (0 when it reads nothing).
    pub(super) fn span(&self, i: usize) -> usize {
        if self.dims.iter().any(|&(size, _)| size == 0) {
            return 0;
        }
        self.dims.iter().fold(self.offsets[i], |end, (size, steps)| end + (size - 1) * steps[i]) + 1
    }

    /// Calls `body(positions, len, steps)` for each run of the elements `range` (row-major
    /// positions in the loop), in order: the run's `len` elements are at `positions[i]`,
    /// `positions[i] + steps[i]`, ... of operand `i`.
    #[inline(always)]
    pub(super) fn runs(&self, range: std::ops::Range<usize>, mut body: impl FnMut([usize; N], usize, [usize; N])) {
        if range.is_empty() {
            return;
        }
        let ((width, inner), outer) = match self.dims.split_last() {
            Some((&last, outer)) => (last, outer),
            None => ((1, [0; N]), &[][..]),
        };
        // The position of the first row, and the column the range starts at.
        let (mut row, mut column) = (range.start / width, range.start % width);
        let mut index: SmallVec<[usize; 6]> = SmallVec::from_elem(0, outer.len());
        let mut start = self.offsets;
        for (i, &(size, steps)) in outer.iter().enumerate().rev() {
            index[i] = row % size;
            row /= size;
            (0..N).for_each(|k| start[k] += index[i] * steps[k]);
        }
        let mut left = range.len();
        loop {
            let len = (width - column).min(left);
            body(std::array::from_fn(|k| start[k] + column * inner[k]), len, inner);
            left -= len;
            if left == 0 {
                return;
            }
            column = 0;
            // The next row: the last outer index counts up, carrying into those before it.
            for (i, &(size, steps)) in outer.iter().enumerate().rev() {
                index[i] += 1;
                (0..N).for_each(|k| start[k] += steps[k]);
                if index[i] < size {
                    break;
                }
                index[i] = 0;
                (0..N).for_each(|k| start[k] -= size * steps[k]);
            }
        }
    }
}

/// True when no two elements of `layout` share a position (what a write through it needs):
/// ordered by step, each dimension steps past everything the smaller ones span.
pub(super) fn distinct(layout: &Layout) -> bool {
    if layout.shape.contains(&0) {
        return true;
    }
    let mut dims: SmallVec<[(usize, usize); 6]> =
        layout.shape.iter().zip(&layout.strides).filter(|&(&n, _)| n > 1).map(|(&n, &s)| (s, n)).collect();
    dims.sort_unstable();
    let mut span = 0;
    for (step, size) in dims {
        if step <= span {
            return false;
        }
        span += (size - 1) * step;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Shape;

    fn layout(shape: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset }
    }

    fn runs<const N: usize>(walk: &Walk<N>, range: std::ops::Range<usize>) -> Vec<([usize; N], usize, [usize; N])> {
        let mut out = Vec::new();
        walk.runs(range, |p, n, s| out.push((p, n, s)));
        out
    }

    #[test]
    fn contiguous_operands_make_one_run_and_a_broadcast_bias_one_per_row() {
        let dense = Layout::contiguous(Shape::from([2, 3, 4]));
        let walk = Walk::new(&[2, 3, 4], [&dense, &dense]).unwrap();
        assert_eq!(runs(&walk, 0..24), [([0, 0], 24, [1, 1])]);
        assert_eq!(runs(&walk, 5..9), [([5, 5], 4, [1, 1])]);
        let bias = Layout::contiguous(Shape::from([4]));
        let walk = Walk::new(&[2, 3, 4], [&dense, &bias]).unwrap();
        assert_eq!(runs(&walk, 2..10), [([2, 2], 2, [1, 1]), ([4, 0], 4, [1, 1]), ([8, 0], 2, [1, 1])]);
        // A column [2, 3, 1] repeats along the rows; a scalar everywhere.
        let column = layout(&[2, 3, 1], &[3, 1, 1], 10);
        let walk = Walk::new(&[2, 3, 4], [&column, &Layout::contiguous(Shape::from([]))]).unwrap();
        assert_eq!(runs(&walk, 0..24)[..2], [([10, 0], 4, [0, 0]), ([11, 0], 4, [0, 0])]);
        assert_eq!(walk.span(0), 16);
    }

    #[test]
    fn contiguous_operands_and_single_elements_make_one_run() {
        let dense = layout(&[2, 3], &[3, 1], 4);
        let one = layout(&[1, 1], &[0, 0], 7);
        let walk = Walk::new(&[2, 3], [&dense, &one]).unwrap();
        assert_eq!(runs(&walk, 0..6), [([4, 7], 6, [1, 0])]);
        assert_eq!(runs(&walk, 2..5), [([6, 7], 3, [1, 0])]);
        assert_eq!(runs(&Walk::new(&[1, 1], [&one]).unwrap(), 0..1), [([7], 1, [0])]);
    }

    #[test]
    fn the_one_run_shortcut_finds_what_merging_finds() {
        let dense = layout(&[2, 3], &[3, 1], 4);
        let one = layout(&[1, 1], &[0, 0], 7);
        let scalar = Layout::contiguous(Shape::from([]));
        for layouts in [[&dense, &one], [&one, &dense], [&dense, &dense], [&scalar, &dense]] {
            assert_eq!(Walk::one_run(&[2, 3], layouts), Walk::merged(&[2, 3], layouts));
            assert!(Walk::one_run(&[2, 3], layouts).is_some());
        }
        assert_eq!(Walk::one_run(&[1], [&one, &scalar]), Walk::merged(&[1], [&one, &scalar]));
        // Not for it: a transpose, a row broadcast, an empty shape, an operand of more dimensions.
        let t = layout(&[2, 3], &[1, 2], 0);
        let row = Layout::contiguous(Shape::from([3]));
        assert!(Walk::one_run(&[2, 3], [&t, &dense]).is_none());
        assert!(Walk::one_run(&[2, 3], [&row, &dense]).is_none());
        assert!(Walk::one_run(&[0, 3], [&layout(&[0, 3], &[3, 1], 0)]).is_none());
        assert!(Walk::one_run(&[1], [&one]).is_none() && Walk::new(&[1], [&one]).is_none());
    }

    #[test]
    fn strided_layouts_are_walked_in_row_major_order() {
        // The transpose of a 3 x 2 matrix, from position 1 on.
        let t = layout(&[2, 3], &[1, 2], 0);
        let walk = Walk::new(&[2, 3], [&t]).unwrap();
        assert_eq!(runs(&walk, 1..6), [([2], 2, [2]), ([1], 3, [2])]);
        assert!(Walk::new(&[2, 3], [&layout(&[3], &[1], 0), &layout(&[2], &[1], 0)]).is_none());
        assert!(runs(&Walk::new(&[0, 3], [&layout(&[0, 3], &[3, 1], 0)]).unwrap(), 0..0).is_empty());
    }

    #[test]
    fn overlapping_layouts_are_not_distinct() {
        assert!(distinct(&layout(&[2, 3], &[1, 2], 0)));
        assert!(distinct(&layout(&[2, 1, 3], &[3, 0, 1], 4)));
        assert!(!distinct(&layout(&[2, 3], &[0, 1], 0)));
        assert!(!distinct(&layout(&[3, 2], &[1, 1], 0)));
    }
}
