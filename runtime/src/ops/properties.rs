//! Properties and data access: `shape`, `dtype`, `device`, `stride`, `ndim`, `_base`, `data_ptr`,
//! `item`.

use crate::backend::Device;
use crate::error::{Result, bail};
use crate::tensor::{DType, Scalar, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;

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

crate::samples! {
    Tensor::SHAPE => [sample([f32s(&[2, 3])])],
    Tensor::DTYPE => [sample([f32s(&[2])])],
    Tensor::DEVICE => [sample([f32s(&[2])])],
    Tensor::NDIM => [sample([f32s(&[2, 3])])],
    Tensor::STRIDE => [sample([f32s(&[2, 3])])],
    Tensor::BASE => [sample([f32s(&[2])])],
    Tensor::DATA_PTR => [sample([f32s(&[2])])],
    Tensor::ITEM => [sample([f32s(&[1])])],
}
