//! Every shader the wgpu backend can build parses and validates with naga (the WGSL compiler
//! wgpu uses), on any machine: no GPU needed.

use super::launch::Kernel;
use super::{along, expressions, index, matmul, packed, reduce, window};

/// Every specialisation of every kernel family.
fn every_kernel() -> Vec<Kernel> {
    [
        expressions::variants(),
        reduce::variants(),
        along::variants(),
        matmul::variants(),
        index::variants(),
        window::variants(),
        packed::variants(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The errors naga reports for `kernel`'s source, if any.
fn problems(kernel: &Kernel) -> Option<String> {
    let source = kernel.source();
    let module = match naga::front::wgsl::parse_str(&source) {
        Ok(module) => module,
        Err(e) => return Some(e.emit_to_string(&source)),
    };
    let mut validator =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty());
    validator.validate(&module).err().map(|e| e.emit_to_string(&source))
}

#[test]
fn every_shader_specialisation_validates() {
    let kernels = every_kernel();
    assert!(kernels.len() > 300, "only {} specialisations", kernels.len());
    let failures: Vec<String> = kernels
        .iter()
        .filter_map(|k| problems(k).map(|p| format!("{} with {:?}:\n{p}", k.name, k.defines)))
        .take(3)
        .collect();
    assert!(failures.is_empty(), "shaders that do not validate:\n\n{}", failures.join("\n\n"));
}

#[test]
fn a_broken_shader_is_caught() {
    let kernel =
        Kernel { name: "broken", template: "fn main() { let x: f32 = 1u; }", defines: Vec::new(), writes: Vec::new() };
    assert!(problems(&kernel).is_some());
}
