//! docs/protocol.md section 3: `as_subclass` and the default hook that keeps the most derived
//! subclass, and its per-instance attributes, through every kind of call.

use std::cell::Cell;

use torchfn::ErrorKind;
use torchfn::prelude::*;

#[derive(TensorSubclass)]
struct Sub {
    tag: u32,
}

#[derive(TensorSubclass)]
#[torchfn(parent = Sub)]
struct SubSub {
    depth: u32,
}

#[derive(TensorSubclass)]
struct Other;

#[derive(TensorSubclass)]
#[torchfn(disable_torch_function)]
struct Quiet;

thread_local! {
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// Counts its calls, then defers to `super()`.
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
        CALLS.with(|c| c.set(c.get() + 1));
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

/// No hook of its own: it inherits `Counted`'s, as a Python subclass would.
#[derive(TensorSubclass)]
#[torchfn(parent = Counted)]
struct CountedChild;

/// A child of a class with the protocol disabled is disabled too.
#[derive(TensorSubclass)]
#[torchfn(parent = Quiet)]
struct QuietChild;

/// Overrides `torchfn.add` alone (subtracts instead), and defers everything else to `super()`.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Contrary;
impl TorchFunction for Contrary {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        if func == torchfn::ADD {
            let (a, b) = (args[0].to::<Tensor>()?, args[1].to::<Tensor>()?);
            let _plain = torchfn::DisableTorchFunctionSubclass::new();
            return Ok(torchfn::sub(&a, &b, 1)?.into());
        }
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

#[derive(Debug, DuckTensor)]
struct Lazy;
impl TorchFunction for Lazy {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::NotImplemented)
    }
}

fn plain() -> Tensor {
    torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap()
}

fn sub() -> Tensor {
    plain().as_subclass(Sub { tag: 7 }).unwrap()
}

fn assert_sub(t: &Tensor, what: &str) {
    assert!(t.is_instance::<Sub>(), "{what} lost the subclass: {t}");
    assert_eq!(t.attrs::<Sub>().map(|s| s.tag), Some(7), "{what} lost the attribute");
}

#[test]
fn as_subclass_is_a_view_of_the_same_data() {
    let x = plain();
    let s = x.as_subclass(Sub { tag: 1 }).unwrap();
    assert_eq!(s.data_ptr().unwrap(), x.data_ptr().unwrap());
    assert!(Class::of(&s) == Sub::class() && Class::of(&x) == Tensor::class());
    assert!(s.is_instance::<Tensor>() && !x.is_instance::<Sub>());
    assert_eq!(s.to_string(), "Sub([[1., 2.],\n     [3., 4.]])");
}

#[test]
fn the_subclass_survives_functions_methods_operators_indexing_and_views() {
    let (s, x) = (sub(), plain());
    assert_sub(&torchfn::add(&s, &x, 2).unwrap(), "torchfn::add(sub, plain)");
    assert_sub(&torchfn::mul(&x, &s).unwrap(), "torchfn::mul(plain, sub)");
    assert_sub(&torchfn::matmul(&x, &s).unwrap(), "torchfn::matmul");
    assert_sub(&s.sum().unwrap(), "Tensor.sum");
    assert_sub(&s.mean().unwrap(), "Tensor.mean");
    assert_sub(&(&s + &x).unwrap(), "sub + plain");
    assert_sub(&(&x + &s).unwrap(), "plain + sub");
    assert_sub(&(2.0 * &s).unwrap(), "2.0 * sub");
    assert_sub(&(&s / 2).unwrap(), "sub / 2");
    assert_sub(&(-&s).unwrap(), "-sub");
    assert_sub(&s.get(0).unwrap(), "sub[0]");
    assert_sub(&s.get((.., 1)).unwrap(), "sub[:, 1]");
    assert_sub(&s.reshape(&[4]).unwrap(), "sub.reshape(4)");
    // and chains of them
    let chained = (&(&s * &x).unwrap().get(1).unwrap() - 1.0).unwrap().sum().unwrap();
    assert_sub(&chained, "a chain");
    assert_eq!(chained.item().unwrap(), Scalar::Float(23.0));
}

#[test]
fn views_through_the_default_hook_still_share_storage() {
    let s = sub();
    let row = s.get(1).unwrap();
    assert_eq!(row.data_ptr().unwrap(), s.data_ptr().unwrap() + 2 * 4);
}

#[test]
fn the_most_derived_subclass_wins_and_keeps_its_own_attributes() {
    let (s, ss) = (sub(), plain().as_subclass(SubSub { depth: 2 }).unwrap());
    for r in [(&s + &ss).unwrap(), (&ss + &s).unwrap(), torchfn::add(&plain(), &ss, 1).unwrap()] {
        assert!(Class::of(&r) == SubSub::class(), "{r}");
        assert_eq!(r.attrs::<SubSub>().map(|a| a.depth), Some(2));
    }
}

#[test]
fn unrelated_sibling_subclasses_do_not_combine() {
    let other = plain().as_subclass(Other).unwrap();
    let err = torchfn::add(&sub(), &other, 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert_eq!(
        err.to_string(),
        "no implementation found for 'torchfn.add' on types that implement __torch_function__: [Sub, Other]"
    );
    // The operator tried `Other.__radd__` too, as Python does, and says so as Python does.
    let err = (&sub() + &other).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert_eq!(err.to_string(), "unsupported operand type(s) for +: 'Sub' and 'Other'");
}

#[test]
fn a_hook_reaches_the_default_hook_as_super() {
    let c = plain().as_subclass(Counted).unwrap();
    CALLS.with(|n| n.set(0));
    let r = (&c + &c).unwrap().sum().unwrap();
    assert!(r.is_instance::<Counted>());
    assert_eq!(CALLS.with(Cell::get), 2, "one hook call for + and one for sum");
}

#[test]
fn subclasses_inherit_their_parents_hook_and_disabled_state() {
    let c = plain().as_subclass(CountedChild).unwrap();
    CALLS.with(|n| n.set(0));
    let r = c.sum().unwrap();
    assert_eq!(CALLS.with(Cell::get), 1, "Counted's hook ran for its child");
    assert!(Class::of(&r) == CountedChild::class(), "with cls the child: {r}");
    let q = plain().as_subclass(QuietChild).unwrap();
    assert!(!torchfn::overrides::has_torch_function(&q));
    assert!(Class::of(&q.sum().unwrap()) == Tensor::class());
}

#[test]
fn a_hook_can_override_one_function_and_defer_the_rest() {
    let c = plain().as_subclass(Contrary).unwrap();
    let added = torchfn::add(&c, &c, 1).unwrap();
    assert_eq!(added.to_vec::<f32>().unwrap(), [0.0; 4]);
    let multiplied = torchfn::mul(&c, &c).unwrap();
    assert!(multiplied.is_instance::<Contrary>());
    assert_eq!(multiplied.to_vec::<f32>().unwrap(), [1.0, 4.0, 9.0, 16.0]);
}

mod reordering {
    use torchfn::prelude::*;

    /// Returns the relevant arguments in the reverse order.
    #[dispatcher]
    pub fn backwards(input: &Tensor, other: &Tensor) -> impl Relevant {
        [other, input]
    }

    /// `input + other`, with a dispatcher that lists `other` first.
    #[torch_function(dispatcher = backwards, module = "tests.subclass")]
    pub fn plus(input: &Tensor, other: &Tensor) -> Result<Tensor> {
        input + other
    }
}

#[test]
fn attributes_come_from_the_first_argument_of_the_class() {
    let (first, second) = (plain().as_subclass(Sub { tag: 1 }).unwrap(), plain().as_subclass(Sub { tag: 2 }).unwrap());
    let r = reordering::plus(&first, &second).unwrap();
    assert_eq!(r.attrs::<Sub>().map(|s| s.tag), Some(1), "the first argument, whatever the dispatcher's order");
    let r = (&second + &first).unwrap();
    assert_eq!(r.attrs::<Sub>().map(|s| s.tag), Some(2));
}

#[test]
fn identity_accessors_are_not_rewrapped() {
    let s = sub();
    let view = s.reshape(&[4]).unwrap();
    let base = view.base().unwrap().expect("a reshape of a contiguous tensor is a view");
    assert!(base.is(&s), "Tensor._base must be the very same object");
    assert!(s.base().unwrap().is_none());
}

#[test]
fn a_class_with_the_hook_disabled_is_not_dispatched_to() {
    let q = plain().as_subclass(Quiet).unwrap();
    assert!(!torchfn::overrides::has_torch_function(&q));
    let r = (&q + &q).unwrap();
    assert!(Class::of(&r) == Tensor::class(), "no hook, no subclass preservation: {r}");
}

#[test]
fn as_subclass_refuses_what_cannot_view_tensor_data() {
    let err = plain().as_subclass_class(Lazy::class()).unwrap_err();
    assert_eq!(err.to_string(), "as_subclass(): Lazy does not descend from Tensor, so it cannot view a tensor's data");
    let err = Tensor::from_duck(Lazy).as_subclass(Sub { tag: 0 }).unwrap_err();
    assert_eq!(err.to_string(), "as_subclass(): argument 'self' must be Tensor, not Lazy");
    let s = plain().as_subclass_class(SubSub::class()).unwrap();
    assert!(s.is_instance::<Sub>() && s.attrs::<SubSub>().is_none());
}
