//! The operations (layer 2): each is declared once with `#[torch_function]`, checks its
//! arguments, works out the result's shape and dtype, and calls the kernels.

mod arithmetic;
mod creation;
mod linalg;
mod operators;
mod properties;
mod reduction;
mod shape;

pub use arithmetic::{ADD, DIV, MUL, NEG, SUB, add, div, mul, neg, sub};
pub use creation::{TensorOptions, eye, ones, tensor, zeros};
pub use linalg::{MATMUL, MM, matmul, mm};
pub use reduction::{MEAN, SUM, mean, sum};
pub use shape::{RESHAPE, reshape};
