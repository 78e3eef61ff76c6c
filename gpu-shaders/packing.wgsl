// Elements narrower than a word (float16, bfloat16, int8, uint8, int16), packed two or four to
// a 32-bit word, the first in the low bits; `FORMAT` says which (filled by
// kernels/src/wgpu/packed.rs: 0 float16, 1 bfloat16, 2 int8, 3 uint8, 4 int16) and `BITS` how
// wide an element is. They compute as float32 or int32 words: `widened` gives an element's
// word, `narrowed` a word's element, rounding to nearest even or wrapping as PyTorch does. The
// conversions work on the bits alone (no float16 arithmetic, no denormals), so every adapter
// computes them exactly, bit for bit as the CPU's (`types::reduced`).

const FORMAT: u32 = {{FORMAT}}u;
const BITS: u32 = {{BITS}}u;
const PER_WORD: u32 = 32u / BITS;
const MASK: u32 = (1u << BITS) - 1u;

// The float32 bits of float16 bits: exact.
fn f16_to_f32(h: u32) -> u32 {
    let sign = (h & 0x8000u) << 16u;
    let exponent = (h >> 10u) & 0x1fu;
    let mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) {
        return sign | 0x7f800000u | (mantissa << 13u);
    }
    if (exponent == 0u) {
        // Zero, or a subnormal: mantissa * 2^-24, a normal float32 (the product is exact).
        return sign | bitcast<u32>(f32(mantissa) * 5.9604644775390625e-8);
    }
    return sign | ((exponent + 112u) << 23u) | (mantissa << 13u);
}

// The float16 bits nearest to float32 bits `f` (ties to even); beyond float16's range,
// infinity; a NaN, float16's quiet NaN.
fn f32_to_f16(f: u32) -> u32 {
    let sign = (f >> 16u) & 0x8000u;
    let magnitude = f & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (magnitude >= (143u << 23u)) {
        return sign | 0x7c00u;
    }
    if (magnitude >= (113u << 23u)) {
        // A normal float16: rebias, round the 13 bits dropped (to nearest even; a carry may
        // reach the exponent, and infinity above 65504).
        let odd = (magnitude >> 13u) & 1u;
        return sign | ((magnitude - (112u << 23u) + 0xfffu + odd) >> 13u);
    }
    // A subnormal float16 (or zero): the value in units of 2^-24 is the float32's mantissa
    // (with its leading one) shifted right by `shift`, rounded to nearest even.
    let exponent = magnitude >> 23u;
    if (exponent < 102u) {
        return sign;
    }
    let mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    let shift = 126u - exponent;
    let kept = mantissa >> shift;
    let dropped = mantissa & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    let up = dropped > half || (dropped == half && (kept & 1u) == 1u);
    return sign | (kept + select(0u, 1u, up));
}

// The bfloat16 bits nearest to float32 bits `f` (ties to even); a NaN stays a quiet NaN.
fn f32_to_bf16(f: u32) -> u32 {
    if ((f & 0x7fffffffu) > 0x7f800000u) {
        return (f >> 16u) | 0x40u;
    }
    return (f + 0x7fffu + ((f >> 16u) & 1u)) >> 16u;
}

// The word an element's bits compute as: float32 bits, or an int32 (sign-extended for int8 and
// int16).
fn widened(bits: u32) -> u32 {
    if (FORMAT == 0u) {
        return f16_to_f32(bits);
    }
    if (FORMAT == 1u) {
        return bits << 16u;
    }
    if (FORMAT == 3u) {
        return bits;
    }
    let unused = 32u - BITS;
    return bitcast<u32>(bitcast<i32>(bits << unused) >> unused);
}

// The element's bits of a computed word: rounded for the floats, wrapped for the integers.
fn narrowed(word: u32) -> u32 {
    if (FORMAT == 0u) {
        return f32_to_f16(word);
    }
    if (FORMAT == 1u) {
        return f32_to_bf16(word);
    }
    return word & MASK;
}
