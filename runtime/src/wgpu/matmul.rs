//! PLACEHOLDER (being written): matrix products on the GPU.

use std::sync::Arc;

use crate::backend::{Array, Device};
use crate::error::Result;
use crate::tensor::{DType, Shape};

use super::context::Context;
use super::launch::unsupported;

pub(crate) fn matmul(_: &Arc<Context>, _: Device, _: &Array, _: &Array, _: &Shape, _: DType) -> Result<Array> {
    Err(unsupported("matmul", "matmul"))
}

#[cfg(test)]
pub(crate) fn variants() -> Vec<super::launch::Kernel> {
    Vec::new()
}
