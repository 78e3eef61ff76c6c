//! Custom autograd Functions (`torchfn::autograd::Function`): the context's features, every
//! misuse with its own error, forward-mode AD through `jvp`, and the protocol seeing `apply`.

use std::cell::RefCell;

use torchfn::ErrorKind;
use torchfn::autograd::{Ctx, Function, forward_ad};
use torchfn::prelude::*;

fn leaf(values: &[f64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap().requires_grad_(true).unwrap()
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    t.grad().unwrap().expect("a gradient").to_vec::<f64>().unwrap()
}

/// `x * c`, with a jvp, saving `x` for backward and `c` for forward.
#[derive(Default)]
struct Scale {
    constant: f64,
    seen_needs: Vec<bool>,
}

impl Function for Scale {
    type Inputs = (Tensor, f64);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((x, c): &(Tensor, f64)) -> Result<Tensor> {
        assert!(!torchfn::autograd::is_grad_enabled(), "forward records nothing");
        x * *c
    }

    fn setup_context(ctx: &mut Ctx<Self>, (x, c): &(Tensor, f64), _: &Tensor) -> Result<()> {
        ctx.constant = *c;
        ctx.seen_needs = ctx.needs_input_grad.clone();
        ctx.save_for_backward(x);
        ctx.save_for_forward(x);
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
        let _x: Tensor = ctx.saved_tensors()?;
        assert_eq!(ctx.seen_needs, [true, false]);
        // A trailing None beyond the arguments is allowed.
        Ok(vec![Some((&g * ctx.constant)?), None, None])
    }

    fn jvp(ctx: &mut Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let _x: Tensor = ctx.saved_tensors()?;
        assert!(tangents[1].is_none(), "a number has no tangent");
        Ok(vec![Some((tangents[0].as_ref().unwrap() * ctx.constant)?)])
    }
}

#[test]
fn apply_records_a_node_named_after_the_function() {
    let x = leaf(&[1.0, 2.0]);
    let y = Scale::apply((x.clone(), 3.0)).unwrap();
    let node = y.grad_fn().unwrap().unwrap();
    assert_eq!(node.name(), "ScaleBackward");
    assert_eq!(node.next_functions()[0].as_ref().unwrap().0.name(), "AccumulateGrad");
    assert!(node.next_functions()[1].is_none(), "a number has no edge");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [3.0, 3.0]);
    // Without an input that requires grad, the output is plain.
    let plain = Scale::apply((torchfn::tensor([1.0f64]).unwrap(), 2.0)).unwrap();
    assert!(plain.grad_fn().unwrap().is_none() && !plain.requires_grad().unwrap());
    // Nor under no_grad.
    let _guard = torchfn::autograd::no_grad();
    assert!(Scale::apply((x, 2.0)).unwrap().grad_fn().unwrap().is_none());
}

/// Returns whatever gradients it is told to, to test the checks on them.
#[derive(Default)]
struct Returns;

thread_local! {
    static RETURNED: RefCell<Vec<Option<Tensor>>> = const { RefCell::new(Vec::new()) };
}

impl Function for Returns {
    type Inputs = (Tensor, i64);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((x, _): &(Tensor, i64)) -> Result<Tensor> {
        x.copy()
    }

    fn backward(_: &mut Ctx<Self>, _: Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(RETURNED.with(|r| r.borrow().clone()))
    }
}

fn backward_error(returned: Vec<Option<Tensor>>) -> String {
    RETURNED.with(|r| *r.borrow_mut() = returned);
    let x = leaf(&[1.0, 2.0]);
    let y = Returns::apply((x, 0)).unwrap();
    let err = y.sum().unwrap().backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    err.to_string()
}

#[test]
fn wrong_gradients_from_backward_are_errors() {
    let good = torchfn::tensor([1.0f64, 1.0]).unwrap();
    assert_eq!(
        backward_error(vec![Some(good.clone())]),
        "function ReturnsBackward returned an incorrect number of gradients (expected 2, got 1)"
    );
    assert_eq!(
        backward_error(vec![Some(good.clone()), None, Some(good.clone())]),
        "function ReturnsBackward returned an incorrect number of gradients (expected 2, got 3)"
    );
    assert!(backward_error(vec![Some(good.clone()), Some(good.clone())]).contains(
        "returned a gradient different than None at position 2, but the corresponding forward input was not a Variable"
    ));
    let shape = backward_error(vec![Some(torchfn::tensor([1.0f64, 2.0, 3.0]).unwrap()), None]);
    assert!(
        shape.contains(
            "ReturnsBackward returned an invalid gradient at index 0 - got [3] but expected shape compatible with [2]"
        ),
        "{shape}"
    );
    let dtype = backward_error(vec![Some(torchfn::tensor([1.0f32, 2.0]).unwrap()), None]);
    assert!(
        dtype.contains(
            "ReturnsBackward returned an invalid gradient - expected dtype torch.float64 but got torch.float32"
        ),
        "{dtype}"
    );
}

/// Saves its input and its output.
#[derive(Default)]
struct Exp;

impl Function for Exp {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward(x: &Tensor) -> Result<Tensor> {
        x.exp()
    }

    fn setup_context(ctx: &mut Ctx<Self>, _: &Tensor, output: &Tensor) -> Result<()> {
        ctx.save_for_backward(output);
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
        let y: Tensor = ctx.saved_tensors()?;
        Ok(vec![Some((&g * &y)?)])
    }
}

#[test]
fn saved_tensors_are_checked_for_in_place_changes_and_freed_after_backward() {
    let x = leaf(&[0.0, 1.0]);
    let y = Exp::apply(x.clone()).unwrap();
    y.sum().unwrap().backward_with(None, Some(true), false, None).unwrap();
    y.sum().unwrap().backward().unwrap(); // retained: a second backward reads them again
    assert_eq!(grad_of(&x), [2.0, 2.0 * std::f64::consts::E]);
    let err = y.sum().unwrap().backward().unwrap_err();
    assert!(err.to_string().starts_with("Trying to backward through the graph a second time"), "{err}");

    let y = Exp::apply(x.clone()).unwrap();
    y.mul_(&Tensor::scalar(2.0)).unwrap();
    let err = y.sum().unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("modified by an inplace operation"), "{err}");
    assert!(err.to_string().contains("ExpBackward"), "{err}");
}

/// A backward that is not differentiable.
#[derive(Default)]
struct Square;

impl Function for Square {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;
    const ONCE_DIFFERENTIABLE: bool = true;

    fn forward(x: &Tensor) -> Result<Tensor> {
        x * x
    }

    fn setup_context(ctx: &mut Ctx<Self>, x: &Tensor, _: &Tensor) -> Result<()> {
        ctx.save_for_backward(x);
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
        assert!(!torchfn::autograd::is_grad_enabled(), "a once-differentiable backward does not record");
        let x: Tensor = ctx.saved_tensors()?;
        Ok(vec![Some((&(&g * &x)? * 2.0)?)])
    }
}

#[test]
fn double_backward_through_a_once_differentiable_function_is_an_error() {
    let x = leaf(&[3.0]);
    let y = Square::apply(x.clone()).unwrap();
    let dy =
        torchfn::autograd::grad(&[y], std::slice::from_ref(&x), None, None, true, false).unwrap()[0].clone().unwrap();
    assert_eq!(dy.to_vec::<f64>().unwrap(), [6.0]);
    assert!(dy.requires_grad().unwrap());
    let err = torchfn::autograd::grad(&[dy], &[x], None, None, false, false).unwrap_err();
    assert!(
        err.to_string().contains("trying to differentiate twice a function that was marked with @once_differentiable"),
        "{err}"
    );
}

/// Sorts nothing: returns `x * 2` and a float "index" output marked non-differentiable, and
/// sees its gradients unmaterialized.
#[derive(Default)]
struct Pair;

thread_local! {
    static GRADS_SEEN: RefCell<Vec<bool>> = const { RefCell::new(Vec::new()) };
}

impl Function for Pair {
    type Inputs = Tensor;
    type Output = (Tensor, Tensor);
    type GradOutputs = (Option<Tensor>, Option<Tensor>);

    fn forward(x: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok(((x * 2.0)?, x.copy()?))
    }

    fn setup_context(ctx: &mut Ctx<Self>, _: &Tensor, (_, index): &(Tensor, Tensor)) -> Result<()> {
        ctx.mark_non_differentiable(&[index]);
        ctx.set_materialize_grads(false);
        Ok(())
    }

    fn backward(_: &mut Ctx<Self>, (g, g_index): (Option<Tensor>, Option<Tensor>)) -> Result<Vec<Option<Tensor>>> {
        GRADS_SEEN.with(|s| *s.borrow_mut() = vec![g.is_some(), g_index.is_some()]);
        Ok(vec![g.map(|g| (&g * 2.0).unwrap())])
    }
}

#[test]
fn non_differentiable_outputs_and_unmaterialized_gradients() {
    let x = leaf(&[1.0, 2.0]);
    let (y, index) = Pair::apply(x.clone()).unwrap();
    assert!(y.requires_grad().unwrap());
    assert!(!index.requires_grad().unwrap() && index.grad_fn().unwrap().is_none());
    y.sum().unwrap().backward().unwrap();
    assert_eq!(GRADS_SEEN.with(|s| s.borrow().clone()), [true, false], "the missing gradient reaches backward as None");
    assert_eq!(grad_of(&x), [2.0, 2.0]);
}

/// Adds one in place and says so.
#[derive(Default)]
struct AddOne;

impl Function for AddOne {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward_with_ctx(ctx: &mut Ctx<Self>, x: &Tensor) -> Result<Tensor> {
        x.add_(&Tensor::scalar(1.0), 1)?;
        ctx.mark_dirty(&[x]);
        Ok(x.clone())
    }

    fn backward(_: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g)])
    }
}

#[test]
fn mark_dirty_gives_the_modified_input_the_function_s_history() {
    let x = leaf(&[1.0, 2.0]);
    let y = (&x * 3.0).unwrap();
    let z = AddOne::apply(y.clone()).unwrap();
    assert!(z.is(&y), "the dirty input is the output");
    assert_eq!(y.grad_fn().unwrap().unwrap().name(), "AddOneBackward");
    assert_eq!(y.to_vec::<f64>().unwrap(), [4.0, 7.0]);
    z.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [3.0, 3.0]);
    // On a leaf that requires grad it is refused.
    let err = AddOne::apply(leaf(&[1.0])).unwrap_err();
    assert!(
        err.to_string().contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{err}"
    );
}

/// Returns its input unchanged (not dirty): the output is a new view with the Function's node.
#[derive(Default)]
struct Identity;

impl Function for Identity {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }

    fn backward(_: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some((&g * 5.0)?)])
    }
}

#[test]
fn an_input_returned_as_is_becomes_a_view_with_the_function_s_history() {
    let x = leaf(&[1.0]);
    let y = Identity::apply(x.clone()).unwrap();
    assert!(!y.is(&x) && x.grad_fn().unwrap().is_none());
    assert_eq!(y.grad_fn().unwrap().unwrap().name(), "IdentityBackward");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [5.0]);
}

#[derive(Default)]
struct NoBackward;

impl Function for NoBackward {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward(x: &Tensor) -> Result<Tensor> {
        x * 2.0
    }
}

#[test]
fn a_function_without_backward_or_jvp_says_what_to_implement() {
    let y = NoBackward::apply(leaf(&[1.0])).unwrap();
    let err = y.sum().unwrap().backward().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotImplemented);
    assert!(err.to_string().contains("You must implement either the backward or vjp method"), "{err}");

    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let _level = forward_ad::dual_level().unwrap();
    let dual = forward_ad::make_dual(&torchfn::tensor([1.0f64]).unwrap(), &torchfn::tensor([1.0f64]).unwrap()).unwrap();
    let err = NoBackward::apply(dual).unwrap_err();
    assert!(err.to_string().contains("You must implement the jvp function"), "{err}");
}

#[test]
fn jvp_gives_the_outputs_their_tangents() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let _level = forward_ad::dual_level().unwrap();
    let x = torchfn::tensor([1.0f64, 2.0]).unwrap();
    let dual = forward_ad::make_dual(&x, &torchfn::tensor([1.0f64, -1.0]).unwrap()).unwrap();
    let y = Scale::apply((dual, 4.0)).unwrap();
    let unpacked = forward_ad::unpack_dual(&(&y + 1.0).unwrap()).unwrap();
    assert_eq!(unpacked.primal.to_vec::<f64>().unwrap(), [5.0, 9.0]);
    assert_eq!(unpacked.tangent.unwrap().to_vec::<f64>().unwrap(), [4.0, -4.0]);
}

#[test]
fn ctx_saved_tensors_of_the_wrong_arity_or_a_missing_one_are_errors() {
    #[derive(Default)]
    struct Saves;
    impl Function for Saves {
        type Inputs = (Tensor, Option<Tensor>);
        type Output = Tensor;
        type GradOutputs = Tensor;
        fn forward((x, _): &(Tensor, Option<Tensor>)) -> Result<Tensor> {
            x * 1.0
        }
        fn setup_context(ctx: &mut Ctx<Self>, (x, b): &(Tensor, Option<Tensor>), _: &Tensor) -> Result<()> {
            ctx.save_for_backward((x, b));
            Ok(())
        }
        fn backward(ctx: &mut Ctx<Self>, g: Tensor) -> Result<Vec<Option<Tensor>>> {
            let wrong: Result<(Tensor, Tensor, Tensor)> = ctx.saved_tensors();
            assert!(wrong.unwrap_err().to_string().contains("expected 3 tensors, got 2"));
            let missing: Result<(Tensor, Tensor)> = ctx.saved_tensors();
            assert!(missing.unwrap_err().to_string().contains("saved_tensors[1] is None"));
            let (_x, b): (Tensor, Option<Tensor>) = ctx.saved_tensors()?;
            assert!(b.is_none());
            Ok(vec![Some(g), None])
        }
    }
    let x = leaf(&[1.0]);
    Saves::apply((x.clone(), None)).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [1.0]);
}

#[derive(TensorSubclass)]
struct Tagged;

/// Records the functions it sees (shared with the fx tests).
#[derive(Default)]
pub(crate) struct Log(pub(crate) RefCell<Vec<String>>);

impl TorchFunctionMode for Log {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.borrow_mut().push(func.qualified_name());
        func.call(args, kwargs)
    }
}

#[test]
fn apply_is_an_overridable_call_and_keeps_subclasses() {
    assert_eq!(Scale::handle().qualified_name(), "Scale.apply");
    assert!(std::ptr::eq(Scale::handle(), Scale::handle()));

    let x = leaf(&[1.0, 2.0]);
    let log = push_mode(Log::default());
    let y = Scale::apply((x.clone(), 2.0)).unwrap();
    assert_eq!(log.0.borrow().first().map(String::as_str), Some("Scale.apply"));
    drop(log);
    assert_eq!(y.grad_fn().unwrap().unwrap().name(), "ScaleBackward", "the mode's call still records");

    let tagged = leaf(&[1.0, 2.0]).as_subclass(Tagged).unwrap();
    let y = Scale::apply((tagged.clone(), 2.0)).unwrap();
    assert!(y.is_instance::<Tagged>(), "a subclass passed in comes back as the subclass");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&tagged), [2.0, 2.0]);
}
