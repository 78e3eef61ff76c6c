//! PLACEHOLDER (being written): index_select and gather on the GPU.

use std::sync::Arc;

use crate::backend::{Array, Device};
use crate::error::Result;

use super::context::Context;
use super::launch::unsupported;

pub(crate) fn index_select(_: &Arc<Context>, _: Device, _: &Array, _: usize, _: &Array) -> Result<Array> {
    Err(unsupported("index", "index_select"))
}

pub(crate) fn gather(_: &Arc<Context>, _: Device, _: &Array, _: usize, _: &Array) -> Result<Array> {
    Err(unsupported("index", "gather"))
}

#[cfg(test)]
pub(crate) fn variants() -> Vec<super::launch::Kernel> {
    Vec::new()
}
