//! The WGSL expression of each elementwise operation: what `gpu-shaders/elementwise.wgsl`
//! computes (its `EXPR`) for each unary and binary operation in each kind, from the operands
//! `a`, `b` and `c` and the extra scalars `s0`, `s1`, ... that `elementwise.rs` loads, converted
//! to the kind the operation computes in.

use crate::backend::{Binary, Unary};
use crate::error::Result;
use crate::types::Scalar;

use super::elementwise::Kind;
#[cfg(test)]
use super::elementwise::Spec;
#[cfg(test)]
use super::launch::Kernel;
use super::launch::unsupported;

/// `where`: `a` where the condition `c` holds, else `b`.
pub const CHOOSE: &str = "select(b, a, c)";

/// A copy or cast: the operand itself.
pub const IDENTITY: &str = "a";

/// A fill: the first extra scalar.
pub const FILL: &str = "s0";

/// One operation in WGSL: the expression, the kind of its result, and the extra scalars it
/// reads as `s0`, `s1`, ... (each a parameter word and the kind it holds).
#[derive(Debug)]
pub struct Expression {
    /// The WGSL expression.
    pub text: String,
    /// The kind of its value.
    pub result: Kind,
    /// The extra scalars: each word and its kind.
    pub scalars: Vec<(u32, Kind)>,
}

impl Expression {
    /// `text`, giving a value of `result`, with no extra scalars.
    pub fn new(text: &str, result: Kind) -> Expression {
        Expression { text: text.to_string(), result, scalars: Vec::new() }
    }
}

/// The expression of unary `op` computed in `kind`, over the operand `a`.
pub fn unary_expr(op: Unary, kind: Kind) -> Result<Expression> {
    let same = |e: &str| Ok(Expression::new(e, kind));
    let test = |e: &str| Ok(Expression::new(e, Kind::Bool));
    match (kind, op) {
        (_, Unary::IsNan) if kind != Kind::F32 => test("false"),
        (_, Unary::IsInf) if kind != Kind::F32 => test("false"),
        (Kind::F32, Unary::IsNan) => test("is_nan(a)"),
        (Kind::F32, Unary::IsInf) => test("is_inf(a)"),
        (Kind::F32, Unary::Round(d)) if d != 0 => {
            let scale = (10f64.powi(d.unsigned_abs().min(400) as i32) as f32).to_bits();
            let e = if d > 0 { "round(a * s0) / s0" } else { "round(a / s0) * s0" };
            Ok(Expression { scalars: vec![(scale, Kind::F32)], ..Expression::new(e, kind) })
        }
        (Kind::F32, _) => same(match op {
            Unary::Exp => "exp(a)",
            Unary::Log => "log(a)",
            Unary::Log1p => "log1p_(a)",
            Unary::Expm1 => "expm1_(a)",
            Unary::Sqrt => "sqrt(a)",
            Unary::Rsqrt => "1.0 / sqrt(a)",
            Unary::Sin => "sin_cos(a).x",
            Unary::Cos => "sin_cos(a).y",
            Unary::Tan => "tan_(a)",
            Unary::Tanh => "tanh_(a)",
            Unary::Sigmoid => "1.0 / (1.0 + exp(-a))",
            Unary::Erf => "erf_(a)",
            Unary::Reciprocal => "1.0 / a",
            Unary::Gelu => "0.5 * a * (1.0 + erf_(a * 0.70710678118654752))",
            Unary::GeluTanh => "0.5 * a * (1.0 + tanh_(0.79788456080286536 * (a + 0.044715 * a * a * a)))",
            Unary::Silu => "a / (1.0 + exp(-a))",
            Unary::Hardswish => "a * min(max(a + 3.0, 0.0), 6.0) / 6.0",
            Unary::Hardsigmoid => "min(max(a + 3.0, 0.0), 6.0) / 6.0",
            Unary::Ceil => "ceil(a)",
            Unary::Floor => "floor(a)",
            Unary::Trunc => "trunc(a)",
            Unary::Round(_) => "round(a)",
            Unary::Neg => "-a",
            Unary::Abs => "abs(a)",
            Unary::Sign => "sign_f32(a)",
            Unary::Square => "a * a",
            Unary::Relu => "select(0.0, a, a > 0.0 || is_nan(a))",
            Unary::Not | Unary::IsNan | Unary::IsInf | Unary::BitNot => {
                return Err(unsupported("elementwise", format!("{op:?} of float32")));
            }
        }),
        (Kind::I32, _) => same(match op {
            Unary::Neg => "-a",
            Unary::Abs => "abs(a)",
            Unary::Sign => "sign(a)",
            Unary::Square => "a * a",
            Unary::Relu => "max(a, 0)",
            Unary::Ceil | Unary::Floor | Unary::Trunc | Unary::Round(0) => "a",
            Unary::BitNot => "~a",
            _ => return Err(unsupported("elementwise", format!("{op:?} of int32"))),
        }),
        (Kind::Bool, _) => same(match op {
            Unary::Not | Unary::BitNot => "!a",
            Unary::Sign | Unary::Abs | Unary::Relu => "a",
            _ => return Err(unsupported("elementwise", format!("{op:?} of bool"))),
        }),
    }
}

/// The expression of binary `op` computed in `kind`, over the operands `a` and `b`.
pub fn binary_expr(op: Binary, kind: Kind) -> Result<Expression> {
    let comparison = match op {
        Binary::Eq => Some("a == b"),
        Binary::Ne => Some("!(a == b)"),
        Binary::Lt => Some("a < b"),
        Binary::Le => Some("a <= b"),
        Binary::Gt => Some("a > b"),
        Binary::Ge => Some("a >= b"),
        _ => None,
    };
    if let Some(e) = comparison {
        let e = match (kind, op) {
            (Kind::Bool, Binary::Lt) => "!a && b",
            (Kind::Bool, Binary::Le) => "!a || b",
            (Kind::Bool, Binary::Gt) => "a && !b",
            (Kind::Bool, Binary::Ge) => "a || !b",
            _ => e,
        };
        return Ok(Expression::new(e, Kind::Bool));
    }
    let same = |e: &str| Ok(Expression::new(e, kind));
    let alpha =
        |e: &str, alpha: Scalar| Ok(Expression { scalars: vec![(kind.word(alpha), kind)], ..Expression::new(e, kind) });
    match (kind, op) {
        (Kind::Bool, Binary::Add(a)) => alpha("a || (s0 && b)", a),
        (_, Binary::Add(a)) => alpha("a + s0 * b", a),
        (Kind::Bool, Binary::Sub(_)) => Err(unsupported("elementwise", "subtraction of bools")),
        (_, Binary::Sub(a)) => alpha("a - s0 * b", a),
        (Kind::Bool, _) => same(match op {
            Binary::Mul | Binary::Minimum | Binary::And | Binary::BitAnd => "a && b",
            Binary::Maximum | Binary::Or | Binary::BitOr => "a || b",
            Binary::Xor | Binary::BitXor => "a != b",
            _ => return Err(unsupported("elementwise", format!("{op:?} of bools"))),
        }),
        (_, Binary::And | Binary::Or | Binary::Xor) => {
            Err(unsupported("elementwise", format!("{op:?} computed in {kind:?} (logic runs on bools)")))
        }
        (Kind::F32, _) => same(match op {
            Binary::Mul => "a * b",
            Binary::Div => "a / b",
            Binary::DivTrunc => "trunc(a / b)",
            Binary::DivFloor => "floor(a / b)",
            Binary::Maximum => "extreme_f32(a, b, true)",
            Binary::Minimum => "extreme_f32(a, b, false)",
            Binary::Pow => "pow_f32(a, b)",
            Binary::Atan2 => "atan2(a, b)",
            Binary::Fmod => "fmod_f32(a, b)",
            Binary::Remainder => "remainder_f32(a, b)",
            Binary::ClampMin => "clamp_f32(a, b, false)",
            Binary::ClampMax => "clamp_f32(a, b, true)",
            _ => return Err(unsupported("elementwise", format!("{op:?} of float32"))),
        }),
        (Kind::I32, _) => same(match op {
            Binary::Mul => "a * b",
            Binary::DivTrunc => "a / b",
            Binary::DivFloor => "div_floor_i32(a, b)",
            Binary::Maximum | Binary::ClampMin => "max(a, b)",
            Binary::Minimum | Binary::ClampMax => "min(a, b)",
            Binary::Pow => "pow_i32(a, b)",
            Binary::Fmod => "a % b",
            Binary::Remainder => "remainder_i32(a, b)",
            Binary::BitAnd => "a & b",
            Binary::BitOr => "a | b",
            Binary::BitXor => "a ^ b",
            // PyTorch's shifts: out-of-range amounts give 0 (or -1, shifting a negative right).
            Binary::Shl => "select(0, a << u32(b), b >= 0 && b < 32)",
            Binary::Shr => "select(select(0, -1, a < 0), a >> u32(b), b >= 0 && b < 32)",
            _ => return Err(unsupported("elementwise", format!("{op:?} of int32"))),
        }),
    }
}

/// Every specialisation this family can make, for the shader validation test: each operation
/// in each kind, with tensor and scalar operands, strided and contiguous, and every cast.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    let kinds = [Kind::F32, Kind::I32, Kind::Bool];
    let mut kernels = Vec::new();
    // Each specialisation with strided and with contiguous operands.
    let mut add = |operands: Vec<(Kind, bool)>, compute: Kind, expression: &Expression, out: Kind| {
        for fast in [false, true] {
            kernels.push(Spec { operands: operands.clone(), compute, expression, out, fast }.kernel());
        }
    };
    let unaries = [
        Unary::Exp,
        Unary::Log,
        Unary::Log1p,
        Unary::Expm1,
        Unary::Sqrt,
        Unary::Rsqrt,
        Unary::Sin,
        Unary::Cos,
        Unary::Tan,
        Unary::Tanh,
        Unary::Sigmoid,
        Unary::Erf,
        Unary::Reciprocal,
        Unary::Gelu,
        Unary::GeluTanh,
        Unary::Silu,
        Unary::Hardswish,
        Unary::Hardsigmoid,
        Unary::Ceil,
        Unary::Floor,
        Unary::Trunc,
        Unary::Round(0),
        Unary::Round(2),
        Unary::Round(-1),
        Unary::Neg,
        Unary::Abs,
        Unary::Sign,
        Unary::Square,
        Unary::Relu,
        Unary::Not,
        Unary::IsNan,
        Unary::IsInf,
        Unary::BitNot,
    ];
    let binaries = [
        Binary::Add(Scalar::Int(2)),
        Binary::Sub(Scalar::Int(1)),
        Binary::Mul,
        Binary::Div,
        Binary::DivTrunc,
        Binary::DivFloor,
        Binary::Maximum,
        Binary::Minimum,
        Binary::Pow,
        Binary::Atan2,
        Binary::Fmod,
        Binary::Remainder,
        Binary::ClampMin,
        Binary::ClampMax,
        Binary::Eq,
        Binary::Ne,
        Binary::Lt,
        Binary::Le,
        Binary::Gt,
        Binary::Ge,
        Binary::And,
        Binary::Or,
        Binary::Xor,
        Binary::BitAnd,
        Binary::BitOr,
        Binary::BitXor,
        Binary::Shl,
        Binary::Shr,
    ];
    for kind in kinds {
        for op in unaries {
            if let Ok(e) = unary_expr(op, kind) {
                add(vec![(kind, false)], kind, &e, e.result);
            }
        }
        for op in binaries {
            if let Ok(e) = binary_expr(op, kind) {
                add(vec![(kind, false), (kind, false)], kind, &e, e.result);
                add(vec![(Kind::I32, false), (Kind::F32, true)], kind, &e, e.result);
            }
        }
        for from in kinds {
            add(vec![(from, false)], kind, &Expression::new(IDENTITY, kind), kind);
        }
        let choose = Expression::new(CHOOSE, kind);
        add(vec![(kind, false), (Kind::I32, true), (Kind::Bool, false)], kind, &choose, kind);
        // A fill with a float32 scalar, converted to the kind.
        let fill = Expression { scalars: vec![(0, Kind::F32)], ..Expression::new(FILL, kind) };
        add(Vec::new(), kind, &fill, kind);
    }
    kernels
}
