//! Modules (`torch.nn.Module` and its layers), in `torchfn::nn` beside the runtime's
//! `nn.functional`: the layer above the operations, made of parameters and buffers and calling
//! `nn.functional` in its forwards.

mod hooks;
pub mod init;
mod layers;
mod module;
mod recurrent;
mod state_dict;
mod transformer;

pub use hooks::{
    BackwardHook, BackwardPreHook, ForwardHook, ForwardPreHook, ModuleHooks, ModuleIo, RemovableHandle, call_module,
    register_module_forward_hook, register_module_forward_pre_hook, register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
};
// fx's tracer records module calls and names modules by these.
#[doc(hidden)]
pub use hooks::{ModuleKey, module_key};
pub use layers::{
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Embedding, Flatten, Forward,
    GELU, GroupNorm, Hardsigmoid, Hardswish, Identity, Layer, LayerNorm, LeakyReLU, Linear, MaxPool2d, RMSNorm, ReLU,
    Sequential, SiLU, Softmax, Tanh, Unflatten, Upsample,
};
#[doc(hidden)]
pub use layers::{ModuleCallHook, install_module_call_hook};
#[doc(hidden)]
pub use module::layer_probe as __layer_probe;
pub(crate) use module::replace_tensors;
pub use module::{Buffer, Module, ModuleField, Parameter, ParameterClass, Training, Visitor, VisitorMut};
pub use recurrent::{GRU, LSTM};
pub use state_dict::{IncompatibleKeys, StateDict};
pub use transformer::{Activation, MultiheadAttention, TransformerEncoder, TransformerEncoderLayer};
