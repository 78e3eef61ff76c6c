//! The operations (layer 2): each is declared once with `#[torch_function]`, checks its
//! arguments, works out the result's shape and dtype, and calls the kernels.

mod arithmetic;
mod creation;
mod linalg;
pub mod nn;
mod operators;
mod properties;
mod reduction;
mod shape;
mod softmax;

pub use arithmetic::{ADD, DIV, MAXIMUM, MINIMUM, MUL, NEG, SUB, add, div, maximum, minimum, mul, neg, sub};
pub use creation::{
    ARANGE, EYE, FULL, FULL_LIKE, LINSPACE, ONES, ONES_LIKE, ZEROS, ZEROS_LIKE, arange, arange_range, eye, full,
    full_like, linspace, ones, ones_like, tensor, zeros, zeros_like,
};
pub use linalg::{BMM, DOT, MATMUL, MM, MV, OUTER, bmm, dot, matmul, mm, mv, outer};
pub use reduction::{
    ALL, AMAX, AMIN, ANY, ARGMAX, ARGMIN, CUMPROD, CUMSUM, LOGSUMEXP, MAX, MEAN, MIN, PROD, STD, SUM, VAR, all,
    all_dim, amax, amin, any, any_dim, argmax, argmin, cumprod, cumsum, logsumexp, max, max_dim, max_other, mean,
    mean_dim, min, min_dim, min_other, prod, prod_dim, std, sum, sum_dim, var,
};
pub use shape::{RESHAPE, reshape};
pub use softmax::{LOG_SOFTMAX, SOFTMAX, log_softmax, softmax};
