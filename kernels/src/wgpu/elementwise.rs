//! The elementwise family on the GPU (`gpu-shaders/elementwise.wgsl`): unary and binary
//! operations, `where`, copies and casts, fills, and writes into strided destinations (which
//! also make concatenation). One template, specialised by operation and dtypes; this file holds
//! the kinds, the operands and the launch machinery, `expressions.rs` the WGSL of each
//! operation.

use std::sync::Arc;

use crate::backend::{Array, Binary, Device, Unary};
use crate::error::{Result, bail};
use crate::types::{Category, DType, Scalar, Shape};

use super::context::Context;
use super::expressions::{CHOOSE, Expression, FILL, IDENTITY, binary_expr, unary_expr};
use super::launch::{GROUP, Kernel, groups_for, unsupported, word, words};
use super::memory::{memory_of, storage};

const TEMPLATE: &str = include_str!("../../../gpu-shaders/elementwise.wgsl");

/// The elements one workgroup computes: four a thread.
const PER_GROUP: u32 = 4 * GROUP;

/// How the GPU holds and computes a dtype: float32, int32, or bool (stored one per 32-bit
/// word, computed as WGSL's `bool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    F32,
    I32,
    Bool,
}

impl Kind {
    /// The kind a dtype computes in on the GPU: the other types map to the 32-bit kind of
    /// their category (the operation refused tensors of them; this only concerns the dtype it
    /// computes in).
    pub fn of(dtype: DType) -> Kind {
        match dtype.category() {
            Category::Floating => Kind::F32,
            Category::Integral => Kind::I32,
            Category::Bool => Kind::Bool,
        }
    }

    /// The dtype of a tensor of this kind.
    pub fn dtype(self) -> DType {
        match self {
            Kind::F32 => DType::Float32,
            Kind::I32 => DType::Int32,
            Kind::Bool => DType::Bool,
        }
    }

    /// The WGSL type of an element in memory.
    pub fn stored(self) -> &'static str {
        match self {
            Kind::F32 => "f32",
            Kind::I32 => "i32",
            Kind::Bool => "u32",
        }
    }

    /// The WGSL type values of this kind compute in.
    pub fn computed(self) -> &'static str {
        match self {
            Kind::F32 => "f32",
            Kind::I32 => "i32",
            Kind::Bool => "bool",
        }
    }

    /// The word that holds `value` converted to this kind (as `Tensor.to` converts).
    pub fn word(self, value: Scalar) -> u32 {
        match self {
            Kind::F32 => (value.to_f64() as f32).to_bits(),
            Kind::I32 => match value {
                Scalar::Float(x) => x as i32 as u32,
                other => other.to_i64() as i32 as u32,
            },
            Kind::Bool => u32::from(value.to_f64() != 0.0),
        }
    }

    /// WGSL converting `value`, an element stored as this kind, to the type `to` computes in.
    /// Floats are true when non-zero, NaN included, tested on the bits (shifting out the sign
    /// leaves both zeros false), which no compiler optimisation can fold away.
    pub fn convert(self, value: &str, to: Kind) -> String {
        match (self, to) {
            (Kind::F32, Kind::F32) | (Kind::I32, Kind::I32) => value.to_string(),
            (Kind::Bool, Kind::Bool) => format!("({value} != 0u)"),
            (_, Kind::F32) => format!("f32({value})"),
            (_, Kind::I32) => format!("i32({value})"),
            (Kind::F32, Kind::Bool) => format!("((bitcast<u32>({value}) << 1u) != 0u)"),
            (Kind::I32, Kind::Bool) => format!("({value} != 0)"),
        }
    }
}

/// WGSL storing a computed value `r` of kind `from` as an element of kind `to`.
fn stored(from: Kind, to: Kind) -> String {
    match (from, to) {
        (Kind::Bool, Kind::Bool) => "select(0u, 1u, r)".to_string(),
        // A computed bool is first the word 0 or 1, which converts as a stored bool does.
        (Kind::Bool, _) => Kind::Bool.convert("select(0u, 1u, r)", to),
        (_, Kind::Bool) => format!("select(0u, 1u, {})", from.convert("r", Kind::Bool)),
        (_, _) => from.convert("r", to),
    }
}

/// One operand of an elementwise launch.
enum Operand<'a> {
    /// A tensor in GPU memory, read through its layout (broadcast to the shape).
    Tensor(&'a Array),
    /// A value held in the parameters, of this kind.
    Scalar(u32, Kind),
}

impl<'a> Operand<'a> {
    /// `x` as an operand on `context`'s device: a tensor there, or a one-element host tensor
    /// (a Python number) as a scalar.
    fn of(x: &'a Array, context: &Context) -> Result<Operand<'a>> {
        if x.device().is_cpu() {
            if x.numel() != 1 {
                return Err(unsupported("elementwise", "a host tensor of more than one element"));
            }
            let kind = Kind::of(x.dtype);
            return Ok(Operand::Scalar(kind.word(crate::backend::host::scalar_of(x)?), kind));
        }
        if x.device().index() != context.index {
            return Err(unsupported("elementwise", format!("a tensor on {}", x.device())));
        }
        Ok(Operand::Tensor(x))
    }

    fn kind(&self) -> Kind {
        match self {
            Operand::Tensor(x) => Kind::of(x.dtype),
            Operand::Scalar(_, kind) => *kind,
        }
    }
}

/// Where the result goes.
enum Target<'a> {
    /// A new contiguous tensor of this kind.
    New(Kind),
    /// The elements of an existing tensor on the device, through its layout.
    Into(&'a Array),
}

/// One elementwise launch: `expression` (over the operands `a`, `b`, `c` and its scalars `s0`,
/// ...) computed in `compute`, for every element of `shape`.
struct Launch<'a> {
    operands: Vec<Operand<'a>>,
    compute: Kind,
    expression: Expression,
    shape: Shape,
}

/// The strides of `x` broadcast to `shape` (0 along broadcast dimensions).
fn broadcast_strides(x: &Array, shape: &Shape) -> Vec<usize> {
    let (n, m) = (shape.len(), x.layout.ndim());
    (0..n)
        .map(|d| match (d + m).checked_sub(n) {
            Some(k) if x.layout.shape[k] == shape[d] => x.layout.strides[k],
            _ => 0,
        })
        .collect()
}

/// `shape` and every operand's strides with size-one dimensions dropped and neighbouring
/// dimensions merged where every operand steps through them as one: fewer dimensions to walk.
fn coalesce(shape: &Shape, strides: &mut [Vec<usize>]) -> Vec<usize> {
    let mut sizes: Vec<usize> = Vec::new();
    let mut merged: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let joins = sizes
            .last()
            .is_some_and(|_| strides.iter().zip(&merged).all(|(s, m)| m.last().copied() == s[d].checked_mul(shape[d])));
        if joins {
            let last = sizes.len() - 1;
            sizes[last] *= shape[d];
            for (m, s) in merged.iter_mut().zip(strides.iter()) {
                let k = m.len() - 1;
                m[k] = s[d];
            }
        } else {
            sizes.push(shape[d]);
            for (m, s) in merged.iter_mut().zip(strides.iter()) {
                m.push(s[d]);
            }
        }
    }
    for (s, m) in strides.iter_mut().zip(merged) {
        *s = m;
    }
    sizes
}

/// What the text of one elementwise kernel depends on.
pub struct Spec<'e> {
    /// The kind of each operand (`a`, `b`, `c`), and whether it is a scalar parameter.
    pub operands: Vec<(Kind, bool)>,
    /// The kind the operands and scalars are converted to and the expression computes in.
    pub compute: Kind,
    /// The operation: its text, the kind of its result and the kinds of its scalars (their
    /// words are parameters, not part of the text).
    pub expression: &'e Expression,
    /// The kind of the output's elements.
    pub out: Kind,
    /// Whether every tensor (and the output) is contiguous over the shape.
    pub fast: bool,
}

/// WGSL reading parameter word `at` as a value of `kind`.
fn parameter(at: &str, kind: Kind) -> String {
    match kind {
        Kind::F32 => format!("bitcast<f32>({at})"),
        Kind::I32 => format!("bitcast<i32>({at})"),
        Kind::Bool => at.to_string(),
    }
}

impl Spec<'_> {
    /// The kernel of this specialisation.
    pub fn kernel(&self) -> Kernel {
        let tensors = self.operands.iter().filter(|(_, scalar)| !scalar).count();
        let position = |k: usize| {
            if self.fast {
                format!("params[operand({k}u, ndim) + ndim] + i")
            } else {
                format!("position(i, ndim, 2u, operand({k}u, ndim), params[operand({k}u, ndim) + ndim])")
            }
        };
        let scalar_at = |j: usize| format!("params[operand({}u, ndim) + {j}u]", tensors + 1);
        let (mut loads, mut bindings) = (Vec::new(), Vec::new());
        let (mut tensor, mut scalar) = (0, 0);
        for (&(kind, is_scalar), name) in self.operands.iter().zip(["a", "b", "c"]) {
            let value = if is_scalar {
                scalar += 1;
                parameter(&scalar_at(scalar - 1), kind)
            } else {
                tensor += 1;
                bindings.push(format!(
                    "@group(0) @binding({tensor}) var<storage, read> in_{name}: array<{}>;",
                    kind.stored()
                ));
                format!("in_{name}[{}]", position(tensor - 1))
            };
            // `where`'s condition, `c`, is always read as a bool.
            let to = if name == "c" { Kind::Bool } else { self.compute };
            loads.push(format!("let {name}: {} = {};", to.computed(), kind.convert(&value, to)));
        }
        for (j, &(_, kind)) in self.expression.scalars.iter().enumerate() {
            let value = parameter(&scalar_at(scalar + j), kind);
            loads.push(format!("let s{j}: {} = {};", self.compute.computed(), kind.convert(&value, self.compute)));
        }
        Kernel {
            name: "elementwise",
            template: TEMPLATE,
            defines: vec![
                ("BINDINGS", bindings.join("\n")),
                ("OUT_BINDING", (tensors + 1).to_string()),
                ("OUT", self.out.stored().to_string()),
                ("LOADS", loads.join("\n    ")),
                ("EXPR", self.expression.text.clone()),
                ("STORE", stored(self.expression.result, self.out)),
                ("TARGET", position(tensors)),
            ],
            writes: std::iter::repeat_n(false, tensors).chain([true]).collect(),
        }
    }
}

impl Launch<'_> {
    /// Records the launch, writing into `target`; returns the array written.
    fn run(self, context: &Arc<Context>, device: Device, target: Target<'_>) -> Result<Array> {
        let n = self.shape.checked_numel().ok_or_else(|| unsupported("elementwise", "a shape too large"))?;
        let memory = match target {
            Target::New(_) => Some(context.alloc("elementwise", n)?),
            Target::Into(_) => None,
        };
        if n == 0 {
            // Nothing to compute; the strides of an empty shape may be anything.
            return match (memory, target) {
                (Some(memory), Target::New(kind)) => {
                    Ok(Array::contiguous(storage(device, memory), self.shape, kind.dtype()))
                }
                (_, Target::Into(dst)) => Ok(dst.clone()),
                (None, Target::New(_)) => Err(unsupported("elementwise", "no output")),
            };
        }
        let (out, out_strides, out_offset) = match target {
            Target::New(kind) => (kind, self.shape.contiguous_strides().to_vec(), 0),
            Target::Into(dst) => (Kind::of(dst.dtype), dst.layout.strides.to_vec(), dst.layout.offset),
        };
        let tensors: Vec<&Array> = self
            .operands
            .iter()
            .filter_map(|o| match o {
                Operand::Tensor(x) => Some(*x),
                Operand::Scalar(..) => None,
            })
            .collect();
        let mut strides: Vec<Vec<usize>> = tensors.iter().map(|x| broadcast_strides(x, &self.shape)).collect();
        strides.push(out_strides);
        let sizes = coalesce(&self.shape, &mut strides);
        let fast = sizes.len() <= 1 && strides.iter().all(|s| s.iter().all(|&x| x == 1));
        let mut params = vec![word(n)?, word(sizes.len())?];
        params.extend(words(sizes)?);
        let offsets = tensors.iter().map(|x| x.layout.offset).chain([out_offset]);
        for (s, offset) in strides.iter().zip(offsets) {
            params.extend(words(s.iter().copied().chain([offset]))?);
        }
        for operand in &self.operands {
            if let Operand::Scalar(bits, _) = operand {
                params.push(*bits);
            }
        }
        params.extend(self.expression.scalars.iter().map(|(bits, _)| *bits));
        let spec = Spec {
            operands: self.operands.iter().map(|o| (o.kind(), matches!(o, Operand::Scalar(..)))).collect(),
            compute: self.compute,
            expression: &self.expression,
            out,
            fast,
        };
        let mut buffers: Vec<&wgpu::Buffer> = Vec::new();
        for x in &tensors {
            buffers.push(memory_of(&x.storage)?.buffer());
        }
        match (&memory, &target) {
            (Some(memory), _) => buffers.push(memory.buffer()),
            (None, Target::Into(dst)) => buffers.push(memory_of(&dst.storage)?.buffer()),
            (None, Target::New(_)) => return Err(unsupported("elementwise", "no output")),
        }
        context.launch(&spec.kernel(), &params, &buffers, groups_for(n, PER_GROUP)?)?;
        match (memory, target) {
            (Some(memory), _) => Ok(Array::contiguous(storage(device, memory), self.shape, out.dtype())),
            (None, Target::Into(dst)) => Ok(dst.clone()),
            (None, Target::New(_)) => Err(unsupported("elementwise", "no output")),
        }
    }
}

/// True when a result of `shape` and `kind` can be written straight into `out`: contiguous,
/// of that shape and dtype, and sharing no memory with the operands (a kernel cannot bind one
/// buffer for reading and writing at once).
fn writable(out: Option<&Array>, shape: &Shape, kind: Kind, operands: &[&Array]) -> bool {
    out.is_some_and(|o| {
        o.layout.is_contiguous()
            && o.layout.shape == *shape
            && o.dtype == kind.dtype()
            && operands.iter().all(|x| !x.shares(o))
    })
}

/// `op` on each element of `x`, computed in `dtype`.
pub fn unary(
    context: &Arc<Context>,
    device: Device,
    x: &Array,
    op: Unary,
    dtype: DType,
    out: Option<&Array>,
) -> Result<Array> {
    let compute = Kind::of(dtype);
    let expression = unary_expr(op, compute)?;
    let result = expression.result;
    let launch =
        Launch { operands: vec![Operand::of(x, context)?], compute, expression, shape: x.layout.shape.clone() };
    let target = match out {
        Some(o) if writable(out, &x.layout.shape, result, &[x]) => Target::Into(o),
        _ => Target::New(result),
    };
    launch.run(context, device, target)
}

/// `op` on the elements of `a` and `b` broadcast to `shape`, computed in `dtype`.
#[allow(clippy::too_many_arguments)]
pub fn binary(
    context: &Arc<Context>,
    device: Device,
    (a, b): (&Array, &Array),
    shape: &Shape,
    op: Binary,
    dtype: DType,
    out: Option<&Array>,
) -> Result<Array> {
    let compute = Kind::of(dtype);
    let expression = binary_expr(op, compute)?;
    let result = expression.result;
    let operands = vec![Operand::of(a, context)?, Operand::of(b, context)?];
    let launch = Launch { operands, compute, expression, shape: shape.clone() };
    let target = match out {
        Some(o) if writable(out, shape, result, &[a, b]) => Target::Into(o),
        _ => Target::New(result),
    };
    launch.run(context, device, target)
}

/// `a` where `condition` is true, `b` elsewhere, broadcast to `shape`, in `dtype`.
pub fn select(
    context: &Arc<Context>,
    device: Device,
    (condition, a, b): (&Array, &Array, &Array),
    shape: &Shape,
    dtype: DType,
) -> Result<Array> {
    let compute = Kind::of(dtype);
    let operands = vec![Operand::of(a, context)?, Operand::of(b, context)?, Operand::of(condition, context)?];
    let launch = Launch { operands, compute, expression: Expression::new(CHOOSE, compute), shape: shape.clone() };
    launch.run(context, device, Target::New(compute))
}

/// The identity launch: `x`'s elements converted to `kind`.
fn identity<'a>(context: &Context, x: &'a Array, kind: Kind) -> Result<Launch<'a>> {
    Ok(Launch {
        operands: vec![Operand::of(x, context)?],
        compute: kind,
        expression: Expression::new(IDENTITY, kind),
        shape: x.layout.shape.clone(),
    })
}

/// A contiguous copy of `x` converted to `dtype`.
pub fn copy(context: &Arc<Context>, device: Device, x: &Array, dtype: DType) -> Result<Array> {
    let kind = Kind::of(dtype);
    identity(context, x, kind)?.run(context, device, Target::New(kind))
}

/// Writes `src` (of `dst`'s shape) into `dst` through its layout, converted to its dtype. A
/// source sharing the destination's memory is copied first.
pub fn assign(context: &Arc<Context>, device: Device, dst: &Array, src: &Array) -> Result<()> {
    let copied;
    let src = if src.shares(dst) {
        copied = copy(context, device, src, src.dtype)?;
        &copied
    } else {
        src
    };
    if src.layout.shape != dst.layout.shape {
        bail!(Runtime, "internal error: assigning {:?} into {:?}", src.layout.shape, dst.layout.shape);
    }
    identity(context, src, Kind::of(dst.dtype))?.run(context, device, Target::Into(dst)).map(|_| ())
}

/// A tensor of `shape` filled with `value` converted to `dtype`.
pub fn fill(context: &Arc<Context>, device: Device, shape: &Shape, value: Scalar, dtype: DType) -> Result<Array> {
    let kind = Kind::of(dtype);
    let fill = Expression { scalars: vec![(kind.word(value), kind)], ..Expression::new(FILL, kind) };
    let launch = Launch { operands: Vec::new(), compute: kind, expression: fill, shape: shape.clone() };
    launch.run(context, device, Target::New(kind))
}

/// `pieces` joined along `dim` into a new tensor of `shape`: each piece written into its slice.
pub fn concat(
    context: &Arc<Context>,
    device: Device,
    pieces: &[&Array],
    dim: usize,
    shape: &Shape,
    dtype: DType,
) -> Result<Array> {
    let kind = Kind::of(dtype);
    let memory = context.alloc("cat", shape.numel())?;
    let out = Array::contiguous(storage(device, memory), shape.clone(), kind.dtype());
    let mut at = 0;
    for piece in pieces {
        let n = piece.layout.shape[dim];
        let mut layout = out.layout.clone();
        layout.offset = at * layout.strides[dim];
        layout.shape = layout.shape.iter().enumerate().map(|(d, &s)| if d == dim { n } else { s }).collect();
        if layout.numel() > 0 {
            let slice = out.with_layout(layout);
            identity(context, piece, kind)?.run(context, device, Target::Into(&slice))?;
        }
        at += n;
    }
    Ok(out)
}
