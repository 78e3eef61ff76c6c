//! The operators (PyTorch's `torch.ops.aten`): one static per operator and overload, named
//! after it in capitals (`aten::add.Tensor` is [`ADD_TENSOR`], `aten::exp` is [`EXP`]).
//! Each is declared once, with its schema, tags and kernel family: here, or, for the unary
//! kernels, as a row of the unary table (`dispatch/unaries.rs`) that also holds its derivative.

use super::linalg::Decomposition;
use super::{Draw, Kernel, Operator, Tag};
use crate::backend::{Binary, Reduce, Scan, Unary};
use crate::types::Scalar;

/// Declares each operator's static, and `OTHERS`, the list of those not in the unary table.
macro_rules! operators {
    ($($(#[$doc:meta])* $name:ident = $schema:expr, [$($tag:ident),*] $kernel:expr;)*) => {
        $(
            $(#[$doc])*
            pub static $name: Operator = Operator::new("aten", $schema, &[$(Tag::$tag),*], $kernel);
        )*
        static OTHERS: &[&Operator] = &[$(&$name),*];
    };
}

/// Declares the operators of the unary table's rows that declare one (pointwise, calling
/// their kernel), `UNARIES` (their list), and [`unary`], the operator of each kernel.
macro_rules! unary_operators {
    ($(
        $(#[$doc:meta])*
        $variant:ident $(($arg:ident))? => $op:ident $(($key:literal, $val:expr))? $(= $schema:expr)?,
        $backward:literal $(($keep:ident) $grad:expr)?;
    )*) => {
        $(unary_operator!($(#[$doc])* $op $variant ($($arg)?) $(= $schema)?);)*
        // (`$schema` only selects the rows that declare an operator.)
        static UNARIES: &[&Operator] = &[$($((&$op, $schema).0,)?)*];

        /// The operator of unary kernel `op`, and the keyword argument that gives its parameter.
        pub(crate) fn unary(op: Unary) -> (&'static Operator, Option<(&'static str, crate::Value)>) {
            match op {
                $(Unary::$variant $(($arg))? => (&$op, None$(.or(Some(($key, $val.into()))))?),)*
            }
        }
    };
}

/// One unary table row's operator: declared where the row gives a schema, calling the row's
/// kernel (with 0 for its parameter, for one that has one).
macro_rules! unary_operator {
    ($(#[$doc:meta])* $op:ident $variant:ident () = $schema:expr) => {
        $(#[$doc])*
        pub static $op: Operator = Operator::new("aten", $schema, &[Tag::Pointwise], Kernel::Unary(Unary::$variant));
    };
    ($(#[$doc:meta])* $op:ident $variant:ident ($arg:ident) = $schema:expr) => {
        $(#[$doc])*
        pub static $op: Operator =
            Operator::new("aten", $schema, &[Tag::Pointwise], Kernel::Unary(Unary::$variant(0)));
    };
    ($(#[$doc:meta])* $op:ident $variant:ident ($($arg:ident)?)) => {};
}

/// A unary float function: `NAME(Tensor self, *, ScalarType? dtype=None) -> Tensor`.
macro_rules! unary {
    ($name:literal) => {
        concat!($name, "(Tensor self, *, ScalarType? dtype=None) -> Tensor")
    };
}

/// A binary function: `NAME.Tensor(Tensor self, Tensor other, *, ScalarType? dtype=None)`.
macro_rules! binary {
    ($name:literal) => {
        concat!($name, ".Tensor(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor")
    };
}

/// An in-place binary function: `NAME.Tensor(Tensor(a!) self, Tensor other, *, ScalarType?
/// dtype=None) -> Tensor(a!)`.
macro_rules! in_place {
    ($name:literal) => {
        concat!($name, ".Tensor(Tensor(a!) self, Tensor other, *, ScalarType? dtype=None) -> Tensor(a!)")
    };
}

super::unaries::unary_table!(unary_operators);

/// Declares the in-place unary operators (`NAME(Tensor(a!) self, *, ScalarType? dtype=None) ->
/// Tensor(a!)`, each calling its kernel into `self`), `UNARIES_IN_PLACE` (their list) and
/// [`unary_in_place`], the in-place operator of each kernel that has one.
macro_rules! unary_in_place_operators {
    ($($op:ident = $name:literal $variant:ident;)*) => {
        $(
            #[doc = concat!("`aten::", $name, "`: the kernel's result written into `self` (an in-place operation).")]
            pub static $op: Operator = Operator::new(
                "aten",
                concat!($name, "(Tensor(a!) self, *, ScalarType? dtype=None) -> Tensor(a!)"),
                &[Tag::Pointwise, Tag::Inplace],
                Kernel::Unary(Unary::$variant),
            );
        )*
        static UNARIES_IN_PLACE: &[&Operator] = &[$(&$op),*];

        /// The in-place operator of unary kernel `op` (`exp_` for `Exp`); `None` where torchfn
        /// declares none (the write then reaches the modes as the operator and `copy_`).
        pub(crate) fn unary_in_place(op: Unary) -> Option<&'static Operator> {
            match op {
                $(Unary::$variant => Some(&$op),)*
                _ => None,
            }
        }
    };
}

unary_in_place_operators! {
    EXP_ = "exp_" Exp;
    LOG_ = "log_" Log;
    LOG1P_ = "log1p_" Log1p;
    EXPM1_ = "expm1_" Expm1;
    SQRT_ = "sqrt_" Sqrt;
    RSQRT_ = "rsqrt_" Rsqrt;
    SIN_ = "sin_" Sin;
    COS_ = "cos_" Cos;
    TAN_ = "tan_" Tan;
    TANH_ = "tanh_" Tanh;
    SIGMOID_ = "sigmoid_" Sigmoid;
    ERF_ = "erf_" Erf;
    RECIPROCAL_ = "reciprocal_" Reciprocal;
    SILU_ = "silu_" Silu;
    HARDSWISH_ = "hardswish_" Hardswish;
    HARDSIGMOID_ = "hardsigmoid_" Hardsigmoid;
    CEIL_ = "ceil_" Ceil;
    FLOOR_ = "floor_" Floor;
    TRUNC_ = "trunc_" Trunc;
    NEG_ = "neg_" Neg;
    ABS_ = "abs_" Abs;
    SIGN_ = "sign_" Sign;
    SQUARE_ = "square_" Square;
    RELU_ = "relu_" Relu;
    BITWISE_NOT_ = "bitwise_not_" BitNot;
}

/// Every operator of this namespace.
pub fn all() -> impl Iterator<Item = &'static Operator> {
    UNARIES.iter().chain(UNARIES_IN_PLACE).chain(OTHERS).copied()
}

operators! {
    /// `self + alpha * other`.
    ADD_TENSOR = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Binary(Binary::Add(Scalar::Int(1)));
    /// `self - alpha * other`.
    SUB_TENSOR = "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Binary(Binary::Sub(Scalar::Int(1)));
    /// `self * other`.
    MUL_TENSOR = binary!("mul"), [Pointwise] Kernel::Binary(Binary::Mul);
    /// True division.
    DIV_TENSOR = binary!("div"), [Pointwise] Kernel::Binary(Binary::Div);
    /// Division rounded by `rounding_mode` (`'trunc'` or `'floor'`).
    DIV_TENSOR_MODE =
        "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Binary(Binary::DivTrunc);
    /// `self += alpha * other`, in place: the in-place operators compute in `dtype` (the two
    /// operands' promoted dtype) and write into `self`, whose shape the result must have and
    /// whose dtype it must cast to.
    ADD__TENSOR = "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1, ScalarType? dtype=None) -> \
        Tensor(a!)", [Pointwise, Inplace] Kernel::Binary(Binary::Add(Scalar::Int(1)));
    /// `self -= alpha * other`, in place.
    SUB__TENSOR = "sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1, ScalarType? dtype=None) -> \
        Tensor(a!)", [Pointwise, Inplace] Kernel::Binary(Binary::Sub(Scalar::Int(1)));
    /// `self *= other`, in place.
    MUL__TENSOR = in_place!("mul_"), [Pointwise, Inplace] Kernel::Binary(Binary::Mul);
    /// `self /= other` (true division), in place.
    DIV__TENSOR = in_place!("div_"), [Pointwise, Inplace] Kernel::Binary(Binary::Div);
    /// `self /= other` rounded by `rounding_mode`, in place.
    DIV__TENSOR_MODE = "div_.Tensor_mode(Tensor(a!) self, Tensor other, *, str? rounding_mode, ScalarType? \
        dtype=None) -> Tensor(a!)", [Pointwise, Inplace] Kernel::Binary(Binary::DivTrunc);
    /// The larger of the two, NaN propagating.
    MAXIMUM = "maximum(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Maximum);
    /// The smaller of the two, NaN propagating.
    MINIMUM = "minimum(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Minimum);
    /// `self ** exponent`.
    POW_TENSOR_TENSOR =
        "pow.Tensor_Tensor(Tensor self, Tensor exponent, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Pow);
    /// `atan2(self, other)`.
    ATAN2 = "atan2(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Atan2);
    /// The remainder with the dividend's sign.
    FMOD_TENSOR = binary!("fmod"), [Pointwise] Kernel::Binary(Binary::Fmod);
    /// The remainder with the divisor's sign.
    REMAINDER_TENSOR = binary!("remainder"), [Pointwise] Kernel::Binary(Binary::Remainder);
    /// `self` clamped from below by `min`.
    CLAMP_MIN_TENSOR = "clamp_min.Tensor(Tensor self, Tensor min, *, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Binary(Binary::ClampMin);
    /// `self` clamped from above by `max`.
    CLAMP_MAX_TENSOR = "clamp_max.Tensor(Tensor self, Tensor max, *, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Binary(Binary::ClampMax);
    /// `self == other`.
    EQ_TENSOR = binary!("eq"), [Pointwise] Kernel::Binary(Binary::Eq);
    /// `self != other`.
    NE_TENSOR = binary!("ne"), [Pointwise] Kernel::Binary(Binary::Ne);
    /// `self < other`.
    LT_TENSOR = binary!("lt"), [Pointwise] Kernel::Binary(Binary::Lt);
    /// `self <= other`.
    LE_TENSOR = binary!("le"), [Pointwise] Kernel::Binary(Binary::Le);
    /// `self > other`.
    GT_TENSOR = binary!("gt"), [Pointwise] Kernel::Binary(Binary::Gt);
    /// `self >= other`.
    GE_TENSOR = binary!("ge"), [Pointwise] Kernel::Binary(Binary::Ge);
    /// Logical and.
    LOGICAL_AND = "logical_and(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::And);
    /// Logical or.
    LOGICAL_OR = "logical_or(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Or);
    /// Logical exclusive or.
    LOGICAL_XOR = "logical_xor(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [Pointwise]
        Kernel::Binary(Binary::Xor);
    /// Bitwise and.
    BITWISE_AND_TENSOR = binary!("bitwise_and"), [Pointwise] Kernel::Binary(Binary::BitAnd);
    /// Bitwise or.
    BITWISE_OR_TENSOR = binary!("bitwise_or"), [Pointwise] Kernel::Binary(Binary::BitOr);
    /// Bitwise exclusive or.
    BITWISE_XOR_TENSOR = binary!("bitwise_xor"), [Pointwise] Kernel::Binary(Binary::BitXor);
    /// `self << other`.
    BITWISE_LEFT_SHIFT_TENSOR = binary!("bitwise_left_shift"), [Pointwise] Kernel::Binary(Binary::Shl);
    /// `self >> other`.
    BITWISE_RIGHT_SHIFT_TENSOR = binary!("bitwise_right_shift"), [Pointwise] Kernel::Binary(Binary::Shr);
    /// `self` where `condition` holds, `other` elsewhere.
    WHERE_SELF =
        "where.self(Tensor condition, Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor",
        [Pointwise] Kernel::Where;

    /// The sum over `dim` (every dimension when it is empty).
    SUM_DIM_INTLIST =
        "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Sum);
    /// The product over `dim` (torchfn's kernel takes several dimensions).
    PROD_DIM_INT =
        "prod.dim_int(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Prod);
    /// The mean over `dim`.
    MEAN_DIM = "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Mean);
    /// The largest element over `dim`.
    AMAX = "amax(Tensor self, int[1] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Max);
    /// The smallest element over `dim`.
    AMIN = "amin(Tensor self, int[1] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Min);
    /// The position of the largest element over `dim` (torchfn's kernel takes several).
    ARGMAX = "argmax(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::ArgMax);
    /// The position of the smallest element over `dim`.
    ARGMIN = "argmin(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::ArgMin);
    /// Whether every element over `dim` is true.
    ALL_DIMS = "all.dims(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::All);
    /// Whether any element over `dim` is true.
    ANY_DIMS = "any.dims(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        [Reduction] Kernel::Reduce(Reduce::Any);
    /// Running sums along `dim`.
    CUMSUM = "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", [] Kernel::Scan(Scan::Sum);
    /// Running products along `dim`.
    CUMPROD = "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", [] Kernel::Scan(Scan::Prod);

    /// The matrix product, batched and broadcast over leading dimensions.
    MATMUL = "matmul(Tensor self, Tensor other, *, ScalarType? dtype=None) -> Tensor", [] Kernel::Matmul;
    /// The positions `index` of dimension `dim`.
    INDEX_SELECT = "index_select(Tensor self, int dim, Tensor index) -> Tensor", [] Kernel::IndexSelect;
    /// `self` at `index` along `dim`, elementwise.
    GATHER = "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", [] Kernel::Gather;
    /// `src` added into zeros of `size` at `index` along `dim` (torchfn's
    /// `zeros(size).scatter_add_(dim, index, src)` in one kernel).
    SCATTER_ADD = "scatter_add(SymInt[] size, int dim, Tensor index, Tensor src) -> Tensor", [] Kernel::ScatterAdd;
    /// The tensors joined along `dim`.
    CAT = "cat(Tensor[] tensors, int dim=0, *, ScalarType? dtype=None) -> Tensor", [] Kernel::Cat;
    /// Softmax along `dim`, in `dtype`.
    SOFTMAX = "_softmax(Tensor self, int dim, bool half_to_float, *, ScalarType? dtype=None) -> Tensor", []
        Kernel::Softmax { log: false };
    /// Log-softmax along `dim`, in `dtype`.
    LOG_SOFTMAX = "_log_softmax(Tensor self, int dim, bool half_to_float, *, ScalarType? dtype=None) -> Tensor", []
        Kernel::Softmax { log: true };
    /// The 2-D cross-correlation (`transposed` must be false).
    CONVOLUTION = "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, \
        SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor", []
        Kernel::Convolution;
    /// The gradients of a convolution's input and weight where `output_mask` asks; `None` for
    /// one asked for means the backend has no kernel of its own (autograd then composes it).
    CONVOLUTION_BACKWARD = "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, \
        SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, \
        SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor?, Tensor?, Tensor?)", []
        Kernel::ConvolutionBackward;
    /// Max pooling of `[planes, h, w]`: the values and each one's position in its plane.
    MAX_POOL2D_WITH_INDICES = "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], \
        int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", []
        Kernel::MaxPool2d;

    /// One LSTM layer's recurrence in one direction, fused (what PyTorch's `mkldnn_rnn_layer`
    /// computes on the CPU after projecting the input): from `gates` (`[T, N, 4H]`, the input's
    /// projection with both biases), `hx` and `cx` (`[N, H]`) and `weight_hh` (`[4H, H]`), the
    /// hidden states `[T, N, H]`, the cell states `[T, N, H]` (in time order) and the gates'
    /// activations `[T, N, 4H]`; on the CPU and the meta device.
    LSTM_LAYER = "_lstm_layer(Tensor gates, Tensor hx, Tensor cx, Tensor weight_hh, bool reverse) -> (Tensor output, \
        Tensor cell_states, Tensor workspace)", [] Kernel::LstmLayer;
    /// The gradients of [`LSTM_LAYER`]'s `gates`, `hx` and `cx` from those of its hidden and cell
    /// states (PyTorch's `mkldnn_rnn_layer_backward`, less the weights' gradients, which are
    /// products of these).
    LSTM_LAYER_BACKWARD = "_lstm_layer_backward(Tensor grad_output, Tensor grad_cell_states, Tensor cx, Tensor \
        weight_hh, Tensor cell_states, Tensor workspace, bool reverse) -> (Tensor grad_gates, Tensor grad_hx, Tensor \
        grad_cx)", [] Kernel::LstmLayerBackward;

    /// Sorts along `dim`, NaN largest: the values and their positions, ties in their order
    /// (torchfn's sort is always stable); computed on the host for every device.
    SORT_STABLE = "sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> \
        (Tensor values, Tensor indices)", [] Kernel::Sort;
    /// The `k` largest (or smallest) along `dim`, in order, and their positions: the first `k`
    /// of a stable sort, selected before sorting them; on the host for every device.
    TOPK = "topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, \
        Tensor indices)", [] Kernel::TopK;

    /// The determinant of each square matrix (`torch.linalg.det`); on the host for every device,
    /// as the other decompositions (`dispatch/linalg.rs`).
    LINALG_DET = "linalg_det(Tensor A) -> Tensor", [] Kernel::Linalg(Decomposition::Det);
    /// The sign and the log of the absolute value of each determinant.
    LINALG_SLOGDET = "linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", []
        Kernel::Linalg(Decomposition::Slogdet);
    /// The inverse of each square matrix; a singular one is an error.
    LINALG_INV = "linalg_inv(Tensor A) -> Tensor", [] Kernel::Linalg(Decomposition::Inv);
    /// `X` with `A X = B` (`left=True` only: the left solve is what the kernel computes).
    LINALG_SOLVE = "linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", []
        Kernel::Linalg(Decomposition::Solve);
    /// The Cholesky factor of each symmetric positive-definite matrix.
    LINALG_CHOLESKY = "linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor", []
        Kernel::Linalg(Decomposition::Cholesky);
    /// The QR decomposition (`mode` 'reduced' or 'complete').
    LINALG_QR = "linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", []
        Kernel::Linalg(Decomposition::Qr);
    /// The singular value decomposition (`compute_uv` is always true here).
    LINALG_SVD = "_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> \
        (Tensor U, Tensor S, Tensor Vh)", [] Kernel::Linalg(Decomposition::Svd);
    /// The eigenvalues and eigenvectors of each symmetric matrix.
    LINALG_EIGH = "_linalg_eigh(Tensor A, str UPLO=\"L\", bool compute_v=True) -> (Tensor eigenvalues, Tensor \
        eigenvectors)", [] Kernel::Linalg(Decomposition::Eigh);

    /// A contiguous copy, converted to `dtype` and moved to `device`.
    TO_COPY = "_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor", []
        Kernel::ToCopy;
    /// A contiguous copy in `self`'s dtype on its device (`Tensor.clone`, `contiguous`, and the
    /// old value autograd keeps of a tensor an in-place operation is about to write).
    CLONE = "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", [] Kernel::ToCopy;
    /// A view of `self`'s memory with the given sizes, strides and offset (every view torchfn
    /// makes is one of these).
    AS_STRIDED = "as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> \
        Tensor(a)", [View] Kernel::AsStrided;
    /// A tensor of `size` filled with `fill_value`.
    FULL = "full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
        [Factory] Kernel::Full;
    /// A tensor filled with a value, placed like `self` (`Tensor.new_full`): the factories
    /// that make a tensor like another (`zeros_like`, `new_zeros`, a view's gradient) call it,
    /// so wrapper subclasses and modes make their own kind of result.
    NEW_FULL = "new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? \
        device=None) -> Tensor", [] Kernel::Full;
    /// The value of a one-element tensor, read on the host: what gives `item()`, and every
    /// decision an operation makes on a tensor's value.
    LOCAL_SCALAR_DENSE = "_local_scalar_dense(Tensor self) -> Scalar", [DataDependent] Kernel::LocalScalar;
    /// Uniform samples on `[0, 1)` of `size`, drawn from `generator` (or the default one).
    RAND = "rand.generator(SymInt[] size, *, Generator? generator, ScalarType? dtype=None, Device? device=None) -> \
        Tensor", [Random, Factory] Kernel::Draw(Draw::Rand);
    /// Standard normal samples of `size`.
    RANDN = "randn.generator(SymInt[] size, *, Generator? generator, ScalarType? dtype=None, Device? device=None) -> \
        Tensor", [Random, Factory] Kernel::Draw(Draw::Randn);
    /// Normal samples of mean `mean` and standard deviation `std`, of `size`.
    NORMAL = "normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, ScalarType? \
        dtype=None, Device? device=None) -> Tensor", [Random, Factory] Kernel::Draw(Draw::Normal);
    /// Integers uniform on `[low, high)`, of `size`.
    RANDINT = "randint.low_generator(SymInt low, SymInt high, SymInt[] size, *, Generator? generator, ScalarType? \
        dtype=None, Device? device=None) -> Tensor", [Random, Factory] Kernel::Draw(Draw::Randint);
    /// Uniform samples on `[from, to)` of `self`'s shape, dtype and device (what `uniform_`
    /// writes).
    UNIFORM = "uniform(Tensor self, float from=0, float to=1, *, Generator? generator=None) -> Tensor",
        [Random] Kernel::Draw(Draw::Uniform);
    /// 1 with probability `p`, else 0, of `self`'s shape, dtype and device (dropout's mask).
    BERNOULLI = "bernoulli.p(Tensor self, float p=0.5, *, Generator? generator=None) -> Tensor", [Random]
        Kernel::Draw(Draw::Bernoulli);
    /// A tensor just made from data, handed to the modes (what makes it fake under
    /// `FakeTensorMode`): itself.
    LIFT_FRESH = "lift_fresh(Tensor(a) self) -> Tensor(a)", [View] Kernel::LiftFresh;
    /// The positions of the nonzero elements, one row of indices each, in order: its size
    /// depends on the values (what a bool mask index takes).
    NONZERO = "nonzero(Tensor self) -> Tensor", [DynamicOutputShape] Kernel::Nonzero;
    /// Writes `src` into `self`, converting and moving it.
    COPY_ = "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", [Inplace] Kernel::Copy;
    /// Scales, in place, each distinct row of `self` that `indices` names whose `norm_type`-norm
    /// exceeds `max_norm` (embedding's `max_norm`); reads the indices and the rows.
    EMBEDDING_RENORM_ = "embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> \
        Tensor(a!)", [Inplace] Kernel::EmbeddingRenorm;
    /// One Adam step of every parameter in `self`, in place, one pass over each parameter's
    /// memory (the optimizers' `fused=True`); `state_steps` are the steps' numbers, already
    /// counted. With `found_inf` non-zero nothing is written; with `grad_scale` the gradients
    /// are divided by it first, and stored so.
    FUSED_ADAM_ = "_fused_adam_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] exp_avgs, Tensor(d!)[] \
        exp_avg_sqs, Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *, float lr, float beta1, float beta2, \
        float weight_decay, float eps, bool amsgrad, bool maximize, Tensor? grad_scale=None, Tensor? \
        found_inf=None) -> ()", [] Kernel::FusedAdam { decoupled: false };
    /// [`FUSED_ADAM_`] with AdamW's decoupled weight decay.
    FUSED_ADAMW_ = "_fused_adamw_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] exp_avgs, Tensor(d!)[] \
        exp_avg_sqs, Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *, float lr, float beta1, float beta2, \
        float weight_decay, float eps, bool amsgrad, bool maximize, Tensor? grad_scale=None, Tensor? \
        found_inf=None) -> ()", [] Kernel::FusedAdam { decoupled: true };
    /// One SGD step of every parameter in `self`, in place, one pass over each parameter's
    /// memory; `momentum_buffer_list` is empty without momentum, and on the first step
    /// (`is_first_step`) each buffer becomes its gradient.
    FUSED_SGD_ = "_fused_sgd_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] momentum_buffer_list, *, float \
        weight_decay, float momentum, float lr, float dampening, bool nesterov, bool maximize, bool is_first_step, \
        Tensor? grad_scale=None, Tensor? found_inf=None) -> ()", [] Kernel::FusedSgd;
}

/// The operator of binary kernel `op`, and the keyword argument that gives its parameter.
pub(crate) fn binary(op: Binary) -> (&'static Operator, Option<(&'static str, crate::Value)>) {
    let op = match op {
        Binary::Add(alpha) => return (&ADD_TENSOR, Some(("alpha", alpha.into()))),
        Binary::Sub(alpha) => return (&SUB_TENSOR, Some(("alpha", alpha.into()))),
        Binary::Mul => &MUL_TENSOR,
        Binary::Div => &DIV_TENSOR,
        Binary::DivTrunc => return (&DIV_TENSOR_MODE, Some(("rounding_mode", "trunc".into()))),
        Binary::DivFloor => return (&DIV_TENSOR_MODE, Some(("rounding_mode", "floor".into()))),
        Binary::Maximum => &MAXIMUM,
        Binary::Minimum => &MINIMUM,
        Binary::Pow => &POW_TENSOR_TENSOR,
        Binary::Atan2 => &ATAN2,
        Binary::Fmod => &FMOD_TENSOR,
        Binary::Remainder => &REMAINDER_TENSOR,
        Binary::ClampMin => &CLAMP_MIN_TENSOR,
        Binary::ClampMax => &CLAMP_MAX_TENSOR,
        Binary::Eq => &EQ_TENSOR,
        Binary::Ne => &NE_TENSOR,
        Binary::Lt => &LT_TENSOR,
        Binary::Le => &LE_TENSOR,
        Binary::Gt => &GT_TENSOR,
        Binary::Ge => &GE_TENSOR,
        Binary::And => &LOGICAL_AND,
        Binary::Or => &LOGICAL_OR,
        Binary::Xor => &LOGICAL_XOR,
        Binary::BitAnd => &BITWISE_AND_TENSOR,
        Binary::BitOr => &BITWISE_OR_TENSOR,
        Binary::BitXor => &BITWISE_XOR_TENSOR,
        Binary::Shl => &BITWISE_LEFT_SHIFT_TENSOR,
        Binary::Shr => &BITWISE_RIGHT_SHIFT_TENSOR,
    };
    (op, None)
}

/// The in-place operator of binary kernel `op` (`add_.Tensor` for `Add`), and the keyword
/// argument that gives its parameter; `None` where torchfn declares none (the write then
/// reaches the modes as the operator and `copy_`).
pub(crate) fn binary_in_place(op: Binary) -> Option<(&'static Operator, Option<(&'static str, crate::Value)>)> {
    Some(match op {
        Binary::Add(alpha) => (&ADD__TENSOR, Some(("alpha", alpha.into()))),
        Binary::Sub(alpha) => (&SUB__TENSOR, Some(("alpha", alpha.into()))),
        Binary::Mul => (&MUL__TENSOR, None),
        Binary::Div => (&DIV__TENSOR, None),
        Binary::DivTrunc => (&DIV__TENSOR_MODE, Some(("rounding_mode", "trunc".into()))),
        Binary::DivFloor => (&DIV__TENSOR_MODE, Some(("rounding_mode", "floor".into()))),
        _ => return None,
    })
}

/// The operator of reduction `op`.
pub(crate) fn reduce(op: Reduce) -> &'static Operator {
    match op {
        Reduce::Sum => &SUM_DIM_INTLIST,
        Reduce::Prod => &PROD_DIM_INT,
        Reduce::Mean => &MEAN_DIM,
        Reduce::Max => &AMAX,
        Reduce::Min => &AMIN,
        Reduce::ArgMax => &ARGMAX,
        Reduce::ArgMin => &ARGMIN,
        Reduce::All => &ALL_DIMS,
        Reduce::Any => &ANY_DIMS,
    }
}

/// The operator of scan `op`.
pub(crate) fn scan(op: Scan) -> &'static Operator {
    match op {
        Scan::Sum => &CUMSUM,
        Scan::Prod => &CUMPROD,
    }
}
