//! Views of sharded tensors: where a view of a DTensor's global tensor lands in each rank's
//! local tensor. A DTensor's views share its contents (as views of any tensor share memory);
//! an operator that receives one works out the view's local tensor and placement here.
//!
//! The global tensor is contiguous, so a view's dimensions step through its flat index in
//! strides; where every stride and extent of the view and of the tensor divides the next,
//! they split the flat index into the same digits, and a view dimension covering the top
//! digits of the sharded dimension is sharded with it. Transposes, permutations, splitting and
//! merging dimensions (reshape), unsqueezing, broadcasting and slicing other dimensions all
//! map; slicing the sharded dimension itself does not (the caller gathers the tensor instead).

use torchfn_runtime::Shape;
use torchfn_runtime::backend::Layout;

use super::placement::shard_range;

/// The view `view` of a contiguous tensor of `base` shape split along `dim` over `ranks`, as
/// seen in rank `rank`'s piece (itself contiguous): the local view, and the view dimension the
/// split lands on. `None` when the view does not map onto the pieces.
pub(crate) fn shard_view(
    base: &[usize],
    dim: usize,
    ranks: usize,
    rank: usize,
    view: &Layout,
) -> Option<(Layout, usize)> {
    let numel: usize = base.iter().product();
    if numel == 0 || base[dim] <= 1 {
        return None;
    }
    let global = Layout::contiguous(Shape::from(base));
    // The boundaries between digits: every stride and extent, of the tensor and of the view.
    let mut bounds = vec![1, numel];
    for (&n, &stride) in base.iter().zip(&global.strides) {
        if n > 1 {
            bounds.extend([stride, stride * n]);
        }
    }
    let spans: Vec<(usize, usize)> = view
        .shape
        .iter()
        .zip(&view.strides)
        .filter(|&(&n, &s)| n > 1 && s > 0)
        .map(|(&n, &s)| (s, s.saturating_mul(n)))
        .collect();
    for &(from, to) in &spans {
        bounds.extend([from, to]);
    }
    bounds.sort_unstable();
    bounds.dedup();
    if *bounds.last()? > numel || bounds.windows(2).any(|w| w[1] % w[0] != 0) {
        return None;
    }
    let at = |b: usize| bounds.binary_search(&b).ok();
    // Each digit covered by at most one view dimension.
    let mut covered = vec![false; bounds.len()];
    for &(from, to) in &spans {
        for c in &mut covered[at(from)?..at(to)?] {
            if std::mem::replace(c, true) {
                return None;
            }
        }
    }
    // The sharded dimension's digits [a, b), and the view dimension that ends where it ends.
    let (a, b) = (at(global.strides[dim])?, at(global.strides[dim] * base[dim])?);
    let j = (0..view.shape.len())
        .find(|&k| view.shape[k] > 1 && view.strides[k] > 0 && view.strides[k] * view.shape[k] == bounds[b])?;
    let p = at(view.strides[j])?;
    let s = p.max(a);
    // The part of the sharded dimension below the view dimension's must be whole in every
    // piece; uneven pieces are `torch.chunk`'s of the view dimension only where it starts at
    // the sharded dimension's start (then that part is empty).
    let inner = bounds[s] / bounds[a];
    let fits = if base[dim].is_multiple_of(ranks) { (base[dim] / ranks).is_multiple_of(inner) } else { p == a };
    if !fits {
        return None;
    }
    // The offset's coordinate along the sharded dimension must not reach the view's digits.
    let mut rest = view.offset;
    let coords: Vec<usize> = global
        .strides
        .iter()
        .map(|&stride| {
            let c = rest / stride;
            rest %= stride;
            c
        })
        .collect();
    if coords[dim] >= inner {
        return None;
    }
    let len = shard_range(base[dim], ranks, rank).1;
    let mut local_shape = base.to_vec();
    local_shape[dim] = len;
    let local = Layout::contiguous(Shape::from(local_shape));
    // A boundary (the start of a view dimension) in the local tensor's flat index.
    let local_bound = |bound: usize| -> Option<usize> {
        let k = (0..base.len())
            .find(|&k| base[k] > 1 && global.strides[k] <= bound && bound < global.strides[k] * base[k])?;
        Some(local.strides[k] * (bound / global.strides[k]))
    };
    let mut shape = Vec::with_capacity(view.shape.len());
    let mut strides = Vec::with_capacity(view.shape.len());
    for (k, (&n, &stride)) in view.shape.iter().zip(&view.strides).enumerate() {
        if n <= 1 || stride == 0 {
            shape.push(n);
            strides.push(stride);
        } else if k == j {
            shape.push(len / inner * (bounds[s] / bounds[p]));
            strides.push(local_bound(stride)?);
        } else {
            shape.push(n);
            strides.push(local_bound(stride)?);
        }
    }
    let offset = if len == 0 { 0 } else { coords.iter().zip(&local.strides).map(|(c, s)| c * s).sum() };
    Some((Layout { shape: shape.into(), strides: strides.into(), offset }, j))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(shape: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout { shape: shape.into(), strides: strides.iter().copied().collect(), offset }
    }

    #[test]
    fn a_transpose_moves_the_shard() {
        // [6, 4] split along 0 over 2 ranks: pieces [3, 4]; its transpose [4, 6] is split along 1.
        let (local, dim) = shard_view(&[6, 4], 0, 2, 1, &view(&[4, 6], &[1, 4], 0)).unwrap();
        assert_eq!((local, dim), (view(&[4, 3], &[1, 4], 0), 1));
    }

    #[test]
    fn splitting_the_sharded_dimension_shards_its_top_part() {
        // [2, 3, 8] split along 2 (pieces of 4); viewed as [2, 3, 4, 2] (heads of 2): 2 heads each.
        let (local, dim) = shard_view(&[2, 3, 8], 2, 2, 0, &view(&[2, 3, 4, 2], &[24, 8, 2, 1], 0)).unwrap();
        assert_eq!((local, dim), (view(&[2, 3, 2, 2], &[12, 4, 2, 1], 0), 2));
        // 12 split in 2, viewed as 4 heads of 3: 2 heads each; 8 as 2 halves of 4: one each
        // over 2 ranks, none over 4 (a half would straddle two pieces).
        assert!(shard_view(&[12], 0, 2, 0, &view(&[4, 3], &[3, 1], 0)).is_some());
        assert!(shard_view(&[8], 0, 2, 0, &view(&[2, 4], &[4, 1], 0)).is_some());
        assert!(shard_view(&[8], 0, 4, 0, &view(&[2, 4], &[4, 1], 0)).is_none());
    }

    #[test]
    fn merging_keeps_the_shard_when_it_is_the_outer_dimension() {
        // [4, 3] split along 0, flattened to [12]: rows 0-1 are elements 0-5.
        let (local, dim) = shard_view(&[4, 3], 0, 2, 1, &view(&[12], &[1], 0)).unwrap();
        assert_eq!((local, dim), (view(&[6], &[1], 0), 0));
        // Split along 1 and flattened: the pieces interleave.
        assert!(shard_view(&[4, 4], 1, 2, 0, &view(&[16], &[1], 0)).is_none());
    }

    #[test]
    fn slices_of_other_dimensions_map_and_of_the_sharded_one_do_not() {
        // [4, 6] split along 0; columns 2..5 (offset 2).
        let (local, dim) = shard_view(&[4, 6], 0, 2, 1, &view(&[4, 3], &[6, 1], 2)).unwrap();
        assert_eq!((local, dim), (view(&[2, 3], &[6, 1], 2), 0));
        // Rows 1..3 cross the pieces.
        assert!(shard_view(&[4, 6], 0, 2, 0, &view(&[2, 6], &[6, 1], 6)).is_none());
        // Row 0 alone.
        assert!(shard_view(&[4, 6], 0, 2, 0, &view(&[6], &[1], 0)).is_none());
    }

    #[test]
    fn broadcast_and_unit_dimensions_pass_through() {
        let (local, dim) = shard_view(&[4], 0, 2, 0, &view(&[3, 1, 4], &[0, 4, 1], 0)).unwrap();
        assert_eq!((local, dim), (view(&[3, 1, 2], &[0, 4, 1], 0), 2));
    }

    #[test]
    fn uneven_pieces_map_only_onto_the_dimension_itself() {
        // [5, 2] split along 0: pieces of 3 and 2 rows.
        let (local, dim) = shard_view(&[5, 2], 0, 2, 1, &view(&[2, 5], &[1, 2], 0)).unwrap();
        assert_eq!((local, dim), (view(&[2, 2], &[1, 2], 0), 1));
        assert!(shard_view(&[5, 2], 0, 2, 1, &view(&[10], &[1], 0)).is_none());
    }
}
