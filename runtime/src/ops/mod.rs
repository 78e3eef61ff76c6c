//! The operations (layer 2): each is declared once with `#[torch_function]`, checks its
//! arguments, works out the result's shape and dtype, and calls the kernels.

mod args;
mod arithmetic;
mod autograd;
mod bitwise;
mod blend;
mod compare;
pub(crate) mod convert;
mod copy;
pub(crate) mod creation;
mod decompositions;
mod default_device;
pub(crate) mod device;
mod einsum;
mod fused_optim;
mod index_family;
pub(crate) mod indexing;
pub(crate) mod inplace;
mod join;
mod math;
mod math_binary;
mod math_inplace;
pub mod nn;
mod norms;
mod operators;
mod printing;
mod products;
mod properties;
pub use properties::{IS_COMPLEX, IS_FLOATING_POINT, NUMEL, is_complex, is_floating_point, numel};
mod random;
mod reduction;
mod shape;
mod softmax;
mod sorting;
pub(crate) mod view;

pub use crate::backend::{AdamHyperparameters, SgdHyperparameters};
pub use args::{FloatList, IntList, NormOrder, SplitSize};
pub use arithmetic::{
    ADD, DIV, MAXIMUM, MINIMUM, MUL, NEG, SUB, add, add_out, div, div_out, maximum, minimum, mul, mul_out, neg, sub,
    sub_out,
};
pub use bitwise::{
    BITWISE_AND, BITWISE_LEFT_SHIFT, BITWISE_NOT, BITWISE_OR, BITWISE_RIGHT_SHIFT, BITWISE_XOR, bitwise_and,
    bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
};
pub use blend::{ADDCDIV, ADDCMUL, LERP, addcdiv, addcmul, lerp};
pub use compare::{
    EQ, GE, GT, ISINF, ISNAN, LE, LOGICAL_AND, LOGICAL_NOT, LOGICAL_OR, LOGICAL_XOR, LT, NE, eq, ge, gt, isinf, isnan,
    le, logical_and, logical_not, logical_or, logical_xor, lt, ne,
};
pub use copy::{CLONE, clone};
pub use creation::{
    ARANGE, AS_TENSOR, EMPTY, EMPTY_LIKE, EYE, FULL, FULL_LIKE, LINSPACE, ONES, ONES_LIKE, TENSOR, ZEROS, ZEROS_LIKE,
    arange, arange_range, as_tensor, empty, empty_like, eye, full, full_like, linspace, ones, ones_like, tensor, zeros,
    zeros_like,
};
pub use default_device::{DeviceContext, default_device, get_default_device, set_default_device};
pub use einsum::{EINSUM, einsum};
pub use fused_optim::{_fused_adam_, _fused_adamw_, _fused_sgd_, FusedAdamOptions, FusedSgdOptions};
pub use index_family::{
    INDEX_ADD, INDEX_COPY, INDEX_FILL, MASKED_SCATTER, MASKED_SELECT, SCATTER, SCATTER_ADD, SCATTER_REDUCE,
    TAKE_ALONG_DIM, index_add, index_copy, index_fill, masked_scatter, masked_select, scatter, scatter_add,
    scatter_reduce, scatter_value, take_along_dim,
};
pub use indexing::{
    FLIP, GATHER, INDEX_PUT, INDEX_SELECT, NONZERO, ROLL, TRIL, TRIU, flip, gather, index_put, index_select, nonzero,
    roll, tril, triu,
};
pub use join::{
    CAT, CHUNK, CONCAT, CONCATENATE, SPLIT, STACK, UNBIND, cat, cat_out, chunk, concat, concatenate, split, stack,
    unbind,
};
pub use math::{
    ABS, CEIL, COS, ERF, EXP, EXPM1, FLOOR, LOG, LOG1P, RECIPROCAL, RELU, ROUND, RSQRT, SIGMOID, SIGN, SIN, SQRT,
    SQUARE, TAN, TANH, TRUNC, abs, ceil, cos, erf, exp, expm1, floor, log, log1p, reciprocal, relu, round, rsqrt,
    sigmoid, sign, sin, sqrt, square, tan, tanh, trunc,
};
pub use math_binary::{
    ATAN2, CLAMP, FMOD, MASKED_FILL, POW, REMAINDER, WHERE, atan2, clamp, clamp_tensor, fmod, masked_fill, pow,
    remainder, r#where,
};
pub use math_inplace::{
    cos_out, erf_out, exp_out, expm1_out, log_out, log1p_out, reciprocal_out, rsqrt_out, sigmoid_out, sin_out,
    sqrt_out, tan_out, tanh_out,
};
pub use nn::recurrent::{GRU, LSTM, gru, lstm};
pub use norms::{CDIST, cdist};
pub use products::{
    ADDMM, BADDBMM, BMM, DOT, MATMUL, MM, MV, OUTER, addmm, baddbmm, bmm, bmm_out, dot, matmul, matmul_out, mm, mm_out,
    mv, outer,
};

/// `torch.linalg`: norms, registered as `torchfn.linalg.*` and overridable like every other
/// operation (the products are at the top level: `matmul`, `mm`...).
///
/// ```
/// let x = torchfn::tensor([3.0f64, 4.0])?;
/// assert_eq!(torchfn::linalg::vector_norm(&x, 2.0, None::<torchfn::Dims>, false, None)?.item()?.to_f64(), 5.0);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub mod linalg {
    pub use super::decompositions::{
        CHOLESKY, DET, EIGH, EIGVALSH, INV, LSTSQ, QR, SLOGDET, SOLVE, SVD, SVDVALS, cholesky, det, eigh, eigvalsh,
        inv, lstsq, qr, slogdet, solve, svd, svdvals,
    };
    pub use super::norms::{MATRIX_NORM, NORM, VECTOR_NORM, matrix_norm, norm, vector_norm};
}
pub use operators::operator;

/// The `N` results of a node with several (a custom Function's `Vec` of outputs), as an array;
/// another count is an error naming `func`.
pub(crate) fn results<const N: usize>(func: &str, outs: Vec<crate::Tensor>) -> crate::Result<[crate::Tensor; N]> {
    let count = outs.len();
    outs.try_into()
        .map_err(|_| crate::error::Error::runtime_error(format!("{func}: the operation gave {count} results, not {N}")))
}
pub use random::{
    RAND, RAND_LIKE, RANDINT, RANDN, RANDN_LIKE, rand, rand_like, randint, randint_range, randn, randn_like,
};
pub use reduction::{
    ALL, AMAX, AMIN, ANY, ARGMAX, ARGMIN, CUMPROD, CUMSUM, LOGSUMEXP, MAX, MEAN, MIN, PROD, STD, SUM, VAR, all,
    all_dim, amax, amin, any, any_dim, argmax, argmin, cumprod, cumprod_out, cumsum, cumsum_out, logsumexp, max,
    max_dim, max_other, mean, mean_dim, mean_dim_dtype, mean_dtype, mean_out, min, min_dim, min_other, prod, prod_dim,
    prod_dim_dtype, prod_dtype, prod_out, std, sum, sum_dim, sum_dim_dtype, sum_dtype, sum_out, var,
};
pub use shape::{RESHAPE, reshape};
pub use softmax::{LOG_SOFTMAX, SOFTMAX, log_softmax, softmax};
pub use sorting::{
    ARGSORT, BUCKETIZE, KTHVALUE, MEDIAN, MSORT, SEARCHSORTED, SORT, TOPK, UNIQUE, argsort, bucketize, kthvalue,
    median, median_dim, msort, searchsorted, sort, topk, unique,
};
pub use view::{
    BROADCAST_TO, FLATTEN, NARROW, PERMUTE, SELECT, SQUEEZE, T, TRANSPOSE, UNSQUEEZE, broadcast_to, flatten, narrow,
    permute, select, squeeze, squeeze_dim, t, transpose, unsqueeze,
};
