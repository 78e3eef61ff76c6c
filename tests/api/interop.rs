//! Interop: tensors to and from ndarray arrays (sharing memory where the layout allows), and
//! `.npy` files as NumPy writes and reads them, with errors instead of panics on bad files.

mod npy;

use std::path::PathBuf;

use torchfn::ndarray::{Array, Array0, Array1, Array2, Array3, ArrayD, ArrayViewD, IxDyn, arr0, array, s};
use torchfn::prelude::*;
use torchfn::{ErrorKind, Shape};

/// A duck: no data to convert or save.
#[derive(Debug, DuckTensor)]
struct Quack;
impl TorchFunction for Quack {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::NotImplemented)
    }
}

/// A duck whose values live elsewhere: reading its data says where (`#[torchfn(data_error)]`).
#[derive(Debug, DuckTensor)]
#[torchfn(data_error = Remote::unreachable)]
struct Remote {
    host: &'static str,
}
impl TorchFunction for Remote {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        // `item` answers with another remote value, where its callers need a number now.
        Ok(match func == Tensor::ITEM {
            true => Value::from(Tensor::from_duck(Remote { host: "node-8" })),
            false => Value::NotImplemented,
        })
    }
}
impl Remote {
    fn unreachable(&self, what: &str) -> Error {
        Error::runtime_error(format!("{what}, but the values are on {}", self.host))
    }
}

#[derive(TensorSubclass)]
struct Tagged;

fn kind_and_message<T: std::fmt::Debug>(r: Result<T>) -> (ErrorKind, String) {
    let err = r.unwrap_err();
    (err.kind(), err.to_string())
}

/// A path in the temporary directory, unique to this process and test.
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("torchfn-interop-{}-{name}.npy", std::process::id()))
}

// ---------------------------------------------------------------- ndarray to tensor

#[test]
fn a_standard_array_becomes_a_tensor_without_a_copy() {
    let a: Array2<f32> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let address = a.as_ptr() as usize;
    let t = Tensor::from(a);
    assert_eq!(t.data_ptr().unwrap(), address);
    assert_eq!(t.shape().unwrap(), [2, 3]);
    assert!(t.is_contiguous().unwrap());
    assert_eq!(t.to_string(), "tensor([[1., 2., 3.],\n        [4., 5., 6.]])");

    // Every dtype, any number of dimensions.
    assert_eq!(Tensor::from(arr0(2.5f64)).shape().unwrap(), Shape::from([]));
    assert_eq!(Tensor::from(arr0(2.5f64)).to_vec::<f64>().unwrap(), [2.5]);
    assert_eq!(Tensor::from(array![1i64, -2]).dtype().unwrap(), DType::Int64);
    assert_eq!(Tensor::from(array![[7i32]]).to_vec::<i32>().unwrap(), [7]);
    assert_eq!(Tensor::from(array![true, false]).to_vec::<bool>().unwrap(), [true, false]);
    let d = ArrayD::from_shape_vec(IxDyn(&[2, 1, 2]), vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(Tensor::from(d).shape().unwrap(), [2, 1, 2]);
    let empty = Tensor::from(Array2::<f32>::zeros((0, 3)));
    assert_eq!((empty.shape().unwrap(), empty.to_vec::<f32>().unwrap()), (Shape::from([0, 3]), vec![]));
}

#[test]
fn transposed_and_sliced_arrays_keep_their_strides_without_a_copy() {
    // Column-major: the transpose of a standard array.
    let a: Array2<i64> = array![[1, 2, 3], [4, 5, 6]];
    let address = a.as_ptr() as usize;
    let t = Tensor::from(a.reversed_axes());
    assert_eq!(t.data_ptr().unwrap(), address);
    assert!(!t.is_contiguous().unwrap());
    assert_eq!(t.to_vec::<i64>().unwrap(), [1, 4, 2, 5, 3, 6]);
    assert_eq!((&t + 10).unwrap().to_vec::<i64>().unwrap(), [11, 14, 12, 15, 13, 16]);

    // An offset and gaps: every other column of the last two rows.
    let a = Array::from_shape_vec((3, 4), (0..12i32).collect()).unwrap();
    let base = a.as_ptr() as usize;
    let sliced = a.slice_move(s![1.., ..;2]);
    let t = Tensor::from(sliced);
    assert_eq!(t.data_ptr().unwrap(), base + 4 * 4, "the first element is element 4 of the same memory");
    assert_eq!(t.shape().unwrap(), [2, 2]);
    assert_eq!(t.to_vec::<i32>().unwrap(), [4, 6, 8, 10]);
    assert_eq!(t.sum().unwrap().item().unwrap(), Scalar::Int(28));
}

#[test]
fn a_reversed_axis_is_copied_into_row_major_order() {
    let a: Array1<f64> = array![1.0, 2.0, 3.0];
    let address = a.as_ptr() as usize;
    let t = Tensor::from(a.slice_move(s![..;-1]));
    assert_ne!(t.data_ptr().unwrap(), address + 2 * 8);
    assert!(t.is_contiguous().unwrap());
    assert_eq!(t.to_vec::<f64>().unwrap(), [3.0, 2.0, 1.0]);

    // A reversed axis of one element moves nothing: no copy needed.
    let a: Array2<f32> = array![[1.0, 2.0]];
    let address = a.as_ptr() as usize;
    let t = Tensor::from(a.slice_move(s![..;-1, ..]));
    assert_eq!(t.data_ptr().unwrap(), address);
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0]);
}

// ---------------------------------------------------------------- tensor to ndarray

#[test]
fn tensors_copy_into_arrays_of_their_shape() {
    let t = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    assert_eq!(Array2::<f32>::try_from(&t).unwrap(), array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let dynamic = ArrayD::<f32>::try_from(&t).unwrap();
    assert_eq!(dynamic.shape(), [2, 3]);
    // Views read in logical order: transposed, narrowed, expanded.
    assert_eq!(Array2::<f32>::try_from(&t.t().unwrap()).unwrap(), array![[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]);
    assert_eq!(Array2::<f32>::try_from(&t.narrow(1, 1, 2).unwrap()).unwrap(), array![[2.0, 3.0], [5.0, 6.0]]);
    let row = torchfn::tensor([1i64, 2]).unwrap();
    assert_eq!(Array3::<i64>::try_from(&row.expand([2, 1, 2]).unwrap()).unwrap(), array![[[1, 2]], [[1, 2]]]);
    assert_eq!(Array0::<bool>::try_from(&torchfn::tensor(true).unwrap()).unwrap(), arr0(true));
    // A subclass instance converts as its data.
    let tagged = t.as_subclass(Tagged).unwrap();
    assert_eq!(Array2::<f32>::try_from(&tagged).unwrap()[[1, 2]], 6.0);
}

#[test]
fn wrong_dtypes_dimensions_and_ducks_are_errors() {
    let t = torchfn::tensor([[1i64, 2], [3, 4]]).unwrap();
    let (kind, message) = kind_and_message(Array2::<f64>::try_from(&t));
    assert_eq!(kind, ErrorKind::Type);
    assert_eq!(
        message,
        "Array<f64, Ix2>::try_from(): the tensor holds torch.int64, not torch.float64; convert it first with .to(Float64)"
    );
    let (kind, message) = kind_and_message(Array1::<i64>::try_from(&t));
    assert_eq!(kind, ErrorKind::Value);
    assert_eq!(
        message,
        "Array<i64, Ix1>::try_from(): expected a tensor with 1 dimensions, got one with 2 (shape [2, 2])"
    );
    let (kind, message) = kind_and_message(ArrayD::<i64>::try_from(Tensor::from_duck(Quack)));
    assert_eq!(kind, ErrorKind::Type);
    assert_eq!(message, "ArrayD<i64>::try_from(): argument 'self' must be Tensor, not Quack");
    // A duck may say what reading its data means, for reads of its data and for an override's
    // result its caller needs now.
    let remote = Tensor::from_duck(Remote { host: "node-7" });
    let (kind, message) = kind_and_message(ArrayD::<i64>::try_from(remote.clone()));
    assert_eq!(kind, ErrorKind::Runtime);
    assert_eq!(message, "ArrayD<i64>::try_from() reads the data of its argument 'self', but the values are on node-7");
    let (kind, message) = kind_and_message(remote.item());
    assert_eq!(kind, ErrorKind::Runtime);
    assert_eq!(message, "Tensor.item must give its caller a Number now, but the values are on node-8");
    assert_eq!(kind_and_message(Array2::<i32>::try_from(t.clone())).0, ErrorKind::Type);
    let (kind, message) = kind_and_message(t.with_ndarray_view(|_: ArrayViewD<'_, f32>| ()));
    assert_eq!(kind, ErrorKind::Type);
    assert!(message.starts_with("with_ndarray_view(): the tensor holds torch.int64, not torch.float32"), "{message}");
}

#[test]
fn a_tensor_that_owns_its_data_moves_into_an_array_without_a_copy() {
    let a: Array2<f64> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let address = a.as_ptr() as usize;
    let back = Array2::<f64>::try_from(Tensor::from(a)).unwrap();
    assert_eq!(back.as_ptr() as usize, address);
    assert_eq!(back, array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);

    // Column-major data comes back column-major, still without a copy.
    let a: Array2<i32> = array![[1, 2, 3], [4, 5, 6]];
    let address = a.as_ptr() as usize;
    let back = Array2::<i32>::try_from(Tensor::from(a.reversed_axes())).unwrap();
    assert_eq!(back.as_ptr() as usize, address);
    assert_eq!(back, array![[1, 4], [2, 5], [3, 6]]);

    // A fresh result of an operation.
    let sum = (&torchfn::tensor([1.0f32, 2.0]).unwrap() * 2.0).unwrap();
    let address = sum.data_ptr().unwrap();
    assert_eq!(Array1::<f32>::try_from(sum).unwrap().as_ptr() as usize, address);
}

#[test]
fn a_tensor_whose_data_is_shared_is_copied_and_left_intact() {
    let t = torchfn::tensor([1i64, 2, 3]).unwrap();
    let other = t.clone();
    let a = Array1::<i64>::try_from(t).unwrap();
    assert_ne!(a.as_ptr() as usize, other.data_ptr().unwrap());
    assert_eq!(other.to_vec::<i64>().unwrap(), [1, 2, 3]);

    // A view (the root still holds the storage), and a view with an offset.
    let root = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    assert_eq!(Array2::<f32>::try_from(root.t().unwrap()).unwrap(), array![[1.0, 3.0], [2.0, 4.0]]);
    assert_eq!(Array1::<f32>::try_from(root.select(0, 1).unwrap()).unwrap(), array![3.0, 4.0]);
    let narrowed = Tensor::from(array![1i32, 2, 3].slice_move(s![1..]));
    assert_eq!(Array1::<i32>::try_from(narrowed).unwrap(), array![2, 3]);
}

#[test]
fn ndarray_views_read_the_tensor_in_place() {
    let t = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0]]).unwrap().t().unwrap();
    let address = t.data_ptr().unwrap();
    let (pointer, strides, total) =
        t.with_ndarray_view(|v: ArrayViewD<'_, f64>| (v.as_ptr() as usize, v.strides().to_vec(), v.sum())).unwrap();
    assert_eq!((pointer, strides, total), (address, vec![1, 2], 10.0));
    let row = torchfn::tensor([1i32, 2, 3]).unwrap().expand([2, 3]).unwrap();
    assert_eq!(
        row.with_ndarray_view(|v: ArrayViewD<'_, i32>| v.to_owned()).unwrap(),
        array![[1, 2, 3], [1, 2, 3]].into_dyn()
    );
    assert_eq!(
        kind_and_message(Tensor::from_duck(Quack).with_ndarray_view(|_: ArrayViewD<'_, f32>| ())).0,
        ErrorKind::Type
    );
}
