//! Tensor parallelism (PyTorch's `torch.distributed.tensor.parallel`): styles that shard a
//! layer's parameters over a mesh and convert its inputs and outputs, and
//! [`parallelize_module`], which applies a plan of them to a model's submodules by path.
//!
//! A feed-forward block becomes tensor parallel with its first projection column-wise and its
//! second row-wise: the input is replicated, each rank computes its share of the hidden
//! features, and one all-reduce of the second projection's partial sums gives the output
//! (backward: one all-reduce of the input's gradient). Attention splits its heads the same
//! way: queries, keys and values column-wise, the output projection row-wise; the module must
//! then work out its number of heads from the width it sees (`view(b, t, -1, head_dim)`), as
//! with PyTorch.

use std::sync::Arc;

use torchfn_nn::nn::{Module, ModuleHooks, Parameter, VisitorMut};
use torchfn_runtime::{Error, Result, Tensor};

use super::mesh::DeviceMesh;
use super::placement::Placement;
use super::{DTensor, DTensorExt, distribute_tensor};

/// How [`parallelize_module`] shards one submodule (PyTorch's `ParallelStyle`).
pub trait ParallelStyle {
    /// Shards `module`'s parameters over `mesh` and installs its input and output conversions.
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()>;
}

/// A `Linear` split by output features, or an `Embedding` by embedding dimension
/// (`ColwiseParallel`): weight `Shard(0)` (`Embedding`: `Shard(1)`), bias `Shard(0)`. The input
/// is taken as `input_layouts` and replicated; the output, sharded along its last dimension,
/// becomes `output_layouts`, and a local tensor with `use_local_output`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColwiseParallel {
    /// How a plain input is placed (`Replicate` by default).
    pub input_layouts: Placement,
    /// How the output is placed (`Shard(-1)` by default).
    pub output_layouts: Placement,
    /// Return the output's local tensor (`true` by default).
    pub use_local_output: bool,
}

impl Default for ColwiseParallel {
    fn default() -> Self {
        ColwiseParallel {
            input_layouts: Placement::Replicate,
            output_layouts: Placement::Shard(-1),
            use_local_output: true,
        }
    }
}

/// A `Linear` split by input features (`RowwiseParallel`): weight `Shard(1)`, bias replicated.
/// The input is taken as `input_layouts` and sharded along its last dimension; the output, a
/// partial sum, becomes `output_layouts` (an all-reduce for `Replicate`), and a local tensor
/// with `use_local_output`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowwiseParallel {
    /// How a plain input is placed (`Shard(-1)` by default).
    pub input_layouts: Placement,
    /// How the output is placed (`Replicate` by default).
    pub output_layouts: Placement,
    /// Return the output's local tensor (`true` by default).
    pub use_local_output: bool,
}

impl Default for RowwiseParallel {
    fn default() -> Self {
        RowwiseParallel {
            input_layouts: Placement::Shard(-1),
            output_layouts: Placement::Replicate,
            use_local_output: true,
        }
    }
}

impl ParallelStyle for ColwiseParallel {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        let weight = match module.type_name() {
            "Linear" => Placement::Shard(0),
            "Embedding" => Placement::Shard(1),
            other => {
                return Err(Error::not_implemented(format!(
                    "ColwiseParallel currently only support nn.Linear and nn.Embedding! (got {other})"
                )));
            }
        };
        shard_parameters(module, mesh, |name| if name == "weight" { weight } else { Placement::Shard(0) })?;
        convert_io(module, mesh, self.input_layouts, Placement::Replicate, self.output_layouts, self.use_local_output);
        Ok(())
    }
}

impl ParallelStyle for RowwiseParallel {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        if module.type_name() != "Linear" {
            return Err(Error::not_implemented(format!(
                "RowwiseParallel currently only support nn.Linear! (got {})",
                module.type_name()
            )));
        }
        shard_parameters(
            module,
            mesh,
            |name| if name == "weight" { Placement::Shard(1) } else { Placement::Replicate },
        )?;
        convert_io(module, mesh, self.input_layouts, Placement::Shard(-1), self.output_layouts, self.use_local_output);
        Ok(())
    }
}

/// Replaces each of `module`'s own parameters by a DTensor parameter placed as `placement`
/// says for its name.
fn shard_parameters(
    module: &mut dyn Module,
    mesh: &Arc<DeviceMesh>,
    placement: impl Fn(&str) -> Placement,
) -> Result<()> {
    struct Shard<'a, F> {
        mesh: &'a Arc<DeviceMesh>,
        placement: F,
        error: Option<Error>,
    }
    impl<F: Fn(&str) -> Placement> VisitorMut for Shard<'_, F> {
        fn parameter(&mut self, name: &str, p: &mut Parameter) {
            if self.error.is_some() || p.tensor().is_dtensor() {
                return;
            }
            let distributed = distribute_tensor(p.tensor(), self.mesh, &[(self.placement)(name)]);
            match distributed.and_then(|d| Parameter::new(&d)) {
                Ok(new) => *p = new,
                Err(e) => self.error = Some(e),
            }
        }
    }
    let mut visitor = Shard { mesh, placement, error: None };
    module.visit_mut(&mut visitor);
    visitor.error.map_or(Ok(()), Err)
}

/// Hooks that take `module`'s first input as `given` (when plain) and bring it to `wanted`,
/// and bring its output to `output`, local with `local`.
fn convert_io(
    module: &dyn Module,
    mesh: &Arc<DeviceMesh>,
    given: Placement,
    wanted: Placement,
    output: Placement,
    local: bool,
) {
    let m = mesh.clone();
    module
        .register_forward_pre_hook(move |_, inputs: &[Tensor]| {
            let mut inputs = inputs.to_vec();
            if let Some(x) = inputs.first_mut() {
                let d = if x.is_dtensor() { x.clone() } else { DTensor::from_local(x, &m, &[given])? };
                let want = wanted.normalized(d.dim()?)?;
                *x = if d.placements()? == [want] { d } else { d.redistribute(&[want])? };
            }
            Ok(Some(inputs))
        })
        .keep();
    module
        .register_forward_hook(move |_, _, outputs: &[Tensor]| {
            let mut outputs = outputs.to_vec();
            for y in outputs.iter_mut().filter(|y| y.is_dtensor()) {
                let want = output.normalized(y.dim()?)?;
                if y.placements()? != [want] {
                    *y = y.redistribute(&[want])?;
                }
                if local {
                    *y = y.to_local()?;
                }
            }
            Ok(Some(outputs))
        })
        .keep();
}

/// Applies `plan` to `module`'s submodules (`parallelize_module`): each entry names a
/// submodule by its dotted path (`blocks.0.mlp.fc`; `""` for `module` itself) and the style
/// that shards it. Collective: every rank of the mesh calls it with the same plan. A path that
/// names no submodule is an error.
pub fn parallelize_module(
    module: &mut dyn Module,
    mesh: &Arc<DeviceMesh>,
    plan: &[(&str, &dyn ParallelStyle)],
) -> Result<()> {
    for (path, style) in plan {
        let mut apply = |m: &mut dyn Module| style.apply(m, mesh);
        with_submodule(module, path, path, &mut apply)?;
    }
    Ok(())
}

/// Runs `f` on the submodule of `module` at `path` (`full` is the whole path, for the error).
fn with_submodule(
    module: &mut dyn Module,
    path: &str,
    full: &str,
    f: &mut dyn FnMut(&mut dyn Module) -> Result<()>,
) -> Result<()> {
    if path.is_empty() {
        return f(module);
    }
    struct Find<'a> {
        path: &'a str,
        full: &'a str,
        f: &'a mut dyn FnMut(&mut dyn Module) -> Result<()>,
        result: Option<Result<()>>,
    }
    impl VisitorMut for Find<'_> {
        fn module(&mut self, name: &str, m: &mut dyn Module) {
            if self.result.is_some() {
                return;
            }
            let rest = if self.path == name {
                Some("")
            } else {
                self.path.strip_prefix(name).and_then(|r| r.strip_prefix('.'))
            };
            if let Some(rest) = rest {
                self.result = Some(with_submodule(m, rest, self.full, self.f));
            }
        }
    }
    let mut find = Find { path, full, f, result: None };
    module.visit_mut(&mut find);
    find.result.unwrap_or_else(|| {
        Err(Error::value_error(format!("parallelize_module(): the module has no submodule '{full}'")))
    })
}
