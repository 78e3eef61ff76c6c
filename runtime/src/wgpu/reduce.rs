//! PLACEHOLDER (being written): reductions, scans and softmax on the GPU.

use std::sync::Arc;

use crate::backend::{Array, Device, Reduce, Scan};
use crate::error::Result;
use crate::tensor::DType;

use super::context::Context;
use super::launch::unsupported;

pub(crate) fn reduce(_: &Arc<Context>, _: Device, _: &Array, _: &[usize], op: Reduce, _: DType) -> Result<Array> {
    Err(unsupported("reduce", format!("{op:?}")))
}

pub(crate) fn scan(_: &Arc<Context>, _: Device, _: &Array, _: usize, op: Scan, _: DType) -> Result<Array> {
    Err(unsupported("scan", format!("{op:?}")))
}

pub(crate) fn softmax(_: &Arc<Context>, _: Device, _: &Array, _: usize, _: bool, _: DType) -> Result<Array> {
    Err(unsupported("softmax", "softmax"))
}

#[cfg(test)]
pub(crate) fn variants() -> Vec<super::launch::Kernel> {
    Vec::new()
}
