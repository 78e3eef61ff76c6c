//! Python-style numbers: the `Scalar` arguments of PyTorch's signatures.

use std::fmt;

use super::dtype::DType;

/// A number as PyTorch's `Scalar`: a bool, an integer or a float.
///
/// Operations treat scalars like Python numbers: they never upcast a tensor within its
/// category (`int32 tensor * 2` stays int32, `float32 tensor * 2.5` stays float32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A Python `bool`.
    Bool(bool),
    /// A Python `int`.
    Int(i64),
    /// A Python `float`.
    Float(f64),
}

impl Scalar {
    /// The dtype a tensor made from this number has: bool, int64 or float64.
    #[inline]
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::Int64,
            Scalar::Float(_) => DType::Float64,
        }
    }

    /// The value as `f64`.
    #[inline]
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as `i64` (floats truncate toward zero).
    #[inline]
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => i64::from(b),
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }

    /// True for `Scalar::Float`.
    #[inline]
    pub fn is_floating_point(self) -> bool {
        matches!(self, Scalar::Float(_))
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            #[inline]
            fn from(v: $t) -> Self {
                Scalar::$v(v.into())
            }
        }
    )*};
}
scalar_from!(
    bool => Bool, i64 => Int, i32 => Int, i16 => Int, i8 => Int, u8 => Int, f64 => Float, f32 => Float,
    half::f16 => Float, half::bf16 => Float
);

/// Prints like Python: `True`, `3`, `2.5`, `1.0`.
impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Bool(true) => f.write_str("True"),
            Scalar::Bool(false) => f.write_str("False"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{}", python_float(x)),
        }
    }
}

/// Python's `repr` of a float: always a decimal point or exponent, `nan`, `inf`.
#[doc(hidden)]
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf".into() } else { "-inf".into() }
    } else if x == x.trunc() && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_print_like_python() {
        assert_eq!(Scalar::from(1.0).to_string(), "1.0");
        assert_eq!(Scalar::from(2.5).to_string(), "2.5");
        assert_eq!(Scalar::from(3).to_string(), "3");
        assert_eq!(Scalar::from(true).to_string(), "True");
        assert_eq!(Scalar::from(f64::NEG_INFINITY).to_string(), "-inf");
    }

    #[test]
    fn scalars_convert() {
        assert_eq!(Scalar::from(true).to_i64(), 1);
        assert_eq!(Scalar::from(-2.7).to_i64(), -2);
        assert_eq!(Scalar::from(3).dtype(), DType::Int64);
    }
}
