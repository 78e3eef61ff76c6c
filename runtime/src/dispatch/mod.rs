//! The dispatcher below autograd (PyTorch's `__torch_dispatch__` layer): every call a
//! primitive makes to a backend is an operator call here, a value (an [`Operator`] handle with
//! a [`Schema`] and [`Tag`]s, plus its arguments), forward and backward alike.
//!
//! A primitive first records its autograd node (layer 3), then calls its operator here: with no
//! [`TorchDispatchMode`] active that is one branch and the backend's kernel, as before; with
//! one, the call is built as values and handed to the top mode's hook, which may compute it
//! itself or call [`Operator::call`] to reach the next mode down, and finally the backend of
//! the operands' device.
//!
//! The operators are PyTorch's ATen operators where torchfn's kernel computes the same thing,
//! under their names and overloads (`aten::mul.Tensor`, `aten::_softmax`,
//! `aten::convolution`...), listed by [`operators`] and found by name with [`operator`]; their
//! statics are in [`aten`]. Where a kernel takes more than ATen's signature (the dtype the
//! operation computes in, which ATen's `TensorIterator` works out itself), the schema says so
//! with a keyword argument.
//!
//! ```
//! use torchfn::dispatch::{self, Tag, aten};
//!
//! let add = dispatch::operator("aten::add.Tensor").unwrap();
//! assert!(std::ptr::eq(add, &aten::ADD_TENSOR));
//! assert_eq!(add.to_string(), "aten.add.Tensor");
//! assert!(add.has_tag(Tag::Pointwise));
//! let names: Vec<&str> = add.schema().arguments().iter().map(|a| a.name()).collect();
//! assert_eq!(names, ["self", "other", "alpha", "dtype"]);
//!
//! // Calling an operator runs it below autograd: no history is recorded.
//! let x = torchfn::tensor([1.0f32, 2.0])?;
//! let kwargs = torchfn::Kwargs::from([("dtype", torchfn::DType::Float32)]);
//! let y = aten::EXP.call(&[x.into()], &kwargs)?;
//! assert_eq!(y.as_tensor().unwrap().to_vec::<f32>()?, [1.0f32.exp(), 2.0f32.exp()]);
//! # Ok::<(), torchfn::Error>(())
//! ```

pub mod aten;
mod calls;
pub(crate) mod linalg;
mod unaries;

pub(crate) use unaries::unary_table;
mod mode;
mod schema;
mod wrapper;

use std::fmt;
use std::sync::OnceLock;

pub(crate) use calls::*;
pub(crate) use mode::intercepting;
pub use mode::{
    NoDispatch, TorchDispatchMode, current_dispatch_mode, dispatch_mode_stack, no_dispatch, pop_dispatch_mode,
    push_dispatch_mode,
};
pub(crate) use schema::tensors_in;
pub use schema::{Alias, Argument, Return, Schema};
pub use torchfn_macros::WrapperTensor;
pub use wrapper::{WrapperSubclass, WrapperTensor};
pub(crate) use wrapper::{is_wrapper_device, reported_device, same_device, stood_for, wrapper_contents};

use crate::backend::{Array, Binary, Reduce, Scan, Unary};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::value::{Kwargs, Value};

/// What kind of computation an operator is, as PyTorch's `torch.Tag`: what tools that work
/// on operators in general (fake tensors, FLOP counters, vmap) read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tag {
    /// Elementwise: each output element depends on the input elements at its position, after
    /// broadcasting (`pointwise`).
    Pointwise,
    /// Reduces dimensions (`reduction`, torchfn's name for ATen's reduction family).
    Reduction,
    /// The result is a view of an input: it shares memory, nothing is computed (`view`).
    View,
    /// Writes into an argument (`inplace`).
    Inplace,
    /// Draws random numbers (`nondeterministic_seeded`).
    Random,
    /// What it gives depends on tensor values, not only shapes (`data_dependent_output`):
    /// shape-only tools cannot run it.
    DataDependent,
    /// The shape of what it gives depends on tensor values (`dynamic_output_shape`): shape-only
    /// tools cannot run it either.
    DynamicOutputShape,
    /// Results may differ between runs on the same inputs (`nondeterministic_bitwise`).
    Nondeterministic,
    /// Creates a tensor from sizes and values, with no tensor argument (`factory`).
    Factory,
}

/// The kernel family an operator runs (and, for a family, which member).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    Unary(Unary),
    Binary(Binary),
    Where,
    Reduce(Reduce),
    Scan(Scan),
    Matmul,
    IndexSelect,
    Gather,
    Cat,
    Softmax {
        log: bool,
    },
    Convolution,
    ConvolutionBackward,
    MaxPool2d,
    Sort,
    TopK,
    ToCopy,
    AsStrided,
    ScatterAdd,
    Full,
    Copy,
    EmbeddingRenorm,
    LocalScalar,
    Nonzero,
    LiftFresh,
    Linalg(linalg::Decomposition),
    Draw(Draw),
    /// Adam's fused step; `decoupled`: AdamW's.
    FusedAdam {
        decoupled: bool,
    },
    /// SGD's fused step.
    FusedSgd,
    /// One LSTM layer's fused recurrence.
    LstmLayer,
    /// Its backward.
    LstmLayerBackward,
}

/// Which random draw a `Kernel::Draw` operator is, and so which arguments give its
/// distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Draw {
    /// `rand`: uniform on `[0, 1)` of a size.
    Rand,
    /// `randn`: standard normal of a size.
    Randn,
    /// `normal`: normal of a mean and standard deviation, of a size.
    Normal,
    /// `randint`: integers on `[low, high)`, of a size.
    Randint,
    /// `uniform`: uniform on `[from, to)`, like a tensor.
    Uniform,
    /// `bernoulli`: 1 with probability `p`, like a tensor.
    Bernoulli,
}

/// What an operator call gives the primitive that made it: the kernel's array (no dispatch
/// mode ran: the primitive wraps it), or the tensor a dispatch hook returned, which stays the
/// program's tensor (autograd records its history on it, as PyTorch does on the object
/// `__torch_dispatch__` returns).
pub(crate) enum Output {
    /// A kernel's result.
    Array(Array),
    /// A hook's result: a tensor with data (checked where it is made).
    Given(Tensor),
}

impl Output {
    /// The result's array.
    #[inline]
    pub(crate) fn array(&self) -> &Array {
        match self {
            Output::Array(array) => array,
            Output::Given(tensor) => &tensor.dense().expect("a hook's result is checked to have data").array,
        }
    }

    /// The result's array, as a value of its own.
    #[inline]
    pub(crate) fn into_array(self) -> Array {
        match self {
            Output::Array(array) => array,
            given => given.array().clone(),
        }
    }

    /// The result as a tensor (the hook's own, or the kernel's array wrapped).
    #[inline]
    pub(crate) fn into_tensor(self) -> Tensor {
        match self {
            Output::Array(array) => Tensor::from_array(array),
            Output::Given(tensor) => tensor,
        }
    }
}

/// An operator of the dispatch layer (PyTorch's `OpOverload`, `torch.ops.aten.add.Tensor`): a
/// namespace, a schema, tags, and the kernel family it runs. Handles are statics ([`aten`]),
/// compared by address.
pub struct Operator {
    namespace: &'static str,
    text: &'static str,
    tags: &'static [Tag],
    pub(crate) kernel: Kernel,
    parsed: OnceLock<Parsed>,
}

/// What an operator's schema text gives, parsed on first use.
struct Parsed {
    schema: Schema,
    /// `aten::add.Tensor`
    name: String,
    /// `aten.add.Tensor`
    display: String,
    /// `aten.add`
    packet: String,
}

impl Operator {
    pub(crate) const fn new(namespace: &'static str, text: &'static str, tags: &'static [Tag], kernel: Kernel) -> Self {
        Operator { namespace, text, tags, kernel, parsed: OnceLock::new() }
    }

    fn parsed(&self) -> &Parsed {
        self.parsed.get_or_init(|| {
            // The schemas are torchfn's own constants; a unit test parses every one.
            let schema = Schema::parse(self.text).unwrap_or_else(|e| panic!("{e}"));
            let overload = if schema.overload().is_empty() { "default" } else { schema.overload() };
            let name = match schema.overload() {
                "" => format!("{}::{}", self.namespace, schema.name()),
                o => format!("{}::{}.{o}", self.namespace, schema.name()),
            };
            let packet = format!("{}.{}", self.namespace, schema.name());
            let display = format!("{packet}.{overload}");
            Parsed { schema, name, display, packet }
        })
    }

    /// The qualified name, as PyTorch's `OpOverload.name()`: `aten::add.Tensor`, `aten::exp`.
    pub fn name(&self) -> &str {
        &self.parsed().name
    }

    /// The name of the operator without its overload, as PyTorch prints an `OpOverloadPacket`
    /// (`aten.add`): what the FLOP counter's tables are keyed by.
    pub fn overload_packet(&self) -> &str {
        &self.parsed().packet
    }

    /// The namespace (`aten`).
    pub fn namespace(&self) -> &'static str {
        self.namespace
    }

    /// The schema: arguments, results, aliasing and mutation.
    pub fn schema(&self) -> &Schema {
        &self.parsed().schema
    }

    /// The schema as PyTorch writes it (`add.Tensor(Tensor self, ...) -> Tensor`).
    pub fn schema_text(&self) -> &'static str {
        self.text
    }

    /// The tags.
    pub fn tags(&self) -> &'static [Tag] {
        self.tags
    }

    /// Whether the operator has `tag`.
    pub fn has_tag(&self, tag: Tag) -> bool {
        self.tags.contains(&tag)
    }

    /// Calls the operator below autograd (nothing is recorded): the next active dispatch mode,
    /// or the backend of the operands' device. Inside a mode's hook this reaches the next mode
    /// down, as `func(*args, **kwargs)` does in PyTorch's `__torch_dispatch__`. The arguments
    /// are checked against the schema; an error names what was wrong.
    pub fn call(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        mode::dispatch(self, args, kwargs)
    }

    /// Calls the operator (as [`call`](Operator::call)) on values bound to its schema, one per
    /// argument as [`Schema::bind_values`] gives them: positional up to its keyword-only
    /// arguments, those by name. How a hook that rewrote a call's arguments by name calls it.
    pub fn call_bound(&'static self, values: Vec<Value>) -> Result<Value> {
        let mut args = Vec::new();
        let mut kwargs = Kwargs::new();
        for (arg, value) in self.schema().arguments().iter().zip(values) {
            if arg.kwarg_only() {
                kwargs.insert(arg.name(), value);
            } else {
                args.push(value);
            }
        }
        self.call(&args, &kwargs)
    }

    /// The backend's kernel on `args` and `kwargs`, bound to the schema.
    pub(crate) fn run(&'static self, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        calls::run(self, args, kwargs)
    }
}

/// Prints as PyTorch prints an `OpOverload`: `aten.add.Tensor`, `aten.exp.default`.
impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.parsed().display)
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<OpOverload(op='{}.{}', overload='", self.namespace, self.schema().name())?;
        let overload = self.schema().overload();
        write!(f, "{}')>", if overload.is_empty() { "default" } else { overload })
    }
}

impl PartialEq for Operator {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Operator {}

/// Every operator, sorted by name.
pub fn operators() -> Vec<&'static Operator> {
    let mut all: Vec<_> = aten::all().collect();
    all.sort_by(|a, b| a.name().cmp(b.name()));
    all
}

/// The operator called `name`: `aten::add.Tensor` or `aten.add.Tensor`; without an overload
/// (`aten::exp`, `aten.exp.default`), the default one.
pub fn operator(name: &str) -> Option<&'static Operator> {
    let name = name.strip_suffix(".default").unwrap_or(name);
    let qualified = match name.split_once("::") {
        Some(_) => name.to_string(),
        None => name.replacen('.', "::", 1),
    };
    aten::all().find(|op| op.name() == qualified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_parses_and_names_are_distinct() {
        let mut names: Vec<&str> = aten::all().map(|op| op.name()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "two operators share a name");
        for op in aten::all() {
            assert_eq!(operator(op.name()), Some(op), "{op}");
            assert_eq!(operator(&op.to_string()), Some(op), "{op}");
        }
    }

    #[test]
    fn views_and_writes_are_declared_in_their_schemas() {
        for op in aten::all() {
            let aliases = op.schema().aliased_argument(0).is_some();
            assert_eq!(aliases, op.has_tag(Tag::View) || op.has_tag(Tag::Inplace), "{op}");
            // An operator that returns nothing (`_fused_adam_`) writes its arguments.
            let writes = op.has_tag(Tag::Inplace) || op.schema().returns().is_empty();
            assert_eq!(op.schema().is_mutable(), writes, "{op}");
        }
    }
}
