//! A quantity with a unit, as a wrapper subclass: the tensor holds its values in an inner
//! tensor and its unit beside them, and the subclass's `torch_dispatch` works out each
//! operator's unit (products multiply units, sums need equal ones, `sqrt` halves them). The
//! hook sits below autograd, so the backward pass's operators keep units too: a gradient comes
//! out in the unit of the loss over the unit of the input.
//!
//! Run it with `cargo run --example units`.

use std::fmt;

use torchfn::dispatch::{Operator, WrapperSubclass};
use torchfn::prelude::*;

/// A unit: the powers of metres, seconds and kilograms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Unit(pub [i8; 3]);

/// Metres.
pub const M: Unit = Unit([1, 0, 0]);
/// Seconds.
pub const S: Unit = Unit([0, 1, 0]);
/// Kilograms.
pub const KG: Unit = Unit([0, 0, 1]);

impl Unit {
    fn times(self, other: Unit) -> Unit {
        Unit(std::array::from_fn(|i| self.0[i] + other.0[i]))
    }

    fn per(self, other: Unit) -> Unit {
        Unit(std::array::from_fn(|i| self.0[i] - other.0[i]))
    }

    fn is_dimensionless(self) -> bool {
        self == Unit::default()
    }
}

impl fmt::Display for Unit {
    /// `m`, `m^2`, `m/s^2`, `kg*m/s`; `1` without dimension.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = |sign: i8| -> Vec<String> {
            let names = ["m", "s", "kg"];
            let mut order = [2, 0, 1];
            order.sort_by_key(|&i| names[i]);
            order
                .iter()
                .filter(|&&i| self.0[i] * sign > 0)
                .map(|&i| match self.0[i].abs() {
                    1 => names[i].to_string(),
                    p => format!("{}^{p}", names[i]),
                })
                .collect()
        };
        let (up, down) = (part(1), part(-1));
        let up = if up.is_empty() { "1".to_string() } else { up.join("*") };
        if down.is_empty() { write!(f, "{up}") } else { write!(f, "{up}/{}", down.join("*")) }
    }
}

/// A tensor of values in a unit.
pub struct Quantity {
    /// The values.
    pub value: Tensor,
    /// Their unit.
    pub unit: Unit,
}

impl Quantity {
    /// `value` in `unit`, as a tensor.
    pub fn tensor(value: Tensor, unit: Unit) -> Result<Tensor> {
        let (shape, dtype, device) = (value.shape()?, value.dtype()?, value.device()?);
        Tensor::make_wrapper_subclass(Quantity { value, unit }, &shape, None, dtype, device, false)
    }

    /// `t`'s values and unit (a plain tensor is a number without dimension).
    pub fn parts(t: &Tensor) -> (Tensor, Unit) {
        match t.wrapper::<Quantity>() {
            Some(q) => (q.value.clone(), q.unit),
            None => (t.clone(), Unit::default()),
        }
    }

    /// `t` printed with its unit: `[2.0, 4.0] m/s`.
    pub fn show(t: &Tensor) -> Result<String> {
        let (value, unit) = Quantity::parts(t);
        Ok(format!("{:?} {unit}", value.to_vec::<f32>()?))
    }
}

/// The unit of `func`'s result from its operands' units (`None`: a result without unit, as
/// comparisons give); an error where the units do not fit.
fn unit_of(func: &'static Operator, units: &[Unit]) -> Result<Option<Unit>> {
    let first = units.first().copied().unwrap_or_default();
    let dimensionless = |what: &str| -> Result<Option<Unit>> {
        match units.iter().find(|u| !u.is_dimensionless()) {
            Some(u) => Err(Error::runtime_error(format!("{func}: {what} of a quantity in {u}"))),
            None => Ok(None),
        }
    };
    Ok(match func.overload_packet() {
        // A tensor made like a quantity (the ones autograd seeds a backward pass with, the
        // zeros of a view's gradient) is a plain number.
        "aten.new_full" => None,
        "aten.mul" | "aten.matmul" => Some(units.iter().fold(Unit::default(), |a, &b| a.times(b))),
        "aten.div" => Some(first.per(units.get(1).copied().unwrap_or_default())),
        "aten.reciprocal" => Some(Unit::default().per(first)),
        "aten.square" => Some(first.times(first)),
        "aten.sqrt" => {
            if first.0.iter().any(|p| p % 2 != 0) {
                return Err(Error::runtime_error(format!("{func}: the square root of {first} has no unit")));
            }
            Some(Unit(first.0.map(|p| p / 2)))
        }
        "aten.add" | "aten.sub" | "aten.maximum" | "aten.minimum" | "aten.where" | "aten.cat" => {
            if let Some(other) = units.iter().find(|&&u| u != first) {
                return Err(Error::runtime_error(format!("{func}: cannot combine {first} and {other}")));
            }
            Some(first)
        }
        "aten.exp" | "aten.log" | "aten.sin" | "aten.cos" | "aten.tanh" | "aten.sigmoid" => {
            dimensionless("the transcendental function")?
        }
        "aten.eq"
        | "aten.ne"
        | "aten.lt"
        | "aten.le"
        | "aten.gt"
        | "aten.ge"
        | "aten.isnan"
        | "aten.isinf"
        | "aten.argmax"
        | "aten.argmin"
        | "aten._local_scalar_dense" => None,
        // Views, copies, sums, negation...: the unit of the operand.
        _ => Some(first),
    })
}

impl WrapperSubclass for Quantity {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        // The units of the tensor operands; a plain tensor without dimension counts as one in
        // the quantities' unit for sums (autograd adds plain zeros and ones to gradients).
        let mut units = Vec::new();
        let values = |v: &Value| v.map_tensors(&|t| Ok(Quantity::parts(t).0));
        for t in args.iter().flat_map(|a| a.as_slice().map_or(std::slice::from_ref(a), |s| s)) {
            if let Some(t) = t.as_tensor() {
                match t.wrapper::<Quantity>() {
                    Some(q) => units.push(q.unit),
                    None if matches!(func.overload_packet(), "aten.mul" | "aten.div" | "aten.matmul") => {
                        units.push(Unit::default())
                    }
                    None => {}
                }
            }
        }
        let unit = unit_of(func, &units)?;
        let args: Vec<Value> = args.iter().map(values).collect::<Result<_>>()?;
        let mut plain = Kwargs::new();
        for (name, value) in kwargs.iter() {
            plain.insert(name, values(value)?);
        }
        let out = func.call(&args, &plain)?;
        match unit {
            Some(unit) => out.map_tensors(&|t| {
                if t.dtype()?.is_floating_point() { Quantity::tensor(t.clone(), unit) } else { Ok(t.clone()) }
            }),
            None => Ok(out),
        }
    }
}

/// A position over a time, a speed, its square summed, and the gradient of that with respect to
/// the position; then a sum that mixes units. Returns what it prints.
pub fn run() -> Result<String> {
    let x = Quantity::tensor(torchfn::tensor([2.0f32, 6.0])?, M)?.requires_grad_(true)?;
    let t = Quantity::tensor(torchfn::tensor([1.0f32, 2.0])?, S)?;
    let v = (&x / &t)?;
    let energy = (&v * &v)?.sum()?;
    energy.backward()?;
    let grad = x.grad()?.expect("x requires grad");
    let mut out = String::new();
    out += &format!("x = {}, t = {}\n", Quantity::show(&x)?, Quantity::show(&t)?);
    out += &format!("v = x / t = {}\n", Quantity::show(&v)?);
    out += &format!("e = sum(v * v) = {} (grad_fn {})\n", Quantity::show(&energy)?, energy.grad_fn()?.unwrap().name());
    out += &format!("de/dx = {}\n", Quantity::show(&grad)?);
    out += &format!("x + t: {}\n", (&x + &t).map_or_else(|e| e.to_string(), |_| "no error".into()));
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
