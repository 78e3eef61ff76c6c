//! How a DTensor's global tensor is laid over the ranks of its mesh: [`Placement`], and the
//! share of a sharded dimension each rank holds.

use std::fmt;

use crate::collectives::ReduceOp;

/// Where a DTensor's values are along one mesh dimension (PyTorch's `Placement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Split along this tensor dimension (negative counts from the end), rank `r` holding
    /// the `r`-th of `torch.chunk`'s pieces (`Shard(dim)`): the first ranks get
    /// `ceil(size / ranks)` each, the last ones what is left, possibly nothing.
    Shard(i64),
    /// The whole tensor on every rank (`Replicate()`).
    Replicate,
    /// Every rank holds a contribution; the global tensor is their reduction by this operation
    /// (`Partial(reduce_op)`), pending a collective.
    Partial(ReduceOp),
}

impl Placement {
    /// `Partial("sum")`, the default partial placement.
    pub const PARTIAL: Placement = Placement::Partial(ReduceOp::Sum);

    /// Whether this is `Shard` (of `dim`, when given).
    pub fn is_shard(&self, dim: Option<i64>) -> bool {
        matches!(*self, Placement::Shard(d) if dim.is_none_or(|x| x == d))
    }

    /// Whether this is `Replicate`.
    pub fn is_replicate(&self) -> bool {
        *self == Placement::Replicate
    }

    /// Whether this is `Partial`.
    pub fn is_partial(&self) -> bool {
        matches!(self, Placement::Partial(_))
    }

    /// The placement with a negative shard dimension counted from the end of `ndim`
    /// dimensions; a dimension out of range is an error naming it.
    pub(crate) fn normalized(self, ndim: usize) -> torchfn_runtime::Result<Placement> {
        match self {
            Placement::Shard(d) => {
                let n = ndim as i64;
                if d < -n || d >= n.max(1) || ndim == 0 {
                    return Err(torchfn_runtime::Error::index_error(format!(
                        "{self} is out of range for a tensor of {ndim} dimensions (expected a dim in [{}, {}])",
                        -n,
                        n - 1
                    )));
                }
                Ok(Placement::Shard(if d < 0 { d + n } else { d }))
            }
            other => Ok(other),
        }
    }

    /// The tensor dimension a normalized `Shard` splits.
    pub(crate) fn shard_dim(&self) -> Option<usize> {
        match *self {
            Placement::Shard(d) => usize::try_from(d).ok(),
            _ => None,
        }
    }
}

/// Prints as PyTorch's `repr`: `Shard(dim=0)`, `Replicate()`, `Partial(sum)`.
impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Shard(d) => write!(f, "Shard(dim={d})"),
            Placement::Replicate => f.write_str("Replicate()"),
            Placement::Partial(op) => write!(f, "Partial({})", op.to_string().to_lowercase()),
        }
    }
}

/// Where rank `rank`'s piece of a dimension of `size` split over `ranks` starts, and its length
/// (`torch.chunk`'s pieces: `ceil(size / ranks)` each, the last ones shorter or empty).
pub(crate) fn shard_range(size: usize, ranks: usize, rank: usize) -> (usize, usize) {
    let chunk = size.div_ceil(ranks.max(1));
    let start = (rank * chunk).min(size);
    (start, chunk.min(size - start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_torch_chunk_s() {
        let pieces = |size, ranks| (0..ranks).map(|r| shard_range(size, ranks, r)).collect::<Vec<_>>();
        assert_eq!(pieces(8, 2), [(0, 4), (4, 4)]);
        assert_eq!(pieces(5, 2), [(0, 3), (3, 2)]);
        assert_eq!(pieces(5, 4), [(0, 2), (2, 2), (4, 1), (5, 0)]);
        assert_eq!(pieces(1, 2), [(0, 1), (1, 0)]);
    }

    #[test]
    fn placements_print_and_normalize_as_pytorch_s() {
        assert_eq!(Placement::Shard(0).to_string(), "Shard(dim=0)");
        assert_eq!(Placement::Replicate.to_string(), "Replicate()");
        assert_eq!(Placement::PARTIAL.to_string(), "Partial(sum)");
        assert_eq!(Placement::Shard(-1).normalized(3).unwrap(), Placement::Shard(2));
        let err = Placement::Shard(3).normalized(3).unwrap_err();
        assert!(err.to_string().contains("Shard(dim=3) is out of range"), "{err}");
    }
}
