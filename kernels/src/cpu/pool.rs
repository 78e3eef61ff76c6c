//! Reuse of large freed buffers. A buffer of 128 KiB or more goes back here when its last
//! tensor is dropped, and the next result of the same dtype and a close size takes it: its
//! pages are already mapped, so writing the result costs no page faults (glibc serves such sizes
//! with a fresh `mmap`, or from heap memory it trims back to the system on a later free, and
//! faulting the pages in costs more than the operation: an add of two 256 × 784 float32
//! tensors into a result of 784 KiB took 70-82 µs when it chained on its previous result with a
//! 1 MiB threshold, 26-27 µs with this one).

use parking_lot::Mutex;

use crate::backend::Buffer;
use crate::types::Element;

/// Buffers smaller than this are left to the allocator, which recycles them well (glibc's
/// default threshold for serving an allocation with `mmap`).
const MIN_BYTES: usize = 1 << 17;
/// The pool never holds more than this; the oldest buffers go first.
const MAX_BYTES: usize = 1 << 30;

/// Freed buffers, oldest first.
static POOL: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());

fn bytes(buffer: &Buffer) -> usize {
    buffer.len() * buffer.dtype().itemsize()
}

/// Keeps `buffer` for reuse when it is large enough to be worth it.
pub fn give(buffer: Buffer) {
    let size = bytes(&buffer);
    if !(MIN_BYTES..=MAX_BYTES).contains(&size) {
        return;
    }
    let mut pool = POOL.lock();
    let mut held: usize = pool.iter().map(bytes).sum::<usize>() + size;
    while held > MAX_BYTES {
        held -= bytes(&pool.remove(0));
    }
    pool.push(buffer);
}

/// A vector of exactly `n` elements of type `T`, taken from the pool when it holds one of at
/// least `n` and at most a quarter more (the smallest such: the rest of its memory stays held
/// as long as the result lives, and zeros for optimizer states live as long as the model). Its
/// elements are what the buffer held before: the caller overwrites every one.
pub(super) fn take<T: Element>(n: usize) -> Option<Vec<T>> {
    if n.saturating_mul(std::mem::size_of::<T>()) < MIN_BYTES {
        return None;
    }
    let mut pool = POOL.lock();
    let fits = |b: &Buffer| b.dtype() == T::DTYPE && (n..=n.saturating_add(n / 4)).contains(&b.len());
    let best = pool.iter().enumerate().filter(|(_, b)| fits(b)).min_by_key(|(_, b)| b.len()).map(|(i, _)| i)?;
    let mut data = pool.remove(best).into_vec::<T>()?;
    data.truncate(n);
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back_and_small_ones_do_not() {
        // f64 buffers of an odd size (24 MB) no other test uses, so parallel tests do not take
        // them.
        let n = 3_000_017;
        assert!(n * 8 >= MIN_BYTES);
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
