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
    /// `torch.int32`
    Int32,
    /// `torch.int64`, the default integer type.
    Int64,
    /// `torch.float32`, the default floating-point type.
    Float32,
    /// `torch.float64`
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
    /// Every dtype, in promotion order.
    pub const ALL: [DType; 5] = [DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64];

    /// The name without the `torch.` prefix, as in `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// The name of PyTorch's C++ scalar type, as its kernels' errors say it: `"Float"`,
    /// `"Long"` (`"bitwise_and_cpu" not implemented for 'Float'`).
    pub fn scalar_type_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::Int32 => "Int",
            DType::Int64 => "Long",
            DType::Float32 => "Float",
            DType::Float64 => "Double",
        }
    }

    /// Parses a dtype name, with or without the `torch.` prefix.
    pub fn from_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for float32 and float64.
    #[inline]
    pub fn is_floating_point(self) -> bool {
        self.category() == Category::Floating
    }

    /// The size of one element in bytes.
    #[inline]
    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Int32 | DType::Float32 => 4,
            DType::Int64 | DType::Float64 => 8,
        }
    }

    #[doc(hidden)]
    #[inline]
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::Int32 | DType::Int64 => Category::Integral,
            DType::Float32 | DType::Float64 => Category::Floating,
        }
    }

    /// `torch.promote_types`: the smallest dtype both can be converted to without losing their
    /// category (bool < integer < floating point).
    #[inline]
    pub fn promote(self, other: DType) -> DType {
        self.max(other)
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
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A Rust type that can be a tensor element: `bool`, `i32`, `i64`, `f32`, `f64`.
pub trait Element:
    sealed::Sealed + Copy + PartialEq + PartialOrd + Default + fmt::Debug + Send + Sync + 'static
{
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// Converts to `f64` (true is 1).
    fn to_f64(self) -> f64;
    /// Converts from `f64`, truncating toward zero for integers (as `tensor.to(dtype)` does).
    fn from_f64(v: f64) -> Self;
    /// Converts to `i64` (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// Converts from `i64`.
    fn from_i64(v: i64) -> Self;

    /// The element as a Python-style number: a bool, an int (integer dtypes) or a float.
    fn to_scalar(self) -> Scalar {
        match Self::DTYPE {
            DType::Bool => Scalar::Bool(self.to_i64() != 0),
            DType::Int32 | DType::Int64 => Scalar::Int(self.to_i64()),
            DType::Float32 | DType::Float64 => Scalar::Float(self.to_f64()),
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
/// arm, `$body` is only instantiated for the numeric types and `$bool` runs for bool tensors.
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
        match $dtype {
            $crate::DType::Bool => $bool,
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
        assert_eq!(DType::from_name("float16"), None);
    }
}
