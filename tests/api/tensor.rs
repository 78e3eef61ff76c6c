//! The minimal dense CPU tensor: creation, views, arithmetic with PyTorch's promotion,
//! reductions, matrix products, reshaping, indexing, and errors instead of panics.

use torchfn::prelude::*;
use torchfn::{Device, ErrorKind, IndexItem, Shape};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn kind_and_message(r: Result<Tensor>) -> (ErrorKind, String) {
    let err = r.unwrap_err();
    (err.kind(), err.to_string())
}

#[test]
fn creation_follows_the_rust_element_type() {
    let cases = [
        (torchfn::tensor([1.0f32]).unwrap(), DType::Float32),
        (torchfn::tensor([1.0f64]).unwrap(), DType::Float64),
        (torchfn::tensor([1i64]).unwrap(), DType::Int64),
        (torchfn::tensor([1i32]).unwrap(), DType::Int32),
        (torchfn::tensor([true]).unwrap(), DType::Bool),
    ];
    for (t, dtype) in cases {
        assert_eq!(t.dtype().unwrap(), dtype);
    }
    let nested = torchfn::tensor(vec![vec![[1i64, 2], [3, 4]], vec![[5, 6], [7, 8]]]).unwrap();
    assert_eq!(nested.shape().unwrap(), [2, 2, 2]);
    assert_eq!(nested.ndim().unwrap(), 3);
    assert_eq!(nested.device().unwrap(), Device::CPU);
    assert_eq!(torchfn::tensor(3.5f32).unwrap().shape().unwrap(), Shape::from([]));
    assert_eq!(torchfn::zeros([2, 2], DType::Int64, None).unwrap().to_vec::<i64>().unwrap(), [0; 4]);
    assert_eq!(torchfn::ones([3], DType::Bool, None).unwrap().to_vec::<bool>().unwrap(), [true; 3]);
    assert_eq!(f32s(&torchfn::eye(2, None, DType::Float32, None).unwrap()), [1.0, 0.0, 0.0, 1.0]);
}

#[test]
fn bad_creation_arguments_are_errors() {
    let err = torchfn::tensor(vec![vec![1.0f32, 2.0], vec![3.0]]).unwrap_err();
    assert_eq!(err.to_string(), "tensor(): expected sequence of length 2 at dim 1 (got 1)");
    let err = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [2, 2]).unwrap_err();
    assert_eq!(err.to_string(), "from_vec(): shape [2, 2] holds 4 elements, but 3 were given");
    let err = torchfn::zeros([usize::MAX, 4], DType::Float32, None).unwrap_err();
    assert!(err.to_string().starts_with("zeros(): a tensor of shape [18446744073709551615, 4] is too large"), "{err}");
    let err = Tensor::from_vec(vec![1.0f32], [3, 12297829382473034411]).unwrap_err();
    assert!(err.to_string().contains("holds more than usize::MAX elements"), "{err}");
    // An empty tensor's other dimensions must fit in memory too (PyTorch: "Stride calculation
    // overflowed" for torch.zeros(0, 2**62, 2**62)).
    let err = torchfn::zeros([0, 1 << 62, 1 << 62], DType::Float32, None).unwrap_err();
    assert!(err.to_string().contains("too large to allocate"), "{err}");
    let empty = torchfn::zeros([0, 1 << 28, 1 << 28], DType::Float32, None).unwrap();
    assert_eq!(empty.shape().unwrap(), [0, 1 << 28, 1 << 28]);
    assert!(empty.reshape(&[0, 1 << 28, 1 << 28]).is_ok());
    // -1 among non-zero sizes is 0 for no elements (PyTorch 2.15 too); among sizes whose product
    // is 0, or overflows, it is an error.
    assert_eq!(empty.reshape(&[-1, 1 << 28, 1 << 28]).unwrap().shape().unwrap(), [0, 1 << 28, 1 << 28]);
    assert!(empty.reshape(&[0, -1]).is_err());
    assert!(empty.reshape(&[-1, 1 << 40, 1 << 40]).is_err());
    let err = torchfn::tensor([1i64]).unwrap().to_vec::<f32>().unwrap_err();
    assert!(err.to_string().contains("holds torch.int64, not torch.float32"), "{err}");
}

#[test]
fn indexing_and_reshaping_make_views_of_the_same_storage() {
    let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]]).unwrap();
    let row = t.get(1).unwrap();
    assert_eq!(row.to_vec::<i64>().unwrap(), [4, 5, 6]);
    assert_eq!(row.data_ptr().unwrap(), t.data_ptr().unwrap() + 3 * 8);
    assert!(row.base().unwrap().unwrap().is(&t));
    assert_eq!(t.get(-1).unwrap().get(-1).unwrap().item().unwrap(), Scalar::Int(6));
    let column = t.get((.., 2)).unwrap();
    assert_eq!(column.to_vec::<i64>().unwrap(), [3, 6]);
    let stepped = t.get((0, IndexItem::slice(None, None, 2))).unwrap();
    assert_eq!(stepped.to_vec::<i64>().unwrap(), [1, 3]);
    let expanded = t.get(vec![IndexItem::Ellipsis, IndexItem::NewAxis]).unwrap();
    assert_eq!(expanded.shape().unwrap(), [2, 3, 1]);
    let reshaped = t.reshape(&[3, -1]).unwrap();
    assert_eq!(reshaped.shape().unwrap(), [3, 2]);
    assert!(reshaped.base().unwrap().unwrap().is(&t), "a view of a view has the root as its base");
    // A non-contiguous input is copied.
    let copy = column.reshape(&[2]).unwrap();
    assert!(copy.base().unwrap().is_none());
    assert_eq!(copy.to_vec::<i64>().unwrap(), [3, 6]);
}

#[test]
fn bad_indices_and_shapes_are_errors() {
    let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]]).unwrap();
    assert_eq!(
        kind_and_message(t.get(2)),
        (ErrorKind::Index, "index 2 is out of bounds for dimension 0 with size 2".into())
    );
    assert_eq!(
        kind_and_message(t.get((0, 0, 0))),
        (ErrorKind::Index, "too many indices for tensor of dimension 2".into())
    );
    assert_eq!(
        kind_and_message(t.reshape(&[4, -1])),
        (ErrorKind::Runtime, "reshape(): shape '[4, -1]' is invalid for input of size 6".into())
    );
    assert_eq!(kind_and_message(t.reshape(&[-1, -1])).1, "reshape(): only one dimension can be inferred");
    assert_eq!(t.item().unwrap_err().to_string(), "item(): a Tensor with 6 elements cannot be converted to Scalar");
}

#[test]
fn arithmetic_broadcasts_and_promotes_like_pytorch() {
    let a = torchfn::tensor([[1.0f32], [2.0]]).unwrap();
    let b = torchfn::tensor([10.0f32, 20.0, 30.0]).unwrap();
    let sum = torchfn::add(&a, &b, 1).unwrap();
    assert_eq!(sum.shape().unwrap(), [2, 3]);
    assert_eq!(f32s(&sum), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    assert_eq!(f32s(&torchfn::sub(&b, &a, 2).unwrap()), [8.0, 18.0, 28.0, 6.0, 16.0, 26.0]);

    let ints = torchfn::tensor([1i64, 2]).unwrap();
    let int32 = torchfn::tensor([1i32, 2]).unwrap();
    let floats = torchfn::tensor([0.5f32, 0.25]).unwrap();
    let promoted = [
        ((&ints + &floats).unwrap(), DType::Float32),
        ((&int32 * 3).unwrap(), DType::Int32),
        ((&ints + 2.5).unwrap(), DType::Float32),
        ((&int32 + &ints).unwrap(), DType::Int64),
        ((&floats * 2.0).unwrap(), DType::Float32),
        ((&ints / &ints).unwrap(), DType::Float32),
        (torchfn::div(&ints, &ints, Some("floor")).unwrap(), DType::Int64),
    ];
    for (t, dtype) in promoted {
        assert_eq!(t.dtype().unwrap(), dtype, "{t}");
    }
    assert_eq!((&int32 * 3).unwrap().to_vec::<i32>().unwrap(), [3, 6]);
    assert_eq!(f32s(&(&ints + 2.5).unwrap()), [3.5, 4.5]);
    assert_eq!(f32s(&(1.0 - &floats).unwrap()), [0.5, 0.75]);
    assert_eq!(f32s(&(2 / &floats).unwrap()), [4.0, 8.0]);

    let bools = torchfn::tensor([true, false]).unwrap();
    let flags = torchfn::tensor([true, true]).unwrap();
    assert_eq!((&bools + &flags).unwrap().to_vec::<bool>().unwrap(), [true, true]);
    assert_eq!((&bools * &flags).unwrap().to_vec::<bool>().unwrap(), [true, false]);
    assert_eq!((&bools + 1).unwrap().to_vec::<i64>().unwrap(), [2, 1]);
}

#[test]
fn division_modes_round_like_pytorch() {
    let n = torchfn::tensor([7i64, -7, 7, -7]).unwrap();
    let d = torchfn::tensor([2i64, 2, -2, -2]).unwrap();
    assert_eq!(torchfn::div(&n, &d, Some("floor")).unwrap().to_vec::<i64>().unwrap(), [3, -4, -4, 3]);
    assert_eq!(torchfn::div(&n, &d, Some("trunc")).unwrap().to_vec::<i64>().unwrap(), [3, -3, -3, 3]);
    assert_eq!(f32s(&torchfn::div(&n, &d, None).unwrap()), [3.5, -3.5, -3.5, 3.5]);
    let x = torchfn::tensor([1.0f32, -1.0, 0.0]).unwrap();
    let zero = torchfn::zeros([3], DType::Float32, None).unwrap();
    let q = f32s(&(&x / &zero).unwrap());
    assert!(q[0] == f32::INFINITY && q[1] == f32::NEG_INFINITY && q[2].is_nan());
}

#[test]
fn arithmetic_errors_name_the_function_and_what_was_wrong() {
    let a = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap();
    let b = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let (kind, message) = kind_and_message(&a + &b);
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(
        message.starts_with(
            "__add__(): the size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"
        ),
        "{message}"
    );
    let ints = torchfn::tensor([1i64]).unwrap();
    assert!(kind_and_message(torchfn::add(&ints, &ints, 0.5)).1.contains("alpha must not be a floating point number"));
    assert!(
        kind_and_message(torchfn::div(&ints, &torchfn::zeros([1], DType::Int64, None).unwrap(), Some("floor")))
            .1
            .contains("ZeroDivisionError")
    );
    assert!(
        kind_and_message(torchfn::div(&ints, &ints, Some("round")))
            .1
            .contains("rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'")
    );
    let bools = torchfn::tensor([true]).unwrap();
    assert!(kind_and_message(-&bools).1.contains("negation, the `-` operator, on a bool tensor is not supported"));
    assert!(
        kind_and_message(&bools - &bools)
            .1
            .contains("subtraction, the `-` operator, with a bool tensor is not supported")
    );
}

#[test]
fn reductions_give_zero_dimensional_tensors() {
    let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    assert_eq!(torchfn::sum(&t).unwrap().item().unwrap(), Scalar::Float(10.0));
    assert_eq!(t.mean().unwrap().item().unwrap(), Scalar::Float(2.5));
    assert_eq!(t.sum().unwrap().shape().unwrap(), Shape::from([]));
    let flags = torchfn::tensor([true, true, false]).unwrap();
    let count = flags.sum().unwrap();
    assert_eq!((count.dtype().unwrap(), count.item().unwrap()), (DType::Int64, Scalar::Int(2)));
    let (kind, message) = kind_and_message(torchfn::tensor([1i64]).unwrap().mean());
    assert_eq!(kind, ErrorKind::NotImplemented, "as PyTorch 2.15 raises");
    assert!(message.contains("Input dtype must be either a floating point or complex dtype. Got: int64"), "{message}");
    let empty = torchfn::zeros([0], DType::Float32, None).unwrap();
    assert!(matches!(empty.mean().unwrap().item().unwrap(), Scalar::Float(x) if x.is_nan()));
}

#[test]
fn matrix_products_cover_every_shape_case() {
    let a = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    let b = torchfn::tensor([[1.0f32, 0.0], [0.0, 1.0], [1.0, 1.0]]).unwrap();
    let ab = torchfn::mm(&a, &b).unwrap();
    assert_eq!((ab.shape().unwrap(), f32s(&ab)), (Shape::from([2, 2]), vec![4.0, 5.0, 10.0, 11.0]));
    let v = torchfn::tensor([1.0f32, 1.0, 1.0]).unwrap();
    let dot = torchfn::matmul(&v, &v).unwrap();
    assert_eq!((dot.shape().unwrap(), dot.item().unwrap()), (Shape::from([]), Scalar::Float(3.0)));
    assert_eq!(f32s(&a.matmul(&v).unwrap()), [6.0, 15.0]);
    assert_eq!(f32s(&torchfn::matmul(&torchfn::tensor([1.0f32, 1.0]).unwrap(), &a).unwrap()), [5.0, 7.0, 9.0]);
    let batch = torchfn::tensor([[[1.0f32, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]]).unwrap();
    let col = torchfn::tensor([[1.0f32], [10.0]]).unwrap();
    let bc = torchfn::matmul(&batch, &col).unwrap();
    assert_eq!((bc.shape().unwrap(), f32s(&bc)), (Shape::from([2, 2, 1]), vec![21.0, 43.0, 10.0, 1.0]));
    let left = torchfn::ones([2, 1, 4, 3], DType::Float32, None).unwrap();
    let right = torchfn::ones([5, 3, 2], DType::Float32, None).unwrap();
    let broadcast = torchfn::matmul(&left, &right).unwrap();
    assert_eq!(broadcast.shape().unwrap(), [2, 5, 4, 2]);
    assert!(f32s(&broadcast).iter().all(|&x| x == 3.0));
    let ints = torchfn::tensor([[2i64, 0], [0, 2]]).unwrap();
    assert_eq!(ints.mm(&ints).unwrap().to_vec::<i64>().unwrap(), [4, 0, 0, 4]);
}

#[test]
fn large_matrix_products_match_a_plain_triple_loop() {
    // Sizes that take the blocked, threaded kernels, with a transposed left operand and a
    // broadcast batch, in both float dtypes; integer entries keep every sum exact.
    let (m, k, n) = (67, 300, 129);
    let entries = |len: usize, seed: usize| (0..len).map(|i| ((i * 7 + seed) % 11) as f64 - 5.0).collect::<Vec<_>>();
    let (a, b) = (entries(k * m, 1), entries(k * n, 2));
    let mut expect = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            expect[i * n + j] = (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum();
        }
    }
    let at = Tensor::from_vec(a, [k, m]).unwrap().t().unwrap(); // m x k, column-major
    let bt = Tensor::from_vec(b, [k, n]).unwrap();
    let product = torchfn::matmul(&at, &bt).unwrap();
    assert_eq!(product.to_vec::<f64>().unwrap(), expect);
    let (a32, b32) = (at.to(DType::Float32, false, false).unwrap(), bt.to(DType::Float32, false, false).unwrap());
    let batched = torchfn::matmul(&a32.unsqueeze(0).unwrap().expand([3, m as i64, k as i64]).unwrap(), &b32).unwrap();
    let got = batched.to_vec::<f32>().unwrap();
    assert!(got.chunks(m * n).all(|c| c.iter().zip(&expect).all(|(&x, &y)| f64::from(x) == y)));
}

#[test]
fn matrix_product_errors_show_the_shapes() {
    let a = torchfn::ones([2, 3], DType::Float32, None).unwrap();
    assert_eq!(
        kind_and_message(torchfn::mm(&a, &a)).1,
        "mm(): mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"
    );
    let v = torchfn::ones([3], DType::Float32, None).unwrap();
    assert!(kind_and_message(torchfn::mm(&v, &a)).1.starts_with("mm(): input must be a matrix"));
    let w = torchfn::ones([4], DType::Float32, None).unwrap();
    assert!(
        kind_and_message(torchfn::matmul(&v, &w))
            .1
            .contains("inconsistent tensor size, expected tensor [3] and src [4]")
    );
    let s = torchfn::tensor(1.0f32).unwrap();
    assert!(
        kind_and_message(torchfn::matmul(&s, &v))
            .1
            .contains("both arguments need to be at least 1D, but they are 0D and 1D")
    );
    let d = torchfn::ones([3, 2], DType::Float64, None).unwrap();
    assert!(kind_and_message(torchfn::mm(&a, &d)).1.contains("same dtype, but got: torch.float32 != torch.float64"));
    let b = torchfn::ones([2, 2], DType::Bool, None).unwrap();
    assert!(kind_and_message(b.mm(&b)).1.contains("not implemented for bool tensors"));
}

#[test]
fn no_bad_input_panics() {
    let shapes: [&[usize]; 5] = [&[], &[0], &[3], &[2, 3], &[3, 1, 2]];
    let mut outcomes = 0;
    for dtype in DType::ALL {
        for &sa in &shapes {
            for &sb in &shapes {
                let a = torchfn::ones(sa, dtype, None).unwrap();
                let b = torchfn::zeros(sb, dtype, None).unwrap();
                let calls: [Result<Tensor>; 12] = [
                    &a + &b,
                    &a - &b,
                    &a * &b,
                    &a / &b,
                    -&a,
                    torchfn::div(&a, &b, Some("floor")),
                    torchfn::matmul(&a, &b),
                    torchfn::mm(&a, &b),
                    a.mean(),
                    a.reshape(&[-1, 2]),
                    a.get((1, -4)),
                    a.get(vec![IndexItem::Ellipsis, IndexItem::Ellipsis]),
                ];
                outcomes += calls.len();
            }
        }
    }
    assert_eq!(outcomes, DType::ALL.len() * 5 * 5 * 12);
}

/// Built without the `wgpu` feature, the GPU API is still there (code compiles either way) and
/// every way to a GPU is an error that says why.
#[test]
#[cfg(not(feature = "wgpu"))]
fn without_the_wgpu_feature_the_gpu_api_says_it_was_left_out() {
    let errors = [
        Device::wgpu().unwrap_err(),
        Device::parse("wgpu:0").unwrap_err(),
        Device::wgpu_preferring(torchfn::wgpu::Preference::LowPower).unwrap_err(),
    ];
    for err in errors {
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().contains("built without the `wgpu` feature"), "{err}");
    }
    assert!(torchfn::wgpu::adapters().is_empty());
    torchfn::wgpu::set_batch_limit(8); // does nothing, and does not fail
}
