//! What the kernel families compute: the elementwise functions, binary operations, reductions
//! and scans, named once here so that every backend implements the same list.

use crate::types::{DType, Scalar};

use super::Array;

/// An elementwise function of one operand, computed in the dtype the operation chose.
///
/// The float functions take a float dtype; `Neg`, `Abs`, `Sign`, `Square` and `Relu` any
/// numeric one; `Not` bool; `IsNan` and `IsInf` any, giving bool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// `e^x`
    Exp,
    /// The natural logarithm.
    Log,
    /// `log(1 + x)`, accurate near 0.
    Log1p,
    /// `e^x - 1`, accurate near 0.
    Expm1,
    /// The square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// The sine.
    Sin,
    /// The cosine.
    Cos,
    /// The tangent.
    Tan,
    /// The hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// The error function.
    Erf,
    /// `1 / x`.
    Reciprocal,
    /// `x * Φ(x)`, with the exact normal distribution function (`gelu(approximate="none")`).
    Gelu,
    /// The tanh approximation of `gelu` (`gelu(approximate="tanh")`).
    GeluTanh,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * min(max(x + 3, 0), 6) / 6`, NaN staying NaN.
    Hardswish,
    /// `min(max(x + 3, 0), 6) / 6`, NaN staying NaN.
    Hardsigmoid,
    /// Rounds up.
    Ceil,
    /// Rounds down.
    Floor,
    /// Rounds toward zero.
    Trunc,
    /// Rounds half to even, at this many decimal places (negative: to tens, hundreds, ...).
    Round(i64),
    /// `-x` (integers wrap).
    Neg,
    /// `|x|` (the most negative integer stays itself).
    Abs,
    /// -1, 0 or 1 (0 for NaN).
    Sign,
    /// `x * x`.
    Square,
    /// `max(x, 0)`, NaN staying NaN.
    Relu,
    /// Logical not of a bool.
    Not,
    /// Whether the element is NaN (bool result).
    IsNan,
    /// Whether the element is infinite (bool result).
    IsInf,
    /// Bitwise not of an integer, logical not of a bool.
    BitNot,
}

impl Unary {
    /// The dtype of the result for one computed in `dtype`.
    pub fn output(self, dtype: DType) -> DType {
        match self {
            Unary::IsNan | Unary::IsInf | Unary::Not => DType::Bool,
            _ => dtype,
        }
    }

    /// Whether this is a float function: one that computes integers in the default float
    /// dtype, as PyTorch's `exp` of an int64 tensor gives float32.
    pub fn is_float_function(self) -> bool {
        use Unary::*;
        match self {
            Exp | Log | Log1p | Expm1 | Sqrt | Rsqrt | Sin | Cos | Tan | Tanh | Sigmoid | Erf | Reciprocal | Gelu
            | GeluTanh | Silu | Hardswish | Hardsigmoid => true,
            Ceil | Floor | Trunc | Round(_) | Neg | Abs | Sign | Square | Relu | Not | IsNan | IsInf | BitNot => false,
        }
    }
}

/// An elementwise operation of two operands, computed in the dtype the operation chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Binary {
    /// `a + alpha * b` (bool: `a or (alpha and b)`).
    Add(Scalar),
    /// `a - alpha * b`.
    Sub(Scalar),
    /// `a * b` (bool: and).
    Mul,
    /// True division (float dtypes).
    Div,
    /// Division rounded toward zero (integers: the divisor is never 0).
    DivTrunc,
    /// Division rounded toward negative infinity (integers: the divisor is never 0).
    DivFloor,
    /// The larger of the two, NaN propagating (bool: or).
    Maximum,
    /// The smaller of the two, NaN propagating (bool: and).
    Minimum,
    /// `a ** b`; integers to a negative power give 0 except for bases 1 and -1.
    Pow,
    /// `atan2(a, b)` (float dtypes).
    Atan2,
    /// The remainder with the dividend's sign (C's `fmod`).
    Fmod,
    /// The remainder with the divisor's sign (Python's `%`).
    Remainder,
    /// `a` clamped from below by `b`: `b` where `a < b` or `b` is NaN, NaN where `a` is.
    ClampMin,
    /// `a` clamped from above by `b`: `b` where `a > b` or `b` is NaN, NaN where `a` is.
    ClampMax,
    /// `a == b` (bool result).
    Eq,
    /// `a != b` (bool result).
    Ne,
    /// `a < b` (bool result).
    Lt,
    /// `a <= b` (bool result).
    Le,
    /// `a > b` (bool result).
    Gt,
    /// `a >= b` (bool result).
    Ge,
    /// Logical and (bool operands and result).
    And,
    /// Logical or.
    Or,
    /// Logical exclusive or.
    Xor,
    /// Bitwise and of integers (logical and of bools).
    BitAnd,
    /// Bitwise or of integers (logical or of bools).
    BitOr,
    /// Bitwise exclusive or of integers (logical exclusive or of bools).
    BitXor,
    /// `a << b` of integers: 0 for a negative `b` or one at least the type's width.
    Shl,
    /// `a >> b` of integers, the sign filling in: for a negative `b` or one at least the type's
    /// width, -1 for a negative `a` and 0 otherwise.
    Shr,
}

impl Binary {
    /// The dtype of the result for one computed in `dtype`.
    pub fn output(self, dtype: DType) -> DType {
        match self {
            Binary::Eq | Binary::Ne | Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge => DType::Bool,
            Binary::And | Binary::Or | Binary::Xor => DType::Bool,
            _ => dtype,
        }
    }
}

/// A reduction over some dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The sum (0 for an empty lane; floats accumulate in at least `f64` on the CPU).
    Sum,
    /// The product (1 for an empty lane).
    Prod,
    /// The mean (NaN for an empty lane).
    Mean,
    /// The largest element, NaN winning.
    Max,
    /// The smallest element, NaN winning.
    Min,
    /// The position in the lane (the reduced dimensions in row-major order) of the first
    /// largest element (NaN winning), in the device's index dtype.
    ArgMax,
    /// The position of the first smallest element.
    ArgMin,
    /// Whether every element is true (bool).
    All,
    /// Whether any element is true (bool).
    Any,
}

impl Reduce {
    /// The dtype of the result for a reduction computed in `dtype` on a device whose index
    /// dtype is `index`.
    pub fn output(self, dtype: DType, index: DType) -> DType {
        match self {
            Reduce::ArgMax | Reduce::ArgMin => index,
            Reduce::All | Reduce::Any => DType::Bool,
            _ => dtype,
        }
    }
}

/// A running operation along one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Running sums.
    Sum,
    /// Running products.
    Prod,
}

/// Where a sliding window sits over `[.., h, w]` planes: kernel size, stride, padding and
/// dilation (height, width), the input plane and the output plane they give. Every value fits
/// (the operation checked them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Implicit padding on each side (zeros for convolution, `-inf` for pooling).
    pub padding: [usize; 2],
    /// Step between kernel taps.
    pub dilation: [usize; 2],
    /// Input height and width.
    pub input: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
}

impl Window {
    /// The input row (`axis` 0) or column that kernel tap `tap` of output position `at` reads,
    /// or `None` when it falls in the padding.
    #[inline(always)]
    pub fn source(&self, axis: usize, at: usize, tap: usize) -> Option<usize> {
        (at * self.stride[axis] + tap * self.dilation[axis])
            .checked_sub(self.padding[axis])
            .filter(|&i| i < self.input[axis])
    }
}

/// Adam's and AdamW's hyperparameters (`torch._fused_adam_`'s keywords).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyperparameters {
    /// The learning rate.
    pub lr: f64,
    /// The first moment's decay.
    pub beta1: f64,
    /// The second moment's decay.
    pub beta2: f64,
    /// The weight decay: added to the gradient (Adam) or taken off the parameter (AdamW).
    pub weight_decay: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Whether the denominator uses the largest second moment so far (`max_exp_avg_sq`).
    pub amsgrad: bool,
    /// Whether the step goes up the gradient.
    pub maximize: bool,
}

/// One Adam or AdamW step, as a backend's fused kernel takes it.
#[derive(Clone, Copy, Debug)]
pub struct AdamStep {
    /// The hyperparameters.
    pub hyper: AdamHyperparameters,
    /// AdamW's decoupled weight decay (else Adam's).
    pub decoupled: bool,
    /// The gradient's scale, which the gradient is divided by (and stored so) first.
    pub grad_scale: Option<f64>,
}

/// The arrays one parameter's step reads and writes (all contiguous, of one float dtype and
/// one number of elements, in storages of their own), and its step number.
#[derive(Clone, Copy)]
pub struct AdamArrays<'a> {
    /// The parameter, updated.
    pub param: &'a Array,
    /// Its gradient (written only when a `grad_scale` is given).
    pub grad: &'a Array,
    /// The first moment, updated.
    pub exp_avg: &'a Array,
    /// The second moment, updated.
    pub exp_avg_sq: &'a Array,
    /// The largest second moment so far (amsgrad), updated.
    pub max_exp_avg_sq: Option<&'a Array>,
    /// The parameter's step number, counted from 1.
    pub step: f64,
}

/// SGD's hyperparameters (`torch._fused_sgd_`'s keywords).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdHyperparameters {
    /// The learning rate.
    pub lr: f64,
    /// The momentum (0: none, and no buffer).
    pub momentum: f64,
    /// The share of the gradient the momentum does not take in.
    pub dampening: f64,
    /// The weight decay, added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// Whether the step goes up the gradient.
    pub maximize: bool,
    /// The first step, where each momentum buffer becomes its gradient.
    pub is_first_step: bool,
}

/// One SGD step, as a backend's fused kernel takes it.
#[derive(Clone, Copy, Debug)]
pub struct SgdStep {
    /// The hyperparameters.
    pub hyper: SgdHyperparameters,
    /// The gradient's scale, which the gradient is divided by (and stored so) first.
    pub grad_scale: Option<f64>,
}

/// The arrays one parameter's SGD step reads and writes: all contiguous, of one float dtype
/// and one number of elements, in storages of their own.
#[derive(Clone, Copy)]
pub struct SgdArrays<'a> {
    /// The parameter, updated.
    pub param: &'a Array,
    /// Its gradient (written only when a `grad_scale` is given).
    pub grad: &'a Array,
    /// The momentum buffer, updated (with a momentum).
    pub momentum_buffer: Option<&'a Array>,
}

/// What the fused backward of one LSTM layer's recurrence reads of its forward
/// ([`Backend::lstm_layer`](super::Backend::lstm_layer)).
#[derive(Clone, Copy)]
pub struct LstmSaved<'a> {
    /// The initial cell state, `[N, H]`.
    pub c0: &'a Array,
    /// The hidden-to-hidden weights, `[4H, H]`.
    pub w_hh: &'a Array,
    /// The cell state after each step, `[T, N, H]`, in time order.
    pub cs: &'a Array,
    /// The gates' activations at each step (`σ(i)`, `σ(f)`, `tanh(g)`, `σ(o)`), `[T, N, 4H]`.
    pub workspace: &'a Array,
    /// Whether the layer ran from the last step to the first.
    pub reverse: bool,
}
