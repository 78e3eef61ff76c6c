//! Rust's operators on tensors: `&a + &b`, `&a * 2.0`, `1.0 - &a`, `-&a`.
//!
//! Each goes through the overridable operator method (`Tensor.__add__`, `Tensor.__radd__`, ...),
//! as Python's operators do, and returns a `Result`: a shape or dtype error is an error, never a
//! panic. A number on either side is a Python-style number ([`Tensor::scalar`]).

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::error::Result;
use crate::tensor::Tensor;

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $dunder:ident, $reflected:ident, $($number:ty),*) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self.$dunder(rhs)
            }
        }
        $(
            impl $trait<$number> for &Tensor {
                type Output = Result<Tensor>;
                fn $method(self, rhs: $number) -> Result<Tensor> {
                    self.$dunder(&Tensor::scalar(rhs))
                }
            }
            impl $trait<&Tensor> for $number {
                type Output = Result<Tensor>;
                fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                    rhs.$reflected(&Tensor::scalar(self))
                }
            }
        )*
    };
}

binary_operator!(Add, add, __add__, __radd__, f64, f32, i64, i32);
binary_operator!(Sub, sub, __sub__, __rsub__, f64, f32, i64, i32);
binary_operator!(Mul, mul, __mul__, __rmul__, f64, f32, i64, i32);
binary_operator!(Div, div, __truediv__, __rtruediv__, f64, f32, i64, i32);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        self.__neg__()
    }
}
