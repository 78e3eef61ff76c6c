//! Automatic mixed precision (`torch.autocast`): inside an [`autocast`] region, the operations
//! that gain from a lower precision (matrix products, linear layers, convolutions, attention)
//! run in bfloat16 or float16, those that need float32's range and precision (losses, `prod`,
//! linear algebra) run in float32, and the rest run in the dtypes they are given.
//!
//! It is built on the protocol: the region is a function mode that sees each public call,
//! casts the call's floating-point tensors by the function's policy (PyTorch's lists, in
//! [`policy`]), and calls the function again. The casts are ordinary differentiable
//! conversions, recorded by autograd, so gradients reach float32 parameters in float32; within
//! one region, a float32 parameter is cast once per dtype and the cast reused (PyTorch's weight
//! cast cache), until the outermost region ends.
//!
//! ```
//! use torchfn::{DType, nn::functional as F};
//!
//! let x = torchfn::randn([4, 8], None, None, None)?;
//! let w = torchfn::randn([16, 8], None, None, None)?.requires_grad_(true)?;
//! let target = torchfn::randn([4, 16], None, None, None)?;
//! let loss = {
//!     let _autocast = torchfn::autocast("cpu", DType::BFloat16)?;
//!     let y = F::linear(&x, &w, None)?;
//!     assert_eq!(y.dtype()?, DType::BFloat16); // a product: lower precision
//!     let loss = F::mse_loss(&y, &target, None, None, "mean")?;
//!     assert_eq!(loss.dtype()?, DType::Float32); // a loss: float32
//!     loss
//! };
//! loss.backward()?;
//! assert_eq!(w.grad()?.unwrap().dtype()?, DType::Float32); // the parameter's own dtype
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::backend::Device;
use crate::dispatch::tensors_in;
use crate::error::{Error, Result, bail};
use crate::protocol::{Func, ModeGuard, Outcome, TorchFunctionMode, Types, push_mode};
use crate::tensor::{ById, DType, Tensor};
use crate::value::{Kwargs, Value};

/// How autocast treats a function's floating-point tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Cast to the region's lower precision (bfloat16 or float16).
    LowerPrecision,
    /// Cast to float32.
    Float32,
    /// Cast to the widest floating-point dtype among them.
    Promote,
    /// An error: the function is unsafe to autocast (`binary_cross_entropy` on a GPU).
    Refused,
}

/// The autocast policy of `func` for tensors on `device_type` (`"cpu"` or `"wgpu"`), from
/// PyTorch's lists (`aten/src/ATen/autocast_mode.cpp`): the CPU's, and for the GPU the list
/// PyTorch keeps for its GPUs (CUDA's, which Apple's MPS shares), or `None` for a function that
/// runs in the dtypes it is given. Functions are named as ATen names them: `linalg.inv` is
/// `linalg_inv`, `fft.rfft` `fft_rfft`, `Tensor.__matmul__` `matmul`.
/// `multi_head_attention_forward`, which PyTorch composes from linear layers and attention (all
/// lower precision), is one function here, and listed with them.
pub fn policy(func: &Func, device_type: &str) -> Option<Policy> {
    let name = func.name();
    let aten: std::borrow::Cow<'_, str> = match func.namespace() {
        "torchfn.linalg" => format!("linalg_{name}").into(),
        "torchfn.fft" => format!("fft_{name}").into(),
        "Tensor" if matches!(name, "__matmul__" | "__rmatmul__") => "matmul".into(),
        _ => name.into(),
    };
    if device_type == "wgpu" {
        return gpu_policy(&aten);
    }
    Some(match &*aten {
        "conv1d"
        | "conv2d"
        | "conv3d"
        | "bmm"
        | "mm"
        | "linalg_vecdot"
        | "baddbmm"
        | "addmm"
        | "addbmm"
        | "linear"
        | "_convolution"
        | "matmul"
        | "conv_tbc"
        | "mkldnn_rnn_layer"
        | "conv_transpose1d"
        | "conv_transpose2d"
        | "conv_transpose3d"
        | "prelu"
        | "scaled_dot_product_attention"
        | "_native_multi_head_attention"
        | "multi_head_attention_forward" => Policy::LowerPrecision,
        "avg_pool3d"
        | "binary_cross_entropy"
        | "grid_sampler"
        | "polar"
        | "prod"
        | "quantile"
        | "nanquantile"
        | "stft"
        | "cdist"
        | "trace"
        | "view_as_complex"
        | "cholesky"
        | "cholesky_inverse"
        | "cholesky_solve"
        | "inverse"
        | "lu_solve"
        | "orgqr"
        | "ormqr"
        | "pinverse"
        | "max_pool3d"
        | "max_unpool2d"
        | "max_unpool3d"
        | "adaptive_avg_pool3d"
        | "reflection_pad1d"
        | "reflection_pad2d"
        | "replication_pad1d"
        | "replication_pad2d"
        | "replication_pad3d"
        | "mse_loss"
        | "cosine_embedding_loss"
        | "nll_loss"
        | "nll_loss2d"
        | "hinge_embedding_loss"
        | "poisson_nll_loss"
        | "smooth_l1_loss"
        | "cross_entropy"
        | "l1_loss"
        | "huber_loss"
        | "margin_ranking_loss"
        | "soft_margin_loss"
        | "triplet_margin_loss"
        | "multi_margin_loss"
        | "ctc_loss"
        | "kl_div"
        | "multilabel_margin_loss"
        | "binary_cross_entropy_with_logits"
        | "fft_fft"
        | "fft_ifft"
        | "fft_fft2"
        | "fft_ifft2"
        | "fft_fftn"
        | "fft_ifftn"
        | "fft_rfft"
        | "fft_irfft"
        | "fft_rfft2"
        | "fft_irfft2"
        | "fft_rfftn"
        | "fft_irfftn"
        | "fft_hfft"
        | "fft_ihfft"
        | "linalg_cond"
        | "linalg_matrix_rank"
        | "linalg_solve"
        | "linalg_cholesky"
        | "linalg_svdvals"
        | "linalg_eigvals"
        | "linalg_eigvalsh"
        | "linalg_inv"
        | "linalg_householder_product"
        | "linalg_tensorinv"
        | "linalg_tensorsolve"
        | "fake_quantize_per_tensor_affine"
        | "geqrf"
        | "_lu_with_info"
        | "qr"
        | "svd"
        | "triangular_solve"
        | "fractional_max_pool2d"
        | "fractional_max_pool3d"
        | "adaptive_max_pool3d"
        | "multilabel_margin_loss_forward"
        | "linalg_qr"
        | "linalg_cholesky_ex"
        | "linalg_svd"
        | "linalg_eig"
        | "linalg_eigh"
        | "linalg_lstsq"
        | "linalg_inv_ex" => Policy::Float32,
        "stack" | "cat" | "index_copy" => Policy::Promote,
        _ => return None,
    })
}

/// PyTorch's autocast lists for its GPUs (`AT_FORALL_LOWER_PRECISION_FP`, `AT_FORALL_FP32`,
/// `AT_FORALL_FP32_SET_OPT_DTYPE` and `AT_FORALL_PROMOTE`, as MPS lists them), by ATen name.
/// The functions whose optional dtype PyTorch sets to float32 (`sum`, `softmax`, `cumsum`...)
/// compute in float32 here too; `binary_cross_entropy` is refused, as on CUDA.
fn gpu_policy(aten: &str) -> Option<Policy> {
    Some(match aten {
        "_convolution"
        | "conv1d"
        | "conv2d"
        | "conv3d"
        | "conv_tbc"
        | "conv_transpose1d"
        | "conv_transpose2d"
        | "conv_transpose3d"
        | "convolution"
        | "prelu"
        | "addmm"
        | "addmv"
        | "addr"
        | "matmul"
        | "einsum"
        | "mm"
        | "mv"
        | "linalg_vecdot"
        | "linear"
        | "addbmm"
        | "baddbmm"
        | "bmm"
        | "chain_matmul"
        | "linalg_multi_dot"
        | "lstm_cell"
        | "gru_cell"
        | "rnn_tanh_cell"
        | "rnn_relu_cell"
        | "scaled_dot_product_attention"
        | "_native_multi_head_attention"
        | "multi_head_attention_forward" => Policy::LowerPrecision,
        "acos"
        | "asin"
        | "cosh"
        | "erfinv"
        | "exp"
        | "expm1"
        | "log"
        | "log10"
        | "log2"
        | "log1p"
        | "reciprocal"
        | "rsqrt"
        | "sinh"
        | "tan"
        | "pow"
        | "softplus"
        | "layer_norm"
        | "native_layer_norm"
        | "group_norm"
        | "frobenius_norm"
        | "nuclear_norm"
        | "cosine_similarity"
        | "poisson_nll_loss"
        | "cosine_embedding_loss"
        | "nll_loss"
        | "nll_loss2d"
        | "hinge_embedding_loss"
        | "kl_div"
        | "l1_loss"
        | "smooth_l1_loss"
        | "huber_loss"
        | "mse_loss"
        | "margin_ranking_loss"
        | "multilabel_margin_loss"
        | "soft_margin_loss"
        | "triplet_margin_loss"
        | "multi_margin_loss"
        | "binary_cross_entropy_with_logits"
        | "dist"
        | "pdist"
        | "cdist"
        | "renorm"
        | "logsumexp"
        | "upsample_nearest1d"
        | "upsample_nearest2d"
        | "upsample_nearest3d"
        | "upsample_linear1d"
        | "upsample_bilinear2d"
        | "upsample_trilinear3d"
        | "upsample_bicubic2d"
        | "cross_entropy"
        | "prod"
        | "softmax"
        | "log_softmax"
        | "cumprod"
        | "cumsum"
        | "linalg_vector_norm"
        | "linalg_matrix_norm"
        | "sum"
        | "norm" => Policy::Float32,
        "addcdiv" | "addcmul" | "atan2" | "bilinear" | "cross" | "dot" | "vdot" | "grid_sampler" | "index_put"
        | "tensordot" | "scatter_add" => Policy::Promote,
        "binary_cross_entropy" => Policy::Refused,
        _ => return None,
    })
}

/// The device types autocast regions are for: the CPU's tensors, and the GPU's (wgpu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeviceType {
    Cpu,
    Wgpu,
}

impl DeviceType {
    /// The device type `name` names; an error for another.
    fn named(name: &str) -> Result<DeviceType> {
        DeviceType::kind(name).ok_or_else(|| {
            Error::runtime_error(format!("autocast(): unsupported device_type {name:?}: expected 'cpu' or 'wgpu'"))
        })
    }

    /// The device type of a device of `kind`, or `None` for one autocast does not know (meta).
    fn kind(kind: &str) -> Option<DeviceType> {
        match kind {
            "cpu" => Some(DeviceType::Cpu),
            "wgpu" => Some(DeviceType::Wgpu),
            _ => None,
        }
    }

    /// The device type of `device`.
    fn of(device: Device) -> Option<DeviceType> {
        DeviceType::kind(device.kind())
    }

    /// The name `named` takes.
    fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Wgpu => "wgpu",
        }
    }

    /// The lower precision of a region that names none: bfloat16 on the CPU, float16 on GPUs
    /// (as PyTorch's CPU and CUDA defaults).
    fn default_dtype(self) -> DType {
        match self {
            DeviceType::Cpu => DType::BFloat16,
            DeviceType::Wgpu => DType::Float16,
        }
    }
}

/// The settings of the innermost region of one device type.
#[derive(Clone, Copy, Debug)]
struct Settings {
    enabled: bool,
    dtype: DType,
    cache_enabled: bool,
}

/// This thread's autocast state: the settings of the innermost region of each device type, how
/// many regions are open, and the casts of parameters made in them.
struct State {
    /// The CPU's settings, then the GPU's.
    settings: [Settings; 2],
    depth: usize,
    /// Float32 leaf tensors that require grad, with their cast to a lower precision.
    cache: HashMap<(ById, DType), Tensor>,
    /// The function mode, pushed while a region is open.
    mode: Option<ModeGuard<AutocastMode>>,
}

impl State {
    fn settings(&mut self, device_type: DeviceType) -> &mut Settings {
        &mut self.settings[device_type as usize]
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        settings: [DeviceType::Cpu, DeviceType::Wgpu]
            .map(|d| Settings { enabled: false, dtype: d.default_dtype(), cache_enabled: true }),
        depth: 0,
        cache: HashMap::new(),
        mode: None,
    });
}

/// The settings of `device_type`'s innermost region on this thread.
fn settings(device_type: DeviceType) -> Settings {
    STATE.with(|s| s.borrow().settings[device_type as usize])
}

/// Opens an autocast region for `device_type`'s tensors (`"cpu"` or `"wgpu"`) in `dtype`
/// (bfloat16 or float16) until the returned guard is dropped (`with torch.autocast(device_type,
/// dtype=dtype):`). Regions of the two device types are independent, as in PyTorch: a `"wgpu"`
/// region casts the GPU's tensors by PyTorch's GPU lists and leaves the CPU's alone. See the
/// [module docs](self) and [`Autocast`] for the other settings.
pub fn autocast(device_type: &str, dtype: DType) -> Result<AutocastGuard> {
    Autocast::new(device_type)?.dtype(dtype).enter()
}

/// Whether an autocast region is open and enabled on this thread for `device_type`
/// (`torch.is_autocast_enabled(device_type)`).
pub fn is_autocast_enabled(device_type: &str) -> bool {
    DeviceType::named(device_type).is_ok_and(|d| settings(d).enabled)
}

/// The lower precision of autocast regions for `device_type` on this thread: the innermost
/// region's, or outside any bfloat16 on the CPU and float16 on the GPU
/// (`torch.get_autocast_dtype(device_type)`).
pub fn get_autocast_dtype(device_type: &str) -> Result<DType> {
    Ok(settings(DeviceType::named(device_type)?).dtype)
}

/// The settings of an autocast region, as `torch.autocast`'s arguments: `dtype` (bfloat16 by
/// default on the CPU, float16 on the GPU), `enabled` (a disabled region inside an enabled one
/// runs everything as given), `cache_enabled` (reuse the casts of parameters).
///
/// ```
/// use torchfn::DType;
/// use torchfn::amp::{Autocast, is_autocast_enabled};
///
/// let _outer = Autocast::new("cpu")?.enter()?;
/// assert!(is_autocast_enabled("cpu"));
/// {
///     let _off = Autocast::new("cpu")?.enabled(false).enter()?;
///     assert!(!is_autocast_enabled("cpu"));
///     let x = torchfn::ones([2, 2], None, None)?;
///     assert_eq!(x.matmul(&x)?.dtype()?, DType::Float32);
/// }
/// assert!(is_autocast_enabled("cpu"));
/// assert!(!is_autocast_enabled("wgpu"));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Autocast {
    device_type: DeviceType,
    settings: Settings,
}

impl Autocast {
    /// A region for `device_type`'s tensors (`"cpu"` or `"wgpu"`), in its default lower
    /// precision, enabled, caching.
    pub fn new(device_type: &str) -> Result<Autocast> {
        let device_type = DeviceType::named(device_type)?;
        let settings = Settings { enabled: true, dtype: device_type.default_dtype(), cache_enabled: true };
        Ok(Autocast { device_type, settings })
    }

    /// The lower precision: bfloat16 or float16.
    pub fn dtype(mut self, dtype: DType) -> Autocast {
        self.settings.dtype = dtype;
        self
    }

    /// Whether the region casts at all.
    pub fn enabled(mut self, enabled: bool) -> Autocast {
        self.settings.enabled = enabled;
        self
    }

    /// Whether casts of parameters are reused within the region.
    pub fn cache_enabled(mut self, cache_enabled: bool) -> Autocast {
        self.settings.cache_enabled = cache_enabled;
        self
    }

    /// Opens the region until the guard is dropped. A dtype other than bfloat16 and float16
    /// is an error, as in PyTorch on the CPU.
    pub fn enter(self) -> Result<AutocastGuard> {
        if !self.settings.dtype.is_reduced_float() {
            let kind = if self.device_type == DeviceType::Cpu { "CPU" } else { "wgpu" };
            return Err(Error::runtime_error(format!(
                "autocast(): in {kind} autocast, but the target dtype is not supported: {}; {kind} autocast only \
                 supports torch.bfloat16 and torch.float16",
                self.settings.dtype
            )));
        }
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let previous = std::mem::replace(s.settings(self.device_type), self.settings);
            s.depth += 1;
            if s.mode.is_none() {
                s.mode = Some(push_mode(AutocastMode));
            }
            Ok(AutocastGuard {
                previous: Autocast { device_type: self.device_type, settings: previous },
                _thread_bound: std::marker::PhantomData,
            })
        })
    }
}

/// Closes an autocast region when dropped, restoring the enclosing region's settings; the
/// outermost one also pops the mode and forgets the cached casts.
#[must_use = "the autocast region ends when the guard is dropped"]
pub struct AutocastGuard {
    previous: Autocast,
    _thread_bound: std::marker::PhantomData<Rc<()>>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        let finished = STATE.with(|s| {
            let mut s = s.borrow_mut();
            *s.settings(self.previous.device_type) = self.previous.settings;
            s.depth -= 1;
            if s.depth > 0 {
                return None;
            }
            s.cache.clear();
            s.mode.take()
        });
        // Dropped outside the borrow: popping runs no autocast code, but stays clear of it.
        drop(finished);
    }
}

/// The function mode of open autocast regions.
pub struct AutocastMode;

impl TorchFunctionMode for AutocastMode {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        let all = || args.iter().chain(kwargs.iter().map(|(_, v)| v)).flat_map(tensors_in);
        // The call's device type: its first floating-point tensor's, as PyTorch's dispatch key.
        let mut device_type = None;
        for t in all() {
            if t.dtype()?.is_floating_point() {
                device_type = DeviceType::of(t.device()?);
                break;
            }
        }
        let Some(device_type) = device_type else { return func.call(args, kwargs) };
        let Settings { enabled, dtype, .. } = settings(device_type);
        // A disabled region looks nothing up.
        let Some(policy) = enabled.then(|| policy(func, device_type.name())).flatten() else {
            return func.call(args, kwargs);
        };
        let target = match policy {
            Policy::LowerPrecision => dtype,
            Policy::Float32 => DType::Float32,
            Policy::Promote => {
                let mut widest = None;
                for t in all() {
                    if eligible(t, device_type)? {
                        let d = t.dtype()?;
                        widest = Some(widest.map_or(d, |w: DType| w.promote(d)));
                    }
                }
                match widest {
                    Some(w) => w,
                    None => return func.call(args, kwargs),
                }
            }
            Policy::Refused => bail!(
                Runtime,
                "{}(): binary_cross_entropy and BCELoss are unsafe to autocast. Many models use a sigmoid layer \
                 right before the binary cross entropy layer; in this case, combine the two layers using \
                 binary_cross_entropy_with_logits or BCEWithLogitsLoss, which are safe to autocast.",
                func.qualified_name()
            ),
        };
        let cast = |v: &Value| cast(v, target, policy, device_type);
        let args: Vec<Value> = args.iter().map(cast).collect::<Result<_>>()?;
        let kwargs: Kwargs = kwargs.iter().map(|(k, v)| Ok((k.to_string(), cast(v)?))).collect::<Result<_>>()?;
        func.call(&args, &kwargs)
    }
}

/// Whether autocast casts `t` in a call on `device_type`: a floating-point tensor other than
/// float64, on a device of that type.
fn eligible(t: &Tensor, device_type: DeviceType) -> Result<bool> {
    let dtype = t.dtype()?;
    Ok(dtype.is_floating_point() && dtype != DType::Float64 && DeviceType::of(t.device()?) == Some(device_type))
}

/// `v` with its eligible tensors converted to `target`.
fn cast(v: &Value, target: DType, policy: Policy, device_type: DeviceType) -> Result<Value> {
    v.map_tensors(&|t| {
        if eligible(t, device_type)? && t.dtype()? != target {
            cast_tensor(t, target, policy, device_type)
        } else {
            Ok(t.clone())
        }
    })
}

/// `t` as `target`: a recorded conversion, reused for a float32 parameter (a leaf that
/// requires grad) cast to the lower precision while the cache is enabled.
fn cast_tensor(t: &Tensor, target: DType, policy: Policy, device_type: DeviceType) -> Result<Tensor> {
    let cacheable = policy == Policy::LowerPrecision
        && settings(device_type).cache_enabled
        && t.dtype()? == DType::Float32
        && t.requires_grad()?
        && t.is_leaf()?;
    if !cacheable {
        return crate::primitive::copy(t, target);
    }
    let key = (ById::new(t), target);
    if let Some(hit) = STATE.with(|s| s.borrow().cache.get(&key).cloned()) {
        return Ok(hit);
    }
    let cast = crate::primitive::copy(t, target)?;
    STATE.with(|s| s.borrow_mut().cache.insert(key, cast.clone()));
    Ok(cast)
}
