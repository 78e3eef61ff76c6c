//! Shapes, views, joins and indexing: which results share storage, how expanded (stride-0) and
//! transposed views read everywhere, known values, and errors of PyTorch's kinds.

use torchfn::prelude::*;
use torchfn::{ErrorKind, Shape};

fn i64s(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// `0, 1, ..., n - 1` as int64, in `shape`.
fn range(shape: &[usize]) -> Tensor {
    let n = shape.iter().product::<usize>() as i64;
    Tensor::from_vec((0..n).collect(), shape).unwrap()
}

fn kind<T: std::fmt::Debug>(r: Result<T>) -> ErrorKind {
    r.unwrap_err().kind()
}

/// True when `view` is a view of `root`: same storage, `_base` is `root`.
fn is_view_of(view: &Tensor, root: &Tensor) -> bool {
    view.base().unwrap().is_some_and(|b| b.is(root))
}

#[test]
fn views_share_the_storage_of_their_root() {
    let t = range(&[2, 3, 4]);
    let views = [
        ("flatten", torchfn::flatten(&t, 0, -1).unwrap()),
        ("flatten(1)", t.flatten(1, -1).unwrap()),
        ("squeeze", torchfn::unsqueeze(&t, 0).unwrap().squeeze().unwrap()),
        ("unsqueeze", t.unsqueeze(-1).unwrap()),
        ("permute", torchfn::permute(&t, [2, 0, 1]).unwrap()),
        ("transpose", t.transpose(0, 2).unwrap()),
        ("t", t.select(0, 0).unwrap().t().unwrap()),
        ("expand", t.expand([2, 2, 3, 4]).unwrap()),
        ("broadcast_to", torchfn::broadcast_to(&t, [3, 2, 3, 4]).unwrap()),
        ("narrow", t.narrow(2, 1, 2).unwrap()),
        ("select", torchfn::select(&t, 1, -1).unwrap()),
    ];
    for (name, view) in &views {
        assert!(is_view_of(view, &t), "{name} is not a view of its input");
    }
    // Views of views have the root as their base, and point into its storage.
    let inner = t.narrow(2, 1, 2).unwrap().select(0, 1).unwrap();
    assert!(is_view_of(&inner, &t));
    let first = t.data_ptr().unwrap();
    assert_eq!(inner.data_ptr().unwrap(), first + (12 + 1) * 8);
    for piece in t.split(2, 2).unwrap().iter().chain(&torchfn::chunk(&t, 2, 1).unwrap()) {
        assert!(is_view_of(piece, &t));
    }
    // start_dim == end_dim gives the input itself, as PyTorch.
    assert!(t.flatten(1, 1).unwrap().is(&t));
}

#[test]
fn copies_have_their_own_storage() {
    let t = range(&[2, 3]);
    let tr = t.t().unwrap();
    for (name, copy) in [
        ("flatten of a transpose", tr.flatten(0, -1).unwrap()),
        ("contiguous", tr.contiguous().unwrap()),
        ("clone", tr.copy().unwrap()),
        ("torch.clone", torchfn::clone(&t).unwrap()),
        ("cat", torchfn::cat(std::slice::from_ref(&t), 0).unwrap()),
        ("flip", t.flip(0).unwrap()),
        ("repeat", t.repeat([1, 1]).unwrap()),
    ] {
        assert!(copy.base().unwrap().is_none(), "{name} has a base");
        assert_ne!(copy.data_ptr().unwrap(), t.data_ptr().unwrap(), "{name} shares storage");
    }
    assert_eq!(i64s(&tr.flatten(0, -1).unwrap()), [0, 3, 1, 4, 2, 5]);
    // A contiguous tensor's `contiguous` is the tensor itself.
    assert!(t.contiguous().unwrap().is(&t));
}

#[test]
fn clone_keeps_dense_strides_and_is_contiguous_follows_pytorch() {
    let t = range(&[2, 3]);
    assert!(t.is_contiguous().unwrap());
    let tr = t.t().unwrap();
    assert!(!tr.is_contiguous().unwrap());
    let c = tr.copy().unwrap();
    assert!(!c.is_contiguous().unwrap(), "preserve_format keeps a transpose's strides");
    assert_eq!(i64s(&c), [0, 3, 1, 4, 2, 5]);
    assert!(c.t().unwrap().is_contiguous().unwrap());
    // A gapped layout clones contiguous.
    let gapped = t.narrow(1, 0, 2).unwrap();
    assert!(!gapped.is_contiguous().unwrap());
    assert!(gapped.copy().unwrap().is_contiguous().unwrap());
    // Size-one dimensions and empty tensors do not count.
    assert!(t.unsqueeze(1).unwrap().is_contiguous().unwrap());
    assert!(t.narrow(1, 0, 0).unwrap().is_contiguous().unwrap());
}

#[test]
fn expanded_views_read_correctly_everywhere() {
    let col = torchfn::tensor([[1.0f32], [2.0], [3.0]]).unwrap();
    let e = col.expand([3, 4]).unwrap();
    assert_eq!(e.shape().unwrap(), [3, 4]);
    assert!(!e.is_contiguous().unwrap());
    assert_eq!(f32s(&e), [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]);
    assert_eq!(e.to_string(), "tensor([[1., 1., 1., 1.],\n        [2., 2., 2., 2.],\n        [3., 3., 3., 3.]])");
    // Arithmetic, with another expanded operand and with a plain one.
    let row = torchfn::tensor([10.0f32, 20.0, 30.0, 40.0]).unwrap().expand([3, -1]).unwrap();
    assert_eq!(f32s(&(&e + &row).unwrap())[..4], [11.0, 21.0, 31.0, 41.0]);
    assert_eq!(f32s(&(&e * 2.0).unwrap())[8..], [6.0; 4]);
    // Reductions.
    assert_eq!(e.sum().unwrap().item().unwrap(), Scalar::Float(24.0));
    assert_eq!(f32s(&e.sum_dim(1, false).unwrap()), [4.0, 8.0, 12.0]);
    assert_eq!(f32s(&torchfn::amax(&e, [0], false).unwrap()), [3.0; 4]);
    assert_eq!(f32s(&torchfn::cumsum(&e, 1, None).unwrap())[..4], [1.0, 2.0, 3.0, 4.0]);
    // Matrix products, copies and joins.
    let ones = torchfn::ones([4], None, None).unwrap();
    assert_eq!(f32s(&torchfn::matmul(&e, &ones).unwrap()), [4.0, 8.0, 12.0]);
    assert_eq!(f32s(&e.contiguous().unwrap()), f32s(&e));
    assert_eq!(f32s(&e.reshape(&[12]).unwrap())[4..6], [2.0, 2.0]);
    let joined = torchfn::cat(&[e.clone(), row.clone()], 0).unwrap();
    assert_eq!(joined.shape().unwrap(), [6, 4]);
    assert_eq!(f32s(&joined)[8..16], [3.0, 3.0, 3.0, 3.0, 10.0, 20.0, 30.0, 40.0]);
    // A scalar expanded along new leading dimensions, and an expanded tensor's views.
    let s = torchfn::tensor(7i64).unwrap().expand([2, 3]).unwrap();
    assert_eq!(i64s(&s), [7; 6]);
    assert_eq!(i64s(&s.t().unwrap().select(0, 2).unwrap()), [7, 7]);
    let flat = s.flatten(0, -1).unwrap();
    assert_eq!((flat.shape().unwrap(), i64s(&flat)), (Shape::from([6]), vec![7; 6]));
    assert!(flat.base().unwrap().is_some(), "one stride (0) steps through both dimensions: a view");
}

#[test]
fn transposed_views_read_correctly_everywhere() {
    let t = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap().t().unwrap();
    assert_eq!(t.shape().unwrap(), [3, 2]);
    assert_eq!(f32s(&t), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(t.to_string(), "tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])");
    assert_eq!(f32s(&(&t - &t.contiguous().unwrap()).unwrap()), [0.0; 6]);
    assert_eq!(f32s(&t.sum_dim(0, false).unwrap()), [6.0, 15.0]);
    assert_eq!(f32s(&torchfn::mm(&t.t().unwrap(), &t).unwrap()), [14.0, 32.0, 32.0, 77.0]);
    assert_eq!(f32s(&t.get(1).unwrap()), [2.0, 5.0]);
    assert_eq!(f32s(&torchfn::permute(&t.unsqueeze(0).unwrap(), [2, 1, 0]).unwrap()), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn view_shapes_and_values() {
    let t = range(&[2, 3, 4]);
    assert_eq!(torchfn::flatten(&t, 1, 2).unwrap().shape().unwrap(), [2, 12]);
    assert_eq!(torchfn::flatten(&torchfn::tensor(5i64).unwrap(), 0, -1).unwrap().shape().unwrap(), [1]);
    let ones = torchfn::zeros([1, 3, 1], None, None).unwrap();
    assert_eq!(torchfn::squeeze(&ones).unwrap().shape().unwrap(), [3]);
    assert_eq!(torchfn::squeeze_dim(&ones, [0, 2]).unwrap().shape().unwrap(), [3]);
    assert_eq!(torchfn::squeeze_dim(&ones, 1).unwrap().shape().unwrap(), [1, 3, 1]);
    assert_eq!(torchfn::unsqueeze(&t, 3).unwrap().shape().unwrap(), [2, 3, 4, 1]);
    assert_eq!(i64s(&torchfn::transpose(&t, 0, 2).unwrap().select(0, 1).unwrap()), [1, 13, 5, 17, 9, 21]);
    assert_eq!(i64s(&torchfn::narrow(&t, 2, -2, 2).unwrap().select(0, 0).unwrap()), [2, 3, 6, 7, 10, 11]);
    assert_eq!(i64s(&t.select(1, 1).unwrap().select(0, 1).unwrap()), [16, 17, 18, 19]);
    assert_eq!(torchfn::t(&range(&[3])).unwrap().shape().unwrap(), [3]);
    assert_eq!(t.expand(vec![2, -1, -1, 4]).unwrap().shape().unwrap(), [2, 2, 3, 4]);
    let empty = torchfn::zeros([0, 1], None, None).unwrap();
    assert_eq!(empty.expand([0, 5]).unwrap().shape().unwrap(), [0, 5]);
}

#[test]
fn joins_and_splits() {
    let a = range(&[2, 2]);
    let b = torchfn::tensor([[0.5f32, 1.5]]).unwrap();
    let c = torchfn::cat(&[a.clone(), b.clone()], 0).unwrap();
    assert_eq!(c.dtype().unwrap(), DType::Float32, "cat promotes");
    assert_eq!(f32s(&c), [0.0, 1.0, 2.0, 3.0, 0.5, 1.5]);
    // Empty one-dimensional tensors are skipped.
    let skipped = torchfn::cat(&[a.clone(), torchfn::zeros([0], DType::Int64, None).unwrap(), a.clone()], 1).unwrap();
    assert_eq!(i64s(&skipped), [0, 1, 0, 1, 2, 3, 2, 3]);
    assert_eq!(torchfn::concatenate(&[a.clone(), a.clone()], -1).unwrap().shape().unwrap(), [2, 4]);
    let s = torchfn::stack(&[a.clone(), a.clone()], 2).unwrap();
    assert_eq!(s.shape().unwrap(), [2, 2, 2]);
    assert_eq!(i64s(&s), [0, 0, 1, 1, 2, 2, 3, 3]);
    let scalars = [torchfn::tensor(1i64).unwrap(), torchfn::tensor(2i64).unwrap()];
    assert_eq!(i64s(&torchfn::stack(&scalars, 0).unwrap()), [1, 2]);

    let t = range(&[5, 2]);
    let pieces = torchfn::split(&t, [1, 4], 0).unwrap();
    assert_eq!(i64s(&pieces[1]), [2, 3, 4, 5, 6, 7, 8, 9]);
    let pieces = t.split(2, 0).unwrap();
    let shapes: Vec<Shape> = pieces.iter().map(|p| p.shape().unwrap()).collect();
    assert_eq!(shapes, [Shape::from([2, 2]), Shape::from([2, 2]), Shape::from([1, 2])]);
    assert_eq!(i64s(&pieces[2]), [8, 9]);
    assert_eq!(torchfn::chunk(&t, 2, 1).unwrap().len(), 2);
    assert_eq!(torchfn::chunk(&t, 4, 0).unwrap().len(), 3, "chunks of ceil(5 / 4) = 2");
    assert_eq!(torchfn::chunk(&torchfn::zeros([0], None, None).unwrap(), 3, 0).unwrap().len(), 3);
}

#[test]
fn indexing_copies() {
    let t = range(&[3, 4]);
    let idx = torchfn::tensor([2i32, 0]).unwrap();
    assert_eq!(i64s(&torchfn::index_select(&t, 0, &idx).unwrap()), [8, 9, 10, 11, 0, 1, 2, 3]);
    let g = torchfn::tensor([[0i64, 3], [1, 1], [2, 0]]).unwrap();
    assert_eq!(i64s(&torchfn::gather(&t, 1, &g).unwrap()), [0, 3, 5, 5, 10, 8]);
    assert_eq!(i64s(&t.gather(0, &torchfn::tensor([[2i64, 1]]).unwrap()).unwrap()), [8, 5]);
    assert_eq!(i64s(&torchfn::flip(&t, [-1]).unwrap())[..4], [3, 2, 1, 0]);
    assert_eq!(i64s(&torchfn::roll(&t, -1, None).unwrap())[..3], [1, 2, 3]);
    assert_eq!(i64s(&torchfn::roll(&t, [1, 1], Some([0, 1].into())).unwrap())[..4], [11, 8, 9, 10]);
    let r = torchfn::tensor([[1i64, 2]]).unwrap().repeat([2, 1, 2]).unwrap();
    assert_eq!(r.shape().unwrap(), [2, 1, 4]);
    assert_eq!(i64s(&r), [1, 2, 1, 2, 1, 2, 1, 2]);
    assert_eq!(i64s(&torchfn::tril(&t, -1).unwrap()), [0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0]);
    assert_eq!(i64s(&torchfn::triu(&t, 2).unwrap()), [0, 0, 2, 3, 0, 0, 0, 7, 0, 0, 0, 0]);
    // On an expanded input too.
    let e = torchfn::tensor([1i64, 2, 3]).unwrap().expand([2, 3]).unwrap();
    assert_eq!(i64s(&e.flip(1).unwrap()), [3, 2, 1, 3, 2, 1]);
    assert_eq!(i64s(&e.tril(0).unwrap()), [1, 0, 0, 1, 2, 0]);
}

#[test]
fn by_name_calls_take_what_pytorch_takes() {
    let t = Value::from(range(&[3, 1]));
    let kw = Kwargs::new();
    // `*sizes` one by one or as one sequence.
    let one_by_one = Tensor::EXPAND.call(&[t.clone(), 2.into(), 3.into(), Value::Int(-1)], &kw).unwrap();
    let sequence = Tensor::EXPAND.call(&[t.clone(), Value::Tuple(vec![2.into(), 3.into(), Value::Int(-1)])], &kw);
    assert_eq!(one_by_one.as_tensor().unwrap().shape().unwrap(), [2, 3, 1]);
    assert_eq!(sequence.unwrap().as_tensor().unwrap().shape().unwrap(), [2, 3, 1]);
    let p = Tensor::PERMUTE.call(&[t.clone(), 1.into(), 0.into()], &kw).unwrap();
    assert_eq!(p.as_tensor().unwrap().shape().unwrap(), [1, 3]);
    // `squeeze` picks its overload; `split` returns the pieces.
    let sq = torchfn::SQUEEZE.call(std::slice::from_ref(&t), &Kwargs::from([("dim", 1)])).unwrap();
    assert_eq!(sq.as_tensor().unwrap().shape().unwrap(), [3]);
    let pieces = torchfn::SPLIT.call(&[t.clone(), Value::List(vec![1.into(), 2.into()])], &kw).unwrap();
    assert_eq!(pieces.as_slice().unwrap().len(), 2);
    // Tensor.clone is Rust's `copy`.
    assert_eq!(Tensor::COPY.qualified_name(), "Tensor.clone");
    let err = torchfn::CAT.call(&[Value::List(vec![t.clone(), Value::Float(1.0)])], &kw).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type, "{err}");
}

#[test]
fn dimensions_out_of_range_are_index_errors() {
    let t = range(&[2, 3]);
    let i = torchfn::tensor([0i64]).unwrap();
    let cases: Vec<(&str, ErrorKind)> = vec![
        ("flatten", kind(torchfn::flatten(&t, 2, -1))),
        ("squeeze", kind(torchfn::squeeze_dim(&t, -3))),
        ("unsqueeze", kind(torchfn::unsqueeze(&t, 3))),
        ("permute", kind(torchfn::permute(&t, [0, 2]))),
        ("transpose", kind(torchfn::transpose(&t, 0, 2))),
        ("narrow dim", kind(torchfn::narrow(&t, 2, 0, 1))),
        ("narrow start", kind(torchfn::narrow(&t, 1, 4, 0))),
        ("select dim", kind(torchfn::select(&t, -3, 0))),
        ("select index", kind(torchfn::select(&t, 1, 3))),
        ("select 0-dim", kind(torchfn::select(&torchfn::tensor(1i64).unwrap(), 0, 0))),
        ("cat", kind(torchfn::cat(&[t.clone(), t.clone()], 2))),
        ("stack", kind(torchfn::stack(std::slice::from_ref(&t), 3))),
        ("split", kind(torchfn::split(&t, 1, 2))),
        ("chunk", kind(torchfn::chunk(&t, 1, -3))),
        ("index_select dim", kind(torchfn::index_select(&t, 2, &i))),
        ("index_select index", kind(torchfn::index_select(&t, 0, &torchfn::tensor([2i64]).unwrap()))),
        ("index_select negative", kind(torchfn::index_select(&t, 0, &torchfn::tensor([-1i64]).unwrap()))),
        ("gather", kind(torchfn::gather(&t, 2, &i))),
        ("flip", kind(torchfn::flip(&t, [2]))),
        ("roll", kind(torchfn::roll(&t, 1, Some(2.into())))),
    ];
    for (name, got) in cases {
        assert_eq!(got, ErrorKind::Index, "{name}");
    }
    let err = torchfn::unsqueeze(&t, 3).unwrap_err();
    assert_eq!(err.to_string(), "unsqueeze(): dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

#[test]
fn bad_sizes_are_runtime_errors() {
    let t = range(&[2, 3]);
    let cases: Vec<(&str, Result<Tensor>)> = vec![
        ("flatten order", torchfn::flatten(&t, 1, 0)),
        ("permute length", torchfn::permute(&t, [0])),
        ("permute repeat", torchfn::permute(&t, [1, -1])),
        ("t of 3-D", torchfn::t(&range(&[1, 1, 1]))),
        ("expand mismatch", t.expand([4, 3])),
        ("expand too few", t.expand([3])),
        ("expand -1 leading", t.expand([-1, 2, 3])),
        ("expand negative", t.expand([2, -2])),
        ("expand huge", t.expand([1 << 62, 1 << 62, 2, 3])),
        ("broadcast_to", torchfn::broadcast_to(&t, [3, 3])),
        ("narrow length", torchfn::narrow(&t, 1, 2, 2)),
        ("narrow negative", torchfn::narrow(&t, 1, 0, -1)),
        ("narrow 0-dim", torchfn::narrow(&torchfn::tensor(1i64).unwrap(), 0, 0, 1)),
        ("cat sizes", torchfn::cat(&[t.clone(), range(&[2, 2])], 0)),
        ("cat ndim", torchfn::cat(&[t.clone(), range(&[3])], 0)),
        ("stack empty", torchfn::stack(&[], 0)),
        ("cat 0-dim", torchfn::cat(&[torchfn::tensor(1i64).unwrap()], 0)),
        ("stack sizes", torchfn::stack(&[t.clone(), range(&[3, 2])], 0)),
        ("gather dtype", torchfn::gather(&t, 0, &torchfn::tensor([[0i32]]).unwrap())),
        ("gather ndim", torchfn::gather(&t, 0, &torchfn::tensor([0i64]).unwrap())),
        ("gather sizes", torchfn::gather(&t, 0, &range(&[1, 4]))),
        ("gather value", torchfn::gather(&t, 0, &torchfn::tensor([[2i64]]).unwrap())),
        ("index_select dtype", torchfn::index_select(&t, 0, &torchfn::tensor([0.0f32]).unwrap())),
        ("flip repeat", torchfn::flip(&t, [0, -2])),
        ("roll align", torchfn::roll(&t, [1, 2], Some(0.into()))),
        ("repeat too few", t.repeat([2])),
        ("repeat negative", t.repeat([1, -1])),
        ("repeat huge", t.repeat([1 << 62, 1 << 62])),
        ("tril 1-D", torchfn::tril(&range(&[3]), 0)),
        ("triu 0-D", torchfn::triu(&torchfn::tensor(1i64).unwrap(), 0)),
    ];
    for (name, r) in cases {
        assert_eq!(kind(r), ErrorKind::Runtime, "{name}");
    }
    // PyTorch checks cat's list in Python: a ValueError.
    assert_eq!(kind(torchfn::cat(&[], 0)), ErrorKind::Value);
    let splits: Vec<(&str, Result<Vec<Tensor>>)> = vec![
        ("split sum", torchfn::split(&t, [1, 2], 0)),
        ("split negative size", torchfn::split(&t, -1, 0)),
        ("split negative section", torchfn::split(&t, [3, -1], 0)),
        ("split zero", torchfn::split(&t, 0, 0)),
        ("split 0-dim", torchfn::split(&torchfn::tensor(1i64).unwrap(), 1, 0)),
        ("chunk zero", torchfn::chunk(&t, 0, 0)),
    ];
    for (name, r) in splits {
        assert_eq!(kind(r), ErrorKind::Runtime, "{name}");
    }
    let err = t.expand([4, 3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "expand(): the expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0.  \
         Target sizes: [4, 3].  Tensor sizes: [2, 3]"
    );
    let err = torchfn::cat(&[t.clone(), range(&[2, 2])], 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cat(): Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for tensor number 1 \
         in the list."
    );
}

#[test]
fn huge_empty_tensors_neither_overflow_nor_panic() {
    // The largest that fit: dimensions other than the zero multiplying to 2^56 elements.
    let empty = torchfn::zeros([0, 1 << 28, 1 << 28], None, None).unwrap();
    assert_eq!(empty.flatten(0, -1).unwrap().shape().unwrap(), [0]);
    assert_eq!(empty.narrow(2, 1 << 27, 1).unwrap().shape().unwrap(), [0, 1 << 28, 1]);
    assert_eq!(empty.select(1, -1).unwrap().shape().unwrap(), [0, 1 << 28]);
    assert_eq!(empty.unsqueeze(3).unwrap().shape().unwrap(), [0, 1 << 28, 1 << 28, 1]);
    assert_eq!(empty.split(1i64 << 27, 1).unwrap().len(), 2);
    assert_eq!(empty.chunk(3, 1).unwrap().len(), 3);
    assert!(empty.chunk(i64::MAX, 0).is_err(), "i64::MAX empty pieces do not fit in memory");
    assert!(empty.transpose(0, 2).unwrap().is_contiguous().unwrap());
    assert!(empty.to_vec::<f32>().unwrap().is_empty());
    // Past that, PyTorch's "Stride calculation overflowed": refused before anything overflows.
    assert!(torchfn::zeros([0, 1 << 62, 1 << 62], None, None).is_err());
}

#[test]
fn views_keep_the_subclass_and_its_attributes() {
    #[derive(TensorSubclass)]
    struct Tagged(&'static str);

    let t = range(&[2, 3]).as_subclass(Tagged("x")).unwrap();
    for v in [t.t().unwrap(), t.expand([2, 2, 3]).unwrap(), torchfn::cat(&[t.clone(), t.clone()], 0).unwrap()] {
        assert!(v.is_instance::<Tagged>());
        assert_eq!(v.attrs::<Tagged>().unwrap().0, "x");
    }
    let pieces = torchfn::split(&t, 1, 0).unwrap();
    assert!(pieces.iter().all(|p| p.is_instance::<Tagged>()));
}

#[test]
fn reductions_take_dim_0_and_minus_1_of_a_zero_dimensional_tensor() {
    // Found by tests/api/no_panic.rs: these indexed the shape of a tensor that has no dimension.
    let x = torchfn::tensor(2.5f32).unwrap();
    for dim in [0, -1] {
        for keepdim in [false, true] {
            let sum = torchfn::sum_dim(&x, dim, keepdim).unwrap();
            assert_eq!((sum.shape().unwrap(), f32s(&sum)), (Shape::default(), vec![2.5]));
            assert_eq!(f32s(&torchfn::mean_dim(&x, [dim], keepdim).unwrap()), [2.5]);
            assert_eq!(f32s(&torchfn::prod_dim(&x, dim, keepdim).unwrap()), [2.5]);
            assert_eq!(f32s(&torchfn::amax(&x, dim, keepdim).unwrap()), [2.5]);
            assert_eq!(f32s(&torchfn::amin(&x, dim, keepdim).unwrap()), [2.5]);
            assert_eq!(f32s(&torchfn::logsumexp(&x, dim, keepdim).unwrap()), [2.5]);
            assert_eq!(i64s(&torchfn::argmax(&x, Some(dim), keepdim).unwrap()), [0]);
            assert_eq!(i64s(&torchfn::argmin(&x, Some(dim), keepdim).unwrap()), [0]);
            let (values, indices) = torchfn::max_dim(&x, dim, keepdim).unwrap();
            assert_eq!((f32s(&values), i64s(&indices)), (vec![2.5], vec![0]));
            let (values, indices) = torchfn::min_dim(&x, dim, keepdim).unwrap();
            assert_eq!((f32s(&values), i64s(&indices)), (vec![2.5], vec![0]));
            assert!(f32s(&torchfn::std(&x, Some(dim.into()), 1, keepdim).unwrap())[0].is_nan());
            assert_eq!(f32s(&torchfn::var(&x, Some(dim.into()), 0, keepdim).unwrap()), [0.0]);
            let any = torchfn::any_dim(&x, dim, keepdim).unwrap();
            assert_eq!(any.to_vec::<bool>().unwrap(), [true]);
        }
    }
    assert_eq!(kind(torchfn::sum_dim(&x, 1, false)), ErrorKind::Index);
    assert_eq!(kind(torchfn::sum_dim(&x, [0, -1], false)), ErrorKind::Runtime);
}

#[test]
fn empty_views_with_any_strides_go_through_every_kernel() {
    // Found by tests/api/no_panic.rs: ndarray's debug checks refused an empty view of a
    // non-empty storage with strides that are not standard ones.
    let empty = torchfn::tensor([[1i64, 2]]).unwrap().narrow(0, 0, 0).unwrap();
    assert_eq!(torchfn::ceil(&empty).unwrap().shape().unwrap(), [0, 2]);
    assert_eq!(torchfn::neg(&empty.t().unwrap()).unwrap().shape().unwrap(), [2, 0]);
    assert_eq!(empty.to(DType::Float32, false, false).unwrap().to_vec::<f32>().unwrap(), [] as [f32; 0]);
}

#[test]
fn cumulative_ops_into_bool_are_not_implemented() {
    // Found by tests/api/no_panic.rs (it was an `unreachable!`). PyTorch 2.15's CPU kernels
    // have no bool accumulation: `"cumsum_out_cpu" not implemented for 'Bool'`.
    let x = torchfn::tensor([2i64, -2, 0, 3]).unwrap();
    for result in [torchfn::cumsum(&x, 0, Some(DType::Bool)), torchfn::cumprod(&x, 0, Some(DType::Bool))] {
        assert_eq!(result.unwrap_err().kind(), ErrorKind::NotImplemented);
    }
}

/// `split`, `chunk` and `unbind` record one node for all their pieces, under PyTorch's names,
/// whose backward writes every piece's gradient into one buffer: the gradients are those of
/// one view per piece, pieces without a gradient count as zero, and with `create_graph` they
/// differentiate again; writing a piece in place while recording is PyTorch's error.
#[test]
fn splits_record_one_node_for_all_their_pieces() {
    let x = torchfn::arange(12, DType::Float64, None).unwrap().reshape(&[4, 3]).unwrap().requires_grad_(true).unwrap();
    let pieces = x.split(2, 0).unwrap();
    let (a, b) = (pieces[0].grad_fn().unwrap().unwrap(), pieces[1].grad_fn().unwrap().unwrap());
    assert_eq!(a.name(), "SplitBackward0");
    assert!(a.ptr_eq(&b), "one node for both pieces");
    assert_eq!(
        torchfn::split(&x, vec![1i64, 3], 0).unwrap()[0].grad_fn().unwrap().unwrap().name(),
        "SplitWithSizesBackward0"
    );
    assert_eq!(x.chunk(2, 1).unwrap()[0].grad_fn().unwrap().unwrap().name(), "SplitBackward0");
    let rows = x.unbind(0).unwrap();
    assert_eq!(rows[3].grad_fn().unwrap().unwrap().name(), "UnbindBackward0");
    // Rows 1 and 3 weighted, rows 0 and 2 unused.
    let loss = (&(&rows[1] * 2.0).unwrap().sum().unwrap() + &(&rows[3] * &rows[3]).unwrap().sum().unwrap()).unwrap();
    let grads = torchfn::autograd::grad(&[loss], std::slice::from_ref(&x), None, None, true, true).unwrap();
    let g = grads[0].clone().unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), [0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 18.0, 20.0, 22.0]);
    // Second order: d/dx of sum(g) is 2 on row 3 (from rows[3]²), zero elsewhere.
    g.sum().unwrap().backward().unwrap();
    assert_eq!(
        x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0]
    );
    // A piece written in place while recording is PyTorch's error (the node serves them all);
    // out of autograd's sight it is a plain write.
    let y = torchfn::ones([2, 2], DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    let base = (&y * 1.0).unwrap();
    let halves = base.split(1, 0).unwrap();
    let err = halves[0].mul_(&Tensor::scalar(3.0)).unwrap_err();
    assert!(err.to_string().contains("Output 0 of SplitBackward0 is a view and is being modified inplace"), "{err}");
    let plain = torchfn::ones([2, 2], DType::Float64, None).unwrap();
    plain.unbind(0).unwrap()[1].mul_(&Tensor::scalar(3.0)).unwrap();
    assert_eq!(plain.to_vec::<f64>().unwrap(), [1.0, 1.0, 3.0, 3.0]);
}
