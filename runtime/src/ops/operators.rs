//! Rust's operators on tensors: `&a + &b`, `&a * 2.0`, `1.0 - &a`, `-&a`.
//!
//! Each goes through the overridable operator method (`Tensor.__add__`, `Tensor.__radd__`, ...),
//! as Python's operators do, and returns a `Result`: a shape or dtype error is an error, never a
//! panic. A number on either side is a Python-style number ([`Tensor::scalar`]): any
//! [`Scalar`] on the right, an `f64` or `i64` on the left.

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::error::Result;
use crate::tensor::{Scalar, Tensor};

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $dunder:ident, $reflected:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self.$dunder(rhs)
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

binary_operator!(Add, add, __add__, __radd__);
binary_operator!(Sub, sub, __sub__, __rsub__);
binary_operator!(Mul, mul, __mul__, __rmul__);
binary_operator!(Div, div, __truediv__, __rtruediv__);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        self.__neg__()
    }
}
