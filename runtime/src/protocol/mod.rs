//! The override protocol (layer 1): classes and hooks, function handles, relevant arguments,
//! dispatch, modes and guards.

mod args;
pub mod bind;
mod class;
pub mod dispatch;
mod func;
pub mod implements;
mod relevant;
pub(crate) mod rerun;
pub(crate) mod state;

pub use class::{Class, DuckTensor, Hook, Outcome, TensorLike, TensorParent, TensorSubclass, TorchFunction, Types};
pub use dispatch::{handle_torch_function, has_torch_function, is_tensor_like};
pub use func::{Func, FuncKind, Overload, Param, ParamDefault, RegisteredOverload, Route, Signature};
pub use relevant::Relevant;
pub use state::{
    DEFAULT_RECURSION_LIMIT, DisableTorchFunction, DisableTorchFunctionSubclass, EnableTorchFunction, IntoMode,
    ModeGuard, TorchFunctionMode, current_mode, enable_torch_function, is_torch_function_enabled,
    is_torch_function_mode_enabled, mode_stack, mode_stack_len, pop_mode, push_mode, recursion_limit,
    set_recursion_limit,
};
