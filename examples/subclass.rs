//! RFC-0001's `SubTensor`: a subclass with an attribute and no hook of its own. The default
//! hook keeps the subclass, and the attribute, through functions, methods, indexing and
//! operators from either side.
//!
//! Run it with `cargo run --example subclass`.

use std::fmt::Write;

use torchfn::prelude::*;

/// RFC-0001's `class SubTensor(torch.Tensor): a = 1`; here `a` is per instance.
#[derive(TensorSubclass)]
pub struct SubTensor {
    /// The attribute the RFC checks after every operation.
    pub a: i64,
}

fn describe(name: &str, t: &Tensor) -> String {
    let a = t.attrs::<SubTensor>().map_or_else(|| "-".to_string(), |s| s.a.to_string());
    format!("{name:<24} {:<18} isinstance(SubTensor) = {:<5}  .a = {a}", t.to_string(), t.is_instance::<SubTensor>())
}

/// RFC-0001's session, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let t = torchfn::tensor([1i64])?.as_subclass(SubTensor { a: 1 })?;
    let plain = torchfn::tensor([1i64])?;
    writeln!(out, "{}", describe("t", &t)).ok();
    writeln!(out, "{}", describe("s = t.sum()", &t.sum()?)).ok();
    writeln!(out, "{}", describe("i = t.get(0)", &t.get(0)?)).ok();
    writeln!(out, "{}", describe("s2 = &t + &plain", &(&t + &plain)?)).ok();
    writeln!(out, "{}", describe("s3 = &plain + &t", &(&plain + &t)?)).ok();
    writeln!(out, "{}", describe("torchfn::add(&plain, &t)", &torchfn::add(&plain, &t, 1)?)).ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
