//! Relevant arguments: the values a dispatcher returns, in which dispatch looks for overrides.

use crate::tensor::Tensor;
use crate::value::Value;

/// Values that may hold tensor-likes: what a dispatcher returns (docs/protocol.md section 1.7).
///
/// Implemented for [`Tensor`], references, `Option`, slices, arrays, `Vec`, tuples and
/// [`Value`], so a dispatcher returns whatever is natural: `[input, other]`, `(input, out)`,
/// `tensors` (a `&[Tensor]`).
pub trait Relevant {
    /// Calls `f` with every tensor-like, left to right.
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor));

    /// True when no tensor-like here takes part in dispatch: all are plain tensors, or of
    /// classes whose hook is disabled. This is the fast-path test, so implementations inline it.
    #[inline]
    fn all_plain(&self) -> bool {
        let mut plain = true;
        self.each_tensor(&mut |t| plain &= !t.class_of().dispatches());
        plain
    }

    /// True for a sequence of no values at all (as Python's `()`): under a mode,
    /// `has_torch_function` of it is false, of any other true, as PyTorch's is.
    #[inline]
    fn is_empty(&self) -> bool {
        false
    }
}

impl Relevant for Tensor {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        f(self)
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        !self.class_of().dispatches()
    }
}

impl<T: Relevant + ?Sized> Relevant for &T {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        (**self).each_tensor(f)
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        (**self).all_plain()
    }
    #[inline]
    fn is_empty(&self) -> bool {
        (**self).is_empty()
    }
}

impl<T: Relevant> Relevant for [T] {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        self.iter().for_each(|x| x.each_tensor(f))
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        self.iter().all(Relevant::all_plain)
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Relevant, const N: usize> Relevant for [T; N] {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        self.as_slice().each_tensor(f)
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        self.iter().all(Relevant::all_plain)
    }
    #[inline]
    fn is_empty(&self) -> bool {
        N == 0
    }
}

impl<T: Relevant> Relevant for Vec<T> {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        self.as_slice().each_tensor(f)
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        self.as_slice().all_plain()
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.as_slice().len() == 0
    }
}

impl<T: Relevant> Relevant for Option<T> {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        if let Some(x) = self {
            x.each_tensor(f)
        }
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        self.as_ref().is_none_or(Relevant::all_plain)
    }
}

impl Relevant for Value {
    #[inline]
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        match self {
            Value::Tensor(t) => f(t),
            Value::List(items) | Value::Tuple(items) => items.each_tensor(f),
            _ => {}
        }
    }
}

macro_rules! tuple_relevant {
    ($($name:ident)*) => {
        impl<$($name: Relevant),*> Relevant for ($($name,)*) {
            #[allow(non_snake_case, unused_variables)]
            #[inline]
            fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
                let ($($name,)*) = self;
                $($name.each_tensor(f);)*
            }
            #[inline(always)]
            #[allow(non_snake_case)]
            fn all_plain(&self) -> bool {
                let ($($name,)*) = self;
                true $(&& $name.all_plain())*
            }
        }
    };
}
tuple_relevant!();
tuple_relevant!(A);
tuple_relevant!(A B);
tuple_relevant!(A B C);
tuple_relevant!(A B C D);
tuple_relevant!(A B C D E);
tuple_relevant!(A B C D E F);
tuple_relevant!(A B C D E F G);
tuple_relevant!(A B C D E F G H);
tuple_relevant!(A B C D E F G H I);
tuple_relevant!(A B C D E F G H I J);
tuple_relevant!(A B C D E F G H I J K);
tuple_relevant!(A B C D E F G H I J K L);
