//! `MetadataTensor` from PyTorch's "Extending torch" note: a wrapper duck that attaches a
//! dictionary of metadata to a tensor and keeps it through every operation, by unwrapping the
//! arguments, calling the function and wrapping the result.
//!
//! Run it with `cargo run --example metadata_tensor`.

use std::collections::BTreeMap;
use std::fmt::{self, Write};

use torchfn::prelude::*;

/// A tensor with metadata.
#[derive(DuckTensor)]
pub struct MetadataTensor {
    t: Tensor,
    metadata: BTreeMap<String, String>,
}

impl MetadataTensor {
    /// Wraps `t` with `metadata`, as a `Tensor` handle every torchfn function accepts.
    pub fn tensor_like(t: Tensor, metadata: BTreeMap<String, String>) -> Tensor {
        Tensor::from_duck(MetadataTensor { t, metadata })
    }
}

impl fmt::Debug for MetadataTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self.metadata.iter().map(|(k, v)| format!("'{k}': '{v}'")).collect();
        write!(f, "Metadata:\n{{{}}}\n\ndata:\n{}", entries.join(", "), self.t)
    }
}

impl TorchFunction for MetadataTensor {
    fn torch_function(
        _cls: &'static Class,
        func: &'static Func,
        _types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        let metadata = args.iter().find_map(|a| a.duck::<MetadataTensor>()).map(|m| m.metadata.clone());
        let Some(metadata) = metadata else { return Ok(Value::NotImplemented) };
        let unwrapped: Vec<Value> =
            args.iter().map(|a| a.duck::<MetadataTensor>().map_or_else(|| a.clone(), |m| m.t.clone().into())).collect();
        Ok(match func.call(&unwrapped, kwargs)? {
            Value::Tensor(t) => MetadataTensor::tensor_like(t, metadata).into(),
            other => other,
        })
    }
}

/// The note's session, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let metadata = BTreeMap::from([("owner".to_string(), "Ministry of Silly Walks".to_string())]);
    let m = MetadataTensor::tensor_like(torchfn::tensor([[1i64, 2], [3, 4]])?, metadata);
    let t = torchfn::tensor([[1i64, 2], [1, 2]])?;
    writeln!(out, ">>> torchfn::add(&t, &m, 1)\n{}", torchfn::add(&t, &m, 1)?).ok();
    writeln!(out, ">>> torchfn::mul(&t, &m)\n{}", torchfn::mul(&t, &m)?).ok();
    writeln!(out, ">>> &(&m * 10)? + &t\n{}", (&(&m * 10)? + &t)?).ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
