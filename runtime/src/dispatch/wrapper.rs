//! Wrapper subclasses (PyTorch's `_make_wrapper_subclass` with `__torch_dispatch__`): a tensor
//! whose shape, dtype, strides, device and `requires_grad` are its own and whose contents are
//! the user's (inner tensors, or nothing at all). Every operator call that receives one goes to
//! its type's [`torch_dispatch`](WrapperSubclass::torch_dispatch), below autograd: autograd
//! records the call on the wrapper as on any tensor, and the backward pass's operators reach
//! the hook too.
//!
//! A wrapper's memory is on a device of its own, one per device it stands for, with no data:
//! its kernels fail (a hook must unwrap before computing), its factories make plain tensors on
//! the device it stands for (the zeros autograd fills a missing gradient with), and
//! [`Tensor::device`] reports the device it stands for.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use super::Operator;
use crate::backend::{Array, Backend, Binary, Buffer, Device, Reduce, Scan, Storage, Unary, Window};
use crate::error::{Error, Result, bail};
use crate::tensor::{DType, Layout, Scalar, Shape, Tensor};
use crate::value::{Kwargs, Value};

/// A wrapper subclass: the type holds an instance's contents, and its hook handles every
/// operator call an instance takes part in (PyTorch's `__torch_dispatch__` classmethod). The
/// hook usually unwraps the arguments ([`Value::map_tensors`]), calls the operator on the inner
/// tensors and wraps the results; returning [`Value::NotImplemented`] lets another wrapper
/// type among the arguments try.
///
/// ```
/// use torchfn::dispatch::{Operator, WrapperSubclass};
/// use torchfn::prelude::*;
///
/// /// A tensor that counts nothing but keeps its values in an inner tensor.
/// struct Boxed(Tensor);
///
/// impl WrapperSubclass for Boxed {
///     fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
///         let unwrap = |t: &Tensor| Ok(t.wrapper::<Boxed>().map_or_else(|| t.clone(), |b| b.0.clone()));
///         let args: Vec<Value> = args.iter().map(|a| a.map_tensors(&unwrap)).collect::<Result<_>>()?;
///         let out = func.call(&args, kwargs)?;
///         out.map_tensors(&|t| Boxed::wrap(t.clone()))
///     }
/// }
///
/// impl Boxed {
///     fn wrap(inner: Tensor) -> Result<Tensor> {
///         let (shape, dtype, device) = (inner.shape()?, inner.dtype()?, inner.device()?);
///         Tensor::make_wrapper_subclass(Boxed(inner), &shape, None, dtype, device, false)
///     }
/// }
///
/// let x = Boxed::wrap(torchfn::tensor([1.0f32, 2.0])?)?.requires_grad_(true)?;
/// let y = (&x * &x)?.sum()?;
/// assert_eq!(y.grad_fn()?.unwrap().name(), "SumBackward0");
/// y.backward()?;
/// let grad = x.grad()?.unwrap();
/// assert_eq!(grad.wrapper::<Boxed>().unwrap().0.to_vec::<f32>()?, [2.0, 4.0]);
/// assert_eq!(grad.device()?, torchfn::Device::CPU);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub trait WrapperSubclass: Any + Send + Sync + Sized {
    /// Handles `func` called on `args` and `kwargs`, at least one of which is an instance.
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value>;
}

/// A wrapper around one inner tensor, with whatever else the type holds: what
/// `#[derive(WrapperTensor)]` implements (the field of type `Tensor`, or the one marked
/// `#[wrapper(inner)]`, is the inner tensor; the other fields are cloned into each result).
/// It gives the pieces a hook is made of, and the whole of a hook that unwraps, calls the
/// operator on the inner tensors and wraps the results ([`dispatch_inner`](WrapperTensor::dispatch_inner)).
///
/// ```
/// use torchfn::dispatch::{Operator, WrapperSubclass, WrapperTensor};
/// use torchfn::prelude::*;
///
/// /// Counts nothing, keeps a label through every operator, forward and backward.
/// #[derive(WrapperTensor)]
/// struct Labelled {
///     elem: Tensor,
///     label: &'static str,
/// }
///
/// impl WrapperSubclass for Labelled {
///     fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
///         Self::dispatch_inner(func, args, kwargs)
///     }
/// }
///
/// let x = Labelled { elem: torchfn::tensor([1.0f32, 2.0])?, label: "x" }.wrap()?.requires_grad_(true)?;
/// (&x * &x)?.sum()?.backward()?;
/// let grad = x.grad()?.unwrap();
/// let labelled = grad.wrapper::<Labelled>().unwrap();
/// assert_eq!((labelled.label, labelled.elem.to_vec::<f32>()?), ("x", vec![2.0, 4.0]));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub trait WrapperTensor: WrapperSubclass {
    /// The inner tensor.
    fn inner(&self) -> &Tensor;

    /// The same wrapper around `inner` (the other fields cloned).
    fn with_inner(&self, inner: Tensor) -> Self;

    /// The wrapper as a tensor with its inner tensor's shape, strides, storage offset, dtype
    /// and device (as PyTorch's subclasses pass `storage_offset` to `_make_wrapper_subclass`),
    /// so a view made of the wrapper addresses the inner tensor's memory as it says.
    fn wrap(self) -> Result<Tensor> {
        let inner = self.inner();
        let (layout, dtype, device) = (inner.data("wrap", "inner")?.layout.clone(), inner.dtype()?, inner.device()?);
        Tensor::wrapper_with_layout(self, layout, dtype, device)
    }

    /// `value` with every instance replaced by its inner tensor.
    fn unwrap(value: &Value) -> Result<Value> {
        value.map_tensors(&|t| Ok(t.wrapper::<Self>().map_or_else(|| t.clone(), |w| w.inner().clone())))
    }

    /// The first instance among a call's arguments, positional then keyword.
    fn first<'a>(args: &'a [Value], kwargs: &'a Kwargs) -> Option<&'a Self> {
        args.iter()
            .chain(kwargs.iter().map(|(_, v)| v))
            .flat_map(super::schema::tensors_in)
            .find_map(|t| t.wrapper::<Self>())
    }

    /// `value` with every tensor wrapped like `self`.
    fn rewrap(&self, value: &Value) -> Result<Value> {
        value.map_tensors(&|t| self.with_inner(t.clone()).wrap())
    }

    /// The hook that changes nothing: `func` on the inner tensors, its results wrapped like the
    /// first instance among the arguments; an in-place operator (`add_`, `copy_`) gives back
    /// the argument it wrote, as PyTorch's `return_and_correct_aliasing` does.
    fn dispatch_inner(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let unwrapped: Vec<Value> = args.iter().map(Self::unwrap).collect::<Result<_>>()?;
        let mut plain = Kwargs::new();
        for (name, value) in kwargs.iter() {
            plain.insert(name, Self::unwrap(value)?);
        }
        let out = func.call(&unwrapped, &plain)?;
        let schema = func.schema();
        if let Some(i) = schema.aliased_argument(0)
            && schema.arguments()[i].is_write()
            && let Some(written) = args.get(i)
        {
            return Ok(written.clone());
        }
        match Self::first(args, kwargs) {
            Some(first) => first.rewrap(&out),
            None => Ok(out),
        }
    }
}

/// A wrapper type's hook.
type Hook = fn(&'static Operator, &[Value], &Kwargs) -> Result<Value>;

/// What a wrapper's memory holds: its contents and its type's hook.
struct Wrapped {
    contents: Box<dyn Any + Send + Sync>,
    hook: Hook,
    type_name: &'static str,
}

/// How many wrappers are alive: while any is, operator calls take the dispatch path (the
/// branch the primitives pay).
static ALIVE: AtomicUsize = AtomicUsize::new(0);

impl Wrapped {
    fn new<W: WrapperSubclass>(contents: W) -> Wrapped {
        ALIVE.fetch_add(1, Ordering::Relaxed);
        Wrapped { contents: Box::new(contents), hook: W::torch_dispatch, type_name: std::any::type_name::<W>() }
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        ALIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a wrapper tensor is alive anywhere.
#[inline(always)]
pub(crate) fn any_alive() -> bool {
    ALIVE.load(Ordering::Relaxed) != 0
}

/// The backend of wrappers standing for devices of `inner`.
struct WrapperBackend {
    inner: &'static dyn Backend,
    /// `wrapper(cpu)`: a name of its own, since devices of the same name are the same.
    name: &'static str,
}

/// The wrapper devices made so far, by the name of the backend they stand for.
static BACKENDS: LazyLock<Mutex<HashMap<&'static str, &'static WrapperBackend>>> = LazyLock::new(Default::default);

/// The device of wrappers standing for `device`.
fn wrapper_device(device: Device) -> Device {
    let mut made = BACKENDS.lock().unwrap_or_else(|e| e.into_inner());
    let backend: &'static WrapperBackend = made.entry(device.kind()).or_insert_with(|| {
        let name = Box::leak(format!("wrapper({})", device.kind()).into_boxed_str());
        Box::leak(Box::new(WrapperBackend { inner: device.backend(), name }))
    });
    Device::with_backend(backend, device.index())
}

/// The device a wrapper device stands for (`device` itself for any other).
#[inline]
pub(crate) fn stood_for(device: Device) -> Device {
    if !any_alive() {
        // No wrapper alive, so no wrapper memory: only the factories of a recorded graph may
        // still name a wrapper device, and they go through the backend.
        return device;
    }
    match device.backend().stands_for() {
        Some(inner) => Device::with_backend(inner, device.index()),
        None => device,
    }
}

/// Whether tensors on `a` and on `b` are on the same device, a wrapper standing for the device
/// it reports (a batched gradient or tangent for a plain tensor's).
#[inline]
pub(crate) fn same_device(a: Device, b: Device) -> bool {
    a == b || stood_for(a) == stood_for(b)
}

/// The device `x` reports (`Tensor.device`): the device a wrapper or a fake tensor stands for,
/// else the device its memory is on.
#[inline]
pub(crate) fn reported_device(x: &Array) -> Device {
    let device = x.device();
    if device.is_meta() {
        return crate::meta::stands_for(x).unwrap_or(device);
    }
    stood_for(device)
}

/// Whether `device` is a wrapper device.
pub(crate) fn is_wrapper_device(device: Device) -> bool {
    any_alive() && device.backend().stands_for().is_some()
}

fn wrapped(t: &Tensor) -> Option<&Wrapped> {
    wrapped_memory(t.dense()?)
}

fn wrapped_memory(x: &Array) -> Option<&Wrapped> {
    if !any_alive() {
        return None;
    }
    x.storage.memory::<Wrapped>()
}

/// The contents of the wrapper of type `W` whose memory `x` is.
pub(crate) fn wrapper_contents<W: WrapperSubclass>(x: &Array) -> Option<&W> {
    wrapped_memory(x)?.contents.downcast_ref::<W>()
}

impl Tensor {
    /// A wrapper subclass instance (PyTorch's `Tensor._make_wrapper_subclass`): a tensor of
    /// `shape` (`strides`: contiguous when `None`), `dtype` and `device`, requiring grad or
    /// not, holding `contents` and no data; `W`'s hook handles every operator call it takes
    /// part in. See [`WrapperSubclass`].
    pub fn make_wrapper_subclass<W: WrapperSubclass>(
        contents: W,
        shape: &[usize],
        strides: Option<&[usize]>,
        dtype: DType,
        device: Device,
        requires_grad: bool,
    ) -> Result<Tensor> {
        let layout = match strides {
            None => Layout::contiguous(Shape::from(shape)),
            Some(strides) if strides.len() == shape.len() => {
                Layout { shape: Shape::from(shape), strides: strides.iter().copied().collect(), offset: 0 }
            }
            Some(strides) => bail!(
                Runtime,
                "make_wrapper_subclass(): strides has {} entries for a shape of {} dimensions",
                strides.len(),
                shape.len()
            ),
        };
        if requires_grad && !dtype.is_floating_point() {
            bail!(Runtime, "make_wrapper_subclass(): only Tensors of floating point dtype can require gradients");
        }
        let t = Tensor::wrapper_with_layout(contents, layout, dtype, device)?;
        if requires_grad { t.requires_grad_(true) } else { Ok(t) }
    }

    /// A wrapper instance of `layout` (an offset too: the view of its contents it stands for).
    pub(crate) fn wrapper_with_layout<W: WrapperSubclass>(
        contents: W,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let storage = Storage::new(wrapper_device(stood_for(device)), Wrapped::new(contents));
        Ok(Tensor::from_array(Array { storage, layout, dtype }))
    }

    /// The contents of this tensor when it is a wrapper of type `W`.
    pub fn wrapper<W: WrapperSubclass>(&self) -> Option<&W> {
        wrapper_contents(self.dense()?)
    }

    /// Whether this tensor is a wrapper subclass instance (of any type).
    pub fn is_wrapper(&self) -> bool {
        wrapped(self).is_some()
    }
}

/// `op` on `args` and `kwargs` through the hooks of the wrapper types among the arguments, in
/// the order they first appear, until one does not decline; `None` when there are none.
pub(crate) fn dispatch(op: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Option<Result<Value>> {
    let mut hooks: Vec<(Hook, &'static str)> = Vec::new();
    for t in args.iter().chain(kwargs.iter().map(|(_, v)| v)).flat_map(super::schema::tensors_in) {
        if let Some(w) = wrapped(t)
            && !hooks.iter().any(|(h, _)| std::ptr::fn_addr_eq(*h, w.hook))
        {
            hooks.push((w.hook, w.type_name));
        }
    }
    if hooks.is_empty() {
        return None;
    }
    for (hook, _) in &hooks {
        match hook(op, args, kwargs) {
            Ok(Value::NotImplemented) => continue,
            result => return Some(result),
        }
    }
    let names: Vec<String> = hooks.iter().map(|(_, n)| format!("  - tensor subclass {n}")).collect();
    Some(Err(Error::type_error(format!(
        "Multiple dispatch failed for '{}'; all __torch_dispatch__ handlers returned NotImplemented:\n\n{}",
        op.name(),
        names.join("\n")
    ))))
}

/// The error of a kernel reached with a wrapper: it has no data.
#[cold]
fn no_data(x: &Array) -> Error {
    let name = x.storage.memory::<Wrapped>().map_or("a wrapper subclass", |w| w.type_name);
    Error::runtime_error(format!(
        "a {name} tensor has no data of its own: its torch_dispatch must unwrap it before calling an operator \
         (or an operator reached it with dispatch disabled)"
    ))
}

impl Backend for WrapperBackend {
    fn name(&self) -> &'static str {
        self.name
    }
    fn stands_for(&self) -> Option<&'static dyn Backend> {
        Some(self.inner)
    }
    fn device_count(&self) -> usize {
        self.inner.device_count()
    }
    fn default_index(&self) -> Result<usize> {
        self.inner.default_index()
    }
    fn describe(&self, index: usize) -> String {
        format!("wrapper subclass tensors standing for {}", self.inner.describe(index))
    }
    fn supports(&self, dtype: DType) -> bool {
        self.inner.supports(dtype)
    }
    fn synchronize(&self, index: usize) -> Result<()> {
        self.inner.synchronize(index)
    }
    fn upload(&self, device: Device, data: Buffer, shape: Shape) -> Result<Array> {
        self.inner.upload(Device::with_backend(self.inner, device.index()), data, shape)
    }
    fn download(&self, x: &Array) -> Result<Buffer> {
        Err(no_data(x))
    }
    fn fill(&self, device: Device, shape: &Shape, value: Scalar, dtype: DType) -> Result<Array> {
        self.inner.fill(Device::with_backend(self.inner, device.index()), shape, value, dtype)
    }
    fn copy(&self, x: &Array, _: DType) -> Result<Array> {
        Err(no_data(x))
    }
    fn assign(&self, dst: &Array, _: &Array) -> Result<()> {
        Err(no_data(dst))
    }
    fn unary(&self, x: &Array, _: Unary, _: DType, _: Option<&Array>) -> Result<Array> {
        Err(no_data(x))
    }
    fn binary(&self, a: &Array, _: &Array, _: &Shape, _: Binary, _: DType, _: Option<&Array>) -> Result<Array> {
        Err(no_data(a))
    }
    fn select(&self, c: &Array, _: &Array, _: &Array, _: &Shape, _: DType) -> Result<Array> {
        Err(no_data(c))
    }
    fn reduce(&self, x: &Array, _: &[usize], _: Reduce, _: DType) -> Result<Array> {
        Err(no_data(x))
    }
    fn scan(&self, x: &Array, _: usize, _: Scan, _: DType) -> Result<Array> {
        Err(no_data(x))
    }
    fn matmul(&self, a: &Array, _: &Array, _: &Shape, _: DType) -> Result<Array> {
        Err(no_data(a))
    }
    fn index_select(&self, x: &Array, _: usize, _: &Array) -> Result<Array> {
        Err(no_data(x))
    }
    fn gather(&self, x: &Array, _: usize, _: &Array) -> Result<Array> {
        Err(no_data(x))
    }
    fn scatter_add(&self, _: &Shape, _: usize, _: &Array, src: &Array) -> Result<Array> {
        Err(no_data(src))
    }
    fn concat(&self, pieces: &[&Array], _: usize, _: &Shape, _: DType) -> Result<Array> {
        Err(pieces.first().map_or_else(|| Error::runtime_error("concat(): no pieces"), |p| no_data(p)))
    }
    fn softmax(&self, x: &Array, _: usize, _: bool, _: DType) -> Result<Array> {
        Err(no_data(x))
    }
    fn conv2d(&self, input: &Array, _: &Array, _: Option<&Array>, _: usize, _: &Window) -> Result<Array> {
        Err(no_data(input))
    }
    fn max_pool2d(&self, input: &Array, _: &Window) -> Result<(Array, Array)> {
        Err(no_data(input))
    }
}
