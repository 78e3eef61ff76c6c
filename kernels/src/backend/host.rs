//! Host memory, for every backend and the layers above: moving arrays between host memory and
//! devices, reading host arrays (ndarray views, elements in row-major order, one-element values),
//! converting elements as `tensor.to(dtype)` does, and allocating without aborting when memory
//! runs out. What the tensor's readers (printing, `to_vec`, `.npy`, ndarray views), the kernels'
//! scalar operands, device transfers and the CPU backend share.

use std::borrow::Cow;

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn, ShapeBuilder};
use smallvec::SmallVec;

use super::{Array, Buffer, Device, Storage};
use crate::cpu::map;
use crate::error::{Error, Result, bail};
use crate::types::{DType, Element, Layout, Scalar, Shape, with_dtype};

/// An error unless `device` holds `dtype`: float64 and int64 on most GPUs.
pub fn check_dtype(func: &str, device: Device, dtype: DType) -> Result<()> {
    if !device.supports(dtype) {
        bail!(
            Runtime,
            "{func}(): {dtype} is not supported on {device} ({}): use {} instead, or compute on the CPU",
            device.describe(),
            if dtype.is_floating_point() { DType::Float32 } else { DType::Int32 }
        );
    }
    Ok(())
}

/// `array` in host memory: itself on the CPU, else a contiguous copy downloaded from its device.
pub fn on_host(array: &Array) -> Result<Cow<'_, Array>> {
    if array.device().is_cpu() {
        return Ok(Cow::Borrowed(array));
    }
    let data = array.device().backend().download(array)?;
    Ok(Cow::Owned(Device::CPU.backend().upload(Device::CPU, data, array.layout.shape.clone())?))
}

/// The value of a one-element array, read on the host.
pub fn scalar_of(array: &Array) -> Result<Scalar> {
    read_scalar(&*on_host(array)?)
}

/// `x` copied to `device` as `dtype`, through host memory. Moving to a device that cannot hold
/// `dtype` (float64 to most GPUs) is an error that says so: nothing is narrowed silently.
pub fn transfer(func: &str, x: &Array, device: Device, dtype: DType) -> Result<Array> {
    check_dtype(func, device, dtype)?;
    let data = if dtype == x.dtype {
        x.device().backend().download(x)?
    } else {
        let host = on_host(x)?;
        with_dtype!(dtype, T => Buffer::from_vec(elements::<T>(func, &host)?))
    };
    device.backend().upload(device, data, x.layout.shape.clone())
}

/// A fresh contiguous host array holding `data`, of `shape`.
pub fn array<T: Element>(data: Vec<T>, shape: Shape) -> Array {
    Array::contiguous(Storage::host(Buffer::from_vec(data)), shape, T::DTYPE)
}

/// Runs `f` on an ndarray view of the host array `x`, whose dtype must be `T`. Every layout
/// torchfn makes reads correctly, expanded (stride-0) and permuted ones included; only
/// overlapping layouts that ndarray refuses are gathered into a copy first, which fails when
/// memory runs out.
pub fn read<T: Element, R>(x: &Array, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
    let buffer = x.storage.read().ok_or_else(|| not_host(x))?;
    let data = buffer.as_slice::<T>().ok_or_else(|| internal("a tensor's dtype is not its storage's"))?;
    let layout = &x.layout;
    // An empty view is given in standard layout: ndarray's `mapv` and `to_owned` assume
    // (in debug builds) that an empty view with other strides could index its slice.
    if layout.numel() == 0 {
        return Ok(f(gathered(data, layout)?.view()));
    }
    // A stride-0 (expanded) dimension of two or more elements makes the view overlap, which
    // ndarray 0.16.0 refuses (0.16.1 accepts it for read-only views): such a dimension is viewed
    // with size one, then broadcast back. The dimensions left address distinct elements, as in
    // every layout torchfn makes.
    let expanded = |(&n, &s): (&usize, &usize)| s == 0 && n > 1;
    let collapsed: SmallVec<[usize; 6]> =
        layout.shape.iter().zip(&layout.strides).map(|d| if expanded(d) { 1 } else { *d.0 }).collect();
    let any_expanded = collapsed.as_slice() != &layout.shape[..];
    let start = &data[layout.offset.min(data.len())..];
    match ArrayViewD::from_shape(IxDyn(&collapsed).strides(IxDyn(&layout.strides)), start) {
        Ok(view) if !any_expanded => Ok(f(view)),
        Ok(view) => match view.broadcast(IxDyn(&layout.shape)) {
            Some(view) => Ok(f(view)),
            None => Err(internal("an expanded layout does not broadcast")),
        },
        // Other overlapping strides (refused by ndarray 0.16.0), or an empty tensor whose
        // strides ndarray cannot offset by: the elements are gathered one by one.
        Err(_) => Ok(f(gathered(data, layout)?.view())),
    }
}

/// The elements `layout` addresses in `data`, copied into a standard-layout array.
fn gathered<T: Element>(data: &[T], layout: &Layout) -> Result<ArrayD<T>> {
    let shape = IxDyn(&layout.shape);
    let n = layout.shape.checked_numel().ok_or_else(|| too_large("read", &layout.shape))?;
    let mut elements = alloc("read", n)?;
    if n > 0 {
        for index in ndarray::indices(shape.clone()) {
            let position = index.slice().iter().zip(&layout.strides).fold(layout.offset, |p, (&i, &s)| p + i * s);
            elements.push(*data.get(position).ok_or_else(|| internal("a layout leaves its storage"))?);
        }
    }
    ArrayD::from_shape_vec(shape, elements).map_err(|_| internal("one element per position"))
}

/// Runs `f` on a view of `x` as `T`, converting (into a temporary) when its dtype differs.
pub fn read_as<T: Element, R>(x: &Array, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
    if x.dtype == T::DTYPE {
        return read(x, f);
    }
    let converted = array(elements::<T>("read", x)?, x.layout.shape.clone());
    read(&converted, f)
}

/// The elements of `x` converted to `T`, in row-major order, in a fresh vector.
pub fn elements<T: Element>(func: &str, x: &Array) -> Result<Vec<T>> {
    with_dtype!(x.dtype, S => map::with_input(x, |data: &[S], layout| map::gather::<S, T>(func, data, layout))?)
}

/// Runs `f` on the elements of `x` as `T`, in row-major order: in place when `x` is
/// contiguous and of dtype `T`, else through a converted copy.
pub fn with_elements<T: Element, R>(x: &Array, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    with_all_elements([x], |[data]| f(data))
}

/// [`with_elements`] of several arrays at once: `f` on the elements of each, as `T`.
pub fn with_all_elements<T: Element, R, const N: usize>(xs: [&Array; N], f: impl FnOnce([&[T]; N]) -> R) -> Result<R> {
    /// One array's elements: its storage, read-locked, where they lie there in order, else a
    /// converted copy.
    enum Held<'a, T> {
        Locked(parking_lot::RwLockReadGuard<'a, Buffer>, std::ops::Range<usize>),
        Copied(Vec<T>),
    }
    fn hold<T: Element>(x: &Array) -> Result<Held<'_, T>> {
        if x.dtype == T::DTYPE && x.layout.is_contiguous() {
            let buffer = x.storage.read().ok_or_else(|| not_host(x))?;
            let range = x.layout.offset..x.layout.offset + x.layout.numel();
            if buffer.as_slice::<T>().is_some_and(|d| d.get(range.clone()).is_some()) {
                return Ok(Held::Locked(buffer, range));
            }
        }
        Ok(Held::Copied(elements::<T>("read", x)?))
    }
    let held: Vec<Held<'_, T>> = xs.into_iter().map(hold).collect::<Result<_>>()?;
    let mut slices = [&[][..]; N];
    for (slice, held) in slices.iter_mut().zip(&held) {
        *slice = match held {
            Held::Locked(buffer, range) => {
                &buffer.as_slice::<T>().ok_or_else(|| internal("a checked buffer"))?[range.clone()]
            }
            Held::Copied(data) => data,
        };
    }
    Ok(f(slices))
}

/// An empty vector with room for `n` elements, or an error naming `func` when memory runs out
/// (a huge expanded tensor copied, say): never an abort.
pub fn alloc<T>(func: &str, n: usize) -> Result<Vec<T>> {
    let mut data = Vec::new();
    reserve_exact(&mut data, n).map_err(|_| {
        Error::runtime_error(format!("{func}(): not enough memory: you tried to allocate {n} elements"))
    })?;
    Ok(data)
}

/// The refusal of [`reserve_exact`]: the elements asked for cannot be had.
#[derive(Debug)]
pub struct OutOfMemory;

/// Room for exactly `n` more elements in `data` (`Vec::try_reserve_exact`), refused beforehand
/// when the vector would outgrow the machine's memory and swap together. Every buffer torchfn
/// allocates is written at once (zeroed, filled or computed), so such an allocation could never
/// complete: on Linux with `vm.overcommit_memory=1` the system grants any size and then ends
/// the process when the pages are touched, where this gives an error instead.
pub fn reserve_exact<T>(data: &mut Vec<T>, n: usize) -> std::result::Result<(), OutOfMemory> {
    fits(data, n)?;
    data.try_reserve_exact(n).map_err(|_| OutOfMemory)
}

/// [`reserve_exact`] for a vector that grows a piece at a time (`Vec::try_reserve`, which
/// keeps the growth amortised).
pub fn reserve<T>(data: &mut Vec<T>, n: usize) -> std::result::Result<(), OutOfMemory> {
    fits(data, n)?;
    data.try_reserve(n).map_err(|_| OutOfMemory)
}

/// Refuses `n` more elements in `data` when the vector would outgrow the machine's memory and
/// swap together.
fn fits<T>(data: &[T], n: usize) -> std::result::Result<(), OutOfMemory> {
    let bytes = data.len().saturating_add(n).saturating_mul(std::mem::size_of::<T>());
    if bytes > host_memory() { Err(OutOfMemory) } else { Ok(()) }
}

/// The machine's memory and swap together in bytes (`MemTotal` plus `SwapTotal` of
/// `/proc/meminfo`), read once; unlimited where that file is not there (other systems).
fn host_memory() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let Ok(info) = std::fs::read_to_string("/proc/meminfo") else { return usize::MAX };
        let kib = |key: &str| {
            let line = info.lines().find_map(|l| l.strip_prefix(key))?;
            line.trim_start_matches(':').split_whitespace().next()?.parse::<usize>().ok()
        };
        match (kib("MemTotal"), kib("SwapTotal")) {
            (Some(memory), swap) => memory.saturating_add(swap.unwrap_or(0)).saturating_mul(1024),
            (None, _) => usize::MAX,
        }
    })
}

/// The error for a result with more elements than a `usize` counts.
pub(crate) fn too_large(func: &str, shape: &Shape) -> Error {
    Error::runtime_error(format!("{func}(): a tensor of shape {:?} is too large to allocate", shape.as_ref()))
}

/// The element of a one-element host array as a Python number.
pub fn read_scalar(x: &Array) -> Result<Scalar> {
    with_dtype!(x.dtype, T => read(x, |v: ArrayViewD<'_, T>| v.iter().next().copied().unwrap_or_default().to_scalar()))
}

/// Converts one element as `tensor.to(dtype)` does: floats truncate toward zero into integers,
/// anything non-zero is `true`.
#[inline(always)]
pub fn cast<S: Element, T: Element>(x: S) -> T {
    if T::DTYPE.is_floating_point() || T::DTYPE == DType::Bool {
        T::from_f64(x.to_f64())
    } else {
        T::from_i64(x.to_i64())
    }
}

/// The error of a host read (or a CPU kernel) handed memory that is not on the host.
#[cold]
pub(crate) fn not_host(x: &Array) -> Error {
    Error::runtime_error(format!("the CPU backend was given a tensor on {}: move it to the CPU first", x.device()))
}

/// The error of a host read that finds memory in a state no layout torchfn makes allows.
fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error reading host memory: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the check, a machine that overcommits memory (`vm.overcommit_memory=1`) grants
    /// the first reservation, and the buffer's first writes end the process.
    #[test]
    fn allocations_beyond_the_machine_s_memory_are_refused_before_they_are_tried() {
        let memory = host_memory();
        if cfg!(target_os = "linux") {
            assert!((1 << 28..usize::MAX / 2).contains(&memory), "{memory} bytes of memory and swap");
        }
        let mut bytes: Vec<u8> = Vec::new();
        assert!(reserve_exact(&mut bytes, memory.saturating_add(1)).is_err());
        let mut words: Vec<f32> = vec![0.0; 4];
        assert!(reserve_exact(&mut words, memory / 4).is_err(), "the elements already held count too");
        assert!(reserve_exact(&mut words, 1024).is_ok() && words.capacity() >= 1028);
    }

    #[test]
    fn the_element_by_element_fallback_reads_any_layout() {
        let data: Vec<i64> = (0..6).collect();
        let layout = |shape: &[usize], strides: &[usize], offset| Layout {
            shape: Shape::new(shape),
            strides: strides.iter().copied().collect(),
            offset,
        };
        let read_back = |l: Layout| gathered(&data, &l).unwrap().iter().copied().collect::<Vec<_>>();
        assert_eq!(read_back(layout(&[3, 2], &[1, 1], 1)), [1, 2, 2, 3, 3, 4]);
        assert_eq!(read_back(layout(&[2, 3], &[0, 2], 0)), [0, 2, 4, 0, 2, 4]);
        assert_eq!(read_back(layout(&[0, 4], &[4, 1], 6)), [] as [i64; 0]);
    }
}
