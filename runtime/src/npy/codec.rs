//! Elements to and from the bytes of a `.npy` file.

use crate::tensor::{DType, Element};
use torchfn_types::half;

/// An element type with a `.npy` dtype: how its bytes read and write.
pub(super) trait Codec: Element {
    /// Appends the elements of `bytes` (whole elements, little- or big-endian) to `out`.
    fn decode_into(bytes: &[u8], big_endian: bool, out: &mut Vec<Self>);
    /// Appends this element's little-endian bytes to `out`.
    fn encode(self, out: &mut Vec<u8>);
}

macro_rules! numeric_codec {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            fn decode_into(bytes: &[u8], big_endian: bool, out: &mut Vec<$t>) {
                let (elements, _) = bytes.as_chunks::<{ size_of::<$t>() }>();
                if big_endian {
                    out.extend(elements.iter().map(|b| <$t>::from_be_bytes(*b)));
                } else {
                    out.extend(elements.iter().map(|b| <$t>::from_le_bytes(*b)));
                }
            }

            #[inline]
            fn encode(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
// float16 is NumPy's `<f2`. NumPy has no bfloat16 ([`type_code`] has none, so no file holds
// it), but its bytes read and write the same way.
numeric_codec!(u8, i8, i16, i32, i64, half::f16, half::bf16, f32, f64);

/// NumPy's bools are one byte, 0 or 1; any other byte reads as true, as in NumPy.
impl Codec for bool {
    fn decode_into(bytes: &[u8], _: bool, out: &mut Vec<bool>) {
        out.extend(bytes.iter().map(|&b| b != 0));
    }

    #[inline]
    fn encode(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// The type code NumPy writes for `dtype`, without the byte order (`f4`, `b1`); NumPy has no
/// bfloat16.
pub(super) fn type_code(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "b1",
        DType::UInt8 => "u1",
        DType::Int8 => "i1",
        DType::Int16 => "i2",
        DType::Int32 => "i4",
        DType::Int64 => "i8",
        DType::Float16 => "f2",
        DType::BFloat16 => return None,
        DType::Float32 => "f4",
        DType::Float64 => "f8",
    })
}

/// The descr NumPy writes for `dtype` in a little-endian file (`<f4`, `|b1`).
pub(super) fn descr(dtype: DType) -> Option<String> {
    let order = if dtype.itemsize() == 1 { '|' } else { '<' };
    Some(format!("{order}{}", type_code(dtype)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_byte_orders_decode() {
        let mut out = Vec::new();
        f32::decode_into(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40], false, &mut out);
        assert_eq!(out, [1.0, 2.0]);
        let mut out = Vec::new();
        i32::decode_into(&[0, 0, 0, 7], true, &mut out);
        assert_eq!(out, [7]);
        let mut out = Vec::new();
        bool::decode_into(&[0, 1, 2], false, &mut out);
        assert_eq!(out, [false, true, true]);
    }

    #[test]
    fn encoding_is_little_endian() {
        let mut out = Vec::new();
        (-2i64).encode(&mut out);
        true.encode(&mut out);
        assert_eq!(out, [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]);
        assert_eq!(descr(DType::Float64).as_deref(), Some("<f8"));
        assert_eq!(descr(DType::Bool).as_deref(), Some("|b1"));
        assert_eq!(descr(DType::Float16).as_deref(), Some("<f2"));
        assert_eq!(descr(DType::UInt8).as_deref(), Some("|u1"));
        assert_eq!(descr(DType::BFloat16), None);
    }
}
