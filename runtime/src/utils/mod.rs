//! Tools built on the layers below (`torch.utils`): the FLOP counter.

pub mod flop_counter;
