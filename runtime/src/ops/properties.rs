//! Properties and data access: `shape`, `size`, `dtype`, `device`, `stride`, `ndim`, `dim`,
//! `numel`, `element_size`, `is_floating_point`, `is_complex`, `is_sparse`, `is_nested`, `_base`,
//! `data_ptr`, `item`, and Python's conversions of a tensor.

use crate::backend::Device;
use crate::error::{Result, bail};
use crate::tensor::{DType, Scalar, Shape, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

impl Tensor {
    /// The size of each dimension (`Tensor.shape`).
    #[torch_function(property)]
    pub fn shape(&self) -> Result<Shape> {
        Ok(self.data("shape", "self")?.layout.shape.clone())
    }

    /// The element type (`Tensor.dtype`).
    #[torch_function(property)]
    pub fn dtype(&self) -> Result<DType> {
        Ok(self.data("dtype", "self")?.dtype)
    }

    /// Where the data lives (`Tensor.device`).
    #[torch_function(property)]
    pub fn device(&self) -> Result<Device> {
        // A wrapper subclass or a fake tensor reports the device it stands for.
        Ok(crate::dispatch::reported_device(self.data("device", "self")?))
    }

    /// How many elements apart consecutive positions of each dimension are in memory
    /// (`Tensor.stride()`).
    ///
    /// ```
    /// let t = torchfn::zeros([2, 3], None, None)?;
    /// assert_eq!(t.stride()?, [3, 1]);
    /// assert_eq!(t.t()?.stride()?, [1, 3]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn stride(&self) -> Result<Vec<usize>> {
        Ok(self.data("stride", "self")?.layout.strides.to_vec())
    }

    /// The number of dimensions (`Tensor.ndim`).
    #[torch_function(property)]
    pub fn ndim(&self) -> Result<usize> {
        Ok(self.data("ndim", "self")?.layout.ndim())
    }

    /// The number of dimensions (`Tensor.dim()`, the method form of [`ndim`](Tensor::ndim)).
    #[torch_function]
    pub fn dim(&self) -> Result<usize> {
        Ok(self.data("dim", "self")?.layout.ndim())
    }

    /// The size of each dimension (`Tensor.size()`), as [`shape`](Tensor::shape).
    ///
    /// ```
    /// let t = torchfn::zeros([2, 3], None, None)?;
    /// assert_eq!((t.size()?.to_vec(), t.size_dim(-1)?, t.dim()?, t.numel()?), (vec![2, 3], 3, 2, 6));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn size(&self) -> Result<Shape> {
        Ok(self.data("size", "self")?.layout.shape.clone())
    }

    /// The size of dimension `dim` (`Tensor.size(dim)`); a negative `dim` counts from the end.
    #[torch_function(overload_of = Tensor::SIZE)]
    pub fn size_dim(&self, dim: i64) -> Result<usize> {
        let shape = &self.data("size", "self")?.layout.shape;
        if shape.is_empty() {
            bail!(Index, "size(): dimension specified as {dim} but tensor has no dimensions");
        }
        Ok(shape[crate::tensor::normalize_dim(dim, shape.len(), "size")?])
    }

    /// The number of elements (`Tensor.numel()`).
    #[torch_function]
    pub fn numel(&self) -> Result<usize> {
        Ok(self.data("numel", "self")?.layout.numel())
    }

    /// The size of one element in bytes (`Tensor.element_size()`).
    #[torch_function]
    pub fn element_size(&self) -> Result<usize> {
        Ok(self.data("element_size", "self")?.dtype.itemsize())
    }

    /// Whether the dtype is a floating-point one (`Tensor.is_floating_point()`).
    #[torch_function]
    pub fn is_floating_point(&self) -> Result<bool> {
        Ok(self.data("is_floating_point", "self")?.dtype.is_floating_point())
    }

    /// Whether the dtype is a complex one (`Tensor.is_complex()`): never, torchfn has none.
    #[torch_function]
    pub fn is_complex(&self) -> Result<bool> {
        self.data("is_complex", "self")?;
        Ok(false)
    }

    /// Whether the layout is sparse (`Tensor.is_sparse`): never, torchfn's tensors are strided.
    #[torch_function(property)]
    pub fn is_sparse(&self) -> Result<bool> {
        self.data("is_sparse", "self")?;
        Ok(false)
    }

    /// Whether this is a nested (jagged) tensor (`Tensor.is_nested`): never in torchfn.
    #[torch_function(property)]
    pub fn is_nested(&self) -> Result<bool> {
        self.data("is_nested", "self")?;
        Ok(false)
    }

    /// The tensor this one is a view of, `None` for a tensor that owns its data
    /// (`Tensor._base`). The very same object is returned, never a subclass copy of it.
    #[torch_function(property, nowrap, name = "_base.__get__")]
    pub fn base(&self) -> Result<Option<Tensor>> {
        Ok(self.data("_base", "self")?.base.clone())
    }

    /// The address of the first element (`Tensor.data_ptr`): views of one storage, and
    /// `as_subclass` results, point into the same memory.
    #[torch_function]
    pub fn data_ptr(&self) -> Result<usize> {
        let x = self.data("data_ptr", "self")?;
        Ok(x.storage.address() + x.layout.offset * x.dtype.itemsize())
    }

    /// The size of the first dimension (Python's `len(t)`, `Tensor.__len__`); a 0-d tensor has
    /// none: PyTorch's `TypeError`.
    #[torch_function]
    pub fn __len__(&self) -> Result<usize> {
        match self.data("__len__", "self")?.layout.shape.first() {
            Some(&n) => Ok(n),
            None => bail!(Type, "len() of a 0-d tensor"),
        }
    }

    /// The truth value of a one-element tensor (Python's `bool(t)`, `Tensor.__bool__`): whether
    /// it is non-zero (NaN is true). Several elements, or none, have none: PyTorch's errors.
    #[torch_function]
    pub fn __bool__(&self) -> Result<bool> {
        match self.data("__bool__", "self")?.layout.numel() {
            0 => bail!(Runtime, "Boolean value of Tensor with no values is ambiguous"),
            1 => {}
            _ => bail!(Runtime, "Boolean value of Tensor with more than one value is ambiguous"),
        }
        Ok(match crate::primitive::item(self)? {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
        })
    }

    /// A one-element tensor as a float (Python's `float(t)`, `Tensor.__float__`).
    #[torch_function]
    pub fn __float__(&self) -> Result<f64> {
        Ok(one_element("__float__", self)?.to_f64())
    }

    /// A one-element tensor as an integer (Python's `int(t)`, `Tensor.__int__`): a float is
    /// truncated toward zero.
    #[torch_function]
    pub fn __int__(&self) -> Result<i64> {
        Ok(match one_element("__int__", self)? {
            Scalar::Float(f) => f.trunc() as i64,
            other => other.to_i64(),
        })
    }

    /// A one-element integer tensor as an index (Python's `operator.index(t)`,
    /// `Tensor.__index__`: what indexing a list with a tensor calls).
    #[torch_function]
    pub fn __index__(&self) -> Result<i64> {
        let x = self.data("__index__", "self")?;
        if x.dtype.is_floating_point() || x.layout.numel() != 1 {
            bail!(Type, "only integer tensors of a single element can be converted to an index");
        }
        Ok(crate::primitive::item(self)?.to_i64())
    }

    /// Whether any element equals `element` (Python's `element in t`, `Tensor.__contains__`):
    /// `(element == self).any()`, broadcast as `==` is.
    #[torch_function]
    pub fn __contains__(&self, element: &Tensor) -> Result<bool> {
        let equal = crate::ops::compare::compare(
            "__contains__",
            crate::backend::Binary::Eq,
            ("other", element),
            ("self", self),
        )?;
        Ok(crate::primitive::item(&crate::any(&equal)?)?.to_i64() != 0)
    }

    /// The value of a one-element tensor as a Python number (`Tensor.item`).
    #[torch_function]
    pub fn item(&self) -> Result<Scalar> {
        let x = self.data("item", "self")?;
        let n = x.layout.numel();
        if n != 1 {
            bail!(Runtime, "item(): a Tensor with {n} elements cannot be converted to Scalar");
        }
        crate::primitive::item(self)
    }
}

/// The value of a one-element tensor, for Python's number conversions (PyTorch's `ValueError`
/// for any other).
fn one_element(func: &str, t: &Tensor) -> Result<Scalar> {
    if t.data(func, "self")?.layout.numel() != 1 {
        bail!(Value, "only one element tensors can be converted to Python scalars");
    }
    crate::primitive::item(t)
}

/// The number of elements of `input` (`torch.numel`).
#[torch_function(module = "torchfn")]
pub fn numel(input: &Tensor) -> Result<usize> {
    Ok(input.data("numel", "input")?.layout.numel())
}

/// Whether `input`'s dtype is a floating-point one (`torch.is_floating_point`).
#[torch_function(module = "torchfn")]
pub fn is_floating_point(input: &Tensor) -> Result<bool> {
    Ok(input.data("is_floating_point", "input")?.dtype.is_floating_point())
}

/// Whether `input`'s dtype is a complex one (`torch.is_complex`): never, torchfn has none.
#[torch_function(module = "torchfn")]
pub fn is_complex(input: &Tensor) -> Result<bool> {
    input.data("is_complex", "input")?;
    Ok(false)
}

crate::samples! {
    NUMEL => [sample([f32s(&[2, 3])])],
    IS_FLOATING_POINT => [sample([f32s(&[2])]), sample([i64s(&[2])])],
    IS_COMPLEX => [sample([f32s(&[2])])],
    Tensor::DIM => [sample([f32s(&[2, 3])])],
    Tensor::SIZE => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3]), Value::Int(-1)])],
    Tensor::NUMEL => [sample([f32s(&[2, 3])])],
    Tensor::ELEMENT_SIZE => [sample([f32s(&[2])]), sample([i64s(&[2])])],
    Tensor::IS_FLOATING_POINT => [sample([i64s(&[2])])],
    Tensor::IS_COMPLEX => [sample([f32s(&[2])])],
    Tensor::IS_SPARSE => [sample([f32s(&[2])])],
    Tensor::IS_NESTED => [sample([f32s(&[2])])],
    Tensor::__LEN__ => [sample([f32s(&[2, 3])])],
    Tensor::__BOOL__ => [sample([f32s(&[1])])],
    Tensor::__FLOAT__ => [sample([f32s(&[1])]), sample([i64s(&[1, 1])])],
    Tensor::__INT__ => [sample([f32s(&[1])]), sample([i64s(&[1])])],
    Tensor::__INDEX__ => [sample([i64s(&[1])])],
    Tensor::__CONTAINS__ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(2)])],
    Tensor::SHAPE => [sample([f32s(&[2, 3])])],
    Tensor::DTYPE => [sample([f32s(&[2])])],
    Tensor::DEVICE => [sample([f32s(&[2])])],
    Tensor::NDIM => [sample([f32s(&[2, 3])])],
    Tensor::STRIDE => [sample([f32s(&[2, 3])])],
    Tensor::BASE => [sample([f32s(&[2])])],
    Tensor::DATA_PTR => [sample([f32s(&[2])])],
    Tensor::ITEM => [sample([f32s(&[1])])],
}
