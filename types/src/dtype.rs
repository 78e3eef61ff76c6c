//! Element types and PyTorch's type promotion.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use crate::Scalar;
use crate::error::{Error, Result};

/// The element type of a tensor, spelled like PyTorch's (`torch.float32` is `DType::Float32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `torch.bool`
    Bool,
    /// `torch.uint8`: images arrive as it.
    UInt8,
    /// `torch.int8`: quantised weights.
    Int8,
    /// `torch.int16` (`torch.short`)
    Int16,
    /// `torch.int32` (`torch.int`)
    Int32,
    /// `torch.int64`, the default integer type.
    Int64,
    /// `torch.float16` (`torch.half`): IEEE binary16, computed in float32 and rounded once.
    Float16,
    /// `torch.bfloat16`: float32's exponent with 8 bits of mantissa, computed in float32 and
    /// rounded once.
    BFloat16,
    /// `torch.float32` (`torch.float`), the default floating-point type.
    Float32,
    /// `torch.float64` (`torch.double`)
    Float64,
}

/// The three categories of PyTorch's promotion rules, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[doc(hidden)]
pub enum Category {
    Bool,
    Integral,
    Floating,
}

impl DType {
    /// Every dtype: bool, the integers from the narrowest, then the floating-point types.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::UInt8,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// The name without the `torch.` prefix, as in `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::UInt8 => "uint8",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// The name of PyTorch's C++ scalar type, as its kernels' errors say it: `"Float"`,
    /// `"Long"` (`"bitwise_and_cpu" not implemented for 'Float'`).
    pub fn scalar_type_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::UInt8 => "Byte",
            DType::Int8 => "Char",
            DType::Int16 => "Short",
            DType::Int32 => "Int",
            DType::Int64 => "Long",
            DType::Float16 => "Half",
            DType::BFloat16 => "BFloat16",
            DType::Float32 => "Float",
            DType::Float64 => "Double",
        }
    }

    /// Parses a dtype name, with or without the `torch.` prefix, including PyTorch's aliases
    /// (`half`, `float`, `double`, `short`, `int`, `long`).
    ///
    /// ```
    /// use torchfn::DType;
    /// assert_eq!(DType::from_name("torch.half"), Some(DType::Float16));
    /// assert_eq!(DType::from_name("bfloat16"), Some(DType::BFloat16));
    /// assert_eq!(DType::from_name("torch.long"), Some(DType::Int64));
    /// assert_eq!(DType::from_name("float8"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        let alias = match name {
            "half" => Some(DType::Float16),
            "float" => Some(DType::Float32),
            "double" => Some(DType::Float64),
            "short" => Some(DType::Int16),
            "int" => Some(DType::Int32),
            "long" => Some(DType::Int64),
            _ => None,
        };
        alias.or_else(|| DType::ALL.into_iter().find(|d| d.name() == name))
    }

    /// Whether a result of this dtype may be written into a tensor of dtype `to` (PyTorch's
    /// `torch.can_cast`, the rule of in-place operations and `out=`): a floating-point value
    /// does not go into an integer or bool tensor, nor an integer one into a bool tensor.
    ///
    /// ```
    /// use torchfn_types::DType;
    /// assert!(DType::Int64.can_cast(DType::Float32));
    /// assert!(DType::Bool.can_cast(DType::Int32));
    /// assert!(!DType::Float32.can_cast(DType::Int64));
    /// assert!(!DType::Int32.can_cast(DType::Bool));
    /// ```
    pub fn can_cast(self, to: DType) -> bool {
        let float_into_non_float = self.is_floating_point() && !to.is_floating_point();
        let non_bool_into_bool = self != DType::Bool && to == DType::Bool;
        !float_into_non_float && !non_bool_into_bool
    }

    /// True for float16, bfloat16, float32 and float64.
    #[inline]
    pub fn is_floating_point(self) -> bool {
        self.category() == Category::Floating
    }

    /// The size of one element in bytes.
    #[inline]
    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::UInt8 | DType::Int8 => 1,
            DType::Int16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::Float32 => 4,
            DType::Int64 | DType::Float64 => 8,
        }
    }

    /// True for float16 and bfloat16: stored in 16 bits, computed in float32 (PyTorch's
    /// "opmath" type) and rounded once per operation.
    #[inline]
    pub fn is_reduced_float(self) -> bool {
        matches!(self, DType::Float16 | DType::BFloat16)
    }

    /// The dtype this one is computed in: float32 for float16 and bfloat16, itself otherwise.
    #[inline]
    pub fn compute_dtype(self) -> DType {
        if self.is_reduced_float() { DType::Float32 } else { self }
    }

    /// True for the unsigned integer type (uint8).
    #[inline]
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::UInt8)
    }

    #[doc(hidden)]
    #[inline]
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::UInt8 | DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => Category::Integral,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => Category::Floating,
        }
    }

    /// `torch.promote_types`: the smallest dtype both can be converted to without losing their
    /// category (bool < integer < floating point), as PyTorch's table has it: a higher category
    /// wins outright (int64 with float16 is float16), uint8 with int8 is int16, and float16
    /// with bfloat16 is float32.
    ///
    /// ```
    /// use torchfn::DType;
    /// assert_eq!(DType::UInt8.promote(DType::Int8), DType::Int16);
    /// assert_eq!(DType::Float16.promote(DType::BFloat16), DType::Float32);
    /// assert_eq!(DType::Int64.promote(DType::BFloat16), DType::BFloat16);
    /// ```
    #[inline]
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        match (self, other) {
            _ if self == other => self,
            (UInt8, Int8) | (Int8, UInt8) => Int16,
            (Float16, BFloat16) | (BFloat16, Float16) => Float32,
            _ if self.category() != other.category() => {
                if self.category() > other.category() {
                    self
                } else {
                    other
                }
            }
            // Within a category the enum lists the types from the narrowest.
            _ => self.max(other),
        }
    }
}

/// The default dtype is the default floating-point dtype ([`get_default_dtype`]).
impl Default for DType {
    fn default() -> Self {
        get_default_dtype()
    }
}

thread_local! {
    static DEFAULT_DTYPE: Cell<DType> = const { Cell::new(DType::Float32) };
}

/// The default floating-point dtype (`torch.get_default_dtype()`): float32 unless
/// [`set_default_dtype`] changed it. Constructors make floating-point tensors of it, Python
/// numbers promote to it, and printing omits it.
#[inline]
pub fn get_default_dtype() -> DType {
    DEFAULT_DTYPE.with(Cell::get)
}

/// Sets the default floating-point dtype (`torch.set_default_dtype`), float32 or float64.
///
/// Unlike PyTorch's, the setting belongs to the calling thread (as grad mode and the mode stack
/// do), so threads and parallel tests do not see each other's; [`default_dtype`] sets it for a
/// scope.
///
/// ```
/// use torchfn::DType;
/// torchfn::set_default_dtype(DType::Float64)?;
/// assert_eq!(torchfn::zeros([2], None, None)?.dtype()?, DType::Float64);
/// assert_eq!((&torchfn::arange(3, None, None)? * 1.5)?.dtype()?, DType::Float64);
/// let err = torchfn::set_default_dtype(DType::Int64).unwrap_err();
/// assert_eq!(err.to_string(), "only floating-point types are supported as the default type");
/// torchfn::set_default_dtype(DType::Float32)?;
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn set_default_dtype(dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() {
        return Err(Error::type_error("only floating-point types are supported as the default type"));
    }
    DEFAULT_DTYPE.with(|d| d.set(dtype));
    Ok(())
}

/// Sets the default floating-point dtype until the returned guard is dropped, then restores the
/// previous one.
///
/// ```
/// use torchfn::DType;
/// {
///     let _float64 = torchfn::default_dtype(DType::Float64)?;
///     assert_eq!(torchfn::rand([2], None, None, None)?.dtype()?, DType::Float64);
/// }
/// assert_eq!(torchfn::rand([2], None, None, None)?.dtype()?, DType::Float32);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn default_dtype(dtype: DType) -> Result<DefaultDTypeGuard> {
    let previous = get_default_dtype();
    set_default_dtype(dtype)?;
    Ok(DefaultDTypeGuard { previous, _thread_bound: PhantomData })
}

/// Restores the previous default dtype when dropped (see [`default_dtype`]).
#[must_use = "the previous default dtype is restored when the guard is dropped"]
pub struct DefaultDTypeGuard {
    previous: DType,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for DefaultDTypeGuard {
    fn drop(&mut self) {
        DEFAULT_DTYPE.with(|d| d.set(self.previous));
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

/// How one operand takes part in `result_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum Participant {
    /// A tensor with at least one dimension.
    Dimensioned(DType),
    /// A zero-dimensional tensor.
    ZeroDim(DType),
    /// A Python-style number (a wrapped scalar): it never upcasts within its category.
    Number(DType),
}

/// `torch.result_type`: dimensioned tensors win over zero-dimensional ones, which win over
/// numbers, unless the lower class belongs to a higher category (an int tensor plus a float
/// number gives the default float dtype).
#[doc(hidden)]
#[inline]
pub fn result_type(operands: impl IntoIterator<Item = Participant>) -> DType {
    let (mut dim, mut zero, mut number) = (None, None, None);
    let join = |acc: &mut Option<DType>, d: DType| *acc = Some(acc.map_or(d, |a| a.promote(d)));
    for p in operands {
        match p {
            Participant::Dimensioned(d) => join(&mut dim, d),
            Participant::ZeroDim(d) => join(&mut zero, d),
            Participant::Number(d) => {
                let d = if d.is_floating_point() { get_default_dtype() } else { d };
                join(&mut number, d)
            }
        }
    }
    combine(dim, combine(zero, number)).unwrap_or_else(get_default_dtype)
}

/// PyTorch's `combine_categories`: keep `higher` unless `lower` is of a higher category.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (Some(h), Some(l)) if l.category() > h.category() => Some(h.promote(l)),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

mod sealed {
    /// Only torchfn's element types: storage and kernels exist for exactly these.
    pub trait Sealed {}
    impl Sealed for bool {}
    impl Sealed for u8 {}
    impl Sealed for i8 {}
    impl Sealed for i16 {}
    impl Sealed for i32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A Rust type that can be a tensor element: `bool`, `u8`, `i8`, `i16`, `i32`, `i64`,
/// [`half::f16`], [`half::bf16`], `f32`, `f64`.
pub trait Element:
    sealed::Sealed + Copy + PartialEq + PartialOrd + Default + fmt::Debug + Send + Sync + 'static
{
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// Converts to `f64` (true is 1).
    fn to_f64(self) -> f64;
    /// Converts from `f64`, truncating toward zero for integers (as `tensor.to(dtype)` does;
    /// the narrow integers wrap as PyTorch's conversion does on x86, through a 64-bit integer:
    /// 300.0 is 44 as int8), rounding to nearest even for float16 and bfloat16.
    fn from_f64(v: f64) -> Self;
    /// Converts to `i64` (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// Converts from `i64`.
    fn from_i64(v: i64) -> Self;

    /// The element as a Python-style number: a bool, an int (integer dtypes) or a float.
    fn to_scalar(self) -> Scalar {
        match Self::DTYPE {
            DType::Bool => Scalar::Bool(self.to_i64() != 0),
            d if d.is_floating_point() => Scalar::Float(self.to_f64()),
            _ => Scalar::Int(self.to_i64()),
        }
    }

    /// A Python-style number as this element type, converted as `tensor.to(dtype)` converts
    /// (floats truncate toward zero into integers, `true` is 1).
    fn from_number(number: Scalar) -> Self {
        match number {
            Scalar::Float(x) => Self::from_f64(x),
            Scalar::Int(i) => Self::from_i64(i),
            Scalar::Bool(b) => Self::from_i64(i64::from(b)),
        }
    }
}

macro_rules! element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
element!(f32, Float32);
element!(f64, Float64);
element!(i64, Int64);
element!(i32, Int32);

macro_rules! narrow_integer {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                // Through i64, as x86's conversion of C++'s `static_cast<int8_t>(float)`.
                (v as i64) as $t
            }
            #[inline]
            fn to_i64(self) -> i64 {
                i64::from(self)
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
narrow_integer!(u8, UInt8);
narrow_integer!(i8, Int8);
narrow_integer!(i16, Int16);

macro_rules! reduced_float {
    ($t:ty, $d:ident, $to_f32:ident, $from_f32:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                f64::from(reduced::$to_f32(self.to_bits()))
            }
            /// Through float32, as PyTorch's conversion of a double (which rounds twice).
            #[inline]
            fn from_f64(v: f64) -> Self {
                <$t>::from_bits(reduced::$from_f32(v as f32))
            }
            #[inline]
            fn to_i64(self) -> i64 {
                reduced::$to_f32(self.to_bits()) as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                <$t>::from_bits(reduced::$from_f32(v as f32))
            }
        }
    };
}
reduced_float!(half::f16, Float16, f16_to_f32, f32_to_f16);
reduced_float!(half::bf16, BFloat16, bf16_to_f32, f32_to_bf16);

/// Conversions between float32 and the half-precision formats' bits, without branches, so that
/// a loop of them vectorises (the `half` crate's check the processor once per element, or
/// branch on NaN). Rounding is to nearest, ties to even, as the hardware's; a NaN stays a NaN
/// (float16's and bfloat16's quiet NaN from float32's, the payload's top bits kept for
/// bfloat16).
#[doc(hidden)]
pub mod reduced {
    /// The float32 value of float16 bits: exact.
    #[inline(always)]
    pub fn f16_to_f32(h: u16) -> f32 {
        let h = u32::from(h);
        let sign = (h & 0x8000) << 16;
        let magnitude = h & 0x7fff;
        // Exponent and mantissa moved into float32's places, then rebiased by 2^(127 - 15):
        // exact for normal and subnormal values alike.
        let scaled = f32::from_bits(magnitude << 13) * f32::from_bits((127 + 112) << 23);
        // Infinities and NaNs (all exponent bits set) keep all of float32's set.
        let special = if magnitude >= 0x7c00 { 0x7f80_0000 } else { 0 };
        f32::from_bits(scaled.to_bits() | special | sign)
    }

    /// The float16 bits nearest to a float32 (ties to even); beyond float16's range,
    /// infinity; a NaN, float16's quiet NaN.
    #[inline(always)]
    pub fn f32_to_f16(f: f32) -> u16 {
        let bits = f.to_bits();
        let sign = (bits >> 16) & 0x8000;
        let magnitude = bits & 0x7fff_ffff;
        // Subnormal results: adding 0.5 (the magic number's value) lets the float32 adder
        // round the few mantissa bits left, in its own rounding (to nearest even).
        let magic = f32::from_bits(((127 - 15) + (23 - 10) + 1) << 23);
        let subnormal = (f32::from_bits(magnitude) + magic).to_bits().wrapping_sub(magic.to_bits());
        // Normal results: rebias, round to nearest even on the 13 bits dropped.
        let odd = (magnitude >> 13) & 1;
        let normal = magnitude.wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff) + odd) >> 13;
        let finite = if magnitude < (113 << 23) { subnormal } else { normal };
        let result = if magnitude >= ((127 + 16) << 23) {
            if magnitude > 0x7f80_0000 { 0x7e00 } else { 0x7c00 }
        } else {
            finite
        };
        (result | sign) as u16
    }

    /// The float32 value of bfloat16 bits: exact (bfloat16 is float32's top half).
    #[inline(always)]
    pub fn bf16_to_f32(b: u16) -> f32 {
        f32::from_bits(u32::from(b) << 16)
    }

    /// The bfloat16 bits nearest to a float32 (ties to even); a NaN stays a (quiet) NaN.
    #[inline(always)]
    pub fn f32_to_bf16(f: f32) -> u16 {
        let bits = f.to_bits();
        let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
        let nan = (bits & 0x7fff_ffff) > 0x7f80_0000;
        (if nan { (bits >> 16) | 0x40 } else { rounded }) as u16
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline]
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

/// Runs `$body` with `$T` bound to the Rust element type of `$dtype`. With a `bool => $bool`
/// arm, `$body` is only instantiated for the numeric types and `$bool` runs for bool tensors;
/// with a `reduced => $reduced` arm as well, `$body` is instantiated for neither bool nor
/// float16 and bfloat16, and `$reduced` runs for those two (kernels that compute half
/// precision on float32 copies, which never instantiate their arithmetic for them).
#[doc(hidden)]
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::with_dtype!($dtype, $T => $body, bool => {
            type $T = bool;
            $body
        })
    };
    ($dtype:expr, $T:ident => $body:expr, bool => $bool:expr) => {
        $crate::with_dtype!($dtype, $T => $body, bool => $bool, reduced => match $dtype {
            $crate::DType::Float16 => {
                type $T = $crate::half::f16;
                $body
            }
            _ => {
                type $T = $crate::half::bf16;
                $body
            }
        })
    };
    ($dtype:expr, $T:ident => $body:expr, bool => $bool:expr, reduced => $reduced:expr) => {
        match $dtype {
            $crate::DType::Bool => $bool,
            $crate::DType::Float16 | $crate::DType::BFloat16 => $reduced,
            $crate::DType::UInt8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Int8 => {
                type $T = i8;
                $body
            }
            $crate::DType::Int16 => {
                type $T = i16;
                $body
            }
            $crate::DType::Int32 => {
                type $T = i32;
                $body
            }
            $crate::DType::Int64 => {
                type $T = i64;
                $body
            }
            $crate::DType::Float32 => {
                type $T = f32;
                $body
            }
            $crate::DType::Float64 => {
                type $T = f64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Participant::*;
    use super::*;

    #[test]
    fn promote_types_follows_pytorch() {
        assert_eq!(DType::Bool.promote(DType::Bool), DType::Bool);
        assert_eq!(DType::Int32.promote(DType::Int64), DType::Int64);
        assert_eq!(DType::Int64.promote(DType::Float32), DType::Float32);
        assert_eq!(DType::Float32.promote(DType::Float64), DType::Float64);
    }

    #[test]
    fn promote_types_is_pytorchs_table() {
        // torch.promote_types over every pair, printed by PyTorch 2.15 in the order of `ALL`.
        let table = [
            "bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64",
            "uint8 uint8 int16 int16 int32 int64 float16 bfloat16 float32 float64",
            "int8 int16 int8 int16 int32 int64 float16 bfloat16 float32 float64",
            "int16 int16 int16 int16 int32 int64 float16 bfloat16 float32 float64",
            "int32 int32 int32 int32 int32 int64 float16 bfloat16 float32 float64",
            "int64 int64 int64 int64 int64 int64 float16 bfloat16 float32 float64",
            "float16 float16 float16 float16 float16 float16 float16 float32 float32 float64",
            "bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 float32 bfloat16 float32 float64",
            "float32 float32 float32 float32 float32 float32 float32 float32 float32 float64",
            "float64 float64 float64 float64 float64 float64 float64 float64 float64 float64",
        ];
        for (a, row) in DType::ALL.into_iter().zip(table) {
            let got: Vec<&str> = DType::ALL.iter().map(|&b| a.promote(b).name()).collect();
            assert_eq!(got.join(" "), row, "promote_types({a}, _)");
        }
    }

    #[test]
    fn narrow_types_convert_like_pytorch() {
        assert_eq!(<i8 as Element>::from_f64(300.0), 44);
        assert_eq!(<i8 as Element>::from_f64(-1.7), -1);
        assert_eq!(<u8 as Element>::from_f64(-1.7), 255);
        assert_eq!(<i8 as Element>::from_f64(1e10), 0);
        assert_eq!(<half::f16 as Element>::from_f64(65520.0).to_f64(), f64::INFINITY);
        assert_eq!(<half::bf16 as Element>::from_f64(1.0 / 3.0).to_f64(), 0.333984375);
        assert_eq!(result_type([Dimensioned(DType::Float16), Number(DType::Float64)]), DType::Float16);
        assert_eq!(result_type([Dimensioned(DType::UInt8), ZeroDim(DType::Int64)]), DType::UInt8);
        assert_eq!(result_type([Dimensioned(DType::Int8), ZeroDim(DType::Float16)]), DType::Float16);
    }

    #[test]
    fn branchless_conversions_agree_with_the_half_crate_on_every_value() {
        use half::{bf16, f16};
        // Every float16 and bfloat16, widened; and float32s around every half-precision value
        // (halfway points and their neighbours), narrowed.
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let w = reduced::f16_to_f32(bits);
            assert!(w.to_bits() == h.to_f32().to_bits() || (w.is_nan() && h.is_nan()), "f16 {bits:#x}");
            let b = bf16::from_bits(bits);
            let w = reduced::bf16_to_f32(bits);
            assert!(w.to_bits() == b.to_f32().to_bits() || (w.is_nan() && b.is_nan()), "bf16 {bits:#x}");
            let x = h.to_f32();
            for f in [x, f32::from_bits(x.to_bits().wrapping_add(1)), f32::from_bits(x.to_bits().wrapping_sub(1))]
                .into_iter()
                .chain((x.is_finite() && bits & 0x7fff < 0x7bff).then(|| (x + f16::from_bits(bits + 1).to_f32()) / 2.0))
            {
                let (got, want) = (reduced::f32_to_f16(f), f16::from_f32(f));
                assert!(got == want.to_bits() || (f.is_nan() && want.is_nan()), "f16 of {f:e}: {got:#x} {want:?}");
            }
            let y = b.to_f32();
            for f in [
                y,
                f32::from_bits(y.to_bits() ^ 0x8000),
                f32::from_bits(y.to_bits() | 0x8000),
                f32::from_bits(y.to_bits() | 0x7fff),
            ] {
                let (got, want) = (reduced::f32_to_bf16(f), bf16::from_f32(f));
                assert!(got == want.to_bits() || (f.is_nan() && want.is_nan()), "bf16 of {f:e}: {got:#x} {want:?}");
            }
        }
    }

    #[test]
    fn numbers_do_not_upcast_within_their_category() {
        // int32 tensor + Python int stays int32; float32 tensor + Python float stays float32.
        assert_eq!(result_type([Dimensioned(DType::Int32), Number(DType::Int64)]), DType::Int32);
        assert_eq!(result_type([Dimensioned(DType::Float32), Number(DType::Float64)]), DType::Float32);
        // int tensor + Python float gives the default float dtype.
        assert_eq!(result_type([Dimensioned(DType::Int64), Number(DType::Float64)]), DType::Float32);
        // bool tensor + Python int gives int64.
        assert_eq!(result_type([Dimensioned(DType::Bool), Number(DType::Int64)]), DType::Int64);
    }

    #[test]
    fn zero_dim_tensors_rank_between_tensors_and_numbers() {
        assert_eq!(result_type([Dimensioned(DType::Float32), ZeroDim(DType::Float64)]), DType::Float32);
        assert_eq!(result_type([Dimensioned(DType::Int64), ZeroDim(DType::Float64)]), DType::Float64);
        assert_eq!(result_type([ZeroDim(DType::Int32), ZeroDim(DType::Int64)]), DType::Int64);
        assert_eq!(result_type([Number(DType::Int64), Number(DType::Float64)]), DType::Float32);
    }

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_name(&d.to_string()), Some(d));
        }
        assert_eq!(DType::from_name("float8_e4m3fn"), None);
    }
}
