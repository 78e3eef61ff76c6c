//! Rust's operators on tensors: `&a + &b`, `&a * 2.0`, `1.0 - &a`, `&a % 3`, `-&a`, `a %= &b`,
//! and the bitwise ones: `&a & &b`, `&a | 1`, `&a ^ &b`, `&a << 2`, `&a >> &b`, `!&a`, `a &= &b`.
//!
//! Each goes through the overridable operator method (`Tensor.__add__`, `Tensor.__radd__`, ...),
//! as Python's operators do, and returns a `Result`: a shape or dtype error is an error, never a
//! panic. A number on either side is a Python-style number ([`Tensor::scalar`]): any
//! [`Scalar`] on the right, an `f64` or `i64` on the left.

use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Div, DivAssign, Mul, MulAssign,
    Neg, Not, Rem, RemAssign, Shl, ShlAssign, Shr, ShrAssign, Sub, SubAssign,
};

use crate::error::{Error, Result};
use crate::tensor::{Scalar, Tensor};

/// `a op b` of two tensors as Python evaluates it: `a.__op__(b)`, then, when every override
/// declined that (PyTorch turns the dispatch `TypeError` of a binary operator into
/// `NotImplemented`), the reflected `b.__rop__(a)`; when both are declined, Python's `TypeError`.
/// So a duck implementing only `__radd__` works on either side of `+`.
fn with_reflection(
    (a, symbol, b): (&Tensor, &str, &Tensor),
    forward: fn(&Tensor, &Tensor) -> Result<Tensor>,
    reflected: fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    reflecting((a, b), forward, reflected, || {
        Err(Error::type_error(format!(
            "unsupported operand type(s) for {symbol}: '{}' and '{}'",
            a.class_of().name(),
            b.class_of().name()
        )))
    })
}

/// `forward(a, b)`, then `reflected(b, a)` when every override declined it, then `declined()`
/// when every override declined that too.
fn reflecting(
    (a, b): (&Tensor, &Tensor),
    forward: fn(&Tensor, &Tensor) -> Result<Tensor>,
    reflected: fn(&Tensor, &Tensor) -> Result<Tensor>,
    declined: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    match forward(a, b) {
        Err(e) if e.is_declined() => match reflected(b, a) {
            Err(e) if e.is_declined() => declined(),
            result => result,
        },
        result => result,
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $dunder:ident, $reflected:ident, $symbol:literal) => {
        /// Through `Tensor.__op__`, then the reflected operator when every override declines.
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                with_reflection((self, $symbol, rhs), Tensor::$dunder, Tensor::$reflected)
            }
        }
        /// A number on the right: `&t op 2.5`.
        impl<S: Into<Scalar>> $trait<S> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: S) -> Result<Tensor> {
                self.$dunder(&Tensor::scalar(rhs))
            }
        }
        /// A float on the left: `2.5 op &t`, through the reflected operator.
        impl $trait<&Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                rhs.$reflected(&Tensor::scalar(self))
            }
        }
        /// An integer on the left: `2 op &t`, through the reflected operator.
        impl $trait<&Tensor> for i64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                rhs.$reflected(&Tensor::scalar(self))
            }
        }
    };
}

binary_operator!(Add, add, __add__, __radd__, "+");
binary_operator!(Sub, sub, __sub__, __rsub__, "-");
binary_operator!(Mul, mul, __mul__, __rmul__, "*");
binary_operator!(Div, div, __truediv__, __rtruediv__, "/");
binary_operator!(Rem, rem, __mod__, __rmod__, "%");
binary_operator!(BitAnd, bitand, __and__, __rand__, "&");
binary_operator!(BitOr, bitor, __or__, __ror__, "|");
binary_operator!(BitXor, bitxor, __xor__, __rxor__, "^");
binary_operator!(Shl, shl, __lshift__, __rlshift__, "<<");
binary_operator!(Shr, shr, __rshift__, __rrshift__, ">>");

macro_rules! assign_operator {
    ($trait:ident, $method:ident, $dunder:ident, $fallible:literal) => {
        /// Writes into this tensor's storage (the operator method this calls is overridable).
        ///
        /// # Panics
        ///
        /// When the operation fails (shapes that do not broadcast to this tensor's, a result
        /// that cannot be cast to its dtype): an assignment operator cannot return the error.
        #[doc = concat!("Call `", $fallible, "` to get it as a `Result`.")]
        impl $trait<&Tensor> for Tensor {
            fn $method(&mut self, rhs: &Tensor) {
                if let Err(e) = self.$dunder(rhs) {
                    panic!("{e}");
                }
            }
        }
        /// As with a tensor on the right; a number is a Python-style number.
        impl<S: Into<Scalar>> $trait<S> for Tensor {
            fn $method(&mut self, rhs: S) {
                if let Err(e) = self.$dunder(&Tensor::scalar(rhs)) {
                    panic!("{e}");
                }
            }
        }
    };
}

assign_operator!(AddAssign, add_assign, __iadd__, "Tensor::__iadd__ (or add_)");
assign_operator!(SubAssign, sub_assign, __isub__, "Tensor::__isub__ (or sub_)");
assign_operator!(MulAssign, mul_assign, __imul__, "Tensor::__imul__ (or mul_)");
assign_operator!(DivAssign, div_assign, __itruediv__, "Tensor::__itruediv__ (or div_)");
assign_operator!(RemAssign, rem_assign, __imod__, "Tensor::__imod__ (or remainder_)");
assign_operator!(BitAndAssign, bitand_assign, __iand__, "Tensor::__iand__ (or bitwise_and_)");
assign_operator!(BitOrAssign, bitor_assign, __ior__, "Tensor::__ior__ (or bitwise_or_)");
assign_operator!(BitXorAssign, bitxor_assign, __ixor__, "Tensor::__ixor__ (or bitwise_xor_)");
assign_operator!(ShlAssign, shl_assign, __ilshift__, "Tensor::__ilshift__ (or bitwise_left_shift_)");
assign_operator!(ShrAssign, shr_assign, __irshift__, "Tensor::__irshift__ (or bitwise_right_shift_)");

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        self.__neg__()
    }
}

/// Python's `~t` (`Tensor.__invert__`): bitwise not of integers, logical not of bools.
impl Not for &Tensor {
    type Output = Result<Tensor>;
    fn not(self) -> Result<Tensor> {
        self.__invert__()
    }
}

/// Python's comparison operators as functions (Python's `operator` module): `operator::lt(a, b)`
/// is `a < b`, since Rust's `<` cannot return a tensor. Each calls `a.__lt__(b)` and, when every
/// override declines it, the reflected `b.__gt__(a)` (`==` and `!=` reflect to themselves); when
/// both decline, Python's `TypeError` for an ordering, and for `==` and `!=` Python's fallback,
/// whether `a` and `b` are the same object.
///
/// ```
/// use torchfn::operator;
/// let (a, b) = (torchfn::tensor([1, 5])?, torchfn::tensor([3, 3])?);
/// assert_eq!(operator::lt(&a, &b)?.to_vec::<bool>()?, [true, false]);
/// assert_eq!(operator::ne(&a, &b)?.to_vec::<bool>()?, [true, true]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub mod operator {
    use super::{Error, Result, Tensor};

    /// `a op b`: `a.__op__(b)`, then `b.__reflected__(a)`, then Python's fallback.
    fn compare(
        (a, symbol, b): (&Tensor, &str, &Tensor),
        forward: fn(&Tensor, &Tensor) -> Result<Tensor>,
        reflected: fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        super::reflecting((a, b), forward, reflected, || match symbol {
            "==" => Tensor::from_vec(vec![a.is(b)], Vec::<usize>::new()),
            "!=" => Tensor::from_vec(vec![!a.is(b)], Vec::<usize>::new()),
            _ => Err(Error::type_error(format!(
                "'{symbol}' not supported between instances of '{}' and '{}'",
                a.class_of().name(),
                b.class_of().name()
            ))),
        })
    }

    /// `a == b` (`a.__eq__(b)`, reflected `b.__eq__(a)`).
    pub fn eq(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, "==", b), Tensor::__eq__, Tensor::__eq__)
    }

    /// `a != b` (`a.__ne__(b)`, reflected `b.__ne__(a)`).
    pub fn ne(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, "!=", b), Tensor::__ne__, Tensor::__ne__)
    }

    /// `a < b` (`a.__lt__(b)`, reflected `b.__gt__(a)`).
    pub fn lt(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, "<", b), Tensor::__lt__, Tensor::__gt__)
    }

    /// `a <= b` (`a.__le__(b)`, reflected `b.__ge__(a)`).
    pub fn le(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, "<=", b), Tensor::__le__, Tensor::__ge__)
    }

    /// `a > b` (`a.__gt__(b)`, reflected `b.__lt__(a)`).
    pub fn gt(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, ">", b), Tensor::__gt__, Tensor::__lt__)
    }

    /// `a >= b` (`a.__ge__(b)`, reflected `b.__le__(a)`).
    pub fn ge(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        compare((a, ">=", b), Tensor::__ge__, Tensor::__le__)
    }
}
