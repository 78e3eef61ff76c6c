//! Comparisons (`eq`, `ne`, `lt`, `le`, `gt`, `ge`), logic (`logical_and`, `logical_or`,
//! `logical_xor`, `logical_not`) and the tests `isnan`, `isinf`: each gives a bool tensor.
//! Comparisons broadcast and compare in the promoted dtype of their operands (an int tensor
//! against 2.5 compares as floats); logic treats every non-zero element, NaN included, as true.
//! The in-place forms (`eq_`, `logical_and_`, ...) write 1 or 0 into `self`'s own dtype.

use crate::backend::{Binary, Unary};
use crate::error::Result;
use crate::ops::device::device_of;
use crate::ops::inplace::write_into;
use crate::tensor::{DType, Tensor, check_broadcast, result_type};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// A comparison (`op` is `Eq` ... `Ge`) in the operands' promoted dtype; IEEE rules: NaN is
/// unequal to everything, itself included, and unordered. Or, with `dtype` bool, a logical
/// operation (`And`, `Or`, `Xor`): reading as bool makes every non-zero element (NaN included)
/// true.
fn binary_test(
    func: &str,
    op: Binary,
    (a_name, a): (&str, &Tensor),
    (b_name, b): (&str, &Tensor),
    logic: bool,
) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    device_of(func, &[(a_name, x), (b_name, y)])?;
    check_broadcast(&x.layout.shape, &y.layout.shape, func)?;
    let dtype = if logic { DType::Bool } else { result_type([x.participant(), y.participant()]) };
    crate::primitive::binary(a, b, op, dtype, None)
}

pub(super) fn compare(func: &str, op: Binary, a: (&str, &Tensor), b: (&str, &Tensor)) -> Result<Tensor> {
    binary_test(func, op, a, b, false)
}

fn logical(func: &str, op: Binary, a: (&str, &Tensor), b: (&str, &Tensor)) -> Result<Tensor> {
    binary_test(func, op, a, b, true)
}

fn logical_not_impl(func: &str, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    t.data(func, name)?;
    crate::primitive::unary(t, Unary::Not, DType::Bool, None)
}

/// Which elements are NaN (`nan` true) or infinite; never for integers and bools.
fn test_impl(func: &str, (name, t): (&str, &Tensor), nan: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let op = if nan { Unary::IsNan } else { Unary::IsInf };
    crate::primitive::unary(t, op, x.dtype, None)
}

/// `input == other` elementwise, broadcast, as a bool tensor (`torch.eq`); `other` may be a
/// Python number. NaN equals nothing, itself included.
///
/// ```
/// let a = torchfn::tensor([1.0f32, 2.0, f32::NAN])?;
/// let b = torchfn::tensor([1.0f32, 3.0, f32::NAN])?;
/// assert_eq!(torchfn::eq(&a, &b)?.to_vec::<bool>()?, [true, false, false]);
/// assert_eq!(torchfn::eq(&a, &2.into())?.to_vec::<bool>()?, [false, true, false]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn eq(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("eq", Binary::Eq, ("input", input), ("other", other))
}

/// `input != other` elementwise, broadcast, as a bool tensor (`torch.ne`); NaN is unequal to
/// everything.
#[torch_function(module = "torchfn")]
pub fn ne(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("ne", Binary::Ne, ("input", input), ("other", other))
}

/// `input < other` elementwise, broadcast, as a bool tensor (`torch.lt`); false where either
/// is NaN.
///
/// ```
/// let a = torchfn::tensor([[1i64], [4]])?;
/// let b = torchfn::tensor([2.5f32, 3.5])?;
/// assert_eq!(torchfn::lt(&a, &b)?.to_vec::<bool>()?, [true, true, false, false]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn lt(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("lt", Binary::Lt, ("input", input), ("other", other))
}

/// `input <= other` elementwise, broadcast, as a bool tensor (`torch.le`); false where either
/// is NaN.
#[torch_function(module = "torchfn")]
pub fn le(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("le", Binary::Le, ("input", input), ("other", other))
}

/// `input > other` elementwise, broadcast, as a bool tensor (`torch.gt`); false where either
/// is NaN.
#[torch_function(module = "torchfn")]
pub fn gt(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("gt", Binary::Gt, ("input", input), ("other", other))
}

/// `input >= other` elementwise, broadcast, as a bool tensor (`torch.ge`); false where either
/// is NaN.
#[torch_function(module = "torchfn")]
pub fn ge(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    compare("ge", Binary::Ge, ("input", input), ("other", other))
}

/// Whether both elements are non-zero, broadcast, as a bool tensor (`torch.logical_and`); any
/// dtypes, NaN counts as true.
///
/// ```
/// let a = torchfn::tensor([0.0f32, 2.0, f32::NAN])?;
/// let b = torchfn::tensor([true, true, true])?;
/// assert_eq!(torchfn::logical_and(&a, &b)?.to_vec::<bool>()?, [false, true, true]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn logical_and(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_and", Binary::And, ("input", input), ("other", other))
}

/// Whether either element is non-zero, broadcast, as a bool tensor (`torch.logical_or`).
#[torch_function(module = "torchfn")]
pub fn logical_or(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_or", Binary::Or, ("input", input), ("other", other))
}

/// Whether exactly one element is non-zero, broadcast, as a bool tensor (`torch.logical_xor`).
#[torch_function(module = "torchfn")]
pub fn logical_xor(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical("logical_xor", Binary::Xor, ("input", input), ("other", other))
}

/// Whether each element is zero, as a bool tensor (`torch.logical_not`); NaN is non-zero.
#[torch_function(module = "torchfn")]
pub fn logical_not(input: &Tensor) -> Result<Tensor> {
    logical_not_impl("logical_not", ("input", input))
}

/// Whether each element is NaN, as a bool tensor (`torch.isnan`); all false for integers.
///
/// ```
/// let t = torchfn::tensor([1.0f32, f32::NAN, f32::INFINITY])?;
/// assert_eq!(torchfn::isnan(&t)?.to_vec::<bool>()?, [false, true, false]);
/// assert_eq!(torchfn::isinf(&t)?.to_vec::<bool>()?, [false, false, true]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn isnan(input: &Tensor) -> Result<Tensor> {
    test_impl("isnan", ("input", input), true)
}

/// Whether each element is `inf` or `-inf`, as a bool tensor (`torch.isinf`); all false for
/// integers.
#[torch_function(module = "torchfn")]
pub fn isinf(input: &Tensor) -> Result<Tensor> {
    test_impl("isinf", ("input", input), false)
}

impl Tensor {
    /// `self == other`: the method form of [`eq`](crate::eq()).
    #[torch_function]
    pub fn eq(&self, other: &Tensor) -> Result<Tensor> {
        compare("eq", Binary::Eq, ("self", self), ("other", other))
    }

    /// `self != other`: the method form of [`ne`](crate::ne()).
    #[torch_function]
    pub fn ne(&self, other: &Tensor) -> Result<Tensor> {
        compare("ne", Binary::Ne, ("self", self), ("other", other))
    }

    /// `self < other`: the method form of [`lt`](crate::lt()).
    #[torch_function]
    pub fn lt(&self, other: &Tensor) -> Result<Tensor> {
        compare("lt", Binary::Lt, ("self", self), ("other", other))
    }

    /// `self <= other`: the method form of [`le`](crate::le()).
    #[torch_function]
    pub fn le(&self, other: &Tensor) -> Result<Tensor> {
        compare("le", Binary::Le, ("self", self), ("other", other))
    }

    /// `self > other`: the method form of [`gt`](crate::gt()).
    #[torch_function]
    pub fn gt(&self, other: &Tensor) -> Result<Tensor> {
        compare("gt", Binary::Gt, ("self", self), ("other", other))
    }

    /// `self >= other`: the method form of [`ge`](crate::ge()).
    #[torch_function]
    pub fn ge(&self, other: &Tensor) -> Result<Tensor> {
        compare("ge", Binary::Ge, ("self", self), ("other", other))
    }

    /// Python's `==` (`Tensor.__eq__`): a bool tensor. [`operator::eq`](crate::operator::eq)
    /// evaluates `a == b` as Python does, reflection included.
    #[torch_function]
    pub fn __eq__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__eq__", Binary::Eq, ("self", self), ("other", other))
    }

    /// Python's `!=` (`Tensor.__ne__`): a bool tensor.
    #[torch_function]
    pub fn __ne__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__ne__", Binary::Ne, ("self", self), ("other", other))
    }

    /// Python's `<` (`Tensor.__lt__`): a bool tensor.
    #[torch_function]
    pub fn __lt__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__lt__", Binary::Lt, ("self", self), ("other", other))
    }

    /// Python's `<=` (`Tensor.__le__`): a bool tensor.
    #[torch_function]
    pub fn __le__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__le__", Binary::Le, ("self", self), ("other", other))
    }

    /// Python's `>` (`Tensor.__gt__`): a bool tensor.
    #[torch_function]
    pub fn __gt__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__gt__", Binary::Gt, ("self", self), ("other", other))
    }

    /// Python's `>=` (`Tensor.__ge__`): a bool tensor.
    #[torch_function]
    pub fn __ge__(&self, other: &Tensor) -> Result<Tensor> {
        compare("__ge__", Binary::Ge, ("self", self), ("other", other))
    }

    /// Both non-zero: the method form of [`logical_and`](crate::logical_and()).
    #[torch_function]
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        logical("logical_and", Binary::And, ("self", self), ("other", other))
    }

    /// Either non-zero: the method form of [`logical_or`](crate::logical_or()).
    #[torch_function]
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        logical("logical_or", Binary::Or, ("self", self), ("other", other))
    }

    /// Exactly one non-zero: the method form of [`logical_xor`](crate::logical_xor()).
    #[torch_function]
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        logical("logical_xor", Binary::Xor, ("self", self), ("other", other))
    }

    /// Zero elements: the method form of [`logical_not`](crate::logical_not()).
    #[torch_function]
    pub fn logical_not(&self) -> Result<Tensor> {
        logical_not_impl("logical_not", ("self", self))
    }

    /// NaN elements: the method form of [`isnan`](crate::isnan()).
    #[torch_function]
    pub fn isnan(&self) -> Result<Tensor> {
        test_impl("isnan", ("self", self), true)
    }

    /// Infinite elements: the method form of [`isinf`](crate::isinf()).
    #[torch_function]
    pub fn isinf(&self) -> Result<Tensor> {
        test_impl("isinf", ("self", self), false)
    }

    /// `self == other`, in place (`Tensor.eq_`): 1 where equal and 0 elsewhere, in `self`'s
    /// dtype (true and false for a bool tensor); returns `self`. `other` broadcasts to `self`'s
    /// shape. See [`eq`](crate::eq()).
    ///
    /// ```
    /// let t = torchfn::tensor([1.0f32, 2.0, 3.0])?;
    /// assert!(t.eq_(&2.into())?.is(&t));
    /// assert_eq!(t.to_vec::<f32>()?, [0.0, 1.0, 0.0]); // still float32
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn eq_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("eq_", self, compare("eq_", Binary::Eq, ("self", self), ("other", other))?)
    }

    /// `self != other`, in place (`Tensor.ne_`), as 1 or 0 in `self`'s dtype. See
    /// [`ne`](crate::ne()).
    #[torch_function]
    pub fn ne_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("ne_", self, compare("ne_", Binary::Ne, ("self", self), ("other", other))?)
    }

    /// `self < other`, in place (`Tensor.lt_`), as 1 or 0 in `self`'s dtype. See
    /// [`lt`](crate::lt()).
    #[torch_function]
    pub fn lt_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("lt_", self, compare("lt_", Binary::Lt, ("self", self), ("other", other))?)
    }

    /// `self <= other`, in place (`Tensor.le_`), as 1 or 0 in `self`'s dtype. See
    /// [`le`](crate::le()).
    #[torch_function]
    pub fn le_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("le_", self, compare("le_", Binary::Le, ("self", self), ("other", other))?)
    }

    /// `self > other`, in place (`Tensor.gt_`), as 1 or 0 in `self`'s dtype. See
    /// [`gt`](crate::gt()).
    #[torch_function]
    pub fn gt_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("gt_", self, compare("gt_", Binary::Gt, ("self", self), ("other", other))?)
    }

    /// `self >= other`, in place (`Tensor.ge_`), as 1 or 0 in `self`'s dtype. See
    /// [`ge`](crate::ge()).
    #[torch_function]
    pub fn ge_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("ge_", self, compare("ge_", Binary::Ge, ("self", self), ("other", other))?)
    }

    /// Both non-zero, in place (`Tensor.logical_and_`), as 1 or 0 in `self`'s dtype. See
    /// [`logical_and`](crate::logical_and()).
    #[torch_function]
    pub fn logical_and_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("logical_and_", self, logical("logical_and_", Binary::And, ("self", self), ("other", other))?)
    }

    /// Either non-zero, in place (`Tensor.logical_or_`), as 1 or 0 in `self`'s dtype. See
    /// [`logical_or`](crate::logical_or()).
    #[torch_function]
    pub fn logical_or_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("logical_or_", self, logical("logical_or_", Binary::Or, ("self", self), ("other", other))?)
    }

    /// Exactly one non-zero, in place (`Tensor.logical_xor_`), as 1 or 0 in `self`'s dtype. See
    /// [`logical_xor`](crate::logical_xor()).
    #[torch_function]
    pub fn logical_xor_(&self, other: &Tensor) -> Result<Tensor> {
        write_into("logical_xor_", self, logical("logical_xor_", Binary::Xor, ("self", self), ("other", other))?)
    }

    /// Zero elements, in place (`Tensor.logical_not_`), as 1 or 0 in `self`'s dtype. See
    /// [`logical_not`](crate::logical_not()).
    #[torch_function]
    pub fn logical_not_(&self) -> Result<Tensor> {
        write_into("logical_not_", self, logical_not_impl("logical_not_", ("self", self))?)
    }
}

crate::samples! {
    EQ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)])],
    NE => [sample([f32s(&[2, 3]), f32s(&[2, 3])])],
    LT => [sample([f32s(&[2, 1]), f32s(&[1, 3])]), sample([i64s(&[3]), Value::Float(0.5)])],
    LE => [sample([f32s(&[2, 3]), f32s(&[3])])],
    GT => [sample([f32s(&[2, 3]), i64s(&[3])])],
    GE => [sample([f32s(&[2, 3]), f32s(&[2, 3])])],
    Tensor::__EQ__ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)])],
    Tensor::__NE__ => [sample([f32s(&[2, 3]), f32s(&[2, 3])])],
    Tensor::__LT__ => [sample([f32s(&[2, 1]), f32s(&[1, 3])]), sample([i64s(&[3]), Value::Float(0.5)])],
    Tensor::__LE__ => [sample([f32s(&[2, 3]), f32s(&[3])])],
    Tensor::__GT__ => [sample([f32s(&[2, 3]), i64s(&[3])])],
    Tensor::__GE__ => [sample([f32s(&[2, 3]), f32s(&[2, 3])])],
    LOGICAL_AND => [sample([bools(&[2, 3]), f32s(&[3])])],
    LOGICAL_OR => [sample([bools(&[2, 3]), bools(&[2, 3])])],
    LOGICAL_XOR => [sample([i64s(&[2, 1]), bools(&[3])])],
    LOGICAL_NOT => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    ISNAN => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    ISINF => [sample([f32s(&[2, 3])])],
    Tensor::EQ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::NE => [sample([f32s(&[3]), Value::Float(0.5)])],
    Tensor::LT => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::LE => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::GT => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::GE => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::LOGICAL_AND => [sample([bools(&[3]), bools(&[3])])],
    Tensor::LOGICAL_OR => [sample([bools(&[3]), f32s(&[3])])],
    Tensor::LOGICAL_XOR => [sample([bools(&[3]), bools(&[3])])],
    Tensor::LOGICAL_NOT => [sample([i64s(&[3])])],
    Tensor::ISNAN => [sample([f32s(&[3])])],
    Tensor::ISINF => [sample([f32s(&[3])])],
    Tensor::EQ_ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)])],
    Tensor::NE_ => [sample([f32s(&[3]), Value::Float(0.5)])],
    Tensor::LT_ => [sample([f32s(&[3]), f32s(&[3])]), sample([bools(&[3]), i64s(&[3])])],
    Tensor::LE_ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::GT_ => [sample([i64s(&[2, 3]), f32s(&[3])])],
    Tensor::GE_ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::LOGICAL_AND_ => [sample([bools(&[2, 3]), f32s(&[3])])],
    Tensor::LOGICAL_OR_ => [sample([f32s(&[3]), bools(&[3])])],
    Tensor::LOGICAL_XOR_ => [sample([i64s(&[3]), bools(&[3])])],
    Tensor::LOGICAL_NOT_ => [sample([f32s(&[3])]), sample([bools(&[3])])],
}
