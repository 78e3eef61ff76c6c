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
//!
//! Sequence parallelism (Megatron's, as PyTorch's tutorials plan a LLaMA) keeps the residual
//! stream split along the sequence between the blocks: [`SequenceParallel`] norms each rank's
//! positions with replicated parameters, [`PrepareModuleInput`] gathers a block's input before
//! its column-wise projections, and the row-wise projections end in a reduce-scatter
//! (`RowwiseParallel { output_layouts: Shard(1), .. }`) instead of an all-reduce. The token
//! embedding can be split by rows ([`RowwiseParallel`] on an `Embedding`): each rank looks up
//! the tokens in its share of the vocabulary.

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

/// A `Linear` split by input features, or an `Embedding` by rows (the vocabulary;
/// `RowwiseParallel`): `Linear` weight `Shard(1)` and bias replicated, `Embedding` weight
/// `Shard(0)`. The input is taken as `input_layouts` and brought to `Shard(-1)` (`Linear`) or
/// `Replicate` (`Embedding`: the indices, each rank looking up those in its rows); the output,
/// a partial sum, becomes `output_layouts` (an all-reduce for `Replicate`, a reduce-scatter for
/// `Shard`), and a local tensor with `use_local_output`.
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
        let input = Conversion::to(self.input_layouts, Placement::Replicate);
        let output = Conversion::of_dtensor(self.output_layouts);
        convert_io(module, mesh, vec![input], false, vec![output], self.use_local_output);
        Ok(())
    }
}

impl ParallelStyle for RowwiseParallel {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        // The weight's placement, and where the input goes (a bias is replicated).
        let (weight, wanted) = match module.type_name() {
            "Linear" => (Placement::Shard(1), Placement::Shard(-1)),
            "Embedding" => (Placement::Shard(0), Placement::Replicate),
            other => {
                return Err(Error::not_implemented(format!(
                    "RowwiseParallel currently only support nn.Linear and nn.Embedding! (got {other})"
                )));
            }
        };
        shard_parameters(module, mesh, |name| if name == "weight" { weight } else { Placement::Replicate })?;
        let input = Conversion::to(self.input_layouts, wanted);
        let output = Conversion::of_dtensor(self.output_layouts);
        convert_io(module, mesh, vec![input], false, vec![output], self.use_local_output);
        Ok(())
    }
}

/// A module that works on each position alone (a `LayerNorm`, an `RMSNorm`, a `Dropout`),
/// run on each rank's share of the sequence (`SequenceParallel`): its parameters replicated,
/// its first input taken as split along `sequence_dim` (a plain tensor is this rank's piece; a
/// DTensor placed otherwise is redistributed), its output left so split, a DTensor unless
/// `use_local_output`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SequenceParallel {
    /// The sequence dimension (1 by default: `[batch, sequence, features]`).
    pub sequence_dim: i64,
    /// Return the output's local tensor (`false` by default).
    pub use_local_output: bool,
}

impl Default for SequenceParallel {
    fn default() -> Self {
        SequenceParallel { sequence_dim: 1, use_local_output: false }
    }
}

impl ParallelStyle for SequenceParallel {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        shard_parameters(module, mesh, |_| Placement::Replicate)?;
        let split = Placement::Shard(self.sequence_dim);
        let output = Conversion { given: None, wanted: None };
        convert_io(module, mesh, vec![Conversion::to(split, split)], false, vec![output], self.use_local_output);
        Ok(())
    }
}

/// Converts a module's inputs before its forward (`PrepareModuleInput`): input `i`, when
/// `input_layouts[i]` is given, is taken as so placed (a plain tensor; a DTensor keeps its own
/// placement) and brought to `desired_input_layouts[i]`; an input without a layout (`None`, or
/// past the list) passes unchanged. With `use_local_output` the converted inputs reach the
/// module as local tensors. Its parameters stay as they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrepareModuleInput {
    /// How each plain input is placed (`None`: left alone).
    pub input_layouts: Vec<Option<Placement>>,
    /// Where each input is brought (`None` where `input_layouts` is).
    pub desired_input_layouts: Vec<Option<Placement>>,
    /// Give the module the local tensors (`false` by default).
    pub use_local_output: bool,
}

/// Converts a module's outputs after its forward (`PrepareModuleOutput`), as
/// [`PrepareModuleInput`] its inputs: output `i` is taken as `output_layouts[i]` (a plain
/// tensor; a DTensor keeps its own placement) and brought to `desired_output_layouts[i]`, and becomes a local
/// tensor with `use_local_output`.
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareModuleOutput {
    /// How each plain output is placed (`None`: left alone).
    pub output_layouts: Vec<Option<Placement>>,
    /// Where each output is brought (`None` where `output_layouts` is).
    pub desired_output_layouts: Vec<Option<Placement>>,
    /// Return the local tensors (`true` by default).
    pub use_local_output: bool,
}

impl Default for PrepareModuleOutput {
    fn default() -> Self {
        PrepareModuleOutput { output_layouts: Vec::new(), desired_output_layouts: Vec::new(), use_local_output: true }
    }
}

/// The conversions of [`PrepareModuleInput`] and [`PrepareModuleOutput`]: one per layout, a
/// mismatch in the lists' lengths or a layout without its desired one an error naming the style.
fn conversions(style: &str, given: &[Option<Placement>], wanted: &[Option<Placement>]) -> Result<Vec<Conversion>> {
    if given.len() != wanted.len() {
        return Err(Error::value_error(format!(
            "{style}: the layouts ({}) and the desired layouts ({}) must have the same length",
            given.len(),
            wanted.len()
        )));
    }
    given
        .iter()
        .zip(wanted)
        .map(|(&given, &wanted)| match (given, wanted) {
            (Some(_), None) | (None, Some(_)) => Err(Error::value_error(format!(
                "{style}: a layout ({given:?}) and its desired layout ({wanted:?}) are both given or both None"
            ))),
            _ => Ok(Conversion { given, wanted }),
        })
        .collect()
}

impl ParallelStyle for PrepareModuleInput {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        let inputs = conversions("PrepareModuleInput", &self.input_layouts, &self.desired_input_layouts)?;
        convert_io(module, mesh, inputs, self.use_local_output, Vec::new(), false);
        Ok(())
    }
}

impl ParallelStyle for PrepareModuleOutput {
    fn apply(&self, module: &mut dyn Module, mesh: &Arc<DeviceMesh>) -> Result<()> {
        let outputs = conversions("PrepareModuleOutput", &self.output_layouts, &self.desired_output_layouts)?;
        convert_io(module, mesh, Vec::new(), false, outputs, self.use_local_output);
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

/// How one input or output of a module is converted: a plain tensor is taken as placed
/// `given` (and left plain when `None`), then the DTensor brought to `wanted` (left as it is
/// when `None`).
#[derive(Clone, Copy, Debug)]
struct Conversion {
    given: Option<Placement>,
    wanted: Option<Placement>,
}

impl Conversion {
    /// A plain tensor taken as `given`, brought to `wanted`.
    fn to(given: Placement, wanted: Placement) -> Conversion {
        Conversion { given: Some(given), wanted: Some(wanted) }
    }

    /// A DTensor brought to `wanted`; a plain tensor left alone.
    fn of_dtensor(wanted: Placement) -> Conversion {
        Conversion { given: None, wanted: Some(wanted) }
    }

    /// `x` converted, and whether it was (a DTensor now).
    fn apply(&self, x: &Tensor, mesh: &Arc<DeviceMesh>) -> Result<Option<Tensor>> {
        let d = match (x.is_dtensor(), self.given) {
            (true, _) => x.clone(),
            (false, Some(given)) => DTensor::from_local(x, mesh, &[given])?,
            (false, None) => return Ok(None),
        };
        let Some(wanted) = self.wanted else { return Ok(Some(d)) };
        let want = wanted.normalized(d.dim()?)?;
        Ok(Some(if d.placements()? == [want] { d } else { d.redistribute(&[want])? }))
    }
}

/// Hooks that convert `module`'s inputs before its forward and its outputs after it, the
/// `k`-th by the `k`-th conversion (those past the lists pass unchanged); the converted ones
/// become local tensors where `*_local` says.
fn convert_io(
    module: &dyn Module,
    mesh: &Arc<DeviceMesh>,
    inputs: Vec<Conversion>,
    inputs_local: bool,
    outputs: Vec<Conversion>,
    outputs_local: bool,
) {
    fn convert(
        mesh: &Arc<DeviceMesh>,
        values: &[Tensor],
        conversions: &[Conversion],
        local: bool,
    ) -> Result<Option<Vec<Tensor>>> {
        let mut values = values.to_vec();
        for (x, conversion) in values.iter_mut().zip(conversions) {
            if let Some(d) = conversion.apply(x, mesh)? {
                *x = if local { d.to_local()? } else { d };
            }
        }
        Ok(Some(values))
    }
    if !inputs.is_empty() {
        let m = mesh.clone();
        module.register_forward_pre_hook(move |_, values: &[Tensor]| convert(&m, values, &inputs, inputs_local)).keep();
    }
    if !outputs.is_empty() {
        let m = mesh.clone();
        module
            .register_forward_hook(move |_, _, values: &[Tensor]| convert(&m, values, &outputs, outputs_local))
            .keep();
    }
}

/// Applies `plan` to `module`'s submodules (`parallelize_module`): each entry names a
/// submodule by its dotted path (`blocks.0.mlp.fc`; `""` for `module` itself) and the style
/// that shards it. Collective: every rank of the mesh calls it with the same plan. A path that
/// names no submodule is an error.
///
/// The styles convert inputs and outputs with module hooks kept for good, and a module's
/// hooks are known by where it lives (see `torchfn::nn`'s hooks): parallelize a module where
/// it will stay, and do not build another in its place once it is dropped.
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
