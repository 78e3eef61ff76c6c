//! Untrusted input never panics (issue 25): the readers of data from outside (`.npy` files,
//! safetensors state dicts, fx graphs as JSON) and the by-name binder each get a fuzz target,
//! a deterministic generator of inputs (mutations of valid files and calls, and plain random
//! bytes and values) whose every input must come back as `Ok` or as an error saying what is
//! wrong: never a panic, an abort (which ends the test binary), a huge allocation or a hang
//! (an input that takes over five seconds). Each target also checks what the input must give
//! when it is read (a file read back equal, an error that names the reader, a graph that
//! calls only registered functions, a binding error the call repeats).
//!
//! The default run makes a few thousand inputs per target, with a fixed seed, so a failure
//! is the same on every run and names the input. To fuzz further, set `TORCHFN_FUZZ_INPUTS`
//! (inputs per target) and `TORCHFN_FUZZ_SEED` (a number), in a release build with overflow
//! checks and debug assertions kept, so that an overflow panics as in the default run instead
//! of wrapping:
//!
//! ```text
//! CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
//! TORCHFN_FUZZ_INPUTS=1000000 cargo test --release -p torchfn --test api untrusted:: -- --nocapture
//! ```
//!
//! Input `n` of a target depends only on the seed, the target and `n`: `TORCHFN_FUZZ_FROM=n`
//! with `TORCHFN_FUZZ_INPUTS=n+1` makes it alone again. The inputs that found bugs are kept
//! as regression tests beside each target.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod bind;
mod fx_json;
mod mutate;
mod npy;
mod safetensors;

use crate::no_panic::{checked, quiet_panics};
use mutate::{Rng, seed_for};
use torchfn::Func;
use torchfn::overrides::{get_ignored_functions, get_overridable_functions};

/// The fixed seed of the default run.
const SEED: u64 = 0x5be0_cd19_137e_2179;

/// An input that takes longer than this is reported as a hang.
const SLOW: Duration = Duration::from_secs(5);

/// What one input showed: whether it was accepted (read, loaded, bound), or what was wrong.
type Verdict = Result<bool, String>;

/// A setting of the run from the environment.
fn setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The problems found at one place: how many inputs, and the first one written out.
struct Place {
    count: usize,
    first: String,
}

/// Runs the target `name`: `default` inputs (or `TORCHFN_FUZZ_INPUTS`), each made by `make`
/// from its own random stream, written by `show` for a report, and checked by `check`. Fails
/// with every place where inputs panicked, hung or broke a property, with the first input of
/// each.
fn fuzz<I>(
    name: &str,
    default: usize,
    make: impl Fn(&mut Rng) -> I,
    show: impl Fn(&I) -> String,
    check: impl Fn(&I) -> Verdict,
) {
    quiet_panics();
    let seed = setting("TORCHFN_FUZZ_SEED").unwrap_or(SEED);
    let count = setting("TORCHFN_FUZZ_INPUTS").unwrap_or(default);
    let from = setting("TORCHFN_FUZZ_FROM").unwrap_or(0);
    let mut found: BTreeMap<String, Place> = BTreeMap::new();
    let start = Instant::now();
    let mut accepted = 0;
    for n in from..count {
        let mut rng = Rng(seed_for(seed, name, n));
        let input = match checked(|| make(&mut rng)) {
            Ok(input) => input,
            Err(panic) => {
                let place = found
                    .entry(format!("making inputs: {}", first_line(&panic)))
                    .or_insert(Place { count: 0, first: String::new() });
                place.count += 1;
                if place.first.is_empty() {
                    place.first = format!("input #{n}: {panic}");
                }
                continue;
            }
        };
        let began = Instant::now();
        let outcome = checked(|| check(&input));
        let took = began.elapsed();
        let problem = match outcome {
            Ok(Ok(_)) if took > SLOW => Some(format!("took {took:?}")),
            Ok(Ok(ok)) => {
                accepted += usize::from(ok);
                None
            }
            Ok(Err(wrong)) => Some(wrong),
            Err(panic) => Some(panic),
        };
        if let Some(problem) = problem {
            let place = found.entry(first_line(&problem)).or_insert(Place { count: 0, first: String::new() });
            place.count += 1;
            if place.first.is_empty() {
                place.first = format!("input #{n}: {}\n{problem}", show(&input));
            }
        }
    }
    eprintln!(
        "untrusted::{name}: {} inputs ({accepted} accepted) in {:.1?} (seed {seed:#x}), {} problem place(s)",
        count.saturating_sub(from),
        start.elapsed(),
        found.len()
    );
    let reports: Vec<String> = found
        .iter()
        .take(12)
        .map(|(place, p)| format!("{place}: {} input(s), first:\n  {}", p.count, p.first))
        .collect();
    assert!(found.is_empty(), "{name}: problems at {} place(s):\n\n{}", found.len(), reports.join("\n\n"));
}

/// The first line of a message, at most 160 characters: the place a problem is grouped by.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or_default().chars().take(160).collect()
}

/// Every function a graph or a by-name call can name: torchfn's overridable functions, the
/// constructors that can be called by name, and `operator.getitem`.
fn functions() -> Vec<&'static Func> {
    let overridable = get_overridable_functions()
        .into_iter()
        .filter(|(ns, _)| *ns == "Tensor" || *ns == "torchfn" || ns.starts_with("torchfn."))
        .flat_map(|(_, funcs)| funcs);
    let constructors =
        get_ignored_functions().into_iter().filter_map(|f| torchfn::overrides::find_function(f.qualified_name()));
    let mut funcs: Vec<&'static Func> = overridable.chain(constructors).collect();
    funcs.push(&torchfn::fx::GETITEM);
    funcs
}
