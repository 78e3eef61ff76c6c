//! Tools built on the layers below (`torch.utils`): the FLOP counter, and the module tracker it
//! charges modules with.

pub mod flop_counter;
pub mod module_tracker;
