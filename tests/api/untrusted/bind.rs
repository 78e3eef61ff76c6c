//! The by-name binder ([`Func::fits`], and [`Func::call`], which binds the same way) on every
//! function a user or a graph can call by name: arguments of the declared types for one of
//! its signatures, then changed (an argument dropped, added, swapped or of another type, a
//! positional one given again by keyword, keywords unknown, NumPy's names for parameters,
//! the variadic parameter by keyword, dozens of extra positionals), and plain random calls.
//! Calls are made with no mode, under a mode that calls the function again, and under one that
//! declines everything. No call panics; arguments that do not bind give a `TypeError`, and the
//! call gives the same error (or `NotImplemented`, for a binary operator).

use torchfn::{
    DType, Device, Func, FuncKind, Generator, Kwargs, Outcome, Slice, Tensor, TorchFunctionMode, Types, Value,
    push_mode,
};

use super::mutate::Rng;
use super::{Verdict, functions, fuzz};

/// Inputs in the default run.
const INPUTS: usize = 6000;

/// Integers: small ones, and sizes no machine holds (never one it could allocate slowly).
const INTS: [i64; 6] = [i64::MIN, i64::MAX, 1 << 62, (1 << 40) + 3, -(1 << 40), -1];

/// Floats, with the extremes.
const FLOATS: [f64; 11] = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e300, 1e-300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

/// Strings where a mode or a name is expected.
const STRINGS: [&str; 10] = ["", "mean", "sum", "none", "bogus", "cpu", "float32", "reflect", "\0", "\u{fc}n\u{ef}"];

/// Keywords no signature has, NumPy's names for parameters, and near misses.
const KEYWORDS: [&str; 16] =
    ["bogus", "", "input_", "self", "out", "args", "*", "\0", "Dim", "dim ", "axis", "keepdims", "x", "a", "x1", "x2"];

/// A small tensor of any dtype: zero-dimensional, empty, a wrapped number, or transposed.
fn tensor(rng: &mut Rng) -> Tensor {
    let shape = rng.pick(&[&[][..], &[1], &[2], &[3], &[2, 3], &[0], &[1, 2], &[3, 1]]);
    let n: usize = shape.iter().product();
    let small = |rng: &mut Rng| rng.below(7) as i64 - 3;
    let t = match rng.pick(&DType::ALL) {
        _ if shape.is_empty() && rng.percent(30) => Ok(Tensor::scalar(small(rng))),
        DType::Bool => Tensor::from_vec((0..n).map(|_| rng.percent(50)).collect::<Vec<bool>>(), shape),
        DType::Int32 => Tensor::from_vec((0..n).map(|_| small(rng) as i32).collect::<Vec<i32>>(), shape),
        DType::Int64 => Tensor::from_vec((0..n).map(|_| small(rng)).collect::<Vec<i64>>(), shape),
        DType::Float32 => Tensor::from_vec((0..n).map(|_| small(rng) as f32 / 2.0).collect::<Vec<f32>>(), shape),
        DType::Float64 => Tensor::from_vec((0..n).map(|_| rng.pick(&FLOATS)).collect::<Vec<f64>>(), shape),
        d @ (DType::UInt8 | DType::Int8 | DType::Int16) => {
            Tensor::from_vec((0..n).map(|_| small(rng)).collect::<Vec<i64>>(), shape)
                .and_then(|t| t.to(d, false, false))
        }
        d @ (DType::Float16 | DType::BFloat16) => {
            Tensor::from_vec((0..n).map(|_| rng.pick(&FLOATS)).collect::<Vec<f64>>(), shape)
                .and_then(|t| t.to(d, false, false))
        }
    }
    .expect("the data fits the shape");
    if shape.len() == 2 && rng.percent(30) { t.transpose(0, 1).expect("two dimensions transpose") } else { t }
}

fn int(rng: &mut Rng) -> i64 {
    if rng.percent(10) { rng.pick(&INTS) } else { rng.below(7) as i64 - 2 }
}

/// A list or tuple of `len` values.
fn seq(rng: &mut Rng, items: Vec<Value>) -> Value {
    if rng.percent(50) { Value::List(items) } else { Value::Tuple(items) }
}

/// Any value at all.
fn any(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 0 { 20 } else { 22 }) {
        0 => Value::None,
        1 => Value::Bool(rng.percent(50)),
        2..=4 => Value::Int(int(rng)),
        5 => Value::Float(rng.pick(&FLOATS)),
        6 => Value::Str(rng.pick(&STRINGS).to_string()),
        7 => Value::DType(rng.pick(&DType::ALL)),
        8 => Value::Device(Device::CPU),
        9 => Value::Generator(Generator::new()),
        10..=13 => Value::Tensor(tensor(rng)),
        14 => {
            let items = (0..rng.below(4)).map(|_| Value::Int(int(rng))).collect();
            seq(rng, items)
        }
        15 => {
            let items = (0..rng.below(4)).map(|_| Value::Tensor(tensor(rng))).collect();
            seq(rng, items)
        }
        16 => {
            let mut end = || if rng.percent(40) { None } else { Some(int(rng)) };
            Value::from(Slice { start: end(), stop: end(), step: end() })
        }
        17 => Value::Ellipsis,
        18 => Value::NotImplemented,
        19 => Value::Tuple(vec![]),
        _ => {
            let items = (0..rng.below(4)).map(|_| any(rng, depth + 1)).collect();
            seq(rng, items)
        }
    }
}

/// A value of the type a parameter declares, sometimes of another.
fn of_type(rng: &mut Rng, type_name: &str) -> Value {
    if rng.percent(8) {
        return any(rng, 0);
    }
    match type_name {
        "Tensor" if rng.percent(10) => Value::Int(int(rng)),
        "Tensor" => Value::Tensor(tensor(rng)),
        "tuple of Tensors" => {
            let items = (0..rng.below(4)).map(|_| Value::Tensor(tensor(rng))).collect();
            seq(rng, items)
        }
        "int or tuple of ints" if rng.percent(50) => Value::Int(int(rng)),
        "int or tuple of ints" | "tuple of ints" => {
            let items = (0..rng.below(4)).map(|_| Value::Int(int(rng))).collect();
            seq(rng, items)
        }
        "int" => Value::Int(int(rng)),
        "float" => Value::Float(rng.pick(&FLOATS)),
        "Number" if rng.percent(50) => Value::Int(int(rng)),
        "Number" => Value::Float(rng.pick(&FLOATS)),
        "bool" => Value::Bool(rng.percent(50)),
        "str" => Value::Str(rng.pick(&STRINGS).to_string()),
        "torch.dtype" => Value::DType(rng.pick(&DType::ALL)),
        "torch.device" => Value::Device(Device::CPU),
        "torch.Generator" => Value::Generator(Generator::new()),
        _ => any(rng, 0),
    }
}

/// A mode that the call is made under: arguments that fit no signature reach it too.
#[derive(Clone, Copy, Debug)]
enum Mode {
    None,
    /// Calls the function again, as a logging mode does.
    Forwarding,
    /// Returns `NotImplemented` for everything.
    Declining,
}

impl TorchFunctionMode for Mode {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        match self {
            Mode::Forwarding => func.call(args, kwargs),
            _ => Ok(Value::NotImplemented),
        }
    }
}

/// One call: positional arguments and keywords, in order (a keyword may come twice), and the
/// mode it is made under.
pub(super) struct Call {
    func: &'static Func,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
    mode: Mode,
}

impl Call {
    /// The call as Python writes it.
    fn show(&self) -> String {
        let args = self.args.iter().map(|a| format!("{a:?}"));
        let kwargs = self.kwargs.iter().map(|(k, v)| format!("{k:?}={v:?}"));
        let call = format!("{}({})", self.func.qualified_name(), args.chain(kwargs).collect::<Vec<_>>().join(", "));
        format!("{call} under mode {:?}", self.mode)
    }
}

/// A call of one of `func`'s signatures with values of the declared types: parameters with
/// defaults now and then left out, some by keyword, the variadic one with a few values.
fn typed(rng: &mut Rng, func: &'static Func) -> Call {
    let signatures = func.signatures();
    let params = rng.pick(&signatures).params();
    let mut call = Call { func, args: Vec::new(), kwargs: Vec::new(), mode: Mode::None };
    let mut by_keyword = false;
    for p in params {
        if p.is_variadic() {
            for _ in 0..rng.below(4) {
                call.args.push(of_type(rng, &p.type_name()));
            }
            by_keyword = true;
        } else if p.default().is_some() && rng.percent(50) {
            by_keyword = true;
        } else if by_keyword || p.is_keyword_only() || rng.percent(15) {
            by_keyword = true;
            call.kwargs.push((p.name().to_string(), of_type(rng, &p.type_name())));
        } else {
            call.args.push(of_type(rng, &p.type_name()));
        }
    }
    call
}

/// `call` changed in one to three ways.
fn mutate(rng: &mut Rng, call: &mut Call) {
    let signatures = call.func.signatures();
    let names: Vec<&'static str> = signatures.iter().flat_map(|s| s.params()).map(|p| p.name()).collect();
    for _ in 0..1 + rng.below(3) {
        let (nargs, nkw) = (call.args.len(), call.kwargs.len());
        match rng.below(12) {
            0 if nargs > 0 => {
                call.args.remove(rng.below(nargs));
            }
            1 if nkw > 0 => {
                call.kwargs.remove(rng.below(nkw));
            }
            2 => {
                let at = rng.below(nargs + 1);
                call.args.insert(at, any(rng, 0));
            }
            3 if !names.is_empty() => {
                // A parameter again by keyword: given twice when it was given by position.
                let name = rng.pick(&names);
                call.kwargs.push((name.to_string(), any(rng, 0)));
            }
            4 => call.kwargs.push((rng.pick(&KEYWORDS).to_string(), any(rng, 0))),
            5 if nargs > 0 => {
                let i = rng.below(nargs);
                call.args[i] = any(rng, 0);
            }
            6 if nkw > 0 => {
                let i = rng.below(nkw);
                call.kwargs[i].1 = any(rng, 0);
            }
            7 if nargs > 1 => {
                let (i, j) = (rng.below(nargs), rng.below(nargs));
                call.args.swap(i, j);
            }
            8 if nargs > 0 => {
                // The last positional argument by the keyword of its parameter.
                let params = rng.pick(&signatures).params();
                if let Some(p) = params.get(nargs - 1).filter(|p| !p.is_variadic()) {
                    let value = call.args.pop().expect("an argument");
                    call.kwargs.push((p.name().to_string(), value));
                }
            }
            9 => {
                let extra = rng.pick(&[1, 2, 10, 63, 64, 65, 80]);
                for _ in 0..extra {
                    call.args.push(Value::Int(int(rng)));
                }
            }
            10 if nkw > 0 => {
                // The same keyword twice.
                let kw = call.kwargs[rng.below(nkw)].0.clone();
                call.kwargs.push((kw, any(rng, 0)));
            }
            _ => {
                call.args.clear();
                call.kwargs.clear();
            }
        }
    }
}

/// A random call of a random function: typed, typed and changed, or anything at all.
fn random_call(rng: &mut Rng, funcs: &[&'static Func]) -> Call {
    let func = rng.pick(funcs);
    let mode = rng.pick(&[Mode::None, Mode::None, Mode::None, Mode::Forwarding, Mode::Declining]);
    let call = match rng.below(10) {
        0..=3 => typed(rng, func),
        4..=8 => {
            let mut call = typed(rng, func);
            mutate(rng, &mut call);
            call
        }
        _ => {
            let args = (0..rng.below(6)).map(|_| any(rng, 0)).collect();
            let kwargs = (0..rng.below(3)).map(|_| (rng.pick(&KEYWORDS).to_string(), any(rng, 0))).collect();
            Call { func, args, kwargs, mode }
        }
    };
    Call { mode, ..call }
}

/// Binds `call`, then makes it, checking that both agree.
fn check(call: &Call) -> Verdict {
    let kwargs: Kwargs = call.kwargs.iter().cloned().collect();
    let func = call.func;
    let fits = func.fits(&call.args, &kwargs);
    if let Err(e) = &fits
        && e.kind() != torchfn::ErrorKind::Type
    {
        return Err(format!("arguments that do not bind give a {:?}, not a TypeError: {e}", e.kind()));
    }
    let outcome = match call.mode {
        Mode::None => func.call(&call.args, &kwargs),
        mode => {
            let _guard = push_mode(mode);
            func.call(&call.args, &kwargs)
        }
    };
    match (&fits, &outcome) {
        (Err(_), Ok(Value::NotImplemented)) if func.kind() == FuncKind::Operator => {}
        (Err(unbound), Err(e)) if e.to_string() == unbound.to_string() => {}
        (Err(unbound), other) => {
            return Err(format!(
                "arguments that do not bind ({unbound}) give something else when called: {:?}",
                other.as_ref().map(|v| v.to_string()).map_err(|e| e.to_string())
            ));
        }
        (Ok(()), _) => {}
    }
    match outcome {
        Ok(value) => {
            let _ = value.to_string();
        }
        Err(e) => {
            let _ = format!("{e:?}");
        }
    }
    Ok(fits.is_ok())
}

#[test]
fn binding_arguments_by_name_never_panics() {
    // Random functions among the calls draw from the default generator, which seeded tests share.
    let _seeded = crate::seeded();
    let funcs = functions();
    assert!(funcs.len() > 250, "only {} functions found", funcs.len());
    fuzz("bind", INPUTS, |rng| random_call(rng, &funcs), Call::show, check);
}
