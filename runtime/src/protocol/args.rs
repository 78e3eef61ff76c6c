//! The positional arguments a hook or mode sees, built for one call that left the fast path.
//!
//! Hooks take `args: &[Value]`, and a `Value` owns its tensor handle. Cloning each tensor of
//! the call into its value, and dropping it afterwards, costs two atomic reference-count
//! updates per tensor on every dispatched call. The tensors of a call outlive its dispatch, and
//! hooks only ever see the values by shared reference, so [`Args`] *lends* them instead: it
//! holds a copy of the handle that is never dropped, which behaves exactly as a reference to
//! the caller's tensor. A hook that keeps a value clones it, which counts the reference as
//! usual.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;

use smallvec::SmallVec;

use crate::tensor::Tensor;
use crate::value::{ToValue, Value};

/// How many arguments [`Args`] can lend; later ones are cloned (no signature has this many).
const MAX_LENT: usize = u64::BITS as usize;

/// The positional arguments a hook sees (`args`), in order; up to four are kept inline,
/// without allocating. Tensors borrowed for `'a` are lent rather than cloned (see the module
/// documentation). Dereferences to `&[Value]`.
#[doc(hidden)]
pub struct Args<'a> {
    /// The values; an entry whose bit is set in `lent` is a lent copy and is never dropped.
    values: SmallVec<[ManuallyDrop<Value>; 4]>,
    /// Bit `i` set: `values[i]` is a lent copy of a tensor borrowed for `'a`.
    lent: u64,
    _borrows: PhantomData<&'a Tensor>,
}

impl<'a> Args<'a> {
    /// No arguments.
    #[inline]
    pub fn new() -> Self {
        Args { values: SmallVec::new(), lent: 0, _borrows: PhantomData }
    }

    /// Appends a value of its own.
    #[inline]
    pub fn push(&mut self, value: Value) {
        self.values.push(ManuallyDrop::new(value));
    }

    /// Appends values of their own.
    pub fn extend(&mut self, values: impl IntoIterator<Item = Value>) {
        values.into_iter().for_each(|v| self.push(v));
    }

    /// Appends a typed call's tensor argument as hooks see it: lent, except a wrapped Python
    /// number, which hooks see as the number it was (as [`ToValue`] converts it).
    #[inline(always)]
    pub fn push_tensor(&mut self, tensor: &'a Tensor) {
        if tensor.dense().is_some_and(|d| d.wrapped_number) {
            self.push(tensor.to_value());
        } else {
            self.lend(tensor);
        }
    }

    /// Appends `tensor` without counting a reference to it.
    #[inline(always)]
    fn lend(&mut self, tensor: &'a Tensor) {
        let at = self.values.len();
        if at >= MAX_LENT {
            return self.push(Value::Tensor(tensor.clone()));
        }
        // SAFETY: the copy is a second handle that no reference count accounts for; it is
        // sound because it is used only as a shared reference to `*tensor` would be:
        // - it is never dropped: it sits in a `ManuallyDrop` whose bit in `lent` is set, and
        //   `Drop for Args` skips those, so no count is decremented twice;
        // - it never outlives `*tensor`: `Args<'a>` cannot outlive the borrow `'a`, during
        //   which `*tensor` (holding a count) can be neither dropped nor changed, so every
        //   allocation the copy points to stays alive;
        // - it is reachable only through `&Value` (`Deref` gives `&[Value]`; nothing gives
        //   `&mut` access or moves an entry out), so only the `&self` methods of `Tensor` and
        //   of the `Arc`s inside it can run on it, which is what `&*tensor` allows too; a
        //   clone of it increments the count as any clone does;
        // - a `Tensor` holds a `&'static Class` and `Arc`s, plain pointers with no interior
        //   mutability of their own and no uniqueness claim (unlike `Box`), so a bitwise copy
        //   aliasing the original is allowed.
        let copy = unsafe { std::ptr::read(tensor) };
        self.values.push(ManuallyDrop::new(Value::Tensor(copy)));
        self.lent |= 1 << at;
    }
}

impl Default for Args<'_> {
    fn default() -> Self {
        Args::new()
    }
}

impl Deref for Args<'_> {
    type Target = [Value];
    #[inline]
    fn deref(&self) -> &[Value] {
        let values: &[ManuallyDrop<Value>] = &self.values;
        // SAFETY: `ManuallyDrop<T>` is `repr(transparent)` over `T` (same size, alignment and
        // bit validity), so a slice of them is a valid slice of `T`, borrowed for as long.
        unsafe { &*(std::ptr::from_ref(values) as *const [Value]) }
    }
}

impl Drop for Args<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Usually every entry is a lent tensor, and there is nothing to drop.
        let len = self.values.len();
        if len >= MAX_LENT || self.lent != (1 << len) - 1 {
            self.drop_owned();
        }
    }
}

impl Args<'_> {
    /// Drops the entries that are not lent.
    #[inline(never)]
    fn drop_owned(&mut self) {
        for (i, value) in self.values.iter_mut().enumerate() {
            if i >= MAX_LENT || self.lent & (1 << i) == 0 {
                // SAFETY: an owned entry, dropped once, here; it is not used afterwards.
                unsafe { ManuallyDrop::drop(value) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_tensors_are_not_counted_and_owned_values_are_dropped() {
        let t = crate::tensor([1.0f32]).unwrap();
        let weak = t.downgrade();
        let mut args = Args::new();
        args.push_tensor(&t);
        args.push(Value::Tensor(t.clone()));
        args.push(Value::Int(3));
        assert!(matches!(&args[..], [Value::Tensor(_), Value::Tensor(_), Value::Int(3)]));
        let kept = args[0].clone();
        drop(args);
        assert!(kept.as_tensor().is_some_and(|k| k.is(&t)));
        drop(kept);
        // Had the lent copy been dropped, the count would have reached zero already.
        assert!(weak.upgrade().is_some());
        drop(t);
        assert!(weak.upgrade().is_none(), "nothing leaked");

        let n = Tensor::scalar(2i64);
        let mut args = Args::new();
        args.push_tensor(&n);
        assert_eq!(args[0].as_int(), Some(2), "a wrapped number is seen as the number");
    }

    #[test]
    fn many_arguments_are_cloned_past_the_lent_ones() {
        let t = crate::tensor([1.0f32]).unwrap();
        let given: Vec<Tensor> = (0..MAX_LENT + 3).map(|_| t.clone()).collect();
        let weak = t.downgrade();
        drop(t);
        let mut args = Args::new();
        given.iter().for_each(|t| args.push_tensor(t));
        assert_eq!(args.len(), MAX_LENT + 3);
        drop(args);
        drop(given);
        assert!(weak.upgrade().is_none(), "the clones past the lent ones were dropped");
    }
}
