//! Which examples each process takes: PyTorch's `DistributedSampler`.

use torchfn_runtime::{Error, Result};

use crate::group::{ProcessGroup, resolve};

/// Splits the indices `0..dataset_len` among the processes of a group, each taking every
/// `num_replicas`-th index from its rank on (PyTorch's `utils.data.DistributedSampler`).
///
/// Without `drop_last` the list is padded with its own first indices to a multiple of the
/// number of processes, so each gets `ceil(len / num_replicas)`; with it, the tail that does
/// not divide evenly is dropped. With `shuffle`, the indices are permuted first, by a
/// permutation that depends on `seed + epoch` only: the same on every process, different each
/// epoch once [`set_epoch`](DistributedSampler::set_epoch) is called. (The permutation is
/// torchfn's own, a Fisher-Yates shuffle on SplitMix64, not `torch.randperm`'s.)
///
/// ```
/// use torchfn::distributed::DistributedSampler;
/// let rank0 = DistributedSampler::with(10, 3, 0, false, 0, false)?;
/// let rank2 = DistributedSampler::with(10, 3, 2, false, 0, false)?;
/// assert_eq!((rank0.indices(), rank2.indices()), (vec![0, 3, 6, 9], vec![2, 5, 8, 1]));
/// let dropped = DistributedSampler::with(10, 3, 2, false, 0, true)?;
/// assert_eq!(dropped.indices(), [2, 5, 8]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    dataset_len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A shuffling sampler over `dataset_len` examples for this process of `group` (the
    /// default group when `None`), seed 0, padding the last round.
    pub fn new(dataset_len: usize, group: Option<&ProcessGroup>) -> Result<DistributedSampler> {
        let group = resolve(group)?;
        let rank = group
            .rank()
            .ok_or_else(|| Error::value_error(format!("DistributedSampler(): this process is not in {group:?}")))?;
        DistributedSampler::with(dataset_len, group.size(), rank, true, 0, false)
    }

    /// A sampler with every argument given (`num_replicas`, `rank`, `shuffle`, `seed`,
    /// `drop_last`).
    pub fn with(
        dataset_len: usize,
        num_replicas: usize,
        rank: usize,
        shuffle: bool,
        seed: u64,
        drop_last: bool,
    ) -> Result<DistributedSampler> {
        if num_replicas == 0 || rank >= num_replicas {
            return Err(Error::value_error(format!(
                "DistributedSampler(): Invalid rank {rank}, rank should be in the interval [0, {}]",
                num_replicas as i64 - 1
            )));
        }
        Ok(DistributedSampler { dataset_len, num_replicas, rank, shuffle, seed, drop_last, epoch: 0 })
    }

    /// Sets the epoch, which changes the shuffled order (`set_epoch`): call it at the start
    /// of every epoch, on every process.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// How many indices this process gets (`len(sampler)`).
    pub fn len(&self) -> usize {
        if self.drop_last && !self.dataset_len.is_multiple_of(self.num_replicas) {
            (self.dataset_len - self.num_replicas).div_ceil(self.num_replicas)
        } else {
            self.dataset_len.div_ceil(self.num_replicas)
        }
    }

    /// Whether this process gets no index.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This process's indices for the current epoch (`iter(sampler)`).
    pub fn indices(&self) -> Vec<usize> {
        let mut all: Vec<usize> = (0..self.dataset_len).collect();
        if self.shuffle {
            let mut state = self.seed.wrapping_add(self.epoch);
            for i in (1..all.len()).rev() {
                let j = (split_mix(&mut state) % (i as u64 + 1)) as usize;
                all.swap(i, j);
            }
        }
        let total = self.len() * self.num_replicas;
        if total > all.len() && !all.is_empty() {
            let first = all.clone();
            all.extend(first.iter().cycle().take(total - first.len()));
        }
        all.truncate(total);
        all.into_iter().skip(self.rank).step_by(self.num_replicas).collect()
    }
}

/// SplitMix64's next value.
fn split_mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
