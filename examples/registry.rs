//! The registry: every overridable function by namespace, one qualified name per line, with
//! a function of this program's own among torchfn's, then the ignored ones (modes see them,
//! subclasses do not) with the reason.
//!
//! Run it with `cargo run --example registry`.

use std::fmt::Write;

use torchfn::prelude::*;

/// `input + offset`; overridable like torchfn's own functions, listed under `mylib`.
#[torch_function(module = "mylib")]
pub fn shift(input: &Tensor, #[default(1.0)] offset: f64) -> Result<Tensor> {
    input + offset
}

/// The listing, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let shifted = shift(&torchfn::tensor([1.0f32, 2.0])?, 1.0)?;
    writeln!(out, "# mylib.shift([1., 2.], 1.0) = {shifted}").ok();
    for (namespace, funcs) in torchfn::overrides::get_overridable_functions() {
        writeln!(out, "# {namespace} ({} functions)", funcs.len()).ok();
        for func in funcs {
            writeln!(out, "{}{}", func.qualified_name(), func.signature()).ok();
        }
    }
    // The constructors and the like that modes see but subclasses do not (PyTorch's
    // `get_ignored_functions`).
    let ignored = torchfn::overrides::get_ignored_functions();
    writeln!(out, "# ignored ({} functions)", ignored.len()).ok();
    for func in ignored {
        writeln!(out, "{}: {}", func.qualified_name(), func.reason()).ok();
    }
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
