//! The elementwise functions of one operand, declared once.
//!
//! Each row of [`unary_table!`] names a kernel ([`Unary`](crate::backend::Unary) variant), the
//! aten operator that calls it (declared by the row, or an existing one with a keyword
//! argument that selects the variant) and its derivative: PyTorch's backward name, what the
//! autograd node saves (`input`, `output` or `nothing`) and the gradient as a closure of the
//! incoming gradient `g` and the saved tensor `s`, or no closure where the function has no
//! derivative. The dispatch layer takes the operators from it ([`aten`](super::aten)), autograd
//! the derivatives (forward mode reuses the gradient: each is linear in `g`); every match they
//! generate is exhaustive, and the kernels crate's CPU and WGSL bodies are exhaustive matches
//! too, so a new variant without a row, a kernel or a formula does not compile.
//!
//! The rows are a callback macro: `unary_table!(m)` expands to `m! { rows }`, so each layer
//! writes the macro that takes the columns it needs.

/// Calls `$m!` with every row of the unary table.
macro_rules! unary_table {
    ($m:ident) => {
        $m! {
            /// `e^x`.
            Exp => EXP = unary!("exp"), "Exp" (output) |g, y| mul(g, y);
            /// The natural logarithm.
            Log => LOG = unary!("log"), "Log" (input) |g, x| div(g, x);
            /// `log(1 + x)`.
            Log1p => LOG1P = unary!("log1p"), "Log1P" (input) |g, x| div(g, &plus(x, 1.0)?);
            /// `e^x - 1`.
            Expm1 => EXPM1 = unary!("expm1"), "Expm1" (output) |g, y| mul(g, &plus(y, 1.0)?);
            /// The square root.
            Sqrt => SQRT = unary!("sqrt"), "Sqrt" (output) |g, y| div(g, &scale(y, 2.0)?);
            /// `1 / sqrt(x)`.
            Rsqrt => RSQRT = unary!("rsqrt"), "Rsqrt" (output) |g, y| mul(g, &scale(&mul(y, &mul(y, y)?)?, -0.5)?);
            /// The sine.
            Sin => SIN = unary!("sin"), "Sin" (input) |g, x| mul(g, &un(x, Cos)?);
            /// The cosine.
            Cos => COS = unary!("cos"), "Cos" (input) |g, x| mul(g, &neg(&un(x, Sin)?)?);
            /// The tangent.
            Tan => TAN = unary!("tan"), "Tan" (output) |g, y| mul(g, &plus(&mul(y, y)?, 1.0)?);
            /// The hyperbolic tangent.
            Tanh => TANH = unary!("tanh"), "Tanh" (output) |g, y| mul(g, &minus_from(1.0, &mul(y, y)?)?);
            /// The logistic function.
            Sigmoid => SIGMOID = unary!("sigmoid"), "Sigmoid" (output) |g, y| mul(g, &mul(y, &minus_from(1.0, y)?)?);
            /// The error function.
            Erf => ERF = unary!("erf"), "Erf" (input)
                |g, x| mul(g, &scale(&un(&neg(&mul(x, x)?)?, Exp)?, FRAC_2_SQRT_PI)?);
            /// `1 / x`.
            Reciprocal => RECIPROCAL = unary!("reciprocal"), "Reciprocal" (output) |g, y| mul(&neg(g)?, &mul(y, y)?);
            /// GELU, exact (`approximate='none'`) or with tanh (`'tanh'`).
            Gelu => GELU = "gelu(Tensor self, *, str approximate='none', ScalarType? dtype=None) -> Tensor", "Gelu"
                (input) gelu_gradient;
            GeluTanh => GELU ("approximate", "tanh"), "Gelu" (input) gelu_tanh_gradient;
            /// `x * sigmoid(x)`.
            Silu => SILU = unary!("silu"), "Silu" (input) |g, x| {
                let sig = un(x, Sigmoid)?;
                mul(g, &mul(&sig, &plus(&mul(x, &minus_from(1.0, &sig)?)?, 1.0)?)?)
            };
            /// `x * min(max(x + 3, 0), 6) / 6`.
            Hardswish => HARDSWISH = unary!("hardswish"), "Hardswish" (input) |g, x| {
                // PyTorch's hardswish_backward: 0 up to -3, x / 3 + 1/2 below 3, 1 from 3 (and NaN) on.
                let inner = super::select(&bin(x, &Tensor::scalar(3.0), Binary::Lt)?, &plus(&scale(x, 1.0 / 3.0)?, 0.5)?, &Tensor::scalar(1.0), dtype(g)?)?;
                let slope = super::select(&bin(x, &Tensor::scalar(-3.0), Binary::Le)?, &Tensor::scalar(0.0), &inner, dtype(g)?)?;
                mul(g, &slope)
            };
            /// `min(max(x + 3, 0), 6) / 6`.
            Hardsigmoid => HARDSIGMOID = unary!("hardsigmoid"), "Hardsigmoid" (input) |g, x| {
                // 1/6 strictly between -3 and 3, 0 elsewhere (and for NaN), as PyTorch's.
                let inside = bin(&bin(x, &Tensor::scalar(-3.0), Binary::Gt)?, &bin(x, &Tensor::scalar(3.0), Binary::Lt)?, Binary::And)?;
                super::select(&inside, &scale(g, 1.0 / 6.0)?, &Tensor::scalar(0.0), dtype(g)?)
            };
            /// Rounds up.
            Ceil => CEIL = unary!("ceil"), "Ceil" (nothing) |g, _| zeros_like(g);
            /// Rounds down.
            Floor => FLOOR = unary!("floor"), "Floor" (nothing) |g, _| zeros_like(g);
            /// Rounds toward zero.
            Trunc => TRUNC = unary!("trunc"), "Trunc" (nothing) |g, _| zeros_like(g);
            /// Rounds half to even at `decimals` places.
            Round(decimals) => ROUND_DECIMALS ("decimals", decimals)
                = "round.decimals(Tensor self, *, int decimals, ScalarType? dtype=None) -> Tensor",
                "Round" (nothing) |g, _| zeros_like(g);
            /// `-x`.
            Neg => NEG = unary!("neg"), "Neg" (nothing) |g, _| neg(g);
            /// `|x|`.
            Abs => ABS = unary!("abs"), "Abs" (input) |g, x| mul(g, &un(x, Sign)?);
            /// -1, 0 or 1.
            Sign => SIGN = unary!("sign"), "Sign" (nothing) |g, _| zeros_like(g);
            /// `x * x`.
            Square => SQUARE = unary!("square"), "Pow" (input) |g, x| mul(g, &scale(x, 2.0)?);
            /// `max(x, 0)`.
            Relu => RELU = unary!("relu"), "Relu" (output) |g, y| {
                // PyTorch's threshold_backward: zero where x <= 0, so NaN passes the gradient on.
                super::select(&bin(y, &Tensor::scalar(0.0), Binary::Le)?, &Tensor::scalar(0.0), g, dtype(g)?)
            };
            /// Logical not.
            Not => LOGICAL_NOT = unary!("logical_not"), "NotDifferentiable";
            /// Whether each element is NaN.
            IsNan => ISNAN = unary!("isnan"), "NotDifferentiable";
            /// Whether each element is infinite.
            IsInf => ISINF = unary!("isinf"), "NotDifferentiable";
            /// Bitwise not (logical not of bools).
            BitNot => BITWISE_NOT = unary!("bitwise_not"), "NotDifferentiable";
        }
    };
}

pub(crate) use unary_table;
