//! Bitwise operations of integer and bool tensors: `bitwise_and`, `bitwise_or`, `bitwise_xor`,
//! `bitwise_left_shift`, `bitwise_right_shift` and `bitwise_not`, as functions, methods,
//! in-place methods and Python's operators (`&`, `|`, `^`, `<<`, `>>`, `~` and their reflected
//! and in-place dunders), with PyTorch's type promotion. On bools the first three are logical;
//! floats are refused, as PyTorch refuses them.

use crate::backend::{Binary, Unary};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::inplace::update;
use crate::tensor::{DType, Tensor, check_broadcast, result_type};
use crate::testing::{bools, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The kernel's name in PyTorch's "not implemented" messages.
fn kernel_name(op: Binary) -> &'static str {
    match op {
        Binary::BitAnd => "bitwise_and_cpu",
        Binary::BitOr => "bitwise_or_cpu",
        Binary::BitXor => "bitwise_xor_cpu",
        Binary::Shl => "lshift_cpu",
        _ => "rshift_cpu",
    }
}

/// `a op b`, broadcast, in the operands' promoted dtype, which must be an integer (or bool, but
/// for the shifts).
fn bitwise(func: &str, op: Binary, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    device_of(func, &[(a_name, x), (b_name, y)])?;
    check_broadcast(&x.layout.shape, &y.layout.shape, func)?;
    let dtype = result_type([x.participant(), y.participant()]);
    let shift = matches!(op, Binary::Shl | Binary::Shr);
    if dtype.is_floating_point() || (shift && dtype == DType::Bool) {
        bail!(NotImplemented, "{func}(): \"{}\" not implemented for '{}'", kernel_name(op), dtype.scalar_type_name());
    }
    crate::primitive::binary(a, b, op, dtype, None)
}

/// `target op= other`, written back into `target`.
fn bitwise_(func: &str, op: Binary, target: &Tensor, other: &Tensor) -> Result<Tensor> {
    update(func, target, &[other], |source| bitwise(func, op, ("self", source), ("other", other)))
}

/// `~t`: bitwise not of an integer tensor, logical not of a bool one; written into `out`
/// where it can be.
fn invert(func: &str, (name, t): (&str, &Tensor), out: Option<&Tensor>) -> Result<Tensor> {
    let dtype = t.data(func, name)?.dtype;
    if dtype.is_floating_point() {
        bail!(Type, "{func}(): ~ (operator.invert) is only implemented on integer and Boolean-type tensors");
    }
    crate::primitive::unary(t, Unary::BitNot, dtype, out)
}

/// One operation's function, method, in-place method and operator dunders.
macro_rules! bitwise_family {
    ($op:expr, $what:literal, $function:ident, $method_:ident, $dunder:ident, $reflected:ident, $inplace:ident) => {
        #[doc = concat!("`input ", $what, " other`, broadcast (`torch.", stringify!($function), "`): integer and bool tensors.")]
        #[torch_function(module = "torchfn")]
        pub fn $function(input: &Tensor, other: &Tensor) -> Result<Tensor> {
            bitwise(stringify!($function), $op, ("input", input), ("other", other))
        }

        impl Tensor {
            #[doc = concat!("`self ", $what, " other`: the method form of [`", stringify!($function), "`](crate::", stringify!($function), "()).")]
            #[torch_function]
            pub fn $function(&self, other: &Tensor) -> Result<Tensor> {
                bitwise(stringify!($function), $op, ("self", self), ("other", other))
            }

            #[doc = concat!("`self ", $what, "= other`, in place (`Tensor.", stringify!($method_), "`); returns `self`.")]
            #[torch_function]
            pub fn $method_(&self, other: &Tensor) -> Result<Tensor> {
                bitwise_(stringify!($method_), $op, self, other)
            }

            #[doc = concat!("Python's `", $what, "` operator (`Tensor.", stringify!($dunder), "`; Rust's `", $what, "` calls it).")]
            #[torch_function]
            pub fn $dunder(&self, other: &Tensor) -> Result<Tensor> {
                bitwise(stringify!($dunder), $op, ("self", self), ("other", other))
            }

            #[doc = concat!("The reflected `", $what, "` operator (`other ", $what, " self`).")]
            #[torch_function]
            pub fn $reflected(&self, other: &Tensor) -> Result<Tensor> {
                bitwise(stringify!($reflected), $op, ("other", other), ("self", self))
            }

            #[doc = concat!("Python's `", $what, "=` (`Tensor.", stringify!($inplace), "`; Rust's `", $what, "=` calls it), in place.")]
            #[torch_function]
            pub fn $inplace(&self, other: &Tensor) -> Result<Tensor> {
                bitwise_(stringify!($inplace), $op, self, other)
            }
        }
    };
}

bitwise_family!(Binary::BitAnd, "&", bitwise_and, bitwise_and_, __and__, __rand__, __iand__);
bitwise_family!(Binary::BitOr, "|", bitwise_or, bitwise_or_, __or__, __ror__, __ior__);
bitwise_family!(Binary::BitXor, "^", bitwise_xor, bitwise_xor_, __xor__, __rxor__, __ixor__);
bitwise_family!(Binary::Shl, "<<", bitwise_left_shift, bitwise_left_shift_, __lshift__, __rlshift__, __ilshift__);
bitwise_family!(Binary::Shr, ">>", bitwise_right_shift, bitwise_right_shift_, __rshift__, __rrshift__, __irshift__);

/// Bitwise not of an integer tensor, logical not of a bool one (`torch.bitwise_not`).
///
/// ```
/// let t = torchfn::tensor([5i64, -6])?;
/// assert_eq!(torchfn::bitwise_not(&t)?.to_vec::<i64>()?, [-6, 5]);
/// assert_eq!((&t & 3)?.to_vec::<i64>()?, [1, 2]);
/// assert_eq!((&t << 2)?.to_vec::<i64>()?, [20, -24]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn bitwise_not(input: &Tensor) -> Result<Tensor> {
    invert("bitwise_not", ("input", input), None)
}

impl Tensor {
    /// Bitwise not: the method form of [`bitwise_not`](crate::bitwise_not()).
    #[torch_function]
    pub fn bitwise_not(&self) -> Result<Tensor> {
        invert("bitwise_not", ("self", self), None)
    }

    /// Bitwise not, in place (`Tensor.bitwise_not_`); returns `self`.
    #[torch_function]
    pub fn bitwise_not_(&self) -> Result<Tensor> {
        update("bitwise_not_", self, &[], |source| invert("bitwise_not_", ("self", source), Some(self)))
    }

    /// Python's `~` (`Tensor.__invert__`; Rust's `!` calls it).
    #[torch_function]
    pub fn __invert__(&self) -> Result<Tensor> {
        invert("__invert__", ("self", self), None)
    }
}

fn ints() -> Value {
    Value::Tensor(Tensor::from_vec(vec![5i64, -6, 7, 0, -1, 12], [2, 3]).expect("a valid shape"))
}

fn amounts() -> Value {
    Value::Tensor(Tensor::from_vec(vec![1i64, 0, 3], [3]).expect("a valid shape"))
}

crate::samples! {
    BITWISE_AND => [sample([ints(), i64s(&[2, 3])]), sample([bools(&[4]), bools(&[4])]), sample([ints(), Value::Int(3)])],
    BITWISE_OR => [sample([ints(), i64s(&[3])]), sample([bools(&[4]), bools(&[4])])],
    BITWISE_XOR => [sample([ints(), i64s(&[2, 3])]), sample([bools(&[2]), bools(&[2])])],
    BITWISE_LEFT_SHIFT => [sample([ints(), amounts()])],
    BITWISE_RIGHT_SHIFT => [sample([ints(), amounts()])],
    BITWISE_NOT => [sample([ints()]), sample([bools(&[3])])],
    Tensor::BITWISE_AND => [sample([ints(), i64s(&[3])])],
    Tensor::BITWISE_OR => [sample([ints(), i64s(&[3])])],
    Tensor::BITWISE_XOR => [sample([bools(&[3]), bools(&[3])])],
    Tensor::BITWISE_LEFT_SHIFT => [sample([ints(), amounts()])],
    Tensor::BITWISE_RIGHT_SHIFT => [sample([ints(), amounts()])],
    Tensor::BITWISE_NOT => [sample([ints()])],
    Tensor::BITWISE_AND_ => [sample([ints(), i64s(&[3])])],
    Tensor::BITWISE_OR_ => [sample([ints(), i64s(&[3])])],
    Tensor::BITWISE_XOR_ => [sample([ints(), i64s(&[3])])],
    Tensor::BITWISE_LEFT_SHIFT_ => [sample([ints(), amounts()])],
    Tensor::BITWISE_RIGHT_SHIFT_ => [sample([ints(), amounts()])],
    Tensor::BITWISE_NOT_ => [sample([ints()])],
    Tensor::__AND__ => [sample([ints(), i64s(&[3])])],
    Tensor::__RAND__ => [sample([ints(), Value::Int(6)])],
    Tensor::__IAND__ => [sample([ints(), i64s(&[3])])],
    Tensor::__OR__ => [sample([ints(), i64s(&[3])])],
    Tensor::__ROR__ => [sample([ints(), Value::Int(6)])],
    Tensor::__IOR__ => [sample([bools(&[3]), bools(&[3])])],
    Tensor::__XOR__ => [sample([ints(), i64s(&[3])])],
    Tensor::__RXOR__ => [sample([ints(), Value::Int(6)])],
    Tensor::__IXOR__ => [sample([ints(), i64s(&[3])])],
    Tensor::__LSHIFT__ => [sample([ints(), amounts()])],
    Tensor::__RLSHIFT__ => [sample([amounts(), Value::Int(3)])],
    Tensor::__ILSHIFT__ => [sample([ints(), amounts()])],
    Tensor::__RSHIFT__ => [sample([ints(), amounts()])],
    Tensor::__RRSHIFT__ => [sample([amounts(), Value::Int(64)])],
    Tensor::__IRSHIFT__ => [sample([ints(), amounts()])],
    Tensor::__INVERT__ => [sample([ints()]), sample([bools(&[3])])],
}
