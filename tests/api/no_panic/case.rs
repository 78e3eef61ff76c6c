//! Random calls: a function's samples with arguments changed, values of the declared types,
//! or anything at all, then arguments dropped, added or repeated by keyword.

use torchfn::Func;
use torchfn::testing::Sample;

use super::values::{Arg, Gen};

/// The arguments of one call.
pub(super) struct Case {
    pub(super) args: Vec<Arg>,
    pub(super) kwargs: Vec<(String, Arg)>,
}

impl Case {
    pub(super) fn from_sample(sample: &Sample) -> Case {
        Case {
            args: sample.args.iter().cloned().map(Arg::of).collect(),
            kwargs: sample.kwargs.iter().map(|(k, v)| (k.to_string(), Arg::of(v.clone()))).collect(),
        }
    }

    /// `torchfn.add(a, b, alpha=2)`, with each argument written as [`Arg`] says.
    pub(super) fn reproducer(&self, func: &Func) -> String {
        let args = self.args.iter().map(|a| a.text.clone());
        let kwargs = self.kwargs.iter().map(|(k, a)| format!("{k}={}", a.text));
        format!("{func}({})", args.chain(kwargs).collect::<Vec<_>>().join(", "))
    }
}

/// Every parameter name of every signature of `func`.
pub(super) fn param_names(func: &'static Func) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = func.signatures().iter().flat_map(|s| s.params()).map(|p| p.name()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// A random call of `func`, from its samples or from its signatures.
pub(super) fn random_case(g: &mut Gen, func: &'static Func, samples: &[Sample]) -> Case {
    let strategy = if samples.is_empty() { 6 + g.rng.below(4) } else { g.rng.below(10) };
    let mut case = match strategy {
        // A sample with some of its arguments changed.
        0..=3 => {
            let mut case = Case::from_sample(&g.rng.pick(samples));
            let n = case.args.len() + case.kwargs.len();
            let forced = g.rng.below(n.max(1));
            for i in 0..n {
                if i == forced || g.rng.percent(20) {
                    if i < case.args.len() {
                        case.args[i] = g.mutate(&case.args[i].value.clone());
                    } else {
                        let k = i - case.args.len();
                        case.kwargs[k].1 = g.mutate(&case.kwargs[k].1.value.clone());
                    }
                }
            }
            case
        }
        // A sample with random tensors: every other argument still valid.
        4..=5 => {
            let sample = g.rng.pick(samples);
            Case {
                args: sample.args.iter().map(|v| g.retensor(v)).collect(),
                kwargs: sample.kwargs.iter().map(|(k, v)| (k.to_string(), g.retensor(v))).collect(),
            }
        }
        // Values of the declared types, for one of the signatures, some by keyword.
        6..=8 => {
            let signatures = func.signatures();
            let signature = g.rng.pick(&signatures);
            let mut case = Case { args: Vec::new(), kwargs: Vec::new() };
            let mut by_keyword = false;
            for p in signature.params() {
                if p.is_variadic() {
                    let len = g.rng.below(4);
                    case.args.extend((0..len).map(|_| g.of_type(&p.type_name())));
                    by_keyword = true;
                } else if p.default().is_some() && g.rng.percent(50) {
                    by_keyword = true;
                } else if by_keyword || g.rng.percent(15) {
                    by_keyword = true;
                    case.kwargs.push((p.name().to_string(), g.of_type(&p.type_name())));
                } else {
                    case.args.push(g.of_type(&p.type_name()));
                }
            }
            case
        }
        // Anything at all.
        _ => {
            let len = g.rng.below(5);
            Case { args: (0..len).map(|_| g.any(0)).collect(), kwargs: Vec::new() }
        }
    };
    // Missing, extra, unknown and repeated arguments.
    if g.rng.percent(30) {
        let names = param_names(func);
        match g.rng.below(5) {
            0 => {
                case.args.pop();
            }
            1 => case.args.push(g.any(0)),
            2 if !names.is_empty() => {
                let name = g.rng.pick(&names);
                let value = g.any(0);
                case.kwargs.push((name.to_string(), value));
            }
            3 => case.kwargs.push(("bogus".into(), g.any(0))),
            _ => {
                if let Some(name) = names.first() {
                    case.kwargs.push((name.to_string(), g.tensor()));
                }
            }
        }
    }
    case
}
