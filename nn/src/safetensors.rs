//! The safetensors format (the `safetensors` crate): state dicts to and from files, so weights
//! move between PyTorch (`safetensors.torch.save_file` / `load_file`) and torchfn.
//!
//! ```
//! use torchfn::nn::StateDict;
//!
//! let path = std::env::temp_dir().join(format!("torchfn-st-doc-{}.safetensors", std::process::id()));
//! let mut state = StateDict::new();
//! state.insert("fc.weight", torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?);
//! state.insert("steps", torchfn::tensor(7i64)?);
//! torchfn::safetensors::save_file(&state, &path)?;
//! let back = torchfn::safetensors::load_file(&path)?;
//! assert_eq!(back.get("fc.weight").unwrap().to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
//! assert_eq!(back.get("steps").unwrap().item()?, torchfn::Scalar::Int(7));
//! std::fs::remove_file(&path).ok();
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt::Display;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView, View};

use crate::error::{Error, Result, bail};
use crate::half::{bf16, f16};
use crate::modules::StateDict;
use crate::{DType, Tensor};

/// A tensor's bytes as safetensors stores them: row-major, little-endian.
struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn le_bytes<T: Copy, const N: usize>(values: Vec<T>, to_le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.into_iter().flat_map(to_le).collect()
}

fn bytes_of(tensor: &Tensor) -> Result<Bytes> {
    let shape = tensor.shape()?.to_vec();
    let t = tensor.detach()?;
    let (dtype, data) = match tensor.dtype()? {
        DType::Float32 => (Dtype::F32, le_bytes(t.to_vec::<f32>()?, f32::to_le_bytes)),
        DType::Float64 => (Dtype::F64, le_bytes(t.to_vec::<f64>()?, f64::to_le_bytes)),
        DType::Int64 => (Dtype::I64, le_bytes(t.to_vec::<i64>()?, i64::to_le_bytes)),
        DType::Int32 => (Dtype::I32, le_bytes(t.to_vec::<i32>()?, i32::to_le_bytes)),
        DType::Int16 => (Dtype::I16, le_bytes(t.to_vec::<i16>()?, i16::to_le_bytes)),
        DType::Int8 => (Dtype::I8, le_bytes(t.to_vec::<i8>()?, i8::to_le_bytes)),
        DType::UInt8 => (Dtype::U8, t.to_vec::<u8>()?),
        DType::Float16 => (Dtype::F16, le_bytes(t.to_vec::<f16>()?, f16::to_le_bytes)),
        DType::BFloat16 => (Dtype::BF16, le_bytes(t.to_vec::<bf16>()?, bf16::to_le_bytes)),
        DType::Bool => (Dtype::BOOL, t.to_vec::<bool>()?.into_iter().map(u8::from).collect()),
    };
    Ok(Bytes { dtype, shape, data })
}

/// The tensors of `state` as safetensors stores them, by name.
fn tensors_of(state: &StateDict) -> Result<Vec<(String, Bytes)>> {
    state.iter().map(|(k, t)| Ok((k.to_string(), bytes_of(t)?))).collect()
}

/// Writes `state` to a safetensors file at `path` (`safetensors.torch.save_file`), replacing
/// any file there. Tensors are written in row-major order whatever their strides; a tensor on
/// the GPU is read back first. An `OSError` when the file cannot be written.
pub fn save_file(state: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let tensors = tensors_of(state)?;
    safetensors::serialize_to_file(tensors.iter().map(|(k, b)| (k.as_str(), b)), None, path).map_err(|e| match e {
        safetensors::SafeTensorError::IoError(io) => {
            Error::os_error(format!("safetensors::save_file(): cannot write {}: {io}", path.display()))
        }
        other => Error::value_error(format!("safetensors::save_file(): {other}")),
    })
}

/// `state` as the bytes of a safetensors file (`safetensors.torch.save`): exactly what
/// [`save_file`] writes.
///
/// ```
/// use torchfn::nn::StateDict;
///
/// let mut state = StateDict::new();
/// state.insert("w", torchfn::tensor([1.5f64, -2.0])?);
/// let bytes = torchfn::safetensors::save(&state)?;
/// let back = torchfn::safetensors::load(&bytes)?;
/// assert_eq!(back.get("w").unwrap().to_vec::<f64>()?, [1.5, -2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn save(state: &StateDict) -> Result<Vec<u8>> {
    let tensors = tensors_of(state)?;
    safetensors::serialize(tensors.iter().map(|(k, b)| (k.as_str(), b)), None)
        .map_err(|e| Error::value_error(format!("safetensors::save(): {e}")))
}

/// Reads a safetensors file (`safetensors.torch.load_file`) into a state dict, on the CPU, in
/// the order of the tensors' data in the file (empty tensors, which take no room, by name).
/// An `OSError` when the file cannot be read; a `ValueError` naming the file when it is
/// truncated or corrupt, or holds a dtype torchfn has no tensors of.
pub fn load_file(path: impl AsRef<Path>) -> Result<StateDict> {
    let path = path.as_ref();
    let buffer = std::fs::read(path)
        .map_err(|e| Error::os_error(format!("safetensors::load_file(): cannot read {}: {e}", path.display())))?;
    deserialize("safetensors::load_file", &path.display(), &buffer)
}

/// Reads a state dict from the bytes of a safetensors file (`safetensors.torch.load`), on the
/// CPU, in the order [`load_file`] gives. Reading never panics, and allocates no more than the
/// tensors the bytes hold: a `ValueError` says what is wrong when the bytes are truncated or
/// corrupt, or hold a dtype torchfn has no tensors of.
///
/// ```
/// // An 8-byte header length, then the header: a JSON object (here with no tensors).
/// assert!(torchfn::safetensors::load(b"\x02\0\0\0\0\0\0\0{}")?.is_empty());
/// let err = torchfn::safetensors::load(b"\x03\0\0\0\0\0\0\0{}").unwrap_err();
/// assert_eq!(err.kind(), torchfn::ErrorKind::Value);
/// assert!(err.to_string().starts_with("safetensors::load(): argument 'data' is not a valid safetensors file"), "{err}");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn load(data: &[u8]) -> Result<StateDict> {
    deserialize("safetensors::load", &"argument 'data'", data)
}

/// The state dict in `buffer`; `func` and `source` name the call and the bytes in errors.
fn deserialize(func: &str, source: &dyn Display, buffer: &[u8]) -> Result<StateDict> {
    let file = SafeTensors::deserialize(buffer)
        .map_err(|e| Error::value_error(format!("{func}(): {source} is not a valid safetensors file: {e}")))?;
    // In the order of their data; empty tensors share an offset, and go by name, so that the
    // order is the same on every run (the header is a JSON object, read as a hash map).
    let mut tensors: Vec<(String, TensorView<'_>)> = file.tensors();
    let place = |view: &TensorView<'_>| (view.data().as_ptr() as usize, view.data().len());
    tensors.sort_by(|(a, x), (b, y)| (place(x), a).cmp(&(place(y), b)));
    let mut state = StateDict::new();
    for (name, view) in tensors {
        state.insert(name.clone(), tensor_of(&name, &view, func, source)?);
    }
    Ok(state)
}

fn tensor_of(name: &str, view: &TensorView<'_>, func: &str, source: &dyn Display) -> Result<Tensor> {
    let shape = view.shape().to_vec();
    let data: &[u8] = view.data();
    // The format checks that the data is as long as the shape needs, which says nothing of an
    // empty shape's other dimensions; they must fit in memory as those of a tensor with data
    // would (strides, views and copies, and ndarray, multiply them).
    let itemsize = view.dtype().bitsize().div_ceil(8);
    if !crate::Shape::from(&shape[..]).fits_in_memory(itemsize) {
        bail!(
            Value,
            "{func}(): tensor '{name}' of {source} has shape {shape:?}: it is empty, but its other dimensions \
             multiply to more elements of {itemsize} bytes than memory can hold"
        );
    }
    fn chunks<const N: usize, T>(data: &[u8], from: impl Fn([u8; N]) -> T) -> Vec<T> {
        data.chunks_exact(N).map(|c| from(c.try_into().unwrap_or([0; N]))).collect()
    }
    match view.dtype() {
        Dtype::F32 => Tensor::from_vec(chunks(data, f32::from_le_bytes), shape),
        Dtype::F64 => Tensor::from_vec(chunks(data, f64::from_le_bytes), shape),
        Dtype::I64 => Tensor::from_vec(chunks(data, i64::from_le_bytes), shape),
        Dtype::I32 => Tensor::from_vec(chunks(data, i32::from_le_bytes), shape),
        Dtype::I16 => Tensor::from_vec(chunks(data, i16::from_le_bytes), shape),
        Dtype::I8 => Tensor::from_vec(chunks(data, i8::from_le_bytes), shape),
        Dtype::U8 => Tensor::from_vec(data.to_vec(), shape),
        // The bits as they are, NaN payloads included: a load is bit-exact.
        Dtype::F16 => Tensor::from_vec(chunks(data, f16::from_le_bytes), shape),
        Dtype::BF16 => Tensor::from_vec(chunks(data, bf16::from_le_bytes), shape),
        Dtype::BOOL => Tensor::from_vec(data.iter().map(|&b| b != 0).collect::<Vec<bool>>(), shape),
        other => {
            bail!(Value, "{func}(): tensor '{name}' of {source} has dtype {other:?}, which torchfn has no tensors of")
        }
    }
}
