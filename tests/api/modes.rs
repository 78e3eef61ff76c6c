//! Modes and guards (docs/protocol.md section 1.5, step 5 of section 2, and section 4): the
//! per-thread mode stack, the disable guards, and the recursion limit.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use torchfn::prelude::*;
use torchfn::{
    DisableTorchFunction, DisableTorchFunctionSubclass, ErrorKind, current_mode, enable_torch_function, mode_stack_len,
};

/// Records every call it sees (function, gathered classes, stack depth), then runs it.
#[derive(Default)]
struct Recorder {
    seen: RefCell<Vec<String>>,
    name: &'static str,
}

impl Recorder {
    fn named(name: &'static str) -> Self {
        Recorder { seen: RefCell::default(), name }
    }
    fn take(&self) -> Vec<String> {
        self.seen.take()
    }
}

impl TorchFunctionMode for Recorder {
    fn torch_function(&self, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let types: Vec<_> = types.iter().map(|t| t.name()).collect();
        self.seen.borrow_mut().push(format!("{}:{func}:{types:?}:stack={}", self.name, mode_stack_len()));
        func.call(args, kwargs)
    }
}

struct Declining;
impl TorchFunctionMode for Declining {
    fn torch_function(&self, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::NotImplemented)
    }
}

struct Replacing;
impl TorchFunctionMode for Replacing {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        if func == Tensor::NDIM { Ok(Value::Int(42)) } else { func.call(args, kwargs) }
    }
}

#[derive(Debug)]
struct Refused;
impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}
impl std::error::Error for Refused {}

struct Failing;
impl TorchFunctionMode for Failing {
    fn torch_function(&self, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Err(Error::user(Refused))
    }
}

struct Panicking;
impl TorchFunctionMode for Panicking {
    fn torch_function(&self, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        panic!("a hook that panics");
    }
}

#[derive(TensorSubclass)]
struct Sub;

/// Calls `func` again on its own arguments: recursion without end.
#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Recursive;
impl TorchFunction for Recursive {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}

/// A tensor made without a constructor call (modes see `torchfn::tensor`).
fn x() -> Tensor {
    Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap()
}

#[test]
fn a_mode_sees_every_call_plain_tensors_included_and_is_popped_while_it_runs() {
    let recorder = push_mode(Recorder::named("r"));
    assert_eq!(mode_stack_len(), 1);
    let y = (&x() + &x()).unwrap().sum().unwrap();
    assert_eq!(y.item().unwrap(), Scalar::Float(6.0));
    assert_eq!(recorder.take(), ["r:Tensor.__add__:[]:stack=0", "r:Tensor.sum:[]:stack=0", "r:Tensor.item:[]:stack=0"]);
    assert_eq!(mode_stack_len(), 1);
    drop(recorder);
    assert_eq!(mode_stack_len(), 0);
}

#[test]
fn types_lists_the_gathered_classes_never_the_mode() {
    let recorder = push_mode(Recorder::named("r"));
    let s = x().as_subclass(Sub).unwrap();
    let r = torchfn::add(&x(), &s, 1).unwrap();
    assert!(r.is_instance::<Sub>());
    // The mode runs first and sees Sub in `types`; its own call reaches Sub's default hook
    // while the mode is popped, so it sees the call once.
    assert_eq!(recorder.take(), ["r:torchfn.add:[\"Sub\"]:stack=0"]);
}

#[test]
fn the_top_mode_runs_first_and_its_calls_reach_the_next_one_down() {
    let outer = push_mode(Recorder::named("outer"));
    let inner = push_mode(Recorder::named("inner"));
    let _ = x().neg().unwrap();
    assert_eq!(inner.take(), ["inner:Tensor.neg:[]:stack=1"]);
    assert_eq!(outer.take(), ["outer:Tensor.neg:[]:stack=0"]);
}

/// Drops its own guard from inside its hook, as a misnested `with` block would.
struct SelfRemoving(RefCell<Option<torchfn::ModeGuard<Recorder>>>);
impl TorchFunctionMode for SelfRemoving {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.borrow_mut().take();
        func.call(args, kwargs)
    }
}

#[test]
fn a_mode_removed_while_its_hook_runs_is_not_pushed_back() {
    let outer = push_mode(SelfRemoving(RefCell::default()));
    *outer.0.borrow_mut() = Some(push_mode(Recorder::named("inner")));
    assert_eq!(mode_stack_len(), 2);
    // The inner recorder runs first; its call reaches the outer mode, whose hook drops the
    // recorder's guard while the recorder's hook is still running.
    let _ = x().neg().unwrap();
    assert_eq!(mode_stack_len(), 1, "the removed mode must not come back");
    assert!(outer.0.borrow().is_none());
    let _ = x().neg().unwrap();
    assert_eq!(mode_stack_len(), 1);
    drop(outer);
    assert_eq!(mode_stack_len(), 0);
}

/// Calls the function (reaching the mode below), then records what is active inside its hook.
struct Top(RefCell<Vec<usize>>);
impl TorchFunctionMode for Top {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let result = func.call(args, kwargs);
        self.0.borrow_mut().push(mode_stack_len());
        result
    }
}

#[test]
fn the_running_mode_stays_popped_when_a_mode_below_removes_itself() {
    let bottom = push_mode(SelfRemoving(RefCell::default()));
    // Bottom's hook drops the guard it holds, the recorder's, while the hooks above it run.
    let bottom_guard_holder = &bottom.0;
    let top = push_mode(Top(RefCell::default()));
    *bottom_guard_holder.borrow_mut() = Some(push_mode(Recorder::named("unused")));
    drop(top);
    let top = push_mode(Top(RefCell::default()));
    assert_eq!(mode_stack_len(), 3);
    let _ = x().neg().unwrap();
    // Top ran first, popped (2 active); its call reached the recorder, then Bottom, whose hook
    // dropped the recorder: inside Top's hook, after its call, Top itself is still not active.
    assert_eq!(top.0.take(), [1]);
    assert_eq!(mode_stack_len(), 2, "Top and Bottom active again");
    drop(top);
    drop(bottom);
    assert_eq!(mode_stack_len(), 0);
}

/// Pushes a recorder the first time its hook runs, and leaves it on the stack.
#[derive(Default)]
struct Pushing(RefCell<Option<std::rc::Rc<Recorder>>>);
impl TorchFunctionMode for Pushing {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        if self.0.borrow().is_none() {
            *self.0.borrow_mut() = Some(push_mode(Recorder::named("pushed")).keep());
        }
        // A mode pushed and popped again inside the hook leaves the stack as it was.
        drop(push_mode(Recorder::named("gone")));
        func.call(args, kwargs)
    }
}

#[test]
fn a_mode_whose_hook_pushes_a_mode_is_active_again_below_it() {
    let pushing = push_mode(Pushing::default());
    let _ = x().neg().unwrap();
    // The recorder pushed while Pushing was inactive sits below it; Pushing is active again.
    assert_eq!(mode_stack_len(), 2);
    assert!(current_mode().is_some_and(|m| m.downcast_ref::<Pushing>().is_some()));
    let pushed = pushing.0.borrow().clone().unwrap();
    let seen = ["pushed:Tensor.neg:[]:stack=0"];
    assert_eq!(pushed.take(), seen, "the hook's own call reaches the mode it pushed");
    let _ = x().neg().unwrap();
    assert_eq!(pushed.take(), seen, "the next call reaches it below Pushing");
    assert_eq!(mode_stack_len(), 2);
    drop(pushing);
    assert!(pop_mode().is_ok_and(|m| m.downcast_ref::<Recorder>().is_some()));
    assert_eq!(mode_stack_len(), 0);
}

#[test]
fn has_torch_function_follows_the_guards() {
    let s = x().as_subclass(Sub).unwrap();
    assert!(torchfn::overrides::has_torch_function(&s));
    {
        let _off = DisableTorchFunctionSubclass::new();
        assert!(!torchfn::overrides::has_torch_function(&s));
        let _mode = push_mode(Replacing);
        assert!(torchfn::overrides::has_torch_function(&x()), "modes still run");
        // As PyTorch 2.15's under a mode: true for numbers, false for no arguments at all.
        assert!(torchfn::overrides::has_torch_function(&[Value::Int(1), Value::Int(2)]));
        assert!(!torchfn::overrides::has_torch_function(&Vec::<Value>::new()));
        let _all_off = DisableTorchFunction::new();
        assert!(!torchfn::overrides::has_torch_function(&x()));
    }
    assert!(torchfn::overrides::has_torch_function(&s));
}

#[test]
fn a_mode_can_replace_the_result() {
    let _mode = push_mode(Replacing);
    assert_eq!(x().ndim().unwrap(), 42);
    assert_eq!(x().sum().unwrap().item().unwrap(), Scalar::Float(3.0));
}

#[test]
fn a_declining_mode_is_named_in_the_error() {
    let _mode = push_mode(Declining);
    let err = x().neg().unwrap_err();
    assert_eq!(
        err.to_string(),
        "no implementation found for 'Tensor.neg' on types that implement __torch_function__: [] nor in mode Declining"
    );
    // An operator tries the reflected form before giving up, as Python does.
    let err = (&x() + &x()).unwrap_err();
    assert_eq!(err.to_string(), "unsupported operand type(s) for +: 'Tensor' and 'Tensor'");
}

#[test]
fn the_stack_is_restored_after_an_error_and_after_a_panic() {
    {
        let _mode = push_mode(Failing);
        let err = x().sum().unwrap_err();
        assert!(err.downcast_ref::<Refused>().is_some());
        assert_eq!(mode_stack_len(), 1);
    }
    assert_eq!(mode_stack_len(), 0);
    {
        let _mode = push_mode(Panicking);
        let caught = catch_unwind(AssertUnwindSafe(|| x().sum()));
        assert!(caught.is_err());
        assert_eq!(mode_stack_len(), 1);
    }
    assert_eq!(mode_stack_len(), 0);
}

#[test]
fn disable_torch_function_subclass_skips_subclasses_but_not_modes() {
    let recorder = push_mode(Recorder::named("r"));
    let s = x().as_subclass(Sub).unwrap();
    let r = {
        let _guard = DisableTorchFunctionSubclass::new();
        assert!(!torchfn::is_torch_function_enabled() && torchfn::is_torch_function_mode_enabled());
        (&s + &s).unwrap()
    };
    assert!(Class::of(&r) == Tensor::class());
    assert_eq!(recorder.take().len(), 1);
    assert!(torchfn::is_torch_function_enabled());
}

#[test]
fn disable_torch_function_skips_everything_and_enable_turns_it_back_on() {
    let recorder = push_mode(Recorder::named("r"));
    let s = x().as_subclass(Sub).unwrap();
    let _off = DisableTorchFunction::new();
    assert!(!torchfn::is_torch_function_mode_enabled());
    let r = (&s + &s).unwrap();
    assert!(Class::of(&r) == Tensor::class());
    assert!(recorder.take().is_empty());
    {
        let _on = enable_torch_function();
        assert!((&s + &s).unwrap().is_instance::<Sub>());
        assert_eq!(recorder.take().len(), 1);
    }
    assert!(!torchfn::is_torch_function_mode_enabled(), "dropping the inner guard restores the outer state");
}

#[test]
fn guards_restore_the_state_when_unwinding() {
    let caught = catch_unwind(|| {
        let _off = DisableTorchFunction::new();
        panic!("unwind through the guard");
    });
    assert!(caught.is_err());
    assert!(torchfn::is_torch_function_enabled() && torchfn::is_torch_function_mode_enabled());
}

#[test]
fn runaway_recursion_in_a_hook_is_an_error_naming_the_function() {
    let r = x().as_subclass(Recursive).unwrap();
    let err = (&r + &r).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let message = err.to_string();
    assert!(
        message.starts_with("maximum recursion depth (64) exceeded while dispatching 'Tensor.__add__'"),
        "{message}"
    );
    // The depth unwinds with the calls: dispatch still works afterwards.
    assert!((&x().as_subclass(Sub).unwrap() + 1.0).unwrap().is_instance::<Sub>());
}
