//! Reuse of freed buffers. A result of 16 KiB or more asks the pool for a buffer of its dtype
//! and a close size and overwrites it as it is, its old elements never read; when its last
//! tensor is dropped, its buffer goes back to the pool. That saves what a fresh buffer costs
//! before the kernel writes a single result: zeroing it (a training step of gpt_tiny zeroed
//! about 9 MB of fresh results between 16 and 128 KiB, about a tenth of its time), and, for
//! the larger ones, faulting its pages in (glibc serves those with a fresh `mmap`, or from heap
//! memory it trims back to the system on a later free; an add of two 256 × 784 float32 tensors
//! into a result of 784 KiB took 70-82 µs when it chained on its previous result with a 1 MiB
//! threshold, 26-27 µs with pooling).
//!
//! The pool keeps a freed buffer only to replace one that a result of its size asked for and
//! has not given back: buffers made elsewhere (a tensor from a `Vec`, a reduction's result) go
//! back to the allocator unless they stand in for such a request, so the pool never holds more
//! of a size than the program's results of that size have asked for. It holds at most 1 GiB;
//! past that the buffers given longest ago go first.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::backend::Buffer;
use crate::types::{DType, Element};

/// Buffers smaller than this are left to the allocator (a fresh one is zeroed, but costs less
/// than the pool's bookkeeping).
const MIN_BYTES: usize = 1 << 14;
/// The pool never holds more than this; the oldest buffers go first.
const MAX_BYTES: usize = 1 << 30;
/// Past this many sizes, those holding no buffer are forgotten (with what they asked for).
const MAX_SIZES: usize = 1 << 12;

/// What the pool knows of one dtype and length: how many results of it took or asked for a
/// buffer and have not given one back, and the buffers it holds, each with the order it was
/// given in (oldest first).
#[derive(Default)]
struct Size {
    owed: usize,
    free: Vec<(u64, Buffer)>,
}

/// The sizes, the bytes their buffers hold, and the order number of the next buffer given.
struct Pool {
    sizes: BTreeMap<(DType, usize), Size>,
    held: usize,
    next: u64,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { sizes: BTreeMap::new(), held: 0, next: 0 });

fn bytes(buffer: &Buffer) -> usize {
    buffer.len() * buffer.dtype().itemsize()
}

/// Keeps `buffer` when a result of its size took or asked for one it has not given back;
/// else drops it.
pub fn give(buffer: Buffer) {
    let size = bytes(&buffer);
    if !(MIN_BYTES..=MAX_BYTES).contains(&size) {
        return;
    }
    let mut pool = POOL.lock();
    let order = pool.next;
    let Some(entry) = pool.sizes.get_mut(&(buffer.dtype(), buffer.len())).filter(|s| s.owed > 0) else { return };
    entry.owed -= 1;
    entry.free.push((order, buffer));
    pool.next += 1;
    pool.held += size;
    while pool.held > MAX_BYTES {
        // The oldest buffer heads one of the lists (rare: only a full pool looks for it).
        let oldest = pool.sizes.iter().filter_map(|(key, s)| Some((s.free.first()?.0, *key))).min();
        let Some((_, key)) = oldest else { break };
        let (_, buffer) = pool.sizes.get_mut(&key).expect("the key was just found").free.remove(0);
        pool.held -= bytes(&buffer);
    }
}

/// A vector of exactly `n` elements of type `T`, taken from the pool when it holds one of at
/// least `n` and at most a quarter more (the smallest such, the one given last of that size:
/// the rest of its memory stays held as long as the result lives, and zeros for optimizer
/// states live as long as the model). Its elements are what the buffer held before: the caller
/// overwrites every one. Either way the pool then owes a buffer to the size `n`.
pub(super) fn take<T: Element>(n: usize) -> Option<Vec<T>> {
    if n.saturating_mul(std::mem::size_of::<T>()) < MIN_BYTES {
        return None;
    }
    let mut pool = POOL.lock();
    if pool.sizes.len() >= MAX_SIZES {
        pool.sizes.retain(|_, s| !s.free.is_empty());
    }
    pool.sizes.entry((T::DTYPE, n)).or_default().owed += 1;
    let range = (T::DTYPE, n)..=(T::DTYPE, n.saturating_add(n / 4));
    let key = *pool.sizes.range(range).find(|(_, s)| !s.free.is_empty())?.0;
    let (_, buffer) = pool.sizes.get_mut(&key).expect("the key was just found").free.pop()?;
    pool.held -= bytes(&buffer);
    let mut data = buffer.into_vec::<T>()?;
    data.truncate(n);
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_for_the_sizes_results_asked_for() {
        // f64 buffers of an odd size (24 MB) no other test uses, so parallel tests do not take
        // them.
        let n = 3_000_017;
        assert!(n * 8 >= MIN_BYTES);
        give(Buffer::from_vec(vec![7.0f64; n]));
        assert!(take::<f64>(n).is_none(), "a buffer no result asked for goes back to the allocator");
        let data = vec![7.0f64; n];
        let ptr = data.as_ptr();
        give(Buffer::from_vec(data));
        let reused = take::<f64>(n - 10).expect("a buffer of close size is reused");
        assert_eq!((reused.as_ptr(), reused.len()), (ptr, n - 10));
        assert!(take::<f64>(n).is_none_or(|v| v.as_ptr() != ptr), "taken buffers leave the pool");
        give(Buffer::from_vec(vec![1.0f64; 10]));
        assert!(take::<f64>(10).is_none(), "small buffers are not pooled");
    }
}
