//! The tensor API that subclass users rely on (issue 14, point 5): the `new_*` constructors,
//! iterating over the first dimension, tensors as keys by identity, and indexed writes
//! (`t[index] = value` as `Tensor::set`, and `index_put_`), each through the protocol: what it
//! dispatches, to whom, and what a subclass instance gets back.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use torchfn::prelude::*;
use torchfn::{ById, ErrorKind, IndexItem};

#[derive(TensorSubclass)]
struct Tagged {
    tag: u32,
}

thread_local! {
    /// What `Counted`'s hook was asked, in order.
    static COUNTED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// What the ducks' hooks were asked, in order.
    static DUCKED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn take(log: &'static std::thread::LocalKey<RefCell<Vec<String>>>) -> Vec<String> {
    log.with(|l| l.take())
}

/// Records each call, then defers to `super()` (so the call still runs, and keeps the class).
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Counted;

impl TorchFunction for Counted {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        COUNTED.with(|c| c.borrow_mut().push(func.qualified_name()));
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

/// A duck that answers the calls of this file: indexed writes (writing nothing), `unbind` (two
/// rows of its own) and `new_ones` (a marker tensor); it records what it sees and declines the
/// rest.
#[derive(Debug, DuckTensor)]
struct Answering;

/// The rows `Answering` answers `unbind` with.
fn duck_rows() -> Vec<Value> {
    vec![torchfn::tensor([10i64, 11]).unwrap().into(), torchfn::tensor([12i64, 13]).unwrap().into()]
}

impl TorchFunction for Answering {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], _: &Kwargs) -> Outcome {
        DUCKED.with(|d| d.borrow_mut().push(func.qualified_name()));
        if func == Tensor::SET {
            Ok(Value::Str("answered".into())) // discarded: `set` returns nothing
        } else if func == Tensor::INDEX_PUT_ || func == torchfn::INDEX_PUT {
            Ok(args[0].clone())
        } else if func == Tensor::UNBIND {
            Ok(Value::List(duck_rows()))
        } else if func == Tensor::NEW_ONES {
            Ok(torchfn::tensor([42i64]).unwrap().into())
        } else {
            Ok(Value::NotImplemented)
        }
    }
}

/// A duck that declines everything.
#[derive(Debug, DuckTensor)]
struct Declining;

impl TorchFunction for Declining {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        DUCKED.with(|d| d.borrow_mut().push(func.qualified_name()));
        Ok(Value::NotImplemented)
    }
}

/// A mode that records every call it sees, then runs it.
#[derive(Default)]
struct Recorder(RefCell<Vec<String>>);

impl TorchFunctionMode for Recorder {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.borrow_mut().push(func.qualified_name());
        func.call(args, kwargs)
    }
}

/// What a mode pushed for the duration of `f` saw.
fn seen_by_a_mode(f: impl FnOnce()) -> Vec<String> {
    let recorder = push_mode(Recorder::default());
    f();
    recorder.0.take()
}

fn tagged() -> Tensor {
    torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap().as_subclass(Tagged { tag: 7 }).unwrap()
}

fn assert_tagged(t: &Tensor, what: &str) {
    assert!(t.is_instance::<Tagged>(), "{what} lost the subclass: {t}");
    assert_eq!(t.attrs::<Tagged>().map(|a| a.tag), Some(7), "{what} lost the attribute");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn i64s(values: &[i64]) -> Tensor {
    torchfn::tensor(values).unwrap()
}

// --- new_ones, new_zeros, new_full, new_empty, new_tensor ---

#[test]
fn new_constructors_take_dtype_and_device_from_self() {
    let t = torchfn::tensor([1.5f64]).unwrap();
    let ones = t.new_ones([2, 3], None, None).unwrap();
    assert_eq!((ones.shape().unwrap(), ones.dtype().unwrap()), ([2, 3].into(), DType::Float64));
    assert_eq!(ones.device().unwrap(), t.device().unwrap());
    assert_eq!(ones.to_vec::<f64>().unwrap(), [1.0; 6]);
    assert_eq!(t.new_zeros([2], DType::Int32, None).unwrap().to_vec::<i32>().unwrap(), [0, 0]);
    let empty = t.new_empty([0, 2], None, None).unwrap();
    assert_eq!((empty.shape().unwrap(), empty.dtype().unwrap()), ([0, 2].into(), DType::Float64));
    assert_eq!(t.new_empty([3], None, None).unwrap().to_vec::<f64>().unwrap(), [0.0; 3], "zero-filled");
    assert_eq!(t.new_ones(t.shape().unwrap(), None, None).unwrap().shape().unwrap(), [1]);
    // The dtype is self's, not the fill value's (unlike `full`).
    let ints = i64s(&[1]);
    assert_eq!(ints.new_full([3], 2.5, None, None).unwrap().to_vec::<i64>().unwrap(), [2, 2, 2]);
    assert_eq!(t.new_full([2], true, None, None).unwrap().to_vec::<f64>().unwrap(), [1.0, 1.0]);
    // By name, the sizes come one by one or as one sequence; dtype and device are keywords.
    let by_name = |args: Vec<Value>| Tensor::NEW_ONES.call(&args, &Kwargs::from([("dtype", DType::Int64)])).unwrap();
    let one_by_one = by_name(vec![t.clone().into(), 2.into(), 3.into()]);
    let sequence = by_name(vec![t.clone().into(), Value::Tuple(vec![2.into(), 3.into()])]);
    for made in [one_by_one, sequence] {
        let made = made.as_tensor().unwrap().clone();
        assert_eq!((made.shape().unwrap(), made.dtype().unwrap()), ([2, 3].into(), DType::Int64));
    }
    assert_eq!(t.new_ones(Vec::<i64>::new(), None, None).unwrap().to_string(), "tensor(1., dtype=torch.float64)");
}

#[test]
fn new_constructors_refuse_negative_sizes() {
    let t = torchfn::tensor([1.0f32]).unwrap();
    for (err, func) in [
        (t.new_ones([2, -3], None, None).unwrap_err(), "new_ones"),
        (t.new_zeros([-1], None, None).unwrap_err(), "new_zeros"),
        (t.new_empty([-1], None, None).unwrap_err(), "new_empty"),
    ] {
        assert_eq!(err.kind(), ErrorKind::Runtime);
        assert!(err.to_string().starts_with(&format!("{func}(): Trying to create tensor with negative dimension")));
    }
    let err = t.new_full([-2], 1.0, None, None).unwrap_err();
    assert_eq!(err.to_string(), "new_full(): Trying to create tensor with negative dimension -2: [-2]");
}

#[test]
fn new_tensor_copies_its_data_as_selfs_dtype() {
    let t = torchfn::tensor([0.5f32]).unwrap();
    let nested = t.new_tensor([[1, 2], [3, 4]], None, None).unwrap();
    assert_eq!((nested.shape().unwrap(), nested.dtype().unwrap()), ([2, 2].into(), DType::Float32));
    assert_eq!(f32s(&nested), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(t.new_tensor(3, None, None).unwrap().to_string(), "tensor(3.)");
    assert_eq!(t.new_tensor(&[true, false][..], None, None).unwrap().to_vec::<f32>().unwrap(), [1.0, 0.0]);
    let truncated = t.new_tensor([1.7, -1.7], DType::Int64, None).unwrap();
    assert_eq!(truncated.to_vec::<i64>().unwrap(), [1, -1]);
    // One-element tensors in a list are numbers.
    let mixed = Value::List(vec![torchfn::tensor(5i64).unwrap().into(), 2.into()]);
    assert_eq!(f32s(&t.new_tensor(mixed, None, None).unwrap()), [5.0, 2.0]);

    // A tensor is copied (not viewed), converted and detached.
    let source = torchfn::tensor([7.0f64, 8.0]).unwrap().requires_grad_(true).unwrap();
    let copy = t.new_tensor(&source, None, None).unwrap();
    assert_eq!((copy.dtype().unwrap(), copy.requires_grad().unwrap()), (DType::Float32, false));
    {
        let _no_grad = torchfn::autograd::no_grad();
        source.fill_(0).unwrap();
    }
    assert_eq!(f32s(&copy), [7.0, 8.0], "the copy does not see writes to its source");
    assert_ne!(copy.data_ptr().unwrap(), source.data_ptr().unwrap());
}

#[test]
fn new_tensor_refuses_what_is_not_numbers() {
    let t = torchfn::tensor([0.5f32]).unwrap();
    let ragged = Value::List(vec![Value::from([1, 2]), Value::from([3])]);
    let err = t.new_tensor(ragged, None, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert_eq!(err.to_string(), "new_tensor(): expected sequence of length 2 at dim 1 (got 1)");
    let err = t.new_tensor(Value::List(vec![1.into(), "a".into()]), None, None).unwrap_err();
    assert_eq!((err.kind(), err.to_string()), (ErrorKind::Type, "new_tensor(): must be real number, not str".into()));
    let err = t.new_tensor(Value::Str("a".into()), None, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    let rows = Value::List(vec![torchfn::ones([2], None, None).unwrap().into()]);
    assert_eq!(t.new_tensor(rows, None, None).unwrap_err().kind(), ErrorKind::Value);
}

#[test]
fn new_constructors_keep_the_subclass_through_the_default_hook() {
    let s = tagged();
    assert_tagged(&s.new_ones([2], None, None).unwrap(), "new_ones");
    assert_tagged(&s.new_zeros([2], DType::Int64, None).unwrap(), "new_zeros");
    assert_tagged(&s.new_full([1], 3.0, None, None).unwrap(), "new_full");
    assert_tagged(&s.new_empty([2, 2], None, None).unwrap(), "new_empty");
    let made = s.new_tensor([1, 2], None, None).unwrap();
    assert_tagged(&made, "new_tensor");
    assert_eq!(made.to_string(), "Tagged([1., 2.])");
}

#[test]
fn new_constructors_dispatch_on_self() {
    let c = torchfn::tensor([1.0f32]).unwrap().as_subclass(Counted).unwrap();
    take(&COUNTED);
    for made in [
        c.new_ones([1], None, None).unwrap(),
        c.new_zeros([1], None, None).unwrap(),
        c.new_full([1], 2, None, None).unwrap(),
        c.new_empty([1], None, None).unwrap(),
        c.new_tensor([1.0], None, None).unwrap(),
    ] {
        assert!(made.is_instance::<Counted>());
    }
    assert_eq!(
        take(&COUNTED),
        ["Tensor.new_ones", "Tensor.new_zeros", "Tensor.new_full", "Tensor.new_empty", "Tensor.new_tensor"]
    );

    // A duck answers for itself; a mode sees the call.
    take(&DUCKED);
    let duck = Tensor::from_duck(Answering);
    assert_eq!(duck.new_ones([5], None, None).unwrap().to_vec::<i64>().unwrap(), [42]);
    assert_eq!(take(&DUCKED), ["Tensor.new_ones"]);
    let t = torchfn::tensor([1.0f32]).unwrap();
    assert_eq!(seen_by_a_mode(|| drop(t.new_full([2], 1, None, None).unwrap())), ["Tensor.new_full"]);
}

#[test]
fn new_tensor_data_takes_no_part_in_dispatch() {
    // As in PyTorch, where `data` is a plain Python object: only `self` is relevant.
    let plain = torchfn::tensor([1.0f32]).unwrap();
    let counted = torchfn::tensor([2.0f32]).unwrap().as_subclass(Counted).unwrap();
    take(&COUNTED);
    let made = plain.new_tensor(&counted, None, None).unwrap();
    assert!(take(&COUNTED).is_empty(), "the subclass in `data` was consulted");
    assert!(!made.is_instance::<Counted>() && f32s(&made) == [2.0]);
    take(&DUCKED);
    let err = plain.new_tensor(Tensor::from_duck(Answering), None, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert!(take(&DUCKED).is_empty(), "the duck in `data` was consulted");
}

// --- iterating over the first dimension ---

#[test]
fn iterating_gives_the_rows_as_views() {
    let t = torchfn::tensor([[1i64, 2], [3, 4], [5, 6]]).unwrap();
    let rows: Vec<Tensor> = t.iter().unwrap().collect();
    assert_eq!(rows.len(), 3);
    let values: Vec<Vec<i64>> = rows.iter().map(|r| r.to_vec::<i64>().unwrap()).collect();
    assert_eq!(values, [[1, 2], [3, 4], [5, 6]]);
    rows[1].fill_(0).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [1, 2, 0, 0, 5, 6], "a row writes through to the tensor");
    let elements: Vec<String> = i64s(&[7, 8]).iter().unwrap().map(|e| e.to_string()).collect();
    assert_eq!(elements, ["tensor(7)", "tensor(8)"]);
    assert_eq!(torchfn::zeros([0, 3], None, None).unwrap().iter().unwrap().count(), 0);
}

#[test]
fn iterating_a_zero_dimensional_tensor_is_a_type_error() {
    let err = torchfn::tensor(1.0f32).unwrap().iter().unwrap_err();
    assert_eq!((err.kind(), err.to_string()), (ErrorKind::Type, "iter(): iteration over a 0-d tensor".into()));
}

#[test]
fn iterating_a_subclass_instance_gives_instances_of_the_subclass() {
    let rows: Vec<Tensor> = tagged().iter().unwrap().collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_tagged(row, "a row");
    }
    assert_eq!(rows[1].to_string(), "Tagged([3., 4.])");
}

#[test]
fn iterating_dispatches_unbind_and_nothing_else() {
    let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    assert_eq!(seen_by_a_mode(|| assert_eq!(t.iter().unwrap().count(), 2)), ["Tensor.unbind"]);
    let c = t.as_subclass(Counted).unwrap();
    take(&COUNTED);
    assert!(c.iter().unwrap().all(|row| row.is_instance::<Counted>()));
    assert_eq!(take(&COUNTED), ["Tensor.unbind"]);
    // A duck iterates over what its hook answers for `unbind`.
    take(&DUCKED);
    let rows: Vec<Vec<i64>> =
        Tensor::from_duck(Answering).iter().unwrap().map(|r| r.to_vec::<i64>().unwrap()).collect();
    assert_eq!(rows, [[10, 11], [12, 13]]);
    assert_eq!(take(&DUCKED), ["Tensor.unbind"]);
}

#[test]
fn unbind_along_any_dimension() {
    let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]]).unwrap();
    let columns = torchfn::unbind(&t, -1).unwrap();
    let values: Vec<Vec<i64>> = columns.iter().map(|c| c.to_vec::<i64>().unwrap()).collect();
    assert_eq!(values, [[1, 4], [2, 5], [3, 6]]);
    assert_eq!(t.unbind(0).unwrap()[1].to_vec::<i64>().unwrap(), [4, 5, 6]);
    let err = t.unbind(2).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = torchfn::tensor(1i64).unwrap().unbind(0).unwrap_err();
    assert_eq!(err.to_string(), "unbind(): Dimension specified as 0 but tensor has no dimensions");
    // Each piece differentiates into its slice.
    let x = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0]]).unwrap().requires_grad_(true).unwrap();
    x.unbind(1).unwrap()[1].sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [0.0, 1.0, 0.0, 1.0]);
}

// --- tensors as keys, by identity ---

#[test]
fn tensors_are_keys_by_identity() {
    let a = torchfn::tensor([1.0f32]).unwrap();
    let b = torchfn::tensor([1.0f32]).unwrap(); // equal in value, another object
    let s = a.as_subclass(Tagged { tag: 1 }).unwrap(); // the same data, another object
    let duck = Tensor::from_duck(Answering);
    let set: HashSet<ById> =
        [&a, &a.clone(), &b, &s, &s.clone(), &duck, &duck.clone()].into_iter().map(ById::from).collect();
    assert_eq!(set.len(), 4);
    for t in [&a, &b, &s, &duck] {
        assert!(set.contains(&ById::from(t)));
    }
    assert!(!set.contains(&ById::from(&a.detach().unwrap())), "detach makes another object");

    let mut names: HashMap<ById, &str> = HashMap::new();
    names.insert(ById::new(&a), "a");
    names.insert(ById::new(&s), "s");
    names.insert(ById::from(duck.clone()), "duck");
    assert_eq!((names[&ById::from(&a)], names[&ById::from(&s)], names[&ById::from(&duck)]), ("a", "s", "duck"));
    assert_eq!(names.get(&ById::from(&b)), None);
    let key = names.keys().find(|k| k.is_instance::<Tagged>()).unwrap();
    assert!(key.tensor().is(&s) && key.shape().unwrap() == [1], "a key derefs to its tensor");
}

#[test]
fn hashing_and_comparing_keys_call_no_hook_and_no_mode() {
    let counted = torchfn::tensor([1.0f32]).unwrap().as_subclass(Counted).unwrap();
    let duck = Tensor::from_duck(Declining);
    take(&COUNTED);
    take(&DUCKED);
    let seen = seen_by_a_mode(|| {
        let mut set = HashSet::new();
        assert!(set.insert(ById::from(&counted)));
        assert!(set.insert(ById::from(&duck)));
        assert!(!set.insert(ById::new(&counted)));
        assert!(set.contains(&ById::from(duck.clone())));
        let map: HashMap<ById, usize> = set.into_iter().map(|k| (k, 1)).collect();
        assert_eq!(map[&ById::from(&counted)] + map[&ById::from(&duck)], 2);
    });
    assert!(seen.is_empty(), "a mode saw {seen:?}");
    assert!(take(&COUNTED).is_empty() && take(&DUCKED).is_empty(), "a hook was called");
}

// --- t[index] = value ---

#[test]
fn set_writes_through_a_basic_index() {
    let t = torchfn::zeros([2, 3], None, None).unwrap();
    t.set(0, 1.0).unwrap(); // t[0] = 1
    t.set((.., 2), torchfn::tensor([5.0f32, 6.0]).unwrap()).unwrap(); // t[:, 2] = [5, 6]
    assert_eq!(f32s(&t), [1.0, 1.0, 5.0, 0.0, 0.0, 6.0]);
    t.set((1, 0..2), 7).unwrap(); // t[1, 0:2] = 7
    t.set(IndexItem::Ellipsis, torchfn::tensor([[[0.5f32, 0.0, 0.0]]]).unwrap()).unwrap(); // leading ones dropped
    assert_eq!(f32s(&t), [0.5, 0.0, 0.0, 0.5, 0.0, 0.0]);
    // Numbers and tensors convert to the tensor's dtype, as copy_ does.
    let ints = torchfn::zeros([3], DType::Int64, None).unwrap();
    ints.set(0, 2.7).unwrap();
    ints.set(1..3, torchfn::tensor([-1.5f32]).unwrap()).unwrap();
    assert_eq!(ints.to_vec::<i64>().unwrap(), [2, -1, -1]);
    // Through a view, into its base.
    let row = t.get(1).unwrap();
    row.set(2, 9).unwrap();
    assert_eq!(f32s(&t), [0.5, 0.0, 0.0, 0.5, 0.0, 9.0]);
    let scalar = torchfn::zeros(Vec::<usize>::new(), None, None).unwrap();
    scalar.set(Vec::<IndexItem>::new(), 3).unwrap(); // t[()] = 3
    assert_eq!(f32s(&scalar), [3.0]);
}

#[test]
fn set_with_index_tensors_is_index_put() {
    let t = torchfn::zeros([3, 2], None, None).unwrap();
    t.set(i64s(&[2, -3]), torchfn::tensor([1.0f32, 2.0]).unwrap()).unwrap(); // rows 2 and 0, broadcast
    assert_eq!(f32s(&t), [1.0, 2.0, 0.0, 0.0, 1.0, 2.0]);
    let mask = torchfn::tensor([[true, false], [false, true], [false, false]]).unwrap();
    t.set(&mask, -1).unwrap(); // t[mask] = -1
    assert_eq!(f32s(&t), [-1.0, 2.0, 0.0, -1.0, 1.0, 2.0]);
    let rows = torchfn::tensor([1i32, 1]).unwrap(); // int32 positions, repeated: the last write wins
    t.set((IndexItem::Tensor(rows), 0), torchfn::tensor([8.0f32, 9.0]).unwrap()).unwrap();
    assert_eq!(f32s(&t), [-1.0, 2.0, 9.0, -1.0, 1.0, 2.0]);
    t.set((IndexItem::Tensor(i64s(&[0, 2])), IndexItem::Tensor(i64s(&[1, 0]))), 4).unwrap(); // pairs
    assert_eq!(f32s(&t), [-1.0, 4.0, 9.0, -1.0, 4.0, 2.0]);
    // A number converts; a tensor value must have the tensor's dtype, as in PyTorch.
    let ints = torchfn::zeros([3], DType::Int64, None).unwrap();
    ints.set(i64s(&[0]), 2.7).unwrap();
    assert_eq!(ints.to_vec::<i64>().unwrap(), [2, 0, 0]);
    let err = ints.set(i64s(&[0]), torchfn::tensor([2.7f32]).unwrap()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert_eq!(
        err.to_string(),
        "__setitem__(): Index put requires the source and destination dtypes match, got torch.int64 for the \
         destination and torch.float32 for the source."
    );
}

#[test]
fn set_errors_are_pytorchs() {
    let t = torchfn::zeros([2, 3], None, None).unwrap();
    let err = t.set(5, 1.0).unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string()),
        (ErrorKind::Index, "index 5 is out of bounds for dimension 0 with size 2".into())
    );
    let err = t.set((0, 0, 0), 1.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = t.set(0, torchfn::ones([4], None, None).unwrap()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("the expanded size of the tensor (3) must match the existing size (4)"), "{err}");
    let err = t.set(i64s(&[0, 1]), torchfn::ones([4], None, None).unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "__setitem__(): shape mismatch: value tensor of shape [4] cannot be broadcast to indexing result of shape [2, 3]"
    );
    let err = t.set(i64s(&[2]), 1.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = t.set(torchfn::tensor([0.5f32]).unwrap(), 1.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = t.set(torchfn::tensor([true, false, true]).unwrap(), 1.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    assert_eq!(
        err.to_string(),
        "__setitem__(): The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2, 3] at \
         index 0"
    );
    let err = t.set((0, IndexItem::Tensor(torchfn::tensor([true, false]).unwrap())), 1.0).unwrap_err();
    assert!(err.to_string().contains("the indexed tensor [3] at index 0"), "{err}");
    // Reading with a mask of the wrong shape is the same error, never a silent partial pick.
    assert_eq!(t.get(torchfn::tensor([true]).unwrap()).unwrap_err().kind(), ErrorKind::Index);
    assert_eq!(f32s(&t), [0.0; 6], "failed writes wrote nothing");
}

#[test]
fn set_is_an_in_place_operation_for_autograd() {
    let leaf = torchfn::ones([3], DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    let err = leaf.set(0, 5.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "__setitem__(): a view of a leaf Variable that requires grad is being used in an in-place operation."
    );
    let err = leaf.set(i64s(&[0]), 5.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "__setitem__(): a leaf Variable that requires grad is being used in an in-place operation."
    );

    // On a tensor with history, the write is recorded: the overwritten elements get no
    // gradient, the value gets theirs.
    for advanced in [false, true] {
        let x = torchfn::ones([3], DType::Float64, None).unwrap().requires_grad_(true).unwrap();
        let v = torchfn::tensor([10.0f64, 20.0]).unwrap().requires_grad_(true).unwrap();
        let y = (&x * 2.0).unwrap();
        if advanced {
            y.set(i64s(&[0, 2]), &v).unwrap();
        } else {
            y.set(IndexItem::slice(None, None, 2), &v).unwrap();
        }
        assert_eq!(y.to_vec::<f64>().unwrap(), [10.0, 2.0, 20.0]);
        (&y * &y).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [0.0, 8.0, 0.0], "advanced: {advanced}");
        assert_eq!(v.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [20.0, 40.0], "advanced: {advanced}");
    }

    // The write counts as a new version: a result saved for backward is then stale.
    let x = torchfn::ones([2], DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    let y = x.exp().unwrap();
    y.set(0, 0.0).unwrap();
    let err = y.sum().unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("modified by an inplace operation"), "{err}");
}

#[test]
fn a_duck_index_reaches_its_hook_and_the_tensor_is_unchanged() {
    let t = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap();
    let duck = Tensor::from_duck(Answering);
    take(&DUCKED);
    t.set(&duck, 0.0).unwrap(); // t[duck] = 0
    t.set((0, IndexItem::Tensor(duck.clone())), 0.0).unwrap(); // t[0, duck] = 0
    t.set(0, &duck).unwrap(); // t[0] = duck
    assert_eq!(take(&DUCKED), ["Tensor.__setitem__"; 3]);
    assert_eq!(f32s(&t), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "the duck answered: nothing was written");

    // A duck that declines: a TypeError naming the function, and nothing written.
    let err = t.set((.., IndexItem::Tensor(Tensor::from_duck(Declining))), 0.0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert!(err.to_string().contains("Tensor.__setitem__"), "{err}");
    assert_eq!(take(&DUCKED), ["Tensor.__setitem__"]);
    assert_eq!(f32s(&t), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// Sees the arguments of `__setitem__` as Python's hooks do: `(self, index, value)`.
#[derive(Debug, DuckTensor)]
struct Inspecting;

impl TorchFunction for Inspecting {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], _: &Kwargs) -> Outcome {
        assert!(func == Tensor::SET);
        let shown: Vec<String> = args.iter().map(|a| a.type_name().to_string() + "=" + &a.to_string()).collect();
        DUCKED.with(|d| d.borrow_mut().push(shown.join(" ")));
        Ok(Value::None)
    }
}

#[test]
fn setitem_hooks_see_self_the_index_and_the_value() {
    let t = torchfn::tensor([1i64, 2]).unwrap();
    take(&DUCKED);
    t.set((IndexItem::Tensor(Tensor::from_duck(Inspecting)), 1..), 2.5).unwrap();
    assert_eq!(take(&DUCKED), ["Tensor=tensor([1, 2]) tuple=(Inspecting, slice(1, None, None)) float=2.5"]);
}

#[test]
fn subclass_indices_and_values_reach_their_hooks_and_still_write() {
    let t = torchfn::zeros([3], None, None).unwrap();
    let counted_index = i64s(&[1]).as_subclass(Counted).unwrap();
    let counted_value = torchfn::tensor([4.0f32]).unwrap().as_subclass(Counted).unwrap();
    take(&COUNTED);
    t.set(&counted_index, 2.0).unwrap();
    t.set(2, &counted_value).unwrap();
    assert_eq!(take(&COUNTED), ["Tensor.__setitem__"; 2]);
    assert_eq!(f32s(&t), [0.0, 2.0, 4.0], "the default hook ran the write");
    // A subclass instance itself.
    let s = tagged();
    s.set((1, 1), 0).unwrap();
    assert_eq!(s.to_string(), "Tagged([[1., 2.],\n        [3., 0.]])");
}

#[test]
fn a_mode_sees_one_setitem_and_none_of_its_parts() {
    let t = torchfn::zeros([2, 2], None, None).unwrap();
    let row = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let index = i64s(&[1]);
    let seen = seen_by_a_mode(|| {
        t.set(0, &row).unwrap();
        t.set(&index, 3.0).unwrap();
    });
    assert_eq!(seen, ["Tensor.__setitem__", "Tensor.__setitem__"]);
    assert_eq!(f32s(&t), [1.0, 2.0, 3.0, 3.0]);
}

// --- index_put_ and index_put ---

#[test]
fn index_put_follows_pytorch() {
    let t = torchfn::zeros([2, 3], None, None).unwrap();
    let out = t.index_put_(&[i64s(&[0, 1, 1]), i64s(&[2, 0, 0])], &torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap(), false);
    assert!(out.unwrap().is(&t), "index_put_ returns self");
    assert_eq!(f32s(&t), [0.0, 0.0, 1.0, 3.0, 0.0, 0.0], "the last write wins");
    t.index_put_(&[i64s(&[0, 0])], &torchfn::tensor([1.0f32, 1.0, 1.0]).unwrap(), true).unwrap();
    assert_eq!(f32s(&t), [2.0, 2.0, 3.0, 3.0, 0.0, 0.0], "accumulate adds every value");
    let mask = torchfn::tensor([false, true]).unwrap();
    t.index_put_(&[mask], &torchfn::tensor(7.0f32).unwrap(), false).unwrap(); // whole rows
    assert_eq!(f32s(&t), [2.0, 2.0, 3.0, 7.0, 7.0, 7.0]);
    t.index_put_(&[torchfn::tensor(0i32).unwrap()], &torchfn::tensor(-1.0f32).unwrap(), false).unwrap(); // 0-d index
    assert_eq!(f32s(&t), [-1.0, -1.0, -1.0, 7.0, 7.0, 7.0]);

    // Into a non-contiguous view: positions are the view's, the writes land in its base.
    let base = torchfn::zeros([2, 3], None, None).unwrap();
    let columns = base.transpose(0, 1).unwrap(); // [3, 2]
    columns.index_put_(&[i64s(&[2]), i64s(&[0])], &torchfn::tensor(5.0f32).unwrap(), false).unwrap();
    columns.set((IndexItem::Tensor(i64s(&[0])), 1), 6).unwrap();
    assert_eq!(f32s(&base), [0.0, 0.0, 5.0, 6.0, 0.0, 0.0]);

    // Out of place: `input` is unchanged.
    let put = torchfn::index_put(&t, &[i64s(&[1])], &torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap(), false).unwrap();
    assert_eq!((f32s(&put), f32s(&t)), (vec![-1.0, -1.0, -1.0, 1.0, 2.0, 3.0], vec![-1.0, -1.0, -1.0, 7.0, 7.0, 7.0]));
    assert_eq!(f32s(&t.index_put(&[i64s(&[0])], &torchfn::tensor(0.0f32).unwrap(), true).unwrap())[..3], [-1.0; 3]);
}

#[test]
fn index_put_errors_are_pytorchs() {
    let t = torchfn::zeros([2, 3], None, None).unwrap();
    let one = torchfn::tensor(1.0f32).unwrap();
    let err = t.index_put_(&[i64s(&[0, 1, 2])], &one, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = t.index_put_(&[i64s(&[0]), i64s(&[0]), i64s(&[0])], &one, false).unwrap_err();
    assert_eq!(err.to_string(), "index_put_(): too many indices for tensor of dimension 2 (got 3)");
    let err = t.index_put_(&[torchfn::tensor([0.0f32]).unwrap()], &one, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index);
    let err = t.index_put_(&[i64s(&[0])], &torchfn::ones([2], None, None).unwrap(), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index_put_(): shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [1, 3]"
    );
    let err = t.index_put_(&[i64s(&[0, 1]), i64s(&[0, 1, 2])], &one, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let err = t.index_put_(&[i64s(&[0])], &torchfn::tensor(1.0f64).unwrap(), false).unwrap_err();
    assert!(err.to_string().contains("Index put requires the source and destination dtypes match"), "{err}");
    let err = t.index_put_(&[], &one, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let leaf = torchfn::zeros([2], None, None).unwrap().requires_grad_(true).unwrap();
    let err = leaf.index_put_(&[i64s(&[0])], &one, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "index_put_(): a leaf Variable that requires grad is being used in an in-place operation."
    );
    assert_eq!(f32s(&t), [0.0; 6], "failed writes wrote nothing");
}

#[test]
fn index_put_differentiates_in_input_and_values() {
    let x = torchfn::tensor([1.0f64, 2.0, 3.0]).unwrap().requires_grad_(true).unwrap();
    let v = torchfn::tensor([10.0f64, 20.0]).unwrap().requires_grad_(true).unwrap();
    let at = i64s(&[2, 2]);
    let added = torchfn::index_put(&x, &[at], &v, true).unwrap();
    assert_eq!(added.to_vec::<f64>().unwrap(), [1.0, 2.0, 33.0]);
    (&added * &torchfn::tensor([1.0f64, 2.0, 3.0]).unwrap()).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(v.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [3.0, 3.0]);
    let (x, v) = (x.detach().unwrap().requires_grad_(true).unwrap(), v.detach().unwrap().requires_grad_(true).unwrap());
    let put = x.index_put(&[i64s(&[0])], &v.get(1..).unwrap(), false).unwrap();
    put.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [0.0, 1.0, 1.0]);
    assert_eq!(v.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [0.0, 1.0]);
}

#[test]
fn index_put_dispatches_on_indices_and_values() {
    let t = torchfn::zeros([3], None, None).unwrap();
    let one = torchfn::tensor([1.0f32]).unwrap();
    let duck = Tensor::from_duck(Answering);
    take(&DUCKED);
    assert!(t.index_put_(std::slice::from_ref(&duck), &one, false).unwrap().is(&t));
    t.index_put_(&[i64s(&[0])], &duck, false).unwrap();
    torchfn::index_put(&t, std::slice::from_ref(&duck), &one, false).unwrap();
    assert_eq!(take(&DUCKED), ["Tensor.index_put_", "Tensor.index_put_", "torchfn.index_put"]);
    assert_eq!(f32s(&t), [0.0; 3], "the duck answered: nothing was written");

    let counted_index = i64s(&[2]).as_subclass(Counted).unwrap();
    take(&COUNTED);
    let out = t.index_put_(&[counted_index], &one, false).unwrap();
    assert_eq!(take(&COUNTED), ["Tensor.index_put_"]);
    assert!(out.is_instance::<Counted>(), "the default hook returns self as the subclass, as PyTorch's");
    assert_eq!(f32s(&t), [0.0, 0.0, 1.0]);
    let first = [i64s(&[0])];
    assert_eq!(seen_by_a_mode(|| drop(t.index_put_(&first, &one, true).unwrap())), ["Tensor.index_put_"]);
    assert_eq!(f32s(&t), [1.0, 0.0, 1.0]);
}

/// Python's conversions, containers and the remaining dunders, with PyTorch 2.15's values and
/// errors (a scratch run of `len`, `bool`, `float`, `int`, `operator.index`, `in`, `+t`,
/// `abs`, `%=`, `**=` and `//=` on the same tensors).
#[test]
fn python_conversions_containers_and_dunders_behave_as_pytorchs() {
    let t = |v: Vec<f64>| torchfn::tensor(v).unwrap();
    let ints = |v: Vec<i64>| torchfn::tensor(v).unwrap();
    let message = |r: torchfn::Error| (r.kind().python_name(), r.to_string());
    assert_eq!(torchfn::zeros([3, 2], None, None).unwrap().__len__().unwrap(), 3);
    assert_eq!(message(Tensor::scalar(1.0).__len__().unwrap_err()), ("TypeError", "len() of a 0-d tensor".into()));
    assert!(!t(vec![0.0]).__bool__().unwrap());
    assert!(Tensor::scalar(f64::NAN).__bool__().unwrap());
    assert_eq!(
        message(t(vec![1.0, 2.0]).__bool__().unwrap_err()),
        ("RuntimeError", "Boolean value of Tensor with more than one value is ambiguous".into())
    );
    assert_eq!(
        message(t(vec![]).__bool__().unwrap_err()),
        ("RuntimeError", "Boolean value of Tensor with no values is ambiguous".into())
    );
    assert_eq!(Tensor::scalar(-2.7).__int__().unwrap(), -2);
    assert_eq!(ints(vec![7]).__float__().unwrap(), 7.0);
    let scalars = ("ValueError", "only one element tensors can be converted to Python scalars".to_string());
    assert_eq!(message(t(vec![1.0, 2.0]).__float__().unwrap_err()), scalars);
    assert_eq!(message(ints(vec![1, 2]).__int__().unwrap_err()), scalars);
    assert_eq!(ints(vec![2]).__index__().unwrap(), 2);
    let index = ("TypeError", "only integer tensors of a single element can be converted to an index".to_string());
    assert_eq!(message(Tensor::scalar(1.0).__index__().unwrap_err()), index);
    assert_eq!(message(ints(vec![1, 2]).__index__().unwrap_err()), index);
    let pairs = ints(vec![1, 2, 3, 4]).reshape(&[2, 2]).unwrap();
    assert!(ints(vec![1, 2]).__contains__(&Tensor::scalar(2)).unwrap());
    assert!(!ints(vec![1, 2]).__contains__(&Tensor::scalar(5)).unwrap());
    assert!(pairs.__contains__(&ints(vec![1, 2])).unwrap());
    let signed = ints(vec![-1, 2]);
    assert_eq!(signed.__abs__().unwrap().to_vec::<i64>().unwrap(), [1, 2]);
    assert!(signed.__pos__().unwrap().is(&signed));
    assert_eq!(
        message(torchfn::tensor(vec![true]).unwrap().__pos__().unwrap_err()),
        ("NotImplementedError", "The `+` operator, on a bool tensor is not supported.".into())
    );
    let mut m = ints(vec![5, -5]);
    m %= &Tensor::scalar(3);
    assert_eq!(m.to_vec::<i64>().unwrap(), [2, 1]);
    let d = ints(vec![5, -5]);
    assert!(d.__ifloordiv__(&Tensor::scalar(2)).unwrap().is(&d));
    assert_eq!(d.to_vec::<i64>().unwrap(), [2, -3]);
    let p = ints(vec![3, -2]);
    p.__ipow__(&Tensor::scalar(2)).unwrap();
    assert_eq!(p.to_vec::<i64>().unwrap(), [9, 4]);
}

/// Issue 29's census: the properties and shorthands every model calls, as PyTorch 2.15 gives
/// them for `t = torch.zeros(2, 3)`.
#[test]
fn sizes_properties_and_dtype_shorthands_are_pytorchs() {
    let t = torchfn::zeros([2, 3], None, None).unwrap();
    assert_eq!(t.size().unwrap().to_vec(), [2, 3]);
    assert_eq!((t.size_dim(1).unwrap(), t.size_dim(-1).unwrap(), t.dim().unwrap()), (3, 3, 2));
    assert_eq!((t.numel().unwrap(), torchfn::numel(&t).unwrap(), t.element_size().unwrap()), (6, 6, 4));
    assert!(t.is_floating_point().unwrap() && torchfn::is_floating_point(&t).unwrap());
    assert!(!t.is_complex().unwrap() && !torchfn::is_complex(&t).unwrap());
    assert!(!t.is_sparse().unwrap() && !t.is_nested().unwrap());
    // Dimension out of range (expected to be in range of [-2, 1], but got 5)
    let err = t.size_dim(5).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Index, "{err}");
    let by_name = Tensor::SIZE.call(&[(&t).into(), 0.into()], &Kwargs::new()).unwrap();
    assert_eq!(by_name.as_int(), Some(2));
    let dtypes = [t.double(), t.long(), t.int(), t.bool(), t.float()].map(|x| x.unwrap().dtype().unwrap());
    assert_eq!(dtypes, [DType::Float64, DType::Int64, DType::Int32, DType::Bool, DType::Float32]);
    assert!(t.float().unwrap().is(&t), "the very same tensor when the dtype is already right");
    // torch.tensor([[1, 2, 3]]).unflatten(1, (3, 1)).shape -> [1, 3, 1];
    // torch.zeros(2, 6).unflatten(1, (-1, 2)).shape -> [2, 3, 2]
    let u = torchfn::tensor([[1i64, 2, 3]]).unwrap().unflatten(1, vec![3, 1]).unwrap();
    assert_eq!((u.shape().unwrap().to_vec(), u.to_vec::<i64>().unwrap()), (vec![1, 3, 1], vec![1, 2, 3]));
    let v = torchfn::zeros([2, 6], None, None).unwrap().unflatten(1, vec![-1, 2]).unwrap();
    assert_eq!(v.shape().unwrap().to_vec(), [2, 3, 2]);
    assert!(v.base().unwrap().is_some(), "a view");
    let err = torchfn::zeros([2, 6], None, None).unwrap().unflatten(1, vec![4, 2]).unwrap_err();
    assert!(err.to_string().contains("don't multiply up to the size of dim 1 (6)"), "{err}");
}

/// `topk` selects in one pass before sorting: its values and positions are the first `k` of
/// the stable sort's, ties in position order and NaN largest, for every `k`, both directions
/// and lanes along either dimension.
#[test]
fn topk_is_the_stable_sorts_first_k() {
    let data: Vec<f32> = (0..60).map(|i| if i % 17 == 5 { f32::NAN } else { ((i * 7) % 9) as f32 - 4.0 }).collect();
    let x = torchfn::Tensor::from_vec(data, [6, 10]).unwrap();
    let same = |a: Vec<f32>, b: Vec<f32>| a.iter().zip(&b).all(|(p, q)| p == q || (p.is_nan() && q.is_nan()));
    for dim in [0i64, 1] {
        let n = x.shape().unwrap()[dim as usize] as i64;
        for largest in [true, false] {
            let (values, indices) = torchfn::sort(&x, dim, largest, false).unwrap();
            for k in 0..=n {
                let (tv, ti) = torchfn::topk(&x, k, dim, largest, true).unwrap();
                let (sv, si) = (values.narrow(dim, 0, k).unwrap(), indices.narrow(dim, 0, k).unwrap());
                assert!(same(tv.to_vec::<f32>().unwrap(), sv.contiguous().unwrap().to_vec::<f32>().unwrap()));
                assert_eq!(ti.to_vec::<i64>().unwrap(), si.contiguous().unwrap().to_vec::<i64>().unwrap(), "k = {k}");
            }
        }
    }
}

/// `bernoulli_` fills integer and bool tensors too, as PyTorch's: 0 and 1 (false and true) in
/// their own dtype, about a fraction `p` of ones.
#[test]
fn bernoulli_fills_integer_and_bool_tensors() {
    let _seeded = crate::seeded();
    let ints = torchfn::zeros([2000], Some(DType::Int64), None).unwrap();
    assert!(ints.bernoulli_(0.25, None::<Generator>).unwrap().is(&ints));
    let values = ints.to_vec::<i64>().unwrap();
    let ones = values.iter().filter(|&&v| v == 1).count();
    assert!(values.iter().all(|&v| v == 0 || v == 1) && (400..600).contains(&ones), "{ones} ones");
    let flags = torchfn::zeros([2000], Some(DType::Bool), None).unwrap();
    flags.bernoulli_(0.75, None::<Generator>).unwrap();
    let set = flags.to_vec::<bool>().unwrap().iter().filter(|&&b| b).count();
    assert!((1400..1600).contains(&set), "{set} set");
    assert_eq!(flags.dtype().unwrap(), DType::Bool);
}

/// The census's last names: `torch.empty` (torchvision's stochastic depth draws into one) and
/// `empty_like`, whose elements torchfn zeroes, and the methods `Tensor.all` and `Tensor.any`.
#[test]
fn empty_and_the_all_and_any_methods_are_pytorchs() {
    let e = torchfn::empty([2, 3], DType::Float64, None).unwrap();
    assert_eq!((e.shape().unwrap().to_vec(), e.dtype().unwrap()), (vec![2, 3], DType::Float64));
    let like = torchfn::empty_like(&torchfn::ones([4], DType::Int32, None).unwrap(), None).unwrap();
    assert_eq!((like.shape().unwrap().to_vec(), like.dtype().unwrap()), (vec![4], DType::Int32));
    let t = torchfn::tensor([[true, false], [true, true]]).unwrap();
    assert_eq!(t.all().unwrap().to_vec::<bool>().unwrap(), [false]);
    assert_eq!(t.any().unwrap().to_vec::<bool>().unwrap(), [true]);
    assert_eq!(t.all_dim(1, false).unwrap().to_vec::<bool>().unwrap(), [false, true]);
    assert_eq!(t.any_dim(0, true).unwrap().shape().unwrap().to_vec(), [1, 2]);
}

/// `unique` along a dimension: the distinct slices sorted lexicographically, each slice's
/// position among them and the counts, as PyTorch 2.15 gives them; zero-sized dimensions other
/// than `dim` are its error.
#[test]
fn unique_along_a_dimension_is_pytorchs() {
    let x = torchfn::tensor([[1i64, 2], [3, 4], [1, 2], [0, 5]]).unwrap();
    let Value::Tuple(parts) = torchfn::unique(&x, true, true, true, Some(0)).unwrap() else { panic!("a tuple") };
    let parts: Vec<Vec<i64>> = parts.iter().map(|p| p.as_tensor().unwrap().to_vec::<i64>().unwrap()).collect();
    assert_eq!(parts, [vec![0, 5, 1, 2, 3, 4], vec![1, 2, 1, 0], vec![1, 2, 1]]);
    let Value::Tuple(columns) = torchfn::unique(&x, true, true, true, Some(1)).unwrap() else { panic!("a tuple") };
    let values = columns[0].as_tensor().unwrap();
    assert_eq!(values.shape().unwrap().to_vec(), [4, 2]);
    assert_eq!(values.to_vec::<i64>().unwrap(), [1, 2, 3, 4, 1, 2, 0, 5]);
    assert_eq!(columns[1].as_tensor().unwrap().to_vec::<i64>().unwrap(), [0, 1]);
    // Slices holding NaN are each their own.
    let nan = torchfn::tensor([[f32::NAN, 1.0], [f32::NAN, 1.0]]).unwrap();
    let Value::Tensor(rows) = torchfn::unique(&nan, true, false, false, Some(0)).unwrap() else { panic!("a tensor") };
    assert_eq!(rows.shape().unwrap().to_vec(), [2, 2]);
    let err = torchfn::unique(&torchfn::zeros([3, 0], None, None).unwrap(), true, false, false, Some(0)).unwrap_err();
    assert!(err.to_string().contains("There are 0 sized dimensions"), "{err}");
    assert_eq!(torchfn::unique(&x, true, false, false, Some(2)).unwrap_err().kind(), ErrorKind::Index);
}
