//! The random stream of the fuzz targets, and the mutations of bytes they share: bit flips,
//! interesting bytes and integers written over length fields, truncation, deletion,
//! insertion, duplication and splicing.

/// The shared random stream (`no_panic`'s SplitMix64).
pub(super) use crate::no_panic::values::Rng;

/// The seed of input `n` of a target: the run's seed mixed with the target's name (FNV-1a)
/// and `n`, so that any input can be made again alone.
pub(super) fn seed_for(seed: u64, target: &str, n: usize) -> u64 {
    let h = target.bytes().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut rng = Rng(h ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.next()
}

/// Integers that length and size fields are set to: zero, one, the limits of each width, and
/// values that overflow when multiplied or added to.
pub(super) const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 40,
    1 << 60,
    i64::MAX as u64,
    1 << 63,
    u64::MAX - 7,
    u64::MAX,
];

/// Bytes that matter to the formats: quotes, brackets, separators, digits, signs, the bytes
/// at the limits and an invalid UTF-8 byte.
const BYTES: &[u8] = b"\x00\x01\x7f\x80\xff\xc3\"'(){}[],:-. 019\n\\eL";

/// A random file for a reader's fuzz target: one the writer wrote (`written`), one built from a
/// random header (`built`), either of them mutated with the other spliced in, or `noise`.
pub(super) fn random_file(
    rng: &mut Rng,
    written: fn(&mut Rng) -> Vec<u8>,
    built: fn(&mut Rng) -> Vec<u8>,
    noise: fn(&mut Rng) -> Vec<u8>,
) -> Vec<u8> {
    match rng.below(10) {
        0 | 1 => written(rng),
        2..=4 => built(rng),
        5 | 6 => {
            let (valid, other) = (written(rng), built(rng));
            mutate_bytes(rng, &valid, &other)
        }
        7 | 8 => {
            let (base, other) = (built(rng), written(rng));
            mutate_bytes(rng, &base, &other)
        }
        _ => noise(rng),
    }
}

/// `input` changed by one to four random mutations; `other` is spliced in now and then.
pub(super) fn mutate_bytes(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        let at = rng.below(len + 1);
        match rng.below(11) {
            0 | 1 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.pick(BYTES);
            }
            3 => out.truncate(at),
            4 if len > 0 => {
                let end = (at + 1 + rng.below(16)).min(len);
                out.drain(at.min(end)..end);
            }
            5 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.pick(BYTES)).collect();
                out.splice(at..at, bytes);
            }
            6 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(32)).min(len);
                let copy = out[start..end].to_vec();
                out.splice(at..at, copy);
            }
            7 => {
                // An integer, little-endian, over whatever is there: a length field, often.
                let width = rng.pick(&[1usize, 2, 4, 8]);
                let value = rng.pick(&INTERESTING).wrapping_add(rng.below(3) as u64).wrapping_sub(1);
                let bytes = value.to_le_bytes();
                let at = if rng.percent(50) { rng.pick(&[6, 8, 10, 12]) } else { at };
                for (i, &b) in bytes[..width].iter().enumerate() {
                    if let Some(slot) = out.get_mut(at + i) {
                        *slot = b;
                    }
                }
            }
            8 if !other.is_empty() => {
                let from = rng.below(other.len());
                out.truncate(at);
                out.extend_from_slice(&other[from..]);
            }
            9 => {
                let n = rng.below(32);
                let bytes = rng.bytes(n);
                out.extend_from_slice(&bytes);
            }
            _ => {
                // A decimal number where text is: large, negative or long.
                let number = rng.pick(&[
                    "18446744073709551616",
                    "-1",
                    "9223372036854775808",
                    "0",
                    "1e400",
                    "99999999999999999999999999999999999999999",
                ]);
                out.splice(at..at, number.bytes());
            }
        }
    }
    out
}

/// `bytes` as a Rust byte string literal, cut after `limit` bytes, for a report.
pub(super) fn escaped(bytes: &[u8], limit: usize) -> String {
    let shown: String = bytes[..bytes.len().min(limit)].escape_ascii().to_string();
    if bytes.len() > limit { format!("b\"{shown}\"... ({} bytes)", bytes.len()) } else { format!("b\"{shown}\"") }
}
