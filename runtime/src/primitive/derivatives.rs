//! The derivatives table: for each primitive, what its node saves and the gradients of its
//! inputs, written with primitives (so that with `create_graph` the backward records too and
//! differentiates again). Public operations differentiate through the primitives they are
//! made of; tie and singular-point rules follow PyTorch's (see the README's autograd notes).

use std::borrow::Cow;
use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};

use super::{Keep, reshape, sum_keepdim};
use crate::autograd::{Backward, Edge, Node, OutputMeta, meta};
use crate::backend::{Binary, Reduce, Scan, Unary, Window};
use crate::error::{Error, Result};
use crate::tensor::{DType, Layout, Scalar, Shape, Tensor};

/// A recorded primitive and what its backward needs besides the saved tensors.
#[derive(Clone)]
pub(crate) enum Op {
    Unary(Unary),
    /// `number`: the second operand was a Python number (clamp's tie rule differs).
    Binary {
        op: Binary,
        number: bool,
    },
    Select,
    Reduce {
        op: Reduce,
        dims: Vec<usize>,
    },
    Scan {
        op: Scan,
        dim: usize,
    },
    Matmul,
    IndexSelect {
        dim: usize,
    },
    Gather {
        dim: usize,
    },
    ScatterAdd {
        dim: usize,
    },
    Concat {
        dim: usize,
        sizes: Vec<usize>,
    },
    Softmax {
        dim: usize,
        log: bool,
    },
    Conv2d {
        groups: usize,
        window: Window,
    },
    MaxPool2d {
        input: Shape,
    },
    Copy,
    Transfer,
    View {
        input: Shape,
        relative: Layout,
    },
    Embed {
        relative: Layout,
    },
    /// The pieces of the input along a dimension, one output each (`split`, `unbind`).
    Views(super::Pieces),
    /// An in-place write into a view: the base's new history (inputs: the base before, the
    /// written values).
    CopySlices {
        relative: Layout,
    },
}

/// Generates, from the unary table's rows, what autograd needs of each unary kernel: what
/// its node saves (`unary_keeps`), its backward's name (`unary_name`) and its gradient
/// (`unary_gradient`).
macro_rules! unary_derivatives {
    ($(
        $(#[$doc:meta])*
        $variant:ident $(($arg:ident))? => $op:ident $(($key:literal, $val:expr))? $(= $schema:expr)?,
        $backward:literal $(($keep:ident) $grad:expr)?;
    )*) => {
        /// What `op`'s node saves: its input (position 0), its output, or nothing.
        pub(super) fn unary_keeps(op: Unary) -> Keep {
            match op {
                $(Unary::$variant { .. } => keep!($($keep)?),)*
            }
        }

        /// PyTorch's name of `op`'s backward, less `Backward0`.
        fn unary_name(op: Unary) -> &'static str {
            match op {
                $(Unary::$variant { .. } => $backward,)*
            }
        }

        /// The gradient of `op` (recorded with `saved`: its input, its output, or nothing)
        /// for `g`.
        fn unary_gradient(op: Unary, g: &Tensor, saved: &[Tensor]) -> Result<Tensor> {
            use Unary::*;
            let s = saved.first().unwrap_or(g);
            match op {
                $(Unary::$variant { .. } => gradient!(op, g, s $(, $grad)?),)*
            }
        }
    };
}

/// What a node saves, by the unary table's word for it.
macro_rules! keep {
    (input) => {
        Keep { inputs: &[0], ..Keep::default() }
    };
    (output) => {
        Keep { output: true, ..Keep::default() }
    };
    ($(nothing)?) => {
        Keep::default()
    };
}

/// A unary table row's gradient: its closure applied to `g` and the saved tensor, or the
/// error for a function without one.
macro_rules! gradient {
    ($op:ident, $g:ident, $s:ident, $grad:expr) => {
        apply_gradient($grad, $g, $s)
    };
    ($op:ident, $g:ident, $s:ident) => {
        Err(Error::runtime_error(format!("the derivative for '{}' is not implemented", unary_name($op))))
    };
}

fn apply_gradient(
    gradient: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
    g: &Tensor,
    saved: &Tensor,
) -> Result<Tensor> {
    gradient(g, saved)
}

crate::dispatch::unary_table!(unary_derivatives);

/// GELU's gradient, `Φ(x) + x φ(x)`.
fn gelu_gradient(g: &Tensor, x: &Tensor) -> Result<Tensor> {
    let cdf = scale(&plus(&un(&scale(x, 1.0 / SQRT_2)?, Unary::Erf)?, 1.0)?, 0.5)?;
    let pdf = scale(&un(&scale(&mul(x, x)?, -0.5)?, Unary::Exp)?, 1.0 / (2.0 * PI).sqrt())?;
    mul(g, &add(&cdf, &mul(x, &pdf)?)?)
}

/// The tanh-approximated GELU's gradient: `0.5 (1 + t) + 0.5 x (1 - t²) k (1 + 3c x²)`, with
/// `t = tanh(k (x + c x³))`.
fn gelu_tanh_gradient(g: &Tensor, x: &Tensor) -> Result<Tensor> {
    let (k, c) = ((2.0 / PI).sqrt(), 0.044715);
    let x2 = mul(x, x)?;
    let t = un(&scale(&add(x, &scale(&mul(&x2, x)?, c)?)?, k)?, Unary::Tanh)?;
    let left = scale(&plus(&t, 1.0)?, 0.5)?;
    let right = mul(&scale(x, 0.5 * k)?, &mul(&minus_from(1.0, &mul(&t, &t)?)?, &plus(&scale(&x2, 3.0 * c)?, 1.0)?)?)?;
    mul(g, &add(&left, &right)?)
}

/// What a binary node saves: both operands where a gradient reads them, and `pow`'s output.
pub(super) fn binary_keeps(op: Binary) -> Keep {
    use Binary::*;
    match op {
        Pow => Keep { inputs: &[0, 1], output: true, ..Keep::default() },
        Mul | Div | Maximum | Minimum | Atan2 | Fmod | Remainder | ClampMin | ClampMax => {
            Keep { inputs: &[0, 1], ..Keep::default() }
        }
        _ => Keep::default(),
    }
}

impl Backward for Op {
    fn name(&self) -> Cow<'static, str> {
        let name: &str = match self {
            Op::Unary(op) => return Cow::Owned(format!("{}Backward0", unary_name(*op))),
            Op::Binary { op, number } => match op {
                Binary::Add(_) => "AddBackward0",
                Binary::Sub(_) => "SubBackward0",
                Binary::Mul => "MulBackward0",
                Binary::Div => "DivBackward0",
                Binary::DivTrunc | Binary::DivFloor => "DivBackward1",
                Binary::Maximum => "MaximumBackward0",
                Binary::Minimum => "MinimumBackward0",
                Binary::Pow if *number => "PowBackward0",
                Binary::Pow => "PowBackward1",
                Binary::Atan2 => "Atan2Backward0",
                Binary::Fmod => "FmodBackward0",
                Binary::Remainder => "RemainderBackward0",
                Binary::ClampMin => "ClampMinBackward0",
                Binary::ClampMax => "ClampMaxBackward0",
                _ => "NotDifferentiable",
            },
            Op::Select => "WhereBackward0",
            Op::Reduce { op, .. } => match op {
                Reduce::Sum => "SumBackward0",
                Reduce::Mean => "MeanBackward0",
                Reduce::Prod => "ProdBackward0",
                Reduce::Max => "MaxBackward1",
                Reduce::Min => "MinBackward1",
                _ => "NotDifferentiable",
            },
            Op::Scan { op: Scan::Sum, .. } => "CumsumBackward0",
            Op::Scan { .. } => "CumprodBackward0",
            Op::Matmul => "MmBackward0",
            Op::IndexSelect { .. } => "IndexSelectBackward0",
            Op::Gather { .. } => "GatherBackward0",
            Op::ScatterAdd { .. } => "ScatterAddBackward0",
            Op::Concat { .. } => "CatBackward0",
            Op::Softmax { log: false, .. } => "SoftmaxBackward0",
            Op::Softmax { log: true, .. } => "LogSoftmaxBackward0",
            Op::Conv2d { .. } => "ConvolutionBackward0",
            Op::MaxPool2d { .. } => "MaxPool2DWithIndicesBackward0",
            Op::Copy => "CloneBackward0",
            Op::Transfer => "ToCopyBackward0",
            Op::View { .. } => "ViewBackward0",
            Op::Embed { .. } => "AsStridedScatterBackward0",
            Op::Views(pieces) => pieces.name,
            Op::CopySlices { .. } => "CopySlices",
        };
        Cow::Borrowed(name)
    }

    fn shares_views(&self) -> bool {
        matches!(self, Op::Views(_))
    }

    fn apply(&self, node: &Node, grads: Vec<Option<Tensor>>, saved: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        if let Op::Views(pieces) = self {
            // Every piece's gradient is given (`materialize_grads`: zeros where none reached it).
            let grads: Vec<Tensor> = grads.into_iter().collect::<Option<_>>().ok_or_else(|| {
                Error::runtime_error("backward: a piece of a split has no gradient (they are materialized)")
            })?;
            let want = node.next.first().and_then(|e| e.as_ref()).map(|e| &e.node.outputs[e.output_nr]);
            return Ok(vec![match want {
                Some(want) => Some(fit(super::views_gradient(*pieces, &grads)?, want)?),
                None => None,
            }]);
        }
        let g = grads
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| Error::runtime_error("backward: no gradient for the output"))?;
        let inputs: Vec<Option<&OutputMeta>> =
            node.next.iter().map(|e| e.as_ref().map(|e| &e.node.outputs[e.output_nr])).collect();
        let raw = self.gradients(&g, &saved, &inputs)?;
        raw.into_iter()
            .zip(&inputs)
            .map(|(grad, want)| {
                Ok(match (grad, want) {
                    (Some(grad), Some(want)) => Some(fit(grad, want)?),
                    _ => None,
                })
            })
            .collect()
    }
}

/// A gradient computed in the node's dtype, brought to its input's shape (summing what was
/// broadcast), dtype and device.
fn fit(grad: Tensor, want: &OutputMeta) -> Result<Tensor> {
    // For a plain input, a gradient batched by a vmap that has returned is the sum over its
    // examples (the input was shared by them: broadcast over the batch).
    let wrapper = crate::dispatch::is_wrapper_device;
    let grad = match wrapper(grad.data("backward", "grad")?.device()) && !wrapper(want.device) {
        true => crate::func::sum_exited_levels(grad)?,
        false => grad,
    };
    let g = grad.data("backward", "grad")?;
    let (device, same_shape, dtype) = (g.device(), g.layout.shape == want.shape, g.dtype);
    let same_device = crate::dispatch::same_device(device, want.device);
    let mut grad = if same_device { grad } else { super::transfer(&grad, want.device, dtype)? };
    if !same_shape {
        grad = sum_to(&grad, &want.shape)?;
    }
    if dtype != want.dtype {
        grad = super::copy(&grad, want.dtype)?;
    }
    Ok(grad)
}

// The formulas' vocabulary: primitives in the promoted dtype, as the operations use them.

fn dtype(t: &Tensor) -> Result<DType> {
    Ok(t.data("backward", "grad")?.dtype)
}

fn bin(a: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
    super::binary(a, b, op, super::promoted(a, b)?, None)
}

fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bin(a, b, Binary::Mul)
}

fn div(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bin(a, b, Binary::Div)
}

fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bin(a, b, Binary::Add(Scalar::Int(1)))
}

fn sub(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bin(a, b, Binary::Sub(Scalar::Int(1)))
}

fn scale(a: &Tensor, factor: f64) -> Result<Tensor> {
    mul(a, &Tensor::scalar(factor))
}

fn plus(a: &Tensor, value: f64) -> Result<Tensor> {
    add(a, &Tensor::scalar(value))
}

/// `value - a`.
fn minus_from(value: f64, a: &Tensor) -> Result<Tensor> {
    add(&scale(a, -1.0)?, &Tensor::scalar(value))
}

fn un(a: &Tensor, op: Unary) -> Result<Tensor> {
    super::unary(a, op, dtype(a)?, None)
}

fn neg(a: &Tensor) -> Result<Tensor> {
    un(a, Unary::Neg)
}

/// `a op b` as 0/1 in `like`'s dtype.
fn indicator(a: &Tensor, b: &Tensor, op: Binary, like: &Tensor) -> Result<Tensor> {
    super::copy(&bin(a, b, op)?, dtype(like)?)
}

fn zeros_like(t: &Tensor) -> Result<Tensor> {
    super::new_full(t, &t.shape()?, Scalar::Int(0), dtype(t)?)
}

/// `g` where `c`, zero elsewhere.
fn only_where(c: &Tensor, g: &Tensor) -> Result<Tensor> {
    super::select(c, g, &Tensor::scalar(0.0), dtype(g)?)
}

/// `g` broadcast to `shape` (a view).
fn expand(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    let shape = shape.clone();
    super::view(g, move |l| {
        let missing = shape.len() - l.ndim();
        let strides = (0..shape.len())
            .map(|d| if d < missing || l.shape[d - missing] != shape[d] { 0 } else { l.strides[d - missing] })
            .collect();
        Ok(Layout { shape: shape.clone(), strides, offset: l.offset })
    })
}

/// The reduced result `g` (dimensions `dims` of `shape` dropped) broadcast back to `shape`.
fn expand_back(g: &Tensor, dims: &[usize], shape: &Shape) -> Result<Tensor> {
    let kept: Shape = shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect();
    expand(&reshape(g, &kept)?, shape)
}

/// `g` summed down to `shape` (undoing broadcasting).
pub(super) fn sum_to(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    let have = g.shape()?;
    let extra = have.len() - shape.len();
    let dims: Vec<usize> = (0..have.len()).filter(|&d| d < extra || (shape[d - extra] == 1 && have[d] != 1)).collect();
    if dims.is_empty() {
        return reshape(g, shape);
    }
    let summed = super::reduce(g, &dims, Reduce::Sum, dtype(g)?)?;
    reshape(&summed, shape)
}

/// `x` with its dimensions in `order`.
fn permute(x: &Tensor, order: &[usize]) -> Result<Tensor> {
    let order = order.to_vec();
    super::view(x, move |l| {
        Ok(Layout {
            shape: order.iter().map(|&d| l.shape[d]).collect(),
            strides: order.iter().map(|&d| l.strides[d]).collect(),
            offset: l.offset,
        })
    })
}

/// `x` with its last two dimensions swapped.
fn transpose_last(x: &Tensor) -> Result<Tensor> {
    let n = x.shape()?.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.swap(n - 2, n - 1);
    permute(x, &order)
}

/// `length` positions of dimension `dim` from `start`.
fn narrow(x: &Tensor, dim: usize, start: usize, length: usize) -> Result<Tensor> {
    super::view(x, move |l| {
        let mut shape = l.shape.to_vec();
        shape[dim] = length;
        let offset = if length == 0 { l.offset } else { l.offset + start * l.strides[dim] };
        Ok(Layout { shape: Shape::from(shape), strides: l.strides.clone(), offset })
    })
}

/// The integer positions `positions` as an index vector on `device`.
fn positions(positions: Vec<i64>, device: crate::backend::Device) -> Result<Tensor> {
    let n = positions.len();
    let data = match device.index_dtype() {
        DType::Int32 => crate::backend::Buffer::from_vec(positions.into_iter().map(|p| p as i32).collect()),
        _ => crate::backend::Buffer::from_vec(positions),
    };
    super::upload(device, data, Shape::from([n]))
}

/// `x` reversed along `dim`.
fn flip(x: &Tensor, dim: usize) -> Result<Tensor> {
    let shape = x.shape()?;
    if shape.contains(&0) {
        // Nothing to reverse, and no index vector as long as a huge empty dimension.
        return Ok(x.clone());
    }
    let n = shape[dim];
    let index = positions((0..n as i64).rev().collect(), x.device()?)?;
    super::index_select(x, dim, &index)
}

/// The running sums of `x` along `dim` taken from the end.
fn reverse_cumsum(x: &Tensor, dim: usize) -> Result<Tensor> {
    flip(&super::scan(&flip(x, dim)?, dim, Scan::Sum, dtype(x)?)?, dim)
}

/// `x` (`[..., k]`) repeated into `[..., k, k]` with row `i`'s element `i` replaced by 1: the
/// lanes whose products (or running products) leave one element out, exactly, zeros included.
fn leave_one_out(x: &Tensor) -> Result<Tensor> {
    let shape = x.shape()?;
    let k = shape[shape.len() - 1];
    let mut square = shape.to_vec();
    square.push(k);
    let square = Shape::from(square);
    let rows = expand(&reshape(x, &Shape::from([&shape[..shape.len() - 1], &[1, k]].concat()))?, &square)?;
    let index = positions((0..k as i64).collect(), x.device()?)?;
    let column = reshape(&index, &Shape::from([k, 1]))?;
    let diagonal = bin(&column, &index, Binary::Eq)?;
    super::select(&diagonal, &Tensor::scalar(1.0), &rows, dtype(x)?)
}

/// The products of all other elements of each lane of `x` along its last dimension.
fn products_of_others(x: &Tensor) -> Result<Tensor> {
    let last = x.shape()?.len();
    super::reduce(&leave_one_out(x)?, &[last], Reduce::Prod, dtype(x)?)
}

/// For each element of `x`, the product of the other elements of its lane over `dims` (the
/// reduced dimensions of a product), exact with zeros; in `x`'s shape.
fn products_of_others_along(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // Move the reduced dimensions last, flattened into one, and take the product of the others
    // in each lane.
    let shape = x.shape()?;
    let rest: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let order: Vec<usize> = rest.iter().chain(dims).copied().collect();
    let moved = permute(x, &order)?;
    let lanes: Vec<usize> = rest.iter().map(|&d| shape[d]).chain([dims.iter().map(|&d| shape[d]).product()]).collect();
    let others = products_of_others(&reshape(&moved, &Shape::from(lanes))?)?;
    let moved_shape: Shape = order.iter().map(|&d| shape[d]).collect();
    let mut inverse = vec![0; order.len()];
    for (i, &d) in order.iter().enumerate() {
        inverse[d] = i;
    }
    permute(&reshape(&others, &moved_shape)?, &inverse)
}

/// The cumprod Jacobian of `x` along its last dimension, `[..., i, j]`: `∂y_j/∂x_i =
/// Π_{k ≤ j, k ≠ i} x_k` where `j ≥ i`, zero elsewhere (exact with zeros).
fn cumprod_jacobian(x: &Tensor) -> Result<Tensor> {
    let shape = x.shape()?;
    let last = shape.len() - 1;
    let k = shape[last];
    let running = super::scan(&leave_one_out(x)?, last + 1, Scan::Prod, dtype(x)?)?; // [..., i, j]
    let index = positions((0..k as i64).collect(), x.device()?)?;
    let later = bin(&index, &reshape(&index, &Shape::from([k, 1]))?, Binary::Ge)?; // j >= i
    super::select(&later, &running, &Tensor::scalar(0.0), dtype(x)?)
}

/// The gradient of the running products of `x` along its last dimension:
/// `Σ_{j ≥ i} g_j ∂y_j/∂x_i`.
fn cumprod_gradient(x: &Tensor, g: &Tensor) -> Result<Tensor> {
    let shape = x.shape()?;
    let (last, k) = (shape.len() - 1, shape[shape.len() - 1]);
    let g_rows = reshape(g, &Shape::from([&shape[..last], &[1, k]].concat()))?;
    super::reduce(&mul(&cumprod_jacobian(x)?, &g_rows)?, &[last + 1], Reduce::Sum, dtype(g)?)
}

/// The tangent of the running products of `x` along its last dimension for its tangent `t`:
/// `Σ_{i ≤ j} t_i ∂y_j/∂x_i` (the transpose of the gradient).
fn cumprod_tangent(x: &Tensor, t: &Tensor) -> Result<Tensor> {
    let shape = x.shape()?;
    let (last, k) = (shape.len() - 1, shape[shape.len() - 1]);
    let t_columns = reshape(t, &Shape::from([&shape[..last], &[k, 1]].concat()))?;
    super::reduce(&mul(&cumprod_jacobian(x)?, &t_columns)?, &[last], Reduce::Sum, dtype(t)?)
}

/// `f` applied with dimension `dim` of `x` (and `g`) moved last, the result moved back.
fn along_last(dim: usize, x: &Tensor, g: &Tensor, f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let n = x.shape()?.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.swap(dim, n - 1);
    permute(&f(&permute(x, &order)?, &permute(g, &order)?)?, &order)
}

impl Op {
    /// The gradient of each input, in the node's dtype and the broadcast shape (`fit` brings
    /// them to the inputs'), `None` where an input needs none.
    fn gradients(&self, g: &Tensor, saved: &[Tensor], inputs: &[Option<&OutputMeta>]) -> Result<Vec<Option<Tensor>>> {
        let needs = |i: usize| inputs.get(i).is_some_and(Option::is_some);
        let input_shape = |i: usize| inputs[i].map(|m| m.shape.clone()).unwrap_or_default();
        let out = || saved.last().ok_or_else(|| Error::runtime_error("backward: the output was not saved"));
        let x = || saved.first().ok_or_else(|| Error::runtime_error("backward: the input was not saved"));
        Ok(match self {
            Op::Unary(op) => vec![Some(unary_gradient(*op, g, saved)?)],
            Op::Binary { op, number } => binary_gradients(*op, *number, g, saved, [needs(0), needs(1)])?,
            Op::Select => {
                let c = &saved[0];
                let a = if needs(1) { Some(only_where(c, g)?) } else { None };
                let b = if needs(2) { Some(super::select(c, &Tensor::scalar(0.0), g, dtype(g)?)?) } else { None };
                vec![None, a, b]
            }
            Op::Reduce { op, dims } => {
                let shape = input_shape(0);
                let back = expand_back(g, dims, &shape)?;
                vec![Some(match op {
                    Reduce::Sum => back,
                    Reduce::Mean => {
                        let count: usize = dims.iter().map(|&d| shape[d]).product();
                        scale(&back, 1.0 / count as f64)?
                    }
                    Reduce::Max | Reduce::Min => {
                        let (x, y) = (x()?, out()?);
                        let mask = indicator(x, &expand_back(y, dims, &shape)?, Binary::Eq, g)?;
                        let count = sum_keepdim(&mask, dims)?;
                        div(&mul(&back, &mask)?, &count)?
                    }
                    Reduce::Prod => mul(&back, &products_of_others_along(x()?, dims)?)?,
                    _ => return Err(not_differentiable(self)),
                })]
            }
            Op::Scan { op: Scan::Sum, dim } => vec![Some(reverse_cumsum(g, *dim)?)],
            Op::Scan { op: Scan::Prod, dim } => vec![Some(along_last(*dim, x()?, g, cumprod_gradient)?)],
            Op::Matmul => {
                let (a, b) = (&saved[0], &saved[1]);
                let ga = if needs(0) { Some(super::matmul(g, &transpose_last(b)?, dtype(g)?)?) } else { None };
                let gb = if needs(1) { Some(super::matmul(&transpose_last(a)?, g, dtype(g)?)?) } else { None };
                vec![ga, gb]
            }
            Op::IndexSelect { dim } => {
                let index = &saved[0];
                let shape = g.shape()?;
                let d = *dim;
                let spread = super::view(index, |l| {
                    let strides = (0..shape.len()).map(|k| if k == d { l.strides[0] } else { 0 }).collect();
                    Ok(Layout { shape: shape.clone(), strides, offset: l.offset })
                })?;
                vec![Some(super::scatter_add(&input_shape(0), d, &spread, g)?)]
            }
            Op::Gather { dim } => vec![Some(super::scatter_add(&input_shape(0), *dim, &saved[0], g)?)],
            Op::ScatterAdd { dim } => vec![Some(super::gather(g, *dim, &saved[0])?)],
            Op::Concat { dim, sizes } => {
                let mut start = 0;
                let mut grads = Vec::new();
                for (i, &n) in sizes.iter().enumerate() {
                    grads.push(if needs(i) { Some(narrow(g, *dim, start, n)?) } else { None });
                    start += n;
                }
                grads
            }
            Op::Softmax { dim, log } => {
                let y = out()?;
                vec![Some(if *log {
                    sub(g, &mul(&un(y, Unary::Exp)?, &sum_keepdim(g, &[*dim])?)?)?
                } else {
                    mul(y, &sub(g, &sum_keepdim(&mul(g, y)?, &[*dim])?)?)?
                })]
            }
            Op::Conv2d { groups, window } => {
                let (x, w) = (&saved[0], &saved[1]);
                let [gx, gw] = match super::conv2d_backward(g, x, w, *groups, window, [needs(0), needs(1)])? {
                    Some(grads) => grads,
                    None => [
                        needs(0).then(|| conv_transpose2d(g, w, *groups, window)).transpose()?,
                        needs(1).then(|| conv2d_weight_gradient(g, x, &w.shape()?, *groups, window)).transpose()?,
                    ],
                };
                let gb = if needs(2) { Some(super::reduce(g, &[0, 2, 3], Reduce::Sum, dtype(g)?)?) } else { None };
                let mut grads = vec![gx, gw];
                if inputs.len() > 2 {
                    grads.push(gb);
                }
                grads
            }
            Op::MaxPool2d { input } => {
                let (planes, h, w) = (input[0], input[1], input[2]);
                let (oh, ow) = (g.shape()?[1], g.shape()?[2]);
                let flat = |t: &Tensor| reshape(t, &Shape::from([planes, oh * ow]));
                let index = super::view(&saved[0], |l| {
                    Ok(Layout { offset: l.offset, ..Layout::contiguous(Shape::from([planes, oh * ow])) })
                })?;
                let scattered = super::scatter_add(&Shape::from([planes, h * w]), 1, &index, &flat(g)?)?;
                vec![Some(reshape(&scattered, input)?)]
            }
            Op::Copy | Op::Transfer => vec![Some(g.clone())],
            Op::View { input, relative } => vec![Some(super::embed(g, input, relative)?)],
            Op::Embed { relative } => vec![Some(super::strided(g, relative.clone())?)],
            // Its outputs' gradients all at once, in `apply`.
            Op::Views(_) => return Err(Error::runtime_error("backward: a views node runs through apply")),
            Op::CopySlices { relative } => {
                let base = if needs(0) {
                    let shape = g.shape()?;
                    let mark = super::ones(&relative.shape, DType::Bool, g.device()?)?;
                    let written = super::embed(&mark, &shape, relative)?;
                    Some(super::select(&written, &Tensor::scalar(0.0), g, dtype(g)?)?)
                } else {
                    None
                };
                let src = if needs(1) { Some(super::strided(g, relative.clone())?) } else { None };
                vec![base, src]
            }
        })
    }
}

impl Op {
    /// The forward formula: the tangent of the output `out` for the inputs' `tangents` (`None`:
    /// zero; at least one is given), with `extra` the tensors the node keeps of its own. Linear
    /// primitives apply themselves to the tangents; element-wise ones reuse their backward,
    /// whose gradient is the tangent times the same partial derivative.
    pub(super) fn jvp(
        &self,
        inputs: &[&Tensor],
        extra: &[Tensor],
        out: &Tensor,
        tangents: &[Option<Tensor>],
    ) -> Result<Tensor> {
        let t = |i: usize| tangents.get(i).and_then(Option::as_ref);
        let first = || t(0).ok_or_else(|| Error::runtime_error("jvp: the input's tangent is missing"));
        let or_zeros = |i: usize| match t(i) {
            Some(t) => Ok(t.clone()),
            None => zeros_like(inputs[i]),
        };
        let out_dtype = dtype(out)?;
        let tangent = match self {
            Op::Unary(op) => {
                let saved = if unary_keeps(*op).output { (*out).clone() } else { inputs[0].clone() };
                unary_gradient(*op, first()?, &[saved])?
            }
            Op::Binary { op: op @ (Binary::Div | Binary::Atan2 | Binary::Maximum | Binary::Minimum), .. } => {
                binary_jvp(*op, inputs[0], inputs[1], out, (t(0), t(1)))?
            }
            Op::Binary { op, number } => {
                let mut saved = vec![inputs[0].clone(), inputs[1].clone()];
                saved.push(out.clone());
                let ta = t(0).map(|t| binary_gradients(*op, *number, t, &saved, [true, false])).transpose()?;
                let tb = t(1).map(|t| binary_gradients(*op, *number, t, &saved, [false, true])).transpose()?;
                let terms =
                    [ta.and_then(|g| g.into_iter().next().flatten()), tb.and_then(|g| g.into_iter().nth(1).flatten())];
                sum_terms(terms)?.map_or_else(|| zeros_like(out), Ok)?
            }
            Op::Select => super::select(inputs[0], &or_zeros(1)?, &or_zeros(2)?, out_dtype)?,
            Op::Reduce { op, dims } => {
                let t = first()?;
                let x = inputs[0];
                let shape = x.shape()?;
                match op {
                    Reduce::Sum => super::reduce(t, dims, Reduce::Sum, out_dtype)?,
                    Reduce::Mean => super::reduce(t, dims, Reduce::Mean, out_dtype)?,
                    Reduce::Max | Reduce::Min => {
                        let mask = indicator(x, &expand_back(out, dims, &shape)?, Binary::Eq, t)?;
                        let count = super::reduce(&mask, dims, Reduce::Sum, out_dtype)?;
                        div(&super::reduce(&mul(t, &mask)?, dims, Reduce::Sum, out_dtype)?, &count)?
                    }
                    Reduce::Prod => {
                        super::reduce(&mul(t, &products_of_others_along(x, dims)?)?, dims, Reduce::Sum, out_dtype)?
                    }
                    _ => return Err(not_differentiable(self)),
                }
            }
            Op::Scan { op: Scan::Sum, dim } => super::scan(first()?, *dim, Scan::Sum, out_dtype)?,
            Op::Scan { op: Scan::Prod, dim } => along_last(*dim, inputs[0], first()?, cumprod_tangent)?,
            Op::Matmul => {
                let (a, b) = (inputs[0], inputs[1]);
                let ta = t(0).map(|t| super::matmul(t, b, out_dtype)).transpose()?;
                let tb = t(1).map(|t| super::matmul(a, t, out_dtype)).transpose()?;
                sum_terms([ta, tb])?.map_or_else(|| zeros_like(out), Ok)?
            }
            Op::IndexSelect { dim } => super::index_select(first()?, *dim, &extra[0])?,
            Op::Gather { dim } => super::gather(first()?, *dim, &extra[0])?,
            Op::ScatterAdd { dim } => super::scatter_add(&out.shape()?, *dim, &extra[0], first()?)?,
            Op::Concat { dim, .. } => {
                let pieces: Vec<Tensor> = (0..inputs.len()).map(or_zeros).collect::<Result<_>>()?;
                super::concat(&pieces, *dim, &out.shape()?, out_dtype)?
            }
            Op::Softmax { dim, log } => {
                let (t, y) = (first()?, out);
                if *log {
                    sub(t, &sum_keepdim(&mul(&un(y, Unary::Exp)?, t)?, &[*dim])?)?
                } else {
                    mul(y, &sub(t, &sum_keepdim(&mul(t, y)?, &[*dim])?)?)?
                }
            }
            Op::Conv2d { groups, window } => {
                let (x, w) = (inputs[0], inputs[1]);
                let tx = t(0).map(|t| super::conv2d(t, w, None, *groups, window)).transpose()?;
                let tw = t(1).map(|t| super::conv2d(x, t, None, *groups, window)).transpose()?;
                let tb = t(2).map(|t| reshape(t, &Shape::from([1, t.shape()?[0], 1, 1]))).transpose()?;
                sum_terms([tx, tw, tb])?.map_or_else(|| zeros_like(out), Ok)?
            }
            Op::MaxPool2d { input } => {
                let (planes, h, w) = (input[0], input[1], input[2]);
                let shape = out.shape()?;
                let flat = Shape::from([planes, shape[1] * shape[2]]);
                let index = reshape(&extra[0], &flat)?;
                let picked = super::gather(&reshape(first()?, &Shape::from([planes, h * w]))?, 1, &index)?;
                reshape(&picked, &shape)?
            }
            Op::Copy => super::copy(first()?, out_dtype)?,
            Op::Transfer => super::transfer(first()?, out.device()?, out_dtype)?,
            Op::View { relative, .. } => super::strided(first()?, relative.clone())?,
            Op::Embed { relative } => super::embed(first()?, &out.shape()?, relative)?,
            Op::CopySlices { .. } => return Err(not_differentiable(self)),
            // Each view gets its tangent as it is made (`primitive::views`).
            Op::Views(_) => return Err(not_differentiable(self)),
        };
        fit_tangent(tangent, out)
    }
}

/// PyTorch's forward formulas of the binary operations whose tangent is not the backward's
/// partial derivatives times the tangents at their singular points: `(ta - tb y) / b` for a
/// quotient (a finite tangent where `1/0 - 1/0` would be NaN), atan2's without a guard at the
/// origin (NaN there, where the gradient is 0), and the larger / smaller of two taking `tb`
/// plus the masked difference (so a NaN comparison takes `ta` alone).
fn binary_jvp(
    op: Binary,
    a: &Tensor,
    b: &Tensor,
    y: &Tensor,
    (ta, tb): (Option<&Tensor>, Option<&Tensor>),
) -> Result<Tensor> {
    let zeros = || zeros_like(y);
    let ta = ta.cloned().map_or_else(zeros, Ok)?;
    let tb = tb.cloned().map_or_else(zeros, Ok)?;
    match op {
        Binary::Div => div(&sub(&ta, &mul(&tb, y)?)?, b),
        Binary::Atan2 => div(&sub(&mul(b, &ta)?, &mul(a, &tb)?)?, &add(&mul(a, a)?, &mul(b, b)?)?),
        _ => {
            let below = if op == Binary::Maximum { Binary::Lt } else { Binary::Gt };
            let d = sub(&ta, &tb)?;
            let half = scale(&d, 0.5)?;
            let masked = super::select(&bin(a, b, below)?, &Tensor::scalar(0.0), &d, dtype(y)?)?;
            add(&tb, &super::select(&bin(a, b, Binary::Eq)?, &half, &masked, dtype(y)?)?)
        }
    }
}

/// The sum of the terms given (`None` when none is).
fn sum_terms(terms: impl IntoIterator<Item = Option<Tensor>>) -> Result<Option<Tensor>> {
    let mut total: Option<Tensor> = None;
    for term in terms.into_iter().flatten() {
        total = Some(match total {
            Some(sum) => add(&sum, &term)?,
            None => term,
        });
    }
    Ok(total)
}

/// A tangent brought to its output's shape (broadcasting what a formula left smaller), dtype
/// and device.
fn fit_tangent(tangent: Tensor, out: &Tensor) -> Result<Tensor> {
    let (t, o) = (tangent.data("jvp", "tangent")?, out.data("jvp", "output")?);
    let (device, same_shape, dtype) = (t.device(), t.layout.shape == o.layout.shape, t.dtype);
    let mut fitted = if device == o.device() { tangent.clone() } else { super::transfer(&tangent, o.device(), dtype)? };
    if !same_shape {
        fitted = expand(&fitted, &o.layout.shape)?;
    }
    if dtype != o.dtype {
        fitted = super::copy(&fitted, o.dtype)?;
    }
    Ok(fitted)
}

/// The tangents after a result is written into `target` in place: `target`'s becomes
/// `tangent` (the result's, zero when it has none); when `target` is a view, its base's tangent
/// takes the written part.
pub(super) fn write_tangent(target: &Tensor, tangent: Option<Tensor>) -> Result<()> {
    use crate::autograd::forward_ad;
    let _formula = forward_ad::suspend();
    let tangent = match tangent {
        Some(t) => fit_tangent(t, target)?,
        None => zeros_like(target)?,
    };
    match target.base_tensor() {
        None => forward_ad::set_tangent(target, Some(tangent)),
        Some(base) => {
            let (b, v) = (base.data("in-place", "self")?, target.data("in-place", "self")?);
            let relative = Layout { offset: v.layout.offset - b.layout.offset, ..v.layout.clone() };
            let shape = b.layout.shape.clone();
            let old = match forward_ad::tangent(&base) {
                Some(t) => t,
                None => zeros_like(&base)?,
            };
            let mark = super::ones(&relative.shape, DType::Bool, b.device())?;
            let written = super::embed(&mark, &shape, &relative)?;
            let spread = super::embed(&tangent, &shape, &relative)?;
            let new = super::select(&written, &spread, &old, dtype(&old)?)?;
            forward_ad::set_tangent(target, Some(super::strided(&new, relative)?));
            forward_ad::set_tangent(&base, Some(new));
        }
    }
    Ok(())
}

#[cold]
fn not_differentiable(op: &Op) -> Error {
    Error::runtime_error(format!("the derivative for '{}' is not implemented", op.name()))
}

/// The gradients of `a op b` for `g`, where `needs` says which operands need one.
fn binary_gradients(
    op: Binary,
    number: bool,
    g: &Tensor,
    saved: &[Tensor],
    needs: [bool; 2],
) -> Result<Vec<Option<Tensor>>> {
    use Binary::*;
    let b = || (&saved[0], &saved[1]);
    let each = |f: &dyn Fn() -> Result<Tensor>, need: bool| if need { f().map(Some) } else { Ok(None) };
    let half_ties = |above: Binary, below: Binary| -> Result<Vec<Option<Tensor>>> {
        let (a, b) = (&saved[0], &saved[1]);
        let ties = || scale(&indicator(a, b, Eq, g)?, 0.5);
        let ga = each(&|| mul(g, &add(&indicator(a, b, above, g)?, &ties()?)?), needs[0])?;
        let gb = each(&|| mul(g, &add(&indicator(a, b, below, g)?, &ties()?)?), needs[1])?;
        Ok(vec![ga, gb])
    };
    Ok(match op {
        Add(alpha) | Sub(alpha) => {
            let sign = if matches!(op, Sub(_)) { -1.0 } else { 1.0 };
            let factor = sign * alpha.to_f64();
            vec![
                each(&|| Ok(g.clone()), needs[0])?,
                each(&|| if factor == 1.0 { Ok(g.clone()) } else { scale(g, factor) }, needs[1])?,
            ]
        }
        Mul => vec![each(&|| mul(g, b().1), needs[0])?, each(&|| mul(g, b().0), needs[1])?],
        Div => {
            let (a, b) = b();
            vec![each(&|| div(g, b), needs[0])?, each(&|| neg(&div(&mul(g, a)?, &mul(b, b)?)?), needs[1])?]
        }
        DivTrunc | DivFloor => vec![each(&|| zeros_like(g), needs[0])?, each(&|| zeros_like(g), needs[1])?],
        Maximum | Minimum => {
            // PyTorch's: ties share the gradient, the smaller (larger) side gets none, and where
            // the comparison is unordered (a NaN) both get all of it.
            let (above, below) = if op == Maximum { (Gt, Lt) } else { (Lt, Gt) };
            let (a, b) = b();
            let share = |loses: Binary| -> Result<Tensor> {
                let lost = add(&indicator(a, b, loses, g)?, &scale(&indicator(a, b, Eq, g)?, 0.5)?)?;
                mul(g, &minus_from(1.0, &lost)?)
            };
            vec![each(&|| share(below), needs[0])?, each(&|| share(above), needs[1])?]
        }
        ClampMin | ClampMax if number => {
            let inside = if op == ClampMin { Gt } else { Lt };
            let (a, b) = b();
            vec![each(&|| only_where(&bin(a, b, inside)?, g), needs[0])?, None]
        }
        ClampMin => half_ties(Gt, Lt)?,
        ClampMax => half_ties(Lt, Gt)?,
        Pow => {
            let (a, b) = b();
            let y = saved.last().ok_or_else(|| Error::runtime_error("backward: pow's output was not saved"))?;
            let ga = || {
                // b a^(b-1), zero where the exponent is zero.
                let term = mul(b, &bin(a, &plus(b, -1.0)?, Pow)?)?;
                let term = super::select(&bin(b, &Tensor::scalar(0.0), Eq)?, &Tensor::scalar(0.0), &term, dtype(g)?)?;
                mul(g, &term)
            };
            let gb = || {
                // y log(a), zero where a is zero and the exponent is not negative.
                let term = mul(y, &un(a, Unary::Log)?)?;
                let zero_base = bin(&bin(a, &Tensor::scalar(0.0), Eq)?, &bin(b, &Tensor::scalar(0.0), Ge)?, And)?;
                mul(g, &super::select(&zero_base, &Tensor::scalar(0.0), &term, dtype(g)?)?)
            };
            vec![each(&ga, needs[0])?, each(&gb, needs[1])?]
        }
        Atan2 => {
            let (a, b) = b();
            // 1 / (a² + b²), and 0 at the origin, where PyTorch's gradients are 0 (not 0/0).
            let r = || {
                let d = add(&mul(a, a)?, &mul(b, b)?)?;
                let origin = bin(&d, &Tensor::scalar(0.0), Eq)?;
                super::select(&origin, &Tensor::scalar(0.0), &un(&d, Unary::Reciprocal)?, dtype(&d)?)
            };
            vec![each(&|| mul(&mul(g, b)?, &r()?), needs[0])?, each(&|| neg(&mul(&mul(g, a)?, &r()?)?), needs[1])?]
        }
        Fmod | Remainder => {
            let (a, b) = b();
            let round = if op == Fmod { Unary::Trunc } else { Unary::Floor };
            vec![each(&|| Ok(g.clone()), needs[0])?, each(&|| neg(&mul(g, &un(&div(a, b)?, round)?)?), needs[1])?]
        }
        _ => return Err(Error::runtime_error(format!("the derivative for '{op:?}' is not implemented"))),
    })
}

/// The transposed convolution of `g` (`[n, o, out]`) with `w` (`[o, c / groups, kh, kw]`):
/// conv2d's adjoint in its input, so both the gradient of conv2d's input and
/// `conv_transpose2d`, whose result has conv2d's input plane (`win.input`). Composed of
/// primitives: a convolution of `g` spread by the stride and padded, with `w` flipped and its
/// channels swapped.
pub(crate) fn conv_transpose2d(g: &Tensor, w: &Tensor, groups: usize, win: &Window) -> Result<Tensor> {
    let (gs, ws) = (g.shape()?, w.shape()?);
    let (n, o, oh, ow) = (gs[0], gs[1], gs[2], gs[3]);
    let (cg, kh, kw) = (ws[1], ws[2], ws[3]);
    let c = cg * groups;
    // The spread gradient's plane: a convolution of kernel extent d (k - 1) + 1 over it gives
    // the input's plane. Output position i lands at row `pad + i s`.
    let extent = |axis: usize, k: usize| win.dilation[axis] * (k - 1);
    let (eh, ew) = (extent(0, kh), extent(1, kw));
    let (zh, zw) = (win.input[0] + eh, win.input[1] + ew);
    // Rows of g that land inside the plane (with much padding, the first ones fall before it).
    let span = |axis: usize, e: usize, count: usize, size: usize| -> (usize, usize, usize) {
        let (s, p) = (win.stride[axis] as i64, win.padding[axis] as i64);
        let at = |i: i64| e as i64 - p + i * s;
        let first = (0..count as i64).find(|&i| at(i) >= 0).unwrap_or(count as i64);
        let last = (0..count as i64).rev().find(|&i| at(i) < size as i64).map_or(first, |i| i + 1);
        let len = (last - first).max(0) as usize;
        (first as usize, len, if len == 0 { 0 } else { at(first) as usize })
    };
    let (r0, rn, rat) = span(0, eh, oh, zh);
    let (c0, cn, cat) = span(1, ew, ow, zw);
    let inner = narrow(&narrow(g, 2, r0, rn)?, 3, c0, cn)?;
    let relative = Layout {
        shape: Shape::from([n, o, rn, cn]),
        strides: [o * zh * zw, zh * zw, win.stride[0] * zw, win.stride[1]].into_iter().collect(),
        offset: rat * zw + cat,
    };
    let spread = super::embed(&inner, &Shape::from([n, o, zh, zw]), &relative)?;
    // w [o, c/g, kh, kw] → [c, o/g, kh, kw], flipped in both spatial dimensions.
    let og = o / groups;
    let swapped = permute(&reshape(w, &Shape::from([groups, og, cg, kh, kw]))?, &[0, 2, 1, 3, 4])?;
    let swapped = reshape(&swapped, &Shape::from([c, og, kh, kw]))?;
    let flipped = flip(&flip(&swapped, 2)?, 3)?;
    let window = Window { stride: [1, 1], padding: [0, 0], input: [zh, zw], out: win.input, ..*win };
    super::conv2d(&spread, &flipped, None, groups, &window)
}

/// The gradient of conv2d's weight: a convolution of the input (batch and channels swapped)
/// with `g` as the kernel, stride and dilation exchanged, cut to the kernel's size.
fn conv2d_weight_gradient(g: &Tensor, x: &Tensor, weight: &Shape, groups: usize, win: &Window) -> Result<Tensor> {
    let (gs, xs) = (g.shape()?, x.shape()?);
    let (n, o, oh, ow) = (gs[0], gs[1], gs[2], gs[3]);
    let (c, h, w) = (xs[1], xs[2], xs[3]);
    let cg = c / groups;
    // x [n, c, h, w] → [c/g, g·n, h, w]: channel k·(c/g) + j of sample m is plane k·n + m of batch j.
    let spread = permute(&reshape(x, &Shape::from([n, groups, cg, h, w]))?, &[2, 1, 0, 3, 4])?;
    let spread = reshape(&spread, &Shape::from([cg, groups * n, h, w]))?;
    // g [n, o, oh, ow] → [o, n, oh, ow].
    let kernel = super::contiguous(&permute(g, &[1, 0, 2, 3])?)?.into_owned();
    let full = |axis: usize| {
        (win.input[axis] + 2 * win.padding[axis] - win.stride[axis] * ([oh, ow][axis] - 1) - 1) / win.dilation[axis] + 1
    };
    let (fh, fw) = (full(0), full(1));
    let window = Window {
        kernel: [oh, ow],
        stride: win.dilation,
        dilation: win.stride,
        padding: win.padding,
        input: [h, w],
        out: [fh, fw],
    };
    let result = super::conv2d(&spread, &kernel, None, groups, &window)?; // [c/g, o, fh, fw]
    let cut = narrow(&narrow(&result, 2, 0, weight[2])?, 3, 0, weight[3])?;
    let _ = o;
    permute(&cut, &[1, 0, 2, 3])
}

/// An in-place write of `result` into `view` (a view of `base`) recorded: `base` becomes the
/// output of a `CopySlices` node over its old history and `result`'s, and `view` a view of it.
pub(super) fn rebase_view(base: &Tensor, view: &Tensor, result: &Tensor) -> Result<()> {
    let (b, v) = (base.data("in-place", "self")?, view.data("in-place", "self")?);
    if !b.layout.is_contiguous() {
        return Err(Error::runtime_error(
            "an in-place operation on a view of a non-contiguous tensor that requires grad is not supported",
        ));
    }
    let relative = Layout { offset: v.layout.offset - b.layout.offset, ..v.layout.clone() };
    let next = vec![meta::gradient_edge(base), meta::gradient_edge(result)];
    let node = Node::function(Op::CopySlices { relative: relative.clone() }, next, Vec::new(), [meta::output_meta(b)]);
    meta::set_history(base, Some(Edge { node: node.clone(), output_nr: 0 }));
    let view_node = Node::function(
        Op::View { input: b.layout.shape.clone(), relative },
        [Some(Edge { node, output_nr: 0 })],
        Vec::new(),
        [meta::output_meta(v)],
    );
    meta::set_history(view, Some(Edge { node: view_node, output_nr: 0 }));
    Ok(())
}
