//! Bad input never panics (issue 3): a deterministic property test calls every public function
//! of torchfn by name ([`Func::call`]) with argument lists made from its samples and from
//! random values (random shapes with empty dimensions, every dtype, non-contiguous layouts,
//! dimensions and sizes out of range, extreme numbers, NaN and infinities, unknown strings,
//! wrong types, missing and extra arguments, unknown keywords) and asserts that every call
//! returns, `Ok` or `Err`, without panicking. Results and errors are printed too, as a user
//! would print them. Every other call takes its float tensors as leaves that require grad and
//! then runs backward on the result, rightly or wrongly (see `backward_somehow`).
//!
//! The seed is fixed, so a failure lists calls that fail the same way on every run. To explore
//! further, set `TORCHFN_FUZZ_SEED` (a number) and `TORCHFN_FUZZ_CALLS` (calls per function);
//! `TORCHFN_FUZZ_ONLY=torchfn.add` limits the run to one function, `TORCHFN_FUZZ_FROM=n` skips
//! its first `n` calls (to replay call `n` alone, with `TORCHFN_FUZZ_CALLS=n+1`), and
//! `TORCHFN_FUZZ_TRACE=1` prints each call, with its number, before making it.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::Read;
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use torchfn::overrides::{find_function, get_ignored_functions, get_overridable_functions};
use torchfn::testing::samples;
use torchfn::{Func, Kwargs, Value};

mod case;
pub(crate) mod values;

use case::random_case;
use values::{Gen, Rng, seed_for};

/// The fixed seed of the default run.
const SEED: u64 = 0x3c6e_f372_fe94_f82b;

/// Calls per function in the default run.
const CALLS: usize = 100;

/// Calls per function with huge tensors.
const HUGE_CALLS: usize = 20;

/// How long the child process with huge tensors may run.
const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// A call on these tiny inputs that takes longer than this is reported as a hang.
const SLOW: Duration = Duration::from_secs(10);

thread_local! {
    /// Whether this thread is running a checked call (the panic hook then keeps quiet).
    static CHECKING: Cell<bool> = const { Cell::new(false) };
    /// Where and why the last checked call panicked.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once, a panic hook that records the panics of checked calls instead of printing
/// them, and leaves every other panic to the previous hook.
pub(crate) fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CHECKING.with(Cell::get) {
                let mut message = info.to_string();
                if !message.contains("runtime/src/") {
                    message += &own_frame();
                }
                PANIC.with(|p| *p.borrow_mut() = Some(message));
            } else {
                previous(info);
            }
        }));
    });
}

/// The innermost frame of torchfn's runtime on the stack, for a panic in a dependency.
fn own_frame() -> String {
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    let frame = trace.lines().find(|l| l.contains("runtime/src/") && l.trim_start().starts_with("at "));
    frame.map_or_else(String::new, |l| format!("\n(called from {})", l.trim_start().trim_start_matches("at ")))
}

/// Runs `f`; a panic comes back as its message and location.
pub(crate) fn checked<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    CHECKING.with(|c| c.set(true));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    CHECKING.with(|c| c.set(false));
    outcome.map_err(|payload| {
        PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| {
            let message = payload.downcast_ref::<&str>().map(|s| s.to_string());
            message.or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
        })
    })
}

/// torchfn's overridable functions and the constructors that can be called by name.
fn functions() -> Vec<&'static Func> {
    let overridable = get_overridable_functions()
        .into_iter()
        .filter(|(ns, _)| *ns == "Tensor" || *ns == "torchfn" || ns.starts_with("torchfn."))
        .flat_map(|(_, funcs)| funcs);
    let constructors = get_ignored_functions().into_iter().filter_map(|f| find_function(f.qualified_name()));
    overridable.chain(constructors).collect()
}

/// A setting of the run from the environment.
fn setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The calls that panicked at one place: the first message, the first call of each function
/// that panicked there, and how many calls did.
#[derive(Default)]
struct Place {
    message: String,
    calls: BTreeMap<String, String>,
    count: usize,
}

/// The panics found, by place: torchfn's own innermost frame for a panic in a dependency.
type Found = BTreeMap<String, Place>;

/// Records a panic (or a hang) of `name`.
fn record(found: &mut Found, name: &str, panic: String, reproducer: &str) {
    let caller = panic.lines().find_map(|l| l.strip_prefix("(called from ")).map(|l| l.trim_end_matches(')'));
    let first = panic.lines().next().unwrap_or_default();
    let place = caller.unwrap_or_else(|| first.trim_start_matches("panicked at ").trim_end_matches(':')).to_string();
    let entry = found.entry(place).or_default();
    if entry.message.is_empty() {
        entry.message = panic;
    }
    entry.calls.entry(name.to_string()).or_insert_with(|| reproducer.to_string());
    entry.count += 1;
}

/// A place's calls, at most three of them written out.
fn report(place: &str, p: &Place) -> String {
    let names: Vec<&str> = p.calls.keys().map(String::as_str).collect();
    let examples: Vec<String> = p.calls.values().take(3).map(|c| format!("  {c}")).collect();
    format!(
        "{place}: {} call(s) of {}\n{}\n{}",
        p.count,
        names.join(", "),
        p.message.lines().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n"),
        examples.join("\n")
    )
}

/// One run: its seed, calls per function, whether tensors are now and then huge, and whether
/// each call is printed (to stderr) before it is made.
struct Run {
    seed: u64,
    calls: usize,
    huge: bool,
    trace: bool,
    only: Option<String>,
    from: usize,
}

impl Run {
    /// A run with `calls` per function unless the environment says otherwise.
    fn new(calls: usize, huge: bool) -> Run {
        Run {
            seed: setting("TORCHFN_FUZZ_SEED").unwrap_or(SEED),
            calls: setting("TORCHFN_FUZZ_CALLS").unwrap_or(calls),
            huge,
            trace: huge || std::env::var_os("TORCHFN_FUZZ_TRACE").is_some(),
            only: setting("TORCHFN_FUZZ_ONLY"),
            from: setting("TORCHFN_FUZZ_FROM").unwrap_or(0),
        }
    }

    /// Calls every function; the places where calls panicked, each with its calls.
    fn go(&self) -> Vec<String> {
        quiet_panics();
        let funcs = functions();
        assert!(funcs.len() > 250, "only {} functions found", funcs.len());
        assert!(funcs.contains(&torchfn::ZEROS) && funcs.contains(&torchfn::RANDINT), "constructors are missing");
        let mut found = Found::new();
        for func in funcs {
            if self.only.as_ref().is_none_or(|o| *o == func.qualified_name()) {
                self.fuzz(func, &mut found);
            }
        }
        found.iter().map(|(place, p)| report(place, p)).collect()
    }

    /// Calls `func` with random arguments, recording the panics in `found`.
    fn fuzz(&self, func: &'static Func, found: &mut Found) {
        let name = func.qualified_name();
        let mut g = Gen { rng: Rng(seed_for(self.seed, &name)), shape: None, huge: self.huge, first: None };
        for n in 0..self.calls {
            (g.shape, g.first) = (None, None);
            let made = checked(|| {
                // Fresh samples for every call: in-place operations write into their arguments.
                let samples = samples(func);
                random_case(&mut g, func, &samples)
            });
            let case = match made {
                Ok(case) => case,
                Err(panic) => {
                    record(found, &name, format!("while making arguments: {panic}"), &name);
                    continue;
                }
            };
            if n < self.from {
                continue;
            }
            let reproducer = case.reproducer(func);
            if self.trace {
                eprintln!("{CALL}#{n} {reproducer}");
            }
            // Every other call, the float tensors are leaves that require grad, and backward runs
            // on what comes out, one way or another (see `backward_somehow`).
            let grad = n % 2 == 1;
            let mut leaves = Vec::new();
            let args: Vec<Value> = case.args.iter().map(|a| leafed(&a.value, grad, &mut leaves)).collect();
            let kwargs: Kwargs =
                case.kwargs.iter().map(|(k, a)| (k.clone(), leafed(&a.value, grad, &mut leaves))).collect();
            let start = Instant::now();
            // Printing the result or the error is part of the call: users print both.
            let outcome = checked(|| match func.call(&args, &kwargs) {
                Ok(value) => {
                    let printed = value.to_string().len();
                    if grad {
                        backward_somehow(&value, &leaves, n / 2);
                    }
                    printed
                }
                Err(error) => format!("{error:?}").len(),
            });
            if let Err(panic) = outcome {
                record(found, &name, panic, &reproducer);
            }
            let took = start.elapsed();
            if took > SLOW {
                record(found, &name, format!("hang in {name}: took {took:?}"), &reproducer);
            }
        }
    }
}

/// `value` with its float tensors (when `grad`) as fresh leaves that require grad, collected.
fn leafed(value: &Value, grad: bool, leaves: &mut Vec<torchfn::Tensor>) -> Value {
    match value {
        Value::Tensor(t) if grad && !t.is_duck() && t.dtype().is_ok_and(|d| d.is_floating_point()) => {
            match t.detach().and_then(|d| d.requires_grad_(true)) {
                Ok(leaf) => {
                    leaves.push(leaf.clone());
                    Value::Tensor(leaf)
                }
                Err(_) => value.clone(),
            }
        }
        Value::List(items) => Value::List(items.iter().map(|v| leafed(v, grad, leaves)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| leafed(v, grad, leaves)).collect()),
        other => other.clone(),
    }
}

/// Runs backward through whatever `value` holds, in the `way`-th of several ways, some of them
/// wrong (a gradient of the wrong shape or dtype, backward twice, an in-place change of a
/// saved output, gradients of gradients): errors are fine, panics are not.
fn backward_somehow(value: &Value, leaves: &[torchfn::Tensor], way: usize) {
    use torchfn::autograd;
    let outputs: Vec<torchfn::Tensor> = match value {
        Value::Tensor(t) => vec![t.clone()],
        Value::List(items) | Value::Tuple(items) => items.iter().filter_map(|v| v.as_tensor().cloned()).collect(),
        _ => Vec::new(),
    };
    let Some(out) = outputs.first() else { return };
    let shape = out.shape().map(|s| s.to_vec()).unwrap_or_default();
    let _ = match way % 6 {
        0 => out.backward(),
        1 => torchfn::ones(shape.clone(), None, None).and_then(|g| out.backward_with(Some(&g), None, false, None)),
        2 => torchfn::ones([3, 1], None, None).and_then(|g| out.backward_with(Some(&g), None, false, None)),
        3 => out.sum().and_then(|s| {
            s.backward_with(None, Some(false), false, None)?;
            s.backward()
        }),
        4 => out.exp().and_then(|e| {
            e.add_(&torchfn::Tensor::scalar(1.0), 1)?;
            e.sum()?.backward()
        }),
        _ => out.sum().and_then(|s| {
            let grads = autograd::grad(&[s], leaves, None, None, true, false)?;
            let mut total = None;
            for g in grads.into_iter().flatten() {
                let term = g.sum()?;
                total = Some(match total {
                    Some(t) => (&t + &term)?,
                    None => term,
                });
            }
            match total {
                Some(t) => autograd::backward(&[t], None, None, false, Some(leaves)),
                None => Ok(()),
            }
        }),
    };
}

/// How a traced call starts its line.
const CALL: &str = "call: ";

/// Set in the child process of [`huge_tensors_give_errors_not_aborts`].
const CHILD: &str = "TORCHFN_FUZZ_CHILD";

#[test]
fn no_call_by_name_panics_whatever_its_arguments() {
    // Random functions among the calls draw from the default generator, which seeded tests share.
    let _seeded = crate::seeded();
    let places = Run::new(CALLS, false).go();
    assert!(places.is_empty(), "calls panicked at {} places:\n\n{}", places.len(), places.join("\n\n"));
}

/// Tensors too large to copy (one element expanded to 2^40 elements or more) must give errors:
/// a failed allocation aborts the process, which no `catch_unwind` can catch, so the calls run
/// in a child process (this test binary again), which prints each call before making it. A
/// child that dies, or runs too long, is reported with its last call.
#[test]
fn huge_tensors_give_errors_not_aborts() {
    if std::env::var_os(CHILD).is_some() {
        let places = Run::new(HUGE_CALLS, true).go();
        assert!(places.is_empty(), "calls panicked at {} places:\n\n{}", places.len(), places.join("\n\n"));
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(exe)
        .args(["--exact", "no_panic::huge_tensors_give_errors_not_aborts", "--include-ignored", "--nocapture"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the test binary runs");
    let mut stderr = child.stderr.take().expect("a pipe");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            break Some(status);
        }
        if start.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().expect("the reader thread ends");
    let last = text.lines().rev().find_map(|l| l.strip_prefix(CALL)).unwrap_or("(none)");
    // The child's own report, and the first frames in torchfn of a backtrace, without the rest.
    let frame = |l: &str| {
        let l = l.trim_start();
        l.starts_with("at ") || l.split_once(": ").is_some_and(|(n, _)| n.parse::<usize>().is_ok())
    };
    let ours = text.lines().filter(|l| l.trim_start().starts_with("at ./runtime/src/")).take(3);
    let others = text.lines().filter(|l| !l.starts_with(CALL) && !frame(l) && !l.contains("RUST_BACKTRACE"));
    let report = others.chain(ours).collect::<Vec<_>>().join("\n");
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("the child process failed ({status}); its last call: {last}\n{report}"),
        None => panic!("the child process ran for more than {CHILD_LIMIT:?}; its last call: {last}"),
    }
}
