//! The registry: every overridable function by namespace, one qualified name per line, with
//! a function of this program's own among torchfn's.
//!
//! Run it with `cargo run --example registry`.

use std::fmt::Write;

use torchfn::prelude::*;

/// `input * factor`; overridable like torchfn's own functions, listed under `mylib`.
#[torch_function(module = "mylib")]
pub fn scale(input: &Tensor, #[default(2.0)] factor: f64) -> Result<Tensor> {
    input * factor
}

/// The listing, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let doubled = scale(&torchfn::tensor([1.0f32, 2.0])?, 2.0)?;
    writeln!(out, "# mylib.scale([1., 2.], 2.0) = {doubled}").ok();
    for (namespace, funcs) in torchfn::overrides::get_overridable_functions() {
        writeln!(out, "# {namespace} ({} functions)", funcs.len()).ok();
        for func in funcs {
            writeln!(out, "{}{}", func.qualified_name(), func.signature()).ok();
        }
    }
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
