//! The tensor handle: shared storage, layout, dtype and class (plain, subclass or duck).

mod data;
mod dims;
mod display;
mod generator;
mod index;
mod interop;

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

pub use crate::types::Scalar;
pub use crate::types::{DType, Element};
pub use crate::types::{Layout, Shape};
pub use data::TensorData;
pub use dims::{Dims, ReduceDims};
pub use generator::{DEFAULT_SEED, Generator, initial_seed, manual_seed, seed};
pub use index::{Index, IndexItem};

pub(crate) use crate::types::{Participant, result_type, with_dtype};
pub(crate) use crate::types::{broadcast_shapes, check_broadcast};
pub(crate) use dims::normalize_dim;

use crate::backend::{Array, Buffer, Storage};
use crate::error::{Error, Result};
use crate::protocol::{Class, DuckTensor, TensorLike, TensorSubclass};
use crate::value::{FromValue, ToValue, Value};

crate::overrides::ignored! {
    "Tensor.as_subclass": "makes a view as another class: dispatching it could not return a different class",
    "Tensor.from_duck": "a constructor with no tensor argument",
    "Tensor.from_vec": "a constructor with no tensor argument",
    "Tensor.scalar": "a constructor with no tensor argument",
    "Tensor.to_vec": "reads the data directly, without dispatch",
    "Tensor.__hash__": "identity (`ById`), never dispatched, as PyTorch's `Tensor.__hash__` is `id(self)`",
}

/// The base class of every tensor.
static TENSOR_CLASS: Class = Class::base(<Tensor as crate::protocol::TorchFunction>::torch_function);

impl TensorLike for Tensor {
    const __HOOK: Option<crate::protocol::Hook> = Some(<Tensor as crate::protocol::TorchFunction>::torch_function);
    const __DEFAULT_HOOK: bool = true;
    fn class() -> &'static Class {
        &TENSOR_CLASS
    }
}

impl crate::protocol::TensorParent for Tensor {}

/// A tensor: a cheap handle to shared data, with its class and per-instance attributes.
///
/// Cloning shares the data. A tensor is a plain `Tensor`, an instance of a tensor subclass
/// (the same data seen through another class, with per-instance attributes; see
/// [`as_subclass`](Tensor::as_subclass)), or a duck: a user value that takes part in the
/// protocol and can be passed wherever a tensor is expected ([`Tensor::from_duck`]).
///
/// The class and the attributes live in the handle, so viewing data as another class, as
/// `as_subclass` and the default hook do, allocates nothing.
#[derive(Clone)]
pub struct Tensor {
    class: &'static Class,
    attrs: Option<Attrs>,
    body: Arc<Body>,
}

/// The per-instance attributes of a subclass instance, behind one thin pointer (they are read
/// rarely, and a thin pointer keeps the handle, and every `Value`, small).
type Attrs = Arc<Box<dyn Any + Send + Sync>>;

/// A tensor handle that does not keep the tensor alive (hooks that refer back to their tensor).
pub(crate) struct WeakTensor {
    class: &'static Class,
    attrs: Option<Attrs>,
    body: std::sync::Weak<Body>,
}

impl WeakTensor {
    /// The tensor, while some handle keeps it alive.
    pub(crate) fn upgrade(&self) -> Option<Tensor> {
        Some(Tensor { class: self.class, attrs: self.attrs.clone(), body: self.body.upgrade()? })
    }
}

enum Body {
    Dense(Dense),
    Duck(Box<dyn DuckObject>),
}

/// A duck value behind a trait object.
trait DuckObject: Any + fmt::Debug + Send + Sync {
    fn data_error(&self, what: &str) -> Option<Error>;
}
impl<T: DuckTensor> DuckObject for T {
    fn data_error(&self, what: &str) -> Option<Error> {
        DuckTensor::data_error(self, what)
    }
}

/// The data of a dense tensor: an array (a view of a shared storage on some device), and what
/// the tensor adds to it.
pub(crate) struct Dense {
    pub(crate) array: Array,
    /// The tensor this one is a view of (the root of the view chain), as `Tensor._base`.
    pub(crate) base: Option<Tensor>,
    /// A Python number converted to a tensor: it does not upcast other operands.
    pub(crate) wrapped_number: bool,
    /// Whether it requires grad, its history and its gradient.
    pub(crate) meta: crate::autograd::Meta,
}

impl fmt::Debug for Dense {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dense").field("array", &self.array).field("wrapped_number", &self.wrapped_number).finish()
    }
}

/// A dense tensor is its array to the kernels: `dense.layout`, `dense.dtype`, `&dense` as an
/// `&Array`.
impl Deref for Dense {
    type Target = Array;
    #[inline(always)]
    fn deref(&self) -> &Array {
        &self.array
    }
}

impl Dense {
    /// A tensor's data that is no view.
    pub(crate) fn new(array: Array) -> Dense {
        Dense::with_meta(array, crate::autograd::Meta::default())
    }

    /// A tensor's data that is no view, with its autograd state.
    pub(crate) fn with_meta(array: Array, meta: crate::autograd::Meta) -> Dense {
        Dense { array, base: None, wrapped_number: false, meta }
    }

    /// A fresh contiguous host tensor owning `buffer`.
    pub(crate) fn host(buffer: Buffer, shape: Shape) -> Dense {
        let dtype = buffer.dtype();
        Dense::new(Array::contiguous(Storage::host(buffer), shape, dtype))
    }

    pub(crate) fn from_vec<T: Element>(data: Vec<T>, shape: Shape) -> Dense {
        Dense::host(Buffer::from_vec(data), shape)
    }

    /// A zero-dimensional host tensor holding `value` (bool, int64 or float64), as operations
    /// pass numbers to kernels.
    pub(crate) fn number(value: impl Into<Scalar>) -> Dense {
        match value.into() {
            Scalar::Bool(b) => Dense::from_vec(vec![b], Shape::default()),
            Scalar::Int(i) => Dense::from_vec(vec![i], Shape::default()),
            Scalar::Float(x) => Dense::from_vec(vec![x], Shape::default()),
        }
    }

    /// How this operand takes part in type promotion.
    pub(crate) fn participant(&self) -> Participant {
        if self.wrapped_number {
            Participant::Number(self.dtype)
        } else if self.layout.ndim() == 0 {
            Participant::ZeroDim(self.dtype)
        } else {
            Participant::Dimensioned(self.dtype)
        }
    }
}

impl Tensor {
    pub(crate) fn from_dense(dense: Dense) -> Tensor {
        Tensor { class: &TENSOR_CLASS, attrs: None, body: Arc::new(Body::Dense(dense)) }
    }

    /// A plain tensor holding a kernel's result.
    #[inline]
    pub(crate) fn from_array(array: Array) -> Tensor {
        Tensor::from_dense(Dense::new(array))
    }

    /// A new plain tensor viewing `layout` of this tensor's storage; its `_base` is the root
    /// of the view chain.
    pub(crate) fn make_view(&self, dense: &Dense, layout: Layout) -> Tensor {
        self.view_of(dense, dense.with_layout(layout))
    }

    /// A new plain tensor holding `array` (memory of this tensor's, seen through another
    /// layout) as a view of this one: its `_base` is the root of the view chain.
    pub(crate) fn view_of(&self, dense: &Dense, array: Array) -> Tensor {
        let base = dense.base.clone().unwrap_or_else(|| self.clone());
        Tensor::from_dense(Dense { base: Some(base), ..Dense::new(array) })
    }

    /// Whether this handle is the only way to reach its memory: a plain tensor, no other handle
    /// to its body (strong or weak), no view of it, no other tensor on its storage, and that
    /// storage all its own (contiguous from the start). Its owner may then keep it instead of
    /// copying it, as PyTorch's `AccumulateGrad` steals a gradient nobody else holds.
    pub(crate) fn is_sole_owner(&self) -> bool {
        let Body::Dense(d) = &*self.body else { return false };
        std::ptr::eq(self.class, Tensor::class())
            && Arc::strong_count(&self.body) == 1
            && Arc::weak_count(&self.body) == 0
            && d.base.is_none()
            && !d.wrapped_number
            && Arc::strong_count(&d.array.storage) == 1
            && d.array.layout.offset == 0
            && d.array.layout.is_contiguous()
    }

    /// The data, for a dense tensor.
    #[inline]
    pub(crate) fn dense(&self) -> Option<&Dense> {
        match &*self.body {
            Body::Dense(dense) => Some(dense),
            Body::Duck(_) => None,
        }
    }

    /// Another tensor over the same memory, class and attributes, with its own autograd state
    /// (`detach`, and saved outputs given back their history). A duck stays itself.
    pub(crate) fn alias(&self, meta: crate::autograd::Meta) -> Tensor {
        match &*self.body {
            Body::Dense(d) => Tensor {
                class: self.class,
                attrs: self.attrs.clone(),
                body: Arc::new(Body::Dense(Dense {
                    array: d.array.clone(),
                    base: d.base.clone(),
                    wrapped_number: d.wrapped_number,
                    meta,
                })),
            },
            Body::Duck(_) => self.clone(),
        }
    }

    /// How many in-place writes this tensor's memory has had (0 for a duck).
    pub(crate) fn version(&self) -> u64 {
        self.dense().map_or(0, |d| d.storage.version())
    }

    /// The tensor this one is a view of (the root of the view chain).
    pub(crate) fn base_tensor(&self) -> Option<Tensor> {
        self.dense()?.base.clone()
    }

    /// A handle that does not keep the tensor alive.
    pub(crate) fn downgrade(&self) -> WeakTensor {
        WeakTensor { class: self.class, attrs: self.attrs.clone(), body: Arc::downgrade(&self.body) }
    }

    /// A tensor from a vector of elements in row-major order and a shape.
    ///
    /// ```
    /// let t = torchfn::Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], [2, 3])?;
    /// assert_eq!(t.to_string(), "tensor([[1, 2, 3],\n        [4, 5, 6]])");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_numel() != Some(data.len()) {
            return Err(Error::value_error(format!(
                "from_vec(): shape {:?} holds {} elements, but {} were given",
                shape.as_ref(),
                shape.checked_numel().map_or("more than usize::MAX".to_string(), |n| n.to_string()),
                data.len()
            )));
        }
        Ok(Tensor::from_dense(Dense::from_vec(data, shape)))
    }

    /// A Python number as a tensor: zero-dimensional, and it does not upcast tensors it is
    /// combined with (`int32_tensor * 2` stays int32), as PyTorch's wrapped numbers.
    pub fn scalar(value: impl Into<Scalar>) -> Tensor {
        Tensor::from_dense(Dense { wrapped_number: true, ..Dense::number(value) })
    }

    /// Wraps a duck value so it can be passed wherever a tensor is expected. Every operation on
    /// it goes to its class's hook; one the hook does not handle fails with a `TypeError`.
    pub fn from_duck<T: DuckTensor>(duck: T) -> Tensor {
        Tensor { class: T::class(), attrs: None, body: Arc::new(Body::Duck(Box::new(duck))) }
    }

    /// The class of this tensor-like; public as [`Class::of`].
    #[inline(always)]
    pub(crate) fn class_of(&self) -> &'static Class {
        self.class
    }

    /// `isinstance(t, T)`: true when this tensor's class is `T`'s class or descends from it.
    pub fn is_instance<T: TensorLike>(&self) -> bool {
        self.class_of().is_subclass_of(T::class())
    }

    /// True when this is a duck rather than a tensor with data.
    pub fn is_duck(&self) -> bool {
        matches!(*self.body, Body::Duck(_))
    }

    /// The address of the tensor's body: equal for handles of the same tensor (a cheap identity
    /// that keeps nothing alive).
    #[inline]
    pub(crate) fn address(&self) -> usize {
        Arc::as_ptr(&self.body) as *const () as usize
    }

    /// True when both handles are the same object (Python's `is`): the same data, seen
    /// through the same class with the same attributes.
    pub fn is(&self, other: &Tensor) -> bool {
        let same_attrs = match (&self.attrs, &other.attrs) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        Arc::ptr_eq(&self.body, &other.body) && std::ptr::eq(self.class, other.class) && same_attrs
    }

    /// The address of this tensor's shared body: the same for every handle to it and every
    /// subclass view of it ([`as_subclass`](Tensor::as_subclass)), and for no other live tensor.
    /// Optimizers key their per-parameter state by it, and modules their tied parameters.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.body).addr()
    }

    /// [`identity`](Tensor::identity) for the optimizers' crate, which keys per-parameter state
    /// by it; not part of PyTorch's API.
    #[doc(hidden)]
    pub fn __identity(&self) -> usize {
        self.identity()
    }

    /// A duck's own error for code that needs its data ([`DuckTensor::data_error`]).
    pub(crate) fn duck_data_error(&self, what: &str) -> Option<Error> {
        match &*self.body {
            Body::Duck(d) => d.data_error(what),
            Body::Dense(_) => None,
        }
    }

    /// The duck value, when this is a duck of type `T`.
    pub fn duck<T: 'static>(&self) -> Option<&T> {
        match &*self.body {
            Body::Duck(d) => (&**d as &dyn Any).downcast_ref::<T>(),
            Body::Dense(_) => None,
        }
    }

    /// The per-instance attributes of a subclass instance, when they are of type `T`.
    pub fn attrs<T: 'static>(&self) -> Option<&T> {
        self.attrs.as_deref()?.downcast_ref::<T>()
    }

    /// A view of the same data as an instance of the subclass `T`, carrying `attrs` (the
    /// subclass value). No copy, no dispatch. Fails for ducks, which have no data to view.
    ///
    /// ```
    /// use torchfn::prelude::*;
    ///
    /// #[derive(TensorSubclass)]
    /// struct Meters;
    ///
    /// let d = torchfn::tensor([1.0f32, 2.0])?.as_subclass(Meters)?;
    /// assert!(d.is_instance::<Meters>());
    /// assert!((&d + &d)?.is_instance::<Meters>()); // the default hook keeps the subclass
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn as_subclass<T: TensorSubclass>(&self, attrs: T) -> Result<Tensor> {
        self.data("as_subclass", "self")?;
        Ok(self.with_class(T::class(), Some(Arc::new(Box::new(attrs)))))
    }

    /// `as_subclass(cls)` with a class known at run time. Per-instance attributes are kept when
    /// this tensor's class is `cls` itself. Fails when `cls` does not descend from `Tensor` (a
    /// duck class) or when this is a duck.
    pub fn as_subclass_class(&self, cls: &'static Class) -> Result<Tensor> {
        if !cls.is_subclass_of(Tensor::class()) {
            return Err(Error::type_error(format!(
                "as_subclass(): {} does not descend from Tensor, so it cannot view a tensor's data",
                cls.name()
            )));
        }
        self.data("as_subclass", "self")?;
        let attrs = if std::ptr::eq(self.class_of(), cls) { self.attrs.clone() } else { None };
        Ok(self.with_class(cls, attrs))
    }

    /// The same data seen through `class`, with `attrs`.
    fn with_class(&self, class: &'static Class, attrs: Option<Attrs>) -> Tensor {
        Tensor { class, attrs, body: self.body.clone() }
    }

    /// This tensor as a `cls` instance with `source`'s attributes (the default hook's
    /// conversion). Ducks are returned unchanged.
    pub(crate) fn rewrap(self, cls: &'static Class, source: Option<&Tensor>) -> Tensor {
        match *self.body {
            Body::Dense(_) => Tensor { class: cls, attrs: source.and_then(|s| s.attrs.clone()), body: self.body },
            Body::Duck(_) => self,
        }
    }

    /// The data of this tensor, as the implementation of `func` needs it; a duck gives
    /// PyTorch's argument error (`mean(): argument 'input' must be Tensor, not ScalarTensor`).
    #[inline]
    pub(crate) fn data(&self, func: &str, arg: &str) -> Result<&Dense> {
        match &*self.body {
            Body::Dense(dense) => Ok(dense),
            Body::Duck(_) => Err(self.not_a_tensor(func, arg)),
        }
    }

    /// The memory, layout and dtype behind this tensor, for code that works below tensors, as
    /// a communication library does (`torchfn::distributed` hands CPU memory to MPI through
    /// it); PyTorch's `untyped_storage()` with the view's layout. Cloning the array shares the
    /// memory. Writing through it bypasses autograd: a writer takes the storage's lock and
    /// counts the write with [`Storage::bump_version`](crate::backend::Storage::bump_version).
    /// A duck has no memory of its own: a `TypeError`.
    ///
    /// ```
    /// let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?.t()?;
    /// let array = t.array()?;
    /// assert_eq!((array.layout.strides.as_ref(), array.layout.offset), (&[1, 2][..], 0));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn array(&self) -> Result<crate::backend::Array> {
        Ok(self.data("array", "self")?.array.clone())
    }

    #[cold]
    fn not_a_tensor(&self, func: &str, arg: &str) -> Error {
        if let Some(error) = self.duck_data_error(&format!("{func}() reads the data of its argument '{arg}'")) {
            return error;
        }
        Error::type_error(format!("{func}(): argument '{arg}' must be Tensor, not {}", self.class_of().name()))
    }

    /// The elements in row-major order. `T` must match the dtype; use `to(dtype)` to convert.
    /// Reads the data directly, without dispatch.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let dense = self.data("to_vec", "self")?;
        if dense.dtype != T::DTYPE {
            return Err(Error::type_error(format!(
                "to_vec::<{}>(): the tensor holds {}, not {}; convert it first with .to({:?})",
                std::any::type_name::<T>(),
                dense.dtype,
                T::DTYPE,
                T::DTYPE
            )));
        }
        crate::backend::host::elements::<T>("to_vec", &*crate::backend::host::on_host(dense)?)
    }
}

/// Converting a tensor gives the tensor, except for a wrapped Python number, which hooks see
/// as the number it was.
impl ToValue for Tensor {
    fn to_value(&self) -> Value {
        if let Body::Dense(d) = &*self.body
            && d.wrapped_number
            && let Ok(number) = crate::backend::host::read_scalar(d)
        {
            return number.to_value();
        }
        Value::Tensor(self.clone())
    }

    #[inline(always)]
    fn push_arg<'s>(&'s self, args: &mut crate::protocol::dispatch::Args<'s>) {
        args.push_tensor(self)
    }
}

/// Binding accepts tensors, subclass instances, ducks and Python numbers (which become wrapped
/// numbers, as PyTorch's argument parser does).
impl FromValue for Tensor {
    fn type_name() -> String {
        "Tensor".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Tensor(t) => Some(t.clone()),
            v => Scalar::from_value(v).map(Tensor::scalar),
        }
    }
    fn from_value_strict(value: &Value) -> Option<Self> {
        value.as_tensor().cloned()
    }
    fn take_value(value: Value) -> std::result::Result<Self, Value> {
        match value {
            Value::Tensor(t) => Ok(t),
            v => Self::from_value(&v).ok_or(v),
        }
    }
}

macro_rules! tensor_from_number {
    ($($t:ty),*) => {$(
        /// A Python-style number (a wrapped scalar); see [`Tensor::scalar`].
        impl From<$t> for Tensor {
            fn from(v: $t) -> Tensor {
                Tensor::scalar(v)
            }
        }
    )*};
}
tensor_from_number!(bool, i32, i64, f32, f64, Scalar);

/// Another handle to the same tensor (a clone), so that parameters written `impl Into<Tensor>`
/// (as [`Tensor::set`]'s value) take `&t` as well as numbers.
impl From<&Tensor> for Tensor {
    fn from(t: &Tensor) -> Tensor {
        t.clone()
    }
}

/// A tensor keyed by identity, to put tensors in `HashSet`s and `HashMap`s, as Python's
/// `Tensor.__hash__` is `id(self)`: two keys are equal when they hold the same object
/// ([`Tensor::is`]: the same data seen through the same class with the same attributes), never
/// by value, and hashing reads only the handle's address, so no hook or mode is ever called.
/// A subclass instance and a duck are keys as any tensor is; a subclass view of a tensor
/// ([`as_subclass`](Tensor::as_subclass)) is another object, so another key. A key keeps its
/// tensor alive, and derefs to it.
///
/// `Tensor` itself implements neither `Hash` nor `PartialEq`: `==` on tensors compares
/// elements in PyTorch ([`Tensor::eq`]), so identity is asked for by name.
///
/// ```
/// use std::collections::{HashMap, HashSet};
/// use torchfn::ById;
///
/// let (a, b) = (torchfn::tensor([1.0f32])?, torchfn::tensor([1.0f32])?);
/// let seen: HashSet<ById> = [&a, &a.clone(), &b].into_iter().map(ById::new).collect();
/// assert_eq!(seen.len(), 2); // `a` once (its clone is the same object), and `b`, equal in value
/// let mut names = HashMap::new();
/// names.insert(ById::new(&a), "a");
/// assert_eq!(names.get(&ById::new(&a)), Some(&"a"));
/// assert_eq!(names.get(&ById::new(&b)), None);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct ById(Box<dyn Held>);

/// What a key holds: the tensor, behind a trait object so that clippy's `mutable_key_type` lint,
/// which sees the interior mutability of a tensor's storage but not that keys hash and compare
/// by address alone, does not flag every `HashSet<ById>` of its users.
trait Held: Send + Sync {
    fn tensor(&self) -> &Tensor;
}

impl Held for Tensor {
    fn tensor(&self) -> &Tensor {
        self
    }
}

impl ById {
    /// A key for `tensor` (another handle to it: cheap, no copy).
    pub fn new(tensor: &Tensor) -> ById {
        ById(Box::new(tensor.clone()))
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        self.0.tensor()
    }
}

impl Clone for ById {
    fn clone(&self) -> ById {
        ById::new(self.tensor())
    }
}

impl fmt::Debug for ById {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ById").field(self.tensor()).finish()
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &ById) -> bool {
        self.tensor().is(other.tensor())
    }
}

impl Eq for ById {}

/// The address of the tensor's body: equal keys share it (a subclass view of the same data
/// shares it too, and differs in `eq`).
impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.tensor().identity().hash(state);
    }
}

impl From<Tensor> for ById {
    fn from(tensor: Tensor) -> ById {
        ById(Box::new(tensor))
    }
}

impl From<&Tensor> for ById {
    fn from(tensor: &Tensor) -> ById {
        ById::new(tensor)
    }
}

impl Deref for ById {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        self.tensor()
    }
}
