//! PLACEHOLDER (being written): conv2d and max_pool2d on the GPU.

use std::sync::Arc;

use crate::backend::{Array, Device, Window};
use crate::error::Result;

use super::context::Context;
use super::launch::unsupported;

pub(crate) fn conv2d(
    _: &Arc<Context>,
    _: Device,
    _: &Array,
    _: &Array,
    _: Option<&Array>,
    _: usize,
    _: &Window,
) -> Result<Array> {
    Err(unsupported("window", "conv2d"))
}

pub(crate) fn max_pool2d(_: &Arc<Context>, _: Device, _: &Array, _: &Window) -> Result<(Array, Array)> {
    Err(unsupported("window", "max_pool2d"))
}

#[cfg(test)]
pub(crate) fn variants() -> Vec<super::launch::Kernel> {
    Vec::new()
}
