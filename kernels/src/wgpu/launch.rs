//! Running kernels: WGSL templates specialised by text substitution, a pipeline cache keyed by
//! kernel and specialisation, and a batch that records many dispatches (and the copies between
//! them) into one command encoder per submit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

use super::context::Context;

/// What every shader starts with: the parameter buffer and helpers (`gpu-shaders/common.wgsl`).
const COMMON: &str = include_str!("../../../gpu-shaders/common.wgsl");

/// Threads per workgroup of the one-thread-per-element kernels.
pub const GROUP: u32 = 256;

/// Dispatches recorded before the batch is submitted (1 submits each at once).
static BATCH_LIMIT: AtomicUsize = AtomicUsize::new(64);

/// Sets how many kernel launches are recorded into one submission to the GPU (at least 1). 1
/// submits each launch at once; larger batches cost fewer driver calls. Readbacks and
/// [`Device::synchronize`](crate::backend::Device::synchronize) submit what is recorded, whatever the
/// size. The default is 64.
pub fn set_batch_limit(launches: usize) {
    BATCH_LIMIT.store(launches.max(1), Ordering::Relaxed);
}

/// The bytes of parameters one batch carries; a batch whose parameters fill it is submitted.
const PARAMS_BYTES: u64 = 1 << 16;

/// A WGSL template and the values of its `{{NAME}}` placeholders: one specialisation of a
/// kernel family.
pub struct Kernel {
    /// The family and entry point, for the cache key and error messages (`"elementwise"`).
    pub name: &'static str,
    /// The template text (a file of `gpu-shaders/`).
    pub template: &'static str,
    /// Each placeholder and its value.
    pub defines: Vec<(&'static str, String)>,
    /// The access of each buffer binding after the parameters (binding 0): `true` for
    /// read-write, in binding order (bindings 1, 2, ...).
    pub writes: Vec<bool>,
}

impl Kernel {
    /// The WGSL source: the common prelude and the template with its placeholders filled.
    pub fn source(&self) -> String {
        let mut source = format!("{COMMON}\n{}", self.template);
        for (name, value) in &self.defines {
            source = source.replace(&format!("{{{{{name}}}}}"), value);
        }
        source
    }

    /// The key of the pipeline cache.
    fn key(&self) -> String {
        let mut key = self.name.to_string();
        for (name, value) in &self.defines {
            key.push_str(&format!("|{name}={value}"));
        }
        key
    }
}

/// Work recorded and not yet submitted: a command encoder, the parameters of its dispatches,
/// and how many there are. The parameters' buffer is made once and rewritten by each submit:
/// wgpu orders a queued write after the work submitted before it, so the previous batch has
/// read its parameters by then.
#[derive(Default)]
pub struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    params: Vec<u8>,
    params_buffer: Option<wgpu::Buffer>,
    launches: usize,
}

impl Context {
    /// The pipeline of `kernel`, built on first use. A shader that does not compile, or a
    /// pipeline the device refuses, is an error naming the kernel.
    fn pipeline(&self, kernel: &Kernel) -> Result<Arc<wgpu::ComputePipeline>> {
        let key = kernel.key();
        if let Some(pipeline) = self.pipelines.lock().get(&key) {
            return Ok(pipeline.clone());
        }
        let source = kernel.source();
        let doing = format!("building the {} kernel ({key})", kernel.name);
        let pipeline = self.scoped(wgpu::ErrorFilter::Validation, &doing, || {
            let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.name),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            };
            let entries: Vec<_> = std::iter::once(storage(0, true))
                .chain(kernel.writes.iter().enumerate().map(|(i, &w)| storage(i as u32 + 1, !w)))
                .collect();
            let layout = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(kernel.name),
                entries: &entries,
            });
            let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(kernel.name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(kernel.name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        })?;
        let pipeline = Arc::new(pipeline);
        self.pipelines.lock().insert(key, pipeline.clone());
        Ok(pipeline)
    }

    /// Records `kernel` over `groups` workgroups with `params` (binding 0) and `buffers`
    /// (bindings 1, 2, ... in the order of `kernel.writes`). More workgroups than the device
    /// allows along one dimension are split over two: kernels number their workgroups with
    /// `group_index` of `common.wgsl`.
    pub fn launch(&self, kernel: &Kernel, params: &[u32], buffers: &[&wgpu::Buffer], groups: u32) -> Result<()> {
        if buffers.len() != kernel.writes.len() {
            return Err(self.failed(
                &format!("launching the {} kernel", kernel.name),
                &format!("{} buffers for {} bindings", buffers.len(), kernel.writes.len()),
            ));
        }
        if groups == 0 {
            return Ok(());
        }
        self.alive()?;
        let pipeline = self.pipeline(kernel)?;
        let limit = self.limits.max_compute_workgroups_per_dimension.max(1);
        let (x, y) = (groups.min(limit), groups.div_ceil(limit));
        if y > limit {
            return Err(self.failed(
                &format!("launching the {} kernel", kernel.name),
                &format!("{groups} workgroups are more than the device can dispatch"),
            ));
        }
        let align = u64::from(self.limits.min_storage_buffer_offset_alignment).max(4);
        let bytes: &[u8] = bytemuck::cast_slice(params);
        let size = (bytes.len() as u64).max(4);
        if size > PARAMS_BYTES {
            return Err(self.failed(
                &format!("launching the {} kernel", kernel.name),
                &format!("its {size} bytes of parameters are more than {PARAMS_BYTES} (too many dimensions)"),
            ));
        }
        let mut batch = self.batch.lock();
        let start = (batch.params.len() as u64).div_ceil(align) * align;
        if start + size > PARAMS_BYTES {
            self.submit(&mut batch)?;
        }
        let start = (batch.params.len() as u64).div_ceil(align) * align;
        batch.params.resize(start as usize, 0);
        batch.params.extend_from_slice(bytes);
        batch.params.resize((start + size) as usize, 0);
        let params_buffer = batch
            .params_buffer
            .get_or_insert_with(|| {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("torchfn parameters"),
                    size: PARAMS_BYTES,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .clone();
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &params_buffer,
                offset: start,
                size: wgpu::BufferSize::new(size),
            }),
        }];
        entries.extend(
            buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() }),
        );
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.name),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let encoder = self.encoder(&mut batch);
        {
            let mut pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(kernel.name), timestamp_writes: None });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
        batch.launches += 1;
        if batch.launches >= BATCH_LIMIT.load(Ordering::Relaxed) {
            self.submit(&mut batch)?;
        }
        Ok(())
    }

    /// The batch's command encoder, created when the batch starts.
    fn encoder<'b>(&self, batch: &'b mut Batch) -> &'b mut wgpu::CommandEncoder {
        batch.encoder.get_or_insert_with(|| {
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("torchfn") })
        })
    }

    /// Records a copy of `bytes` from host memory into `target`, in order with the launches.
    /// `bytes` is whole words. A device out of memory or lost is an error (wgpu's own
    /// `create_buffer_init` would panic).
    pub fn record_upload(&self, bytes: &[u8], target: &wgpu::Buffer) -> Result<()> {
        self.alive()?;
        let size = bytes.len() as u64;
        let staging =
            self.scoped(wgpu::ErrorFilter::OutOfMemory, &format!("staging {size} bytes to upload"), || {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("torchfn upload"),
                    size,
                    usage: wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                })
            })?;
        let mut view =
            staging.slice(..).get_mapped_range_mut().map_err(|e| self.failed("uploading", &e.to_string()))?;
        view.copy_from_slice(bytes);
        drop(view);
        staging.unmap();
        self.record_copy(&staging, 0, target, size)
    }

    /// Records a copy of `bytes` from `source` at `offset` to the start of `target`.
    pub fn record_copy(&self, source: &wgpu::Buffer, offset: u64, target: &wgpu::Buffer, bytes: u64) -> Result<()> {
        self.alive()?;
        let mut batch = self.batch.lock();
        self.encoder(&mut batch).copy_buffer_to_buffer(source, offset, target, 0, bytes);
        Ok(())
    }

    /// Submits everything recorded so far (without waiting for it).
    pub fn flush(&self) -> Result<()> {
        let mut batch = self.batch.lock();
        self.submit(&mut batch)
    }

    fn submit(&self, batch: &mut Batch) -> Result<()> {
        let Some(encoder) = batch.encoder.take() else { return Ok(()) };
        if let Some(params) = &batch.params_buffer
            && !batch.params.is_empty()
        {
            self.queue.write_buffer(params, 0, &batch.params);
        }
        batch.params.clear();
        batch.launches = 0;
        self.queue.submit([encoder.finish()]);
        self.alive()
    }
}

/// An error for a kernel asked for something it cannot do (a bug in the caller).
pub fn unsupported(kernel: &str, what: impl std::fmt::Display) -> Error {
    Error::runtime_error(format!("internal error in the wgpu {kernel} kernel: {what}"))
}

/// The workgroups that give one thread per item of `count`, `per_group` threads a group.
pub fn groups_for(count: usize, per_group: u32) -> Result<u32> {
    u32::try_from(count.div_ceil(per_group as usize))
        .map_err(|_| Error::runtime_error(format!("{count} elements are more than one wgpu dispatch can address")))
}

/// A parameter word, or an error for a value a 32-bit word cannot hold.
pub fn word(value: usize) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        Error::runtime_error(format!(
            "a tensor position ({value}) beyond 2^32 elements: wgpu kernels address 32-bit positions"
        ))
    })
}

/// Parameter words of `values`, or an error for the first a 32-bit word cannot hold.
pub fn words(values: impl IntoIterator<Item = usize>) -> Result<Vec<u32>> {
    values.into_iter().map(word).collect()
}
