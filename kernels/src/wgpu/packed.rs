//! Dtypes narrower than a word on the GPU: float16, bfloat16, int8, uint8 and int16, stored
//! packed (two or four elements to a 32-bit word, the first in the low bits) and computed in 32
//! bits. The kernels never see them: each operation reads a packed tensor through [`widen`] (a
//! contiguous float32 or int32 copy, `gpu-shaders/unpack.wgsl`) and its result is written back
//! by [`narrow`] or [`store`] (`gpu-shaders/pack_words.wgsl` a whole word per thread into a
//! contiguous view, else `gpu-shaders/pack.wgsl` an element per thread with atomic bit
//! operations), rounding once to nearest even or wrapping, as PyTorch's CPU kernels do. The
//! conversions work on the bits alone (`gpu-shaders/packing.wgsl`), so every adapter holds
//! these dtypes and gives the CPU's bits; float16 needs no `SHADER_F16`.

use std::borrow::Cow;
use std::sync::Arc;

use crate::backend::{Array, Buffer, Device};
use crate::error::Result;
use crate::types::{DType, Layout};

use super::context::Context;
use super::elementwise;
use super::launch::{GROUP, Kernel, groups_for, word, words};
use super::memory::{memory_of, storage};

/// The kernels, each after the conversions they share: widening, narrowing an element at a
/// time through any layout, and narrowing whole words of a contiguous view.
const UNPACK: &str =
    concat!(include_str!("../../../gpu-shaders/packing.wgsl"), include_str!("../../../gpu-shaders/unpack.wgsl"));
const PACK: &str =
    concat!(include_str!("../../../gpu-shaders/packing.wgsl"), include_str!("../../../gpu-shaders/pack.wgsl"));
const PACK_WORDS: &str =
    concat!(include_str!("../../../gpu-shaders/packing.wgsl"), include_str!("../../../gpu-shaders/pack_words.wgsl"));

/// A dtype stored packed: which one, and its place in `packing.wgsl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed(DType);

impl Packed {
    /// The packing of `dtype`, or `None` for a dtype a word holds one of.
    pub fn of(dtype: DType) -> Option<Packed> {
        matches!(dtype, DType::Float16 | DType::BFloat16 | DType::Int8 | DType::UInt8 | DType::Int16)
            .then_some(Packed(dtype))
    }

    /// The bits of one element.
    fn bits(self) -> usize {
        8 * self.0.itemsize()
    }

    /// The elements one word holds.
    fn per_word(self) -> usize {
        32 / self.bits()
    }

    /// The words `n` elements take.
    fn words(self, n: usize) -> usize {
        n.div_ceil(self.per_word())
    }

    /// The 32-bit dtype its elements compute in: float32 for the floats, int32 for the
    /// integers.
    pub fn wide(self) -> DType {
        if self.0.is_floating_point() { DType::Float32 } else { DType::Int32 }
    }

    /// `FORMAT` in `packing.wgsl`.
    fn format(self) -> u32 {
        match self.0 {
            DType::Float16 => 0,
            DType::BFloat16 => 1,
            DType::Int8 => 2,
            DType::UInt8 => 3,
            _ => 4,
        }
    }

    /// The words of a contiguous view `layout` of a tensor of this dtype: the first word, how
    /// many, and the element of the first word the view starts at.
    pub fn word_range(self, layout: &Layout) -> (usize, usize, usize) {
        let per_word = self.per_word();
        let (start, end) = (layout.offset, layout.offset + layout.numel());
        (start / per_word, end.div_ceil(per_word) - start / per_word, start % per_word)
    }

    /// Host elements of this dtype from `words`: `n` of them, from element `skip` of the first
    /// word on.
    pub fn buffer_of(self, words: &[u32], skip: usize, n: usize) -> Buffer {
        let (per_word, bits) = (self.per_word(), self.bits());
        let element = |k: usize| {
            let at = skip + k;
            (words[at / per_word] >> ((at % per_word) * bits)) & ((1 << bits) - 1)
        };
        let bits16 = |k| element(k) as u16;
        match self.0 {
            DType::Float16 => Buffer::Float16((0..n).map(|k| crate::types::half::f16::from_bits(bits16(k))).collect()),
            DType::BFloat16 => {
                Buffer::BFloat16((0..n).map(|k| crate::types::half::bf16::from_bits(bits16(k))).collect())
            }
            DType::Int16 => Buffer::Int16((0..n).map(|k| bits16(k) as i16).collect()),
            DType::Int8 => Buffer::Int8((0..n).map(|k| element(k) as u8 as i8).collect()),
            _ => Buffer::UInt8((0..n).map(|k| element(k) as u8).collect()),
        }
    }

    /// The kernel of `template` (`UNPACK`, `PACK` or `PACK_WORDS`) for this dtype.
    fn kernel(self, name: &'static str, template: &'static str) -> Kernel {
        let defines = vec![("FORMAT", self.format().to_string()), ("BITS", self.bits().to_string())];
        Kernel { name, template, defines, writes: vec![false, true] }
    }
}

/// The dtype an operation computing in `dtype` computes in on the GPU: `dtype`, or for a packed
/// one its 32-bit dtype.
pub fn computes_in(dtype: DType) -> DType {
    Packed::of(dtype).map_or(dtype, Packed::wide)
}

/// The words of host elements of a packed dtype, or `None` for another dtype.
pub fn words_of(data: &Buffer) -> Option<Vec<u32>> {
    fn pack<T: Copy>(v: &[T], bits: impl Fn(T) -> u32, per_word: usize) -> Vec<u32> {
        let width = 32 / per_word;
        v.chunks(per_word).map(|c| c.iter().enumerate().fold(0, |w, (k, &x)| w | (bits(x) << (k * width)))).collect()
    }
    Some(match data {
        Buffer::Float16(v) => pack(v, |x| u32::from(x.to_bits()), 2),
        Buffer::BFloat16(v) => pack(v, |x| u32::from(x.to_bits()), 2),
        Buffer::Int16(v) => pack(v, |x| u32::from(x as u16), 2),
        Buffer::Int8(v) => pack(v, |x| u32::from(x as u8), 4),
        Buffer::UInt8(v) => pack(v, u32::from, 4),
        _ => return None,
    })
}

/// The parameters of a launch over the elements of `layout`: `[n, ndim, offset, sizes,
/// strides]`.
fn params(layout: &Layout) -> Result<Vec<u32>> {
    let mut params = vec![word(layout.numel())?, word(layout.ndim())?, word(layout.offset)?];
    params.extend(words(layout.shape.iter().copied().chain(layout.strides.iter().copied()))?);
    Ok(params)
}

/// `x` as the kernels read it: itself, or, for a packed tensor on the device, a contiguous copy
/// in its 32-bit dtype. (Host tensors joining an operation are converted by the operation.)
pub fn widen<'a>(context: &Arc<Context>, device: Device, x: &'a Array) -> Result<Cow<'a, Array>> {
    let Some(packed) = Packed::of(x.dtype).filter(|_| !x.device().is_cpu()) else {
        return Ok(Cow::Borrowed(x));
    };
    let n = x.numel();
    let memory = context.alloc("to", n)?;
    if n > 0 {
        let buffers = [memory_of(&x.storage)?.buffer(), memory.buffer()];
        context.launch(&packed.kernel("unpack", UNPACK), &params(&x.layout)?, &buffers, groups_for(n, GROUP)?)?;
    }
    Ok(Cow::Owned(Array::contiguous(storage(device, memory), x.layout.shape.clone(), packed.wide())))
}

/// Writes `src` (of `dst`'s shape, any dtype) into the packed `dst` through its layout,
/// converted to `dst`'s dtype.
pub fn store(context: &Arc<Context>, device: Device, dst: &Array, src: &Array) -> Result<()> {
    let Some(packed) = Packed::of(dst.dtype) else {
        return elementwise::assign(context, device, dst, &*widen(context, device, src)?);
    };
    let n = dst.numel();
    if n == 0 {
        return Ok(());
    }
    // The source as contiguous words of the 32-bit dtype, from its offset on (a copy also when
    // it shares `dst`'s memory, which this launch writes).
    let src = widen(context, device, src)?;
    let wide = if src.layout.is_contiguous() && src.dtype == packed.wide() && !src.shares(dst) {
        src
    } else {
        Cow::Owned(elementwise::copy(context, device, &src, packed.wide())?)
    };
    let buffers = [memory_of(&wide.storage)?.buffer(), memory_of(&dst.storage)?.buffer()];
    let per_word = packed.per_word();
    if dst.layout.is_contiguous() && dst.layout.offset.is_multiple_of(per_word) {
        // Whole words, one per thread: plain stores where neighbouring elements' atomic
        // operations would contend for their shared word.
        let params = words([n, dst.layout.offset / per_word, wide.layout.offset])?;
        let kernel = packed.kernel("pack_words", PACK_WORDS);
        return context.launch(&kernel, &params, &buffers, groups_for(packed.words(n), GROUP)?);
    }
    let mut params = params(&dst.layout)?;
    params.push(word(wide.layout.offset)?);
    context.launch(&packed.kernel("pack", PACK), &params, &buffers, groups_for(n, GROUP)?)
}

/// A result computed in `computes_in(dtype)` as a tensor of `dtype`: `x` itself, unless `dtype`
/// is packed and `x` holds its 32-bit dtype (a bool result stays as it is).
pub fn narrow(context: &Arc<Context>, device: Device, x: Array, dtype: DType) -> Result<Array> {
    match Packed::of(dtype) {
        Some(packed) if x.dtype == packed.wide() => {
            let memory = context.alloc("to", packed.words(x.numel()))?;
            let out = Array::contiguous(storage(device, memory), x.layout.shape.clone(), dtype);
            store(context, device, &out, &x)?;
            Ok(out)
        }
        _ => Ok(x),
    }
}

/// Every specialisation of the two kernels (for the shader validation test).
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    [DType::Float16, DType::BFloat16, DType::Int8, DType::UInt8, DType::Int16]
        .into_iter()
        .filter_map(Packed::of)
        .flat_map(|p| [p.kernel("unpack", UNPACK), p.kernel("pack", PACK), p.kernel("pack_words", PACK_WORDS)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{gpu, layout};
    use super::super::{WGPU, context_of};
    use super::*;
    use crate::backend::Backend;
    use crate::types::half::{bf16, f16};
    use crate::types::{Shape, dtype_reduced as reduced};

    /// `data` moved to the GPU, converted there to `dtype`, and read back.
    fn converted(device: Device, data: Buffer, dtype: DType) -> Buffer {
        let n = data.len();
        let x = WGPU.upload(device, data, Shape::new(&[n])).unwrap();
        WGPU.download(&WGPU.copy(&x, dtype).unwrap()).unwrap()
    }

    /// Float32 values around every float16 and bfloat16 boundary: each half-precision value,
    /// the float32 values next to it and halfway to the next, and the specials.
    fn edges() -> Vec<f32> {
        let mut values = vec![f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 65504.0, 65520.0, 65536.0, 1e-8];
        for h in (0..=u16::MAX).step_by(7) {
            for x in [reduced::f16_to_f32(h), reduced::bf16_to_f32(h)] {
                let b = x.to_bits();
                values.extend([x, f32::from_bits(b.wrapping_add(1)), f32::from_bits(b.wrapping_sub(1))]);
                values.extend([f32::from_bits(b.wrapping_add(1 << 12)), f32::from_bits(b.wrapping_add(1 << 15))]);
            }
        }
        values
    }

    #[test]
    fn every_float16_and_bfloat16_widens_exactly_on_the_gpu() {
        let Some(device) = gpu() else { return };
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let halves = Buffer::Float16(all.iter().map(|&h| f16::from_bits(h)).collect());
        let Buffer::Float32(got) = converted(device, halves, DType::Float32) else { panic!("float32") };
        for (&h, g) in all.iter().zip(got) {
            assert_eq!(g.to_bits(), reduced::f16_to_f32(h).to_bits(), "float16 {h:#06x}");
        }
        let brains = Buffer::BFloat16(all.iter().map(|&h| bf16::from_bits(h)).collect());
        let Buffer::Float32(got) = converted(device, brains, DType::Float32) else { panic!("float32") };
        for (&h, g) in all.iter().zip(got) {
            assert_eq!(g.to_bits(), reduced::bf16_to_f32(h).to_bits(), "bfloat16 {h:#06x}");
        }
    }

    #[test]
    fn float32_rounds_to_float16_and_bfloat16_as_on_the_cpu() {
        let Some(device) = gpu() else { return };
        let values = edges();
        let Buffer::Float16(got) = converted(device, Buffer::Float32(values.clone()), DType::Float16) else {
            panic!("float16")
        };
        for (&x, g) in values.iter().zip(got) {
            assert_eq!(g.to_bits(), reduced::f32_to_f16(x), "float16 of {x:e} ({:#010x})", x.to_bits());
        }
        let Buffer::BFloat16(got) = converted(device, Buffer::Float32(values.clone()), DType::BFloat16) else {
            panic!("bfloat16")
        };
        for (&x, g) in values.iter().zip(got) {
            assert_eq!(g.to_bits(), reduced::f32_to_bf16(x), "bfloat16 of {x:e} ({:#010x})", x.to_bits());
        }
    }

    #[test]
    fn small_integers_widen_with_their_sign_and_wrap_when_narrowed() {
        let Some(device) = gpu() else { return };
        let ints: Vec<i32> = (-300..300).chain([i32::MAX, i32::MIN, 65535, 32768]).collect();
        let wide = || Buffer::Int32(ints.clone());
        let Buffer::Int8(got) = converted(device, wide(), DType::Int8) else { panic!("int8") };
        assert_eq!(got, ints.iter().map(|&x| x as i8).collect::<Vec<_>>());
        let Buffer::UInt8(got) = converted(device, wide(), DType::UInt8) else { panic!("uint8") };
        assert_eq!(got, ints.iter().map(|&x| x as u8).collect::<Vec<_>>());
        let Buffer::Int16(got) = converted(device, wide(), DType::Int16) else { panic!("int16") };
        assert_eq!(got, ints.iter().map(|&x| x as i16).collect::<Vec<_>>());
        for (data, back) in [
            (Buffer::Int8((-128..=127).collect()), (-128..=127).collect::<Vec<i32>>()),
            (Buffer::UInt8((0..=255).collect()), (0..=255).collect()),
            (Buffer::Int16(vec![i16::MIN, -1, 0, 1, i16::MAX]), vec![-32768, -1, 0, 1, 32767]),
        ] {
            assert_eq!(converted(device, data, DType::Int32), Buffer::Int32(back));
        }
    }

    #[test]
    fn writes_into_a_strided_packed_view_leave_the_other_elements_alone() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let base: Vec<u8> = (0..23).collect();
        let x = WGPU.upload(device, Buffer::UInt8(base.clone()), Shape::new(&[23])).unwrap();
        // Elements 1, 4, 7, ... 19 (a view starting mid-word, three apart): 200 + k.
        let view = x.with_layout(layout(&[7], &[3], 1));
        let src = WGPU.upload(device, Buffer::Int32((200..207).collect()), Shape::new(&[7])).unwrap();
        WGPU.assign(&view, &src).unwrap();
        let mut want = base.clone();
        for k in 0..7 {
            want[1 + 3 * k] = 200 + k as u8;
        }
        assert_eq!(WGPU.download(&x).unwrap(), Buffer::UInt8(want.clone()));
        // Views read back through their layout, contiguous ones from mid-word too.
        assert_eq!(WGPU.download(&view).unwrap(), Buffer::UInt8((200..207).collect()));
        let tail = x.with_layout(layout(&[5], &[1], 18));
        assert_eq!(WGPU.download(&tail).unwrap(), Buffer::UInt8(want[18..].to_vec()));
        // A packed source into a packed view of another dtype, through the 32-bit words.
        let halves = WGPU.upload(device, Buffer::Float16(vec![f16::from_f32(-2.5); 7]), Shape::new(&[7])).unwrap();
        let ints = WGPU.upload(device, Buffer::Int16(vec![7; 10]), Shape::new(&[10])).unwrap();
        WGPU.assign(&ints.with_layout(layout(&[7], &[1], 3)), &halves).unwrap();
        assert_eq!(WGPU.download(&ints).unwrap(), Buffer::Int16(vec![7, 7, 7, -2, -2, -2, -2, -2, -2, -2]));
        drop(context);
    }

    #[test]
    fn packed_writes_read_the_source_from_its_offset_and_keep_the_other_elements() {
        let Some(device) = gpu() else { return };
        // A contiguous float32 source that starts at element 2 of its memory (it was read from
        // element 0 once).
        let wide =
            WGPU.upload(device, Buffer::Float32((0..12).map(|v| v as f32).collect()), Shape::new(&[12])).unwrap();
        let src = |n: usize| wide.with_layout(layout(&[n], &[1], 2));
        for (dtype, per_word) in [(DType::Float16, 2), (DType::Int8, 4)] {
            // Views from word boundaries, ending inside a word and on one; and one from inside a
            // word (element by element, through the atomic kernel).
            for (start, n) in [(0, 7), (per_word, 5), (per_word, 2 * per_word), (0, 1), (1, 6)] {
                let dst = WGPU.upload(device, Buffer::Float32(vec![-1.0; 13]), Shape::new(&[13])).unwrap();
                let dst = WGPU.copy(&dst, dtype).unwrap();
                WGPU.assign(&dst.with_layout(layout(&[n], &[1], start)), &src(n)).unwrap();
                let back = WGPU.download(&WGPU.copy(&dst, DType::Float32).unwrap()).unwrap();
                let want: Vec<f32> = (0..13)
                    .map(|i| if (start..start + n).contains(&i) { (i - start + 2) as f32 } else { -1.0 })
                    .collect();
                assert_eq!(back, Buffer::Float32(want), "{dtype}: {n} elements from {start}");
            }
        }
    }
}
