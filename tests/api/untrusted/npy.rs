//! The `.npy` reader ([`torchfn::npy::read`] and [`torchfn::npy::load`]) on files NumPy
//! writes, changed: headers of every shape, dtype, version, length and spelling, data too
//! short or too long, lengths that claim 2^60 elements, bytes flipped and cut, and plain
//! random bytes. A file that reads must read the same from a stream that trickles its bytes
//! and from a file, and write back to a file that reads equal; one that does not must give
//! an error from the reader, naming it and its argument.

use std::io::{self, Read};

use torchfn::half::{bf16, f16};
use torchfn::{DType, ErrorKind, Tensor, npy};

use super::mutate::{INTERESTING, Rng, escaped, random_file};
use super::{Verdict, fuzz};

/// Inputs in the default run.
const INPUTS: usize = 4000;

/// The `descr` of a header: every dtype tensors have, in each byte order, and others.
const DESCRS: [&str; 26] = [
    "<f4",
    "<f8",
    "<i4",
    "<i8",
    "|b1",
    ">f4",
    ">f8",
    ">i4",
    ">i8",
    "=f4",
    "|i8",
    ">b1",
    "<u2",
    "<f2",
    "<c16",
    "|O",
    "",
    "<",
    "f4",
    "<U3",
    "|V8",
    "<i0",
    "<i99999999999999999999",
    "<M8[ns]",
    "\u{e9}",
    "<f4\u{0}",
];

/// The dimensions of a shape, as written in a header: sizes from zero to past `u64::MAX`,
/// negative ones, and things that are not ints.
const DIMS: [&str; 28] = [
    "0",
    "1",
    "2",
    "3",
    "7",
    "255",
    "65536",
    "2147483648",
    "4294967296",
    "1099511627776",
    "1152921504606846976",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999999999999999",
    "-1",
    "-9223372036854775808",
    "3L",
    "0L",
    "+1",
    "1.0",
    "True",
    "None",
    "'2'",
    "()",
    "[2]",
];

/// A random file: one NumPy writes, one built from a random header, either changed, or
/// random bytes.
fn file(rng: &mut Rng) -> Vec<u8> {
    random_file(rng, written, built, noise)
}

/// Random bytes, sometimes behind the start a valid file has (its magic, or a header length).
fn noise(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(80);
    let mut bytes = if rng.percent(50) { b"\x93NUMPY".to_vec() } else { Vec::new() };
    bytes.extend(rng.bytes(n));
    bytes
}

/// A random small tensor of any dtype, sometimes transposed.
pub(super) fn random_tensor(rng: &mut Rng) -> Tensor {
    let ndim = rng.below(4);
    let shape: Vec<usize> = (0..ndim).map(|_| rng.pick(&[0, 1, 2, 3, 4])).collect();
    let n: usize = shape.iter().product();
    let t = match rng.pick(&DType::ALL) {
        DType::Bool => Tensor::from_vec((0..n).map(|_| rng.percent(50)).collect::<Vec<bool>>(), shape),
        DType::Int32 => Tensor::from_vec((0..n).map(|_| rng.next() as i32).collect::<Vec<i32>>(), shape),
        DType::Int64 => Tensor::from_vec((0..n).map(|_| rng.next() as i64).collect::<Vec<i64>>(), shape),
        DType::Float32 => {
            Tensor::from_vec((0..n).map(|_| f32::from_bits(rng.next() as u32)).collect::<Vec<f32>>(), shape)
        }
        DType::Float64 => Tensor::from_vec((0..n).map(|_| f64::from_bits(rng.next())).collect::<Vec<f64>>(), shape),
        DType::UInt8 => Tensor::from_vec((0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>(), shape),
        DType::Int8 => Tensor::from_vec((0..n).map(|_| rng.next() as i8).collect::<Vec<i8>>(), shape),
        DType::Int16 => Tensor::from_vec((0..n).map(|_| rng.next() as i16).collect::<Vec<i16>>(), shape),
        // NumPy has no bfloat16: float16 stands in for it.
        DType::Float16 | DType::BFloat16 => {
            Tensor::from_vec((0..n).map(|_| f16::from_bits(rng.next() as u16)).collect::<Vec<f16>>(), shape)
        }
    }
    .expect("the data fits the shape");
    if ndim >= 2 && rng.percent(30) { t.transpose(0, 1).expect("two dimensions transpose") } else { t }
}

/// A file as `np.save` writes it.
fn written(rng: &mut Rng) -> Vec<u8> {
    let mut bytes = Vec::new();
    npy::write(&mut bytes, &random_tensor(rng)).expect("writing to a Vec succeeds");
    bytes
}

/// A file with a random header: its keys in any order, missing, repeated or unknown, values
/// of every kind, versions 1.0 to 3.0 and others, a header length that is right or wrong, and
/// data of the length the shape needs, or not.
fn built(rng: &mut Rng) -> Vec<u8> {
    let quote = if rng.percent(80) { '\'' } else { '"' };
    let descr = match rng.below(10) {
        0 => rng.pick(&["[('x', '<f4')]", "1", "None", "'<f4", "{'a': 1}"]).to_string(),
        _ => format!("{quote}{}{quote}", rng.pick(&DESCRS)),
    };
    let fortran = rng.pick(&["True", "False", "False", "True", "0", "None", "'True'", "true"]).to_string();
    let ndim = if rng.percent(5) { 20 + rng.below(30) } else { rng.below(5) };
    let dims: Vec<&str> =
        (0..ndim).map(|_| if rng.percent(70) { rng.pick(&DIMS[..5]) } else { rng.pick(&DIMS) }).collect();
    let trailing = if dims.len() == 1 || rng.percent(20) { "," } else { "" };
    let shape = match rng.below(12) {
        0 => format!("[{}]", dims.join(", ")),
        1 => rng.pick(&["5", "'(2,)'", "(((((((((((((((((((1)))))))))))))))))))", "(2, (3,))", "(", ""]).to_string(),
        _ => format!("({}{trailing})", dims.join(", ")),
    };
    let key = |name: &str| format!("{quote}{name}{quote}");
    let mut entries = vec![(key("descr"), descr.clone()), (key("fortran_order"), fortran), (key("shape"), shape)];
    match rng.below(12) {
        0 => {
            entries.remove(rng.below(3));
        }
        1 => {
            let i = rng.below(3);
            entries.push(entries[i].clone());
        }
        2 => entries.push((key("x"), "1".into())),
        3 => entries.push(("1".into(), "2".into())),
        _ => {}
    }
    if rng.percent(30) {
        let (i, j) = (rng.below(entries.len()), rng.below(entries.len()));
        entries.swap(i, j);
    }
    let sep = if rng.percent(80) { ", " } else { "," };
    let body: Vec<String> = entries.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let mut header = format!("{{{}{}}}", body.join(sep), if rng.percent(70) { ", " } else { "" });
    if rng.percent(5) {
        header = format!("{}{header}", "{'a': ".repeat(1 + rng.below(40)));
    }
    header.extend(std::iter::repeat_n(' ', rng.below(70)));
    header.push('\n');

    let version = match rng.below(10) {
        0..=5 => [1, 0],
        6 | 7 => [2, 0],
        8 => [3, 0],
        _ => [rng.next() as u8, rng.next() as u8],
    };
    let len_size = if version[0] == 1 { 2 } else { 4 };
    let header_len = match rng.below(10) {
        0 => rng.pick(&INTERESTING),
        1 => (header.len() as u64).wrapping_add(rng.below(5) as u64).wrapping_sub(2),
        _ => header.len() as u64,
    };
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.extend_from_slice(&version);
    bytes.extend_from_slice(&header_len.to_le_bytes()[..len_size]);
    bytes.extend_from_slice(header.as_bytes());

    // The data: what the shape needs when that is small, give or take a byte, or anything.
    let itemsize: Option<u64> = descr.get(2..4).and_then(|c| c.parse().ok());
    let needed =
        dims.iter().try_fold(itemsize.unwrap_or(4), |n, d| d.parse::<u64>().ok().and_then(|d| n.checked_mul(d)));
    let len = match needed {
        Some(n) if n <= 4096 && rng.percent(70) => match rng.below(4) {
            0 => (n as usize).saturating_sub(1),
            1 => n as usize + 1,
            _ => n as usize,
        },
        _ => rng.pick(&[0, 1, 4, 8, 24, 100, 4096]),
    };
    let data = rng.bytes(len);
    bytes.extend(data);
    bytes
}

/// A stream that hands out its bytes a few at a time, interrupted now and then, and fails
/// after `fail_after` bytes when that is set.
struct Trickle<'a> {
    data: &'a [u8],
    pos: usize,
    calls: usize,
    fail_after: Option<usize>,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        if self.fail_after.is_some_and(|n| self.pos >= n) {
            return Err(io::Error::other("the disk is on fire"));
        }
        let n = buf.len().min(self.data.len() - self.pos).min(1 + self.calls % 7);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A tensor's shape, dtype and elements (as bits).
pub(super) type Contents = (Vec<usize>, DType, Vec<u64>);

/// A tensor's contents, to compare two reads.
pub(super) fn contents(t: &Tensor) -> Result<Contents, torchfn::Error> {
    let dtype = t.dtype()?;
    let bits: Vec<u64> = match dtype {
        DType::Bool => t.to_vec::<bool>()?.into_iter().map(u64::from).collect(),
        DType::Int32 => t.to_vec::<i32>()?.into_iter().map(|x| x as u64).collect(),
        DType::Int64 => t.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect(),
        DType::Float32 => t.to_vec::<f32>()?.into_iter().map(|x| x.to_bits().into()).collect(),
        DType::Float64 => t.to_vec::<f64>()?.into_iter().map(f64::to_bits).collect(),
        DType::UInt8 => t.to_vec::<u8>()?.into_iter().map(u64::from).collect(),
        DType::Int8 => t.to_vec::<i8>()?.into_iter().map(|x| x as u64).collect(),
        DType::Int16 => t.to_vec::<i16>()?.into_iter().map(|x| x as u64).collect(),
        DType::Float16 => t.to_vec::<f16>()?.into_iter().map(|x| x.to_bits().into()).collect(),
        DType::BFloat16 => t.to_vec::<bf16>()?.into_iter().map(|x| x.to_bits().into()).collect(),
    };
    Ok((t.shape()?.to_vec(), dtype, bits))
}

/// What a user does with a tensor read from a file: prints it, sums it, copies it.
pub(super) fn exercise(t: &Tensor) -> Result<(), torchfn::Error> {
    let _ = t.to_string();
    let _ = format!("{t:?}");
    t.sum()?;
    let copy = t.contiguous()?;
    if contents(&copy)? != contents(t)? {
        return Err(torchfn::Error::value_error("contiguous() changed the elements"));
    }
    Ok(())
}

/// Whether an error is one the reader `func` gives about `source`: a `ValueError` or
/// `TypeError` about the data, a `RuntimeError` when memory runs out, an `OSError` only when
/// reading failed.
fn from_reader(err: &torchfn::Error, func: &str, source: &str, os: bool) -> Verdict {
    let message = err.to_string();
    let named = message.starts_with(&format!("{func}(): {source}"))
        || message.starts_with(&format!("{func}(): not enough memory"))
        || (os && message.starts_with(&format!("{func}(): cannot read {source}")));
    let kind = matches!(err.kind(), ErrorKind::Value | ErrorKind::Type | ErrorKind::Runtime)
        || (os && err.kind() == ErrorKind::Os);
    if named && kind {
        Ok(false)
    } else {
        Err(format!("an error that does not name the reader: {:?}: {message}", err.kind()))
    }
}

/// Reads `bytes` every way there is, checking that the ways agree.
fn check(bytes: &Vec<u8>, n: usize) -> Verdict {
    let read = npy::read(bytes.as_slice());
    let trickled = npy::read(Trickle { data: bytes, pos: 0, calls: 0, fail_after: None });
    match (&read, &trickled) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (contents(a).map_err(|e| e.to_string())?, contents(b).map_err(|e| e.to_string())?);
            if a != b {
                return Err("a stream read a different tensor".into());
            }
        }
        (Err(a), Err(b)) if a.to_string() == b.to_string() => {
            from_reader(a, "npy::read", "argument 'reader'", false)?;
        }
        (a, b) => {
            return Err(format!(
                "a stream read differently: {:?} from the bytes, {:?} from a stream",
                a.as_ref().err(),
                b.as_ref().err()
            ));
        }
    }
    let failing = npy::read(Trickle { data: bytes, pos: 0, calls: 0, fail_after: Some(n % (bytes.len() + 1)) });
    if let Err(e) = &failing {
        from_reader(e, "npy::read", "argument 'reader'", true)?;
    }
    if n.is_multiple_of(4) {
        let path = std::env::temp_dir().join(format!(
            "torchfn-untrusted-{}-{:?}.npy",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        let loaded = npy::load(&path);
        std::fs::remove_file(&path).ok();
        match (&read, &loaded) {
            (Ok(a), Ok(b)) => {
                if contents(a).map_err(|e| e.to_string())? != contents(b).map_err(|e| e.to_string())? {
                    return Err("a file loaded a different tensor".into());
                }
            }
            (Err(_), Err(e)) => {
                from_reader(e, "npy::load", &format!("file '{}'", path.display()), false)?;
            }
            (a, b) => {
                return Err(format!(
                    "a file loaded differently: {:?} from the bytes, {:?} from a file",
                    a.as_ref().err(),
                    b.as_ref().err()
                ));
            }
        }
    }
    let Ok(t) = read else { return Ok(false) };
    exercise(&t).map_err(|e| format!("the tensor read fails to print, sum or copy: {e}"))?;
    let mut again = Vec::new();
    npy::write(&mut again, &t).map_err(|e| format!("the tensor read does not write: {e}"))?;
    let back = npy::read(again.as_slice()).map_err(|e| format!("the file written does not read: {e}"))?;
    if contents(&back).map_err(|e| e.to_string())? != contents(&t).map_err(|e| e.to_string())? {
        return Err("the tensor read writes and reads back different".into());
    }
    Ok(true)
}

#[test]
fn npy_reading_never_panics_whatever_the_bytes() {
    fuzz(
        "npy",
        INPUTS,
        |rng| {
            let n = rng.next() as usize;
            (file(rng), n)
        },
        |(bytes, _)| escaped(bytes, 600),
        |(bytes, n)| check(bytes, *n),
    );
}

/// The inputs the fuzzer found bugs with: empty shapes whose other dimensions multiply past
/// `isize::MAX` bytes read as tensors that overflowed in the kernels when copied or summed, or
/// that the kernels could not write back (ndarray refuses such shapes). Each must be an error
/// naming the shape.
#[test]
fn the_inputs_that_found_bugs_are_errors() {
    let cases: [(&[u8], &str); 2] = [
        (
            b"\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': True, 'shape': (7, 0, 9223372036854775808, \
              9223372036854775808)}                   \n",
            "npy::read(): argument 'reader' has shape [7, 0, 9223372036854775808, 9223372036854775808]: it is \
             empty, but its other dimensions multiply to more elements of 1 bytes than memory can hold",
        ),
        (
            b"\x93NUMPY\x01\x00\x85\x00{'descr': '>f8', 'fortran_order': False, 'shape': (0, 18446744073709551615, \
              0, 0,), }                                               \n",
            "npy::read(): argument 'reader' has shape [0, 18446744073709551615, 0, 0]: it is empty, but its other \
             dimensions multiply to more elements of 8 bytes than memory can hold",
        ),
    ];
    for (bytes, message) in cases {
        let err = npy::read(bytes).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Value);
        assert_eq!(err.to_string(), message);
    }
    // The largest empty shape that fits still reads, and copies.
    let big = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': (0, {}), }}", isize::MAX as usize / 8);
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(big.len() as u16).to_le_bytes());
    bytes.extend_from_slice(big.as_bytes());
    let t = npy::read(bytes.as_slice()).unwrap();
    assert_eq!(t.shape().unwrap().as_ref(), [0, isize::MAX as usize / 8]);
    exercise(&t).unwrap();
}
