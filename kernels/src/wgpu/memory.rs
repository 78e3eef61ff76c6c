//! GPU memory: storage buffers of 4-byte words (a float32, an int32 or a bool per word, or two or
//! four packed elements of the narrower dtypes), reused through a pool of freed buffers by size
//! class; uploads and readbacks.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::backend::{Buffer, Device, Storage};
use crate::error::{Error, Result};
use crate::types::DType;

use super::context::Context;

/// The bytes of one word of GPU memory.
pub const WORD: u64 = 4;

/// Freed buffers are kept up to this many bytes in all, per device.
const POOL_BYTES: u64 = 1 << 30;

/// A tensor's memory on a GPU: at least `words` 4-byte words. Dropping it gives the buffer back
/// to its context's pool.
pub struct GpuMemory {
    buffer: Option<wgpu::Buffer>,
    /// The number of words it holds.
    pub words: usize,
    pub context: Arc<Context>,
}

impl GpuMemory {
    /// The storage buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("a buffer is only taken when its memory is dropped")
    }
}

impl std::fmt::Debug for GpuMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuMemory({} words on wgpu:{})", self.words, self.context.index)
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.context.pool.give(buffer);
        }
    }
}

/// The size class of a buffer of `bytes`: four classes per doubling, so a reused buffer is at
/// most a quarter larger than asked for.
fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(256);
    let step = (bytes.next_power_of_two() / 8).max(64);
    bytes.div_ceil(step) * step
}

/// Freed buffers by size class, and how many bytes they hold.
#[derive(Default)]
pub struct Pool {
    free: Mutex<(HashMap<u64, Vec<wgpu::Buffer>>, u64)>,
}

impl Pool {
    fn give(&self, buffer: wgpu::Buffer) {
        let size = buffer.size();
        let mut free = self.free.lock();
        if free.1 + size > POOL_BYTES {
            return;
        }
        free.1 += size;
        free.0.entry(size).or_default().push(buffer);
    }

    fn take(&self, class: u64) -> Option<wgpu::Buffer> {
        let mut free = self.free.lock();
        let buffer = free.0.get_mut(&class)?.pop()?;
        free.1 -= buffer.size();
        Some(buffer)
    }

    /// Frees every pooled buffer (when memory runs out).
    fn clear(&self) {
        *self.free.lock() = Default::default();
    }
}

impl Context {
    /// The largest buffer one tensor may have, in bytes: whole words (Vulkan and DX12 report
    /// an odd binding limit, 2^31 - 1, and bindings must be whole words), and at most 2^32 - 1
    /// of them, so that the shaders' u32 positions never wrap.
    pub fn max_bytes(&self) -> u64 {
        let limit = self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size);
        limit.min(u64::from(u32::MAX) * WORD) & !(WORD - 1)
    }

    /// Memory for `words` elements (their contents undefined), from the pool when it has a
    /// buffer of the size class. A tensor larger than the device allows, or one the device has
    /// no memory left for, is an error that says so.
    pub fn alloc(self: &Arc<Self>, func: &str, words: usize) -> Result<GpuMemory> {
        let bytes = (words as u64).checked_mul(WORD).filter(|&b| b <= self.max_bytes()).ok_or_else(|| {
            Error::runtime_error(format!(
                "{func}(): a tensor of {words} elements ({} bytes) is larger than wgpu:{} ({}) allows in one buffer \
                 ({} bytes); split it, or compute on the CPU",
                (words as u128) * u128::from(WORD),
                self.index,
                self.description,
                self.max_bytes()
            ))
        })?;
        let class = size_class(bytes).min(self.max_bytes().max(bytes));
        let buffer = match self.pool.take(class) {
            Some(buffer) => buffer,
            None => self.create(func, class)?,
        };
        Ok(GpuMemory { buffer: Some(buffer), words, context: self.clone() })
    }

    /// A new storage buffer of `bytes`; when the device is out of memory the pool is emptied
    /// and the allocation tried once more.
    fn create(&self, func: &str, bytes: u64) -> Result<wgpu::Buffer> {
        let descriptor = wgpu::BufferDescriptor {
            label: Some("torchfn tensor"),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        };
        let doing = format!("allocating {bytes} bytes for {func}()");
        self.scoped(wgpu::ErrorFilter::OutOfMemory, &doing, || self.device.create_buffer(&descriptor)).or_else(|_| {
            // Pooled buffers are freed once no recorded or running work uses them.
            self.pool.clear();
            self.flush()?;
            self.idle()?;
            self.scoped(wgpu::ErrorFilter::OutOfMemory, &doing, || self.device.create_buffer(&descriptor))
        })
    }

    /// Host elements copied into new GPU memory. The copy is recorded with the pending work, so
    /// it lands after every command recorded before it.
    pub fn upload(self: &Arc<Self>, func: &str, data: &Buffer) -> Result<GpuMemory> {
        let words = words_of(data)?;
        let memory = self.alloc(func, words.len())?;
        if !words.is_empty() {
            self.record_upload(bytemuck::cast_slice(&words), memory.buffer())?;
        }
        Ok(memory)
    }

    /// The bytes of `count` words of `memory` from word `start`, read back to the host: one
    /// copy into a mapped buffer, after every command recorded so far.
    pub fn download(self: &Arc<Self>, memory: &GpuMemory, start: usize, count: usize) -> Result<Vec<u32>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        if start + count > memory.words {
            return Err(self
                .failed("reading back", &format!("words {start}..{} of a buffer of {}", start + count, memory.words)));
        }
        let bytes = count as u64 * WORD;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("torchfn readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.record_copy(memory.buffer(), start as u64 * WORD, &staging, bytes)?;
        self.flush()?;
        let (sender, receiver) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |result| {
            let _ = sender.send(result);
        });
        self.idle()?;
        let mapped = receiver.recv().map_err(|_| self.failed("reading back", "the map callback never ran"))?;
        mapped.map_err(|e| self.failed("reading back", &e.to_string()))?;
        let view = staging.slice(..).get_mapped_range().map_err(|e| self.failed("reading back", &e.to_string()))?;
        let words = bytemuck::pod_collect_to_vec::<u8, u32>(&view);
        drop(view);
        staging.unmap();
        Ok(words)
    }

    /// The error of a failed step.
    pub fn failed(&self, doing: &str, why: &str) -> Error {
        Error::runtime_error(format!("wgpu:{} ({}) failed {doing}: {why}", self.index, self.description))
    }
}

/// The GPU words of host elements: float32 and int32 as they are, bools as 0 or 1, the narrower
/// dtypes packed. The 64-bit dtypes have no GPU form (the operation refused them before).
fn words_of(data: &Buffer) -> Result<Vec<u32>> {
    Ok(match data {
        Buffer::Float32(v) => v.iter().map(|x| x.to_bits()).collect(),
        Buffer::Int32(v) => v.iter().map(|&x| x as u32).collect(),
        Buffer::Bool(v) => v.iter().map(|&b| u32::from(b)).collect(),
        _ => return super::packed::words_of(data).ok_or_else(|| not_held(data.dtype())),
    })
}

/// The error for a tensor of a dtype the wgpu backend does not hold.
fn not_held(dtype: DType) -> Error {
    let instead = if dtype.is_floating_point() { DType::Float32 } else { DType::Int32 };
    Error::runtime_error(format!(
        "{dtype} tensors cannot live on a wgpu device, which has no 64-bit types: convert to {instead} first"
    ))
}

/// Host elements of `dtype` (a 32-bit one, or bool) from GPU words.
pub fn buffer_of(words: Vec<u32>, dtype: DType) -> Result<Buffer> {
    Ok(match dtype {
        DType::Float32 => Buffer::Float32(words.into_iter().map(f32::from_bits).collect()),
        DType::Int32 => Buffer::Int32(words.into_iter().map(|w| w as i32).collect()),
        DType::Bool => Buffer::Bool(words.into_iter().map(|w| w != 0).collect()),
        _ => return Err(Error::runtime_error(format!("internal error: a {dtype} tensor on a wgpu device"))),
    })
}

/// The GPU memory behind `storage`, which is on a wgpu device.
pub fn memory_of(storage: &Storage) -> Result<&GpuMemory> {
    storage.memory::<GpuMemory>().ok_or_else(|| {
        Error::runtime_error(format!(
            "the wgpu backend was given a tensor on {}: move it there first",
            storage.device()
        ))
    })
}

/// New storage on `device` for GPU memory.
pub fn storage(device: Device, memory: GpuMemory) -> Arc<Storage> {
    Storage::new(device, memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_waste_at_most_a_quarter() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 320);
        for bytes in [1000u64, 4096, 4097, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let class = size_class(bytes);
            assert!(class >= bytes && class <= bytes + bytes / 4 + 64, "{bytes} -> {class}");
            assert_eq!(size_class(class), class, "a class is its own class");
        }
    }

    #[test]
    fn host_elements_become_words_and_back() {
        let data = Buffer::Bool(vec![true, false]);
        assert_eq!(words_of(&data).unwrap(), [1, 0]);
        assert_eq!(buffer_of(vec![1, 0], DType::Bool).unwrap(), data);
        let floats = Buffer::Float32(vec![1.5, -0.0]);
        assert_eq!(buffer_of(words_of(&floats).unwrap(), DType::Float32).unwrap(), floats);
        assert!(words_of(&Buffer::Int64(vec![1])).unwrap_err().to_string().contains("convert to torch.int32"));
    }
}
