//! The operations (layer 2): each is declared once with `#[torch_function]`, checks its
//! arguments, works out the result's shape and dtype, and calls the kernels.

mod args;
mod arithmetic;
mod copy;
mod creation;
mod indexing;
mod join;
mod linalg;
mod operators;
mod properties;
mod reduction;
mod shape;
mod view;

pub use args::{IntList, SplitSize};
pub use arithmetic::{ADD, DIV, MAXIMUM, MINIMUM, MUL, NEG, SUB, add, div, maximum, minimum, mul, neg, sub};
pub use copy::{CLONE, clone};
pub use creation::{
    ARANGE, EYE, FULL, FULL_LIKE, LINSPACE, ONES, ONES_LIKE, ZEROS, ZEROS_LIKE, arange, arange_range, eye, full,
    full_like, linspace, ones, ones_like, tensor, zeros, zeros_like,
};
pub use indexing::{FLIP, GATHER, INDEX_SELECT, ROLL, TRIL, TRIU, flip, gather, index_select, roll, tril, triu};
pub use join::{CAT, CHUNK, CONCAT, CONCATENATE, SPLIT, STACK, cat, chunk, concat, concatenate, split, stack};
pub use linalg::{MATMUL, MM, matmul, mm};
pub use reduction::{
    ALL, AMAX, AMIN, ANY, ARGMAX, ARGMIN, CUMPROD, CUMSUM, LOGSUMEXP, MAX, MEAN, MIN, PROD, STD, SUM, VAR, all,
    all_dim, amax, amin, any, any_dim, argmax, argmin, cumprod, cumsum, logsumexp, max, max_dim, max_other, mean,
    mean_dim, min, min_dim, min_other, prod, prod_dim, std, sum, sum_dim, var,
};
pub use shape::{RESHAPE, reshape};
pub use view::{
    BROADCAST_TO, FLATTEN, NARROW, PERMUTE, SELECT, SQUEEZE, T, TRANSPOSE, UNSQUEEZE, broadcast_to, flatten, narrow,
    permute, select, squeeze, squeeze_dim, t, transpose, unsqueeze,
};
