//! The safetensors reader ([`torchfn::safetensors::load`], and [`load_file`] now and then)
//! on files `save` writes and on files built from random headers: every dtype the format
//! names, shapes from empty to past `u64::MAX` elements, offsets that overlap, leave gaps or
//! run past the data, header lengths of every size, JSON of the wrong types, bytes flipped
//! and cut, and plain random bytes. A state dict that loads must print, sum and copy, and
//! save and load back equal; bytes that do not load must give a `ValueError` from the reader.
//!
//! [`load_file`]: torchfn::safetensors::load_file

use serde_json::{Value as Json, json};
use torchfn::nn::StateDict;
use torchfn::{ErrorKind, safetensors};

use super::mutate::{INTERESTING, Rng, escaped, random_file};
use super::npy::{Contents, contents, exercise, random_tensor};
use super::{Verdict, fuzz};

/// Inputs in the default run.
const INPUTS: usize = 4000;

/// The dtypes of the format, with their sizes in bits, and names it does not have.
const DTYPES: [(&str, u64); 20] = [
    ("F32", 32),
    ("F64", 64),
    ("I64", 64),
    ("I32", 32),
    ("BOOL", 8),
    ("F16", 16),
    ("BF16", 16),
    ("U8", 8),
    ("I8", 8),
    ("I16", 16),
    ("U32", 32),
    ("U64", 64),
    ("F8_E4M3", 8),
    ("F8_E5M2", 8),
    ("F4", 4),
    ("F6_E2M3", 6),
    ("C64", 64),
    ("f32", 32),
    ("", 32),
    ("F33", 32),
];

/// Dimensions: mostly small, now and then huge.
const DIMS: [u64; 12] = [0, 1, 2, 3, 5, 1 << 31, 1 << 32, 1 << 40, 1 << 62, 1 << 63, u64::MAX, 0];

/// Tensor names: ordinary, dotted, empty, the metadata key, odd characters.
const NAMES: [&str; 9] = ["w", "fc.weight", "fc.bias", "", "__metadata__", "a.b.c.d", "\u{e9}\u{0}", "0", "w "];

/// A random file: one `save` writes, one built from a random header, either changed, or
/// random bytes.
fn file(rng: &mut Rng) -> Vec<u8> {
    random_file(rng, written, built, noise)
}

/// Random bytes, sometimes behind the start a valid file has (its magic, or a header length).
fn noise(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(80);
    let mut bytes = rng.bytes(8.min(n));
    if rng.percent(50) {
        bytes = (n as u64).saturating_sub(8).to_le_bytes().to_vec();
    }
    bytes.extend(rng.bytes(n));
    bytes
}

/// The bytes `save` writes for a random state dict.
fn written(rng: &mut Rng) -> Vec<u8> {
    let mut state = StateDict::new();
    for _ in 0..rng.below(4) {
        state.insert(rng.pick(&NAMES), random_tensor(rng));
    }
    safetensors::save(&state).expect("a state dict of tensors saves")
}

/// A file from a random header: tensors of any dtype and shape, offsets right or wrong,
/// fields missing or of the wrong type, a header length right or wrong, and data of the
/// length the header needs, or not.
fn built(rng: &mut Rng) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    if rng.percent(30) {
        let metadata = match rng.below(4) {
            0 => json!({"format": "pt"}),
            1 => json!({"format": 1}),
            2 => json!([1, 2]),
            _ => json!("pt"),
        };
        header.insert("__metadata__".into(), metadata);
    }
    let mut offset = 0u64;
    for _ in 0..rng.below(5) {
        let (dtype, bits) = rng.pick(&DTYPES);
        let ndim = rng.below(5);
        let mut shape: Vec<u64> =
            (0..ndim).map(|_| if rng.percent(85) { rng.pick(&DIMS[..5]) } else { rng.pick(&DIMS) }).collect();
        if rng.percent(5) {
            // Empty, with the other dimensions too large together.
            shape = vec![rng.pick(&DIMS[8..]), 0, rng.pick(&DIMS[8..])];
            shape.rotate_left(rng.below(3));
        }
        let size = shape.iter().try_fold(bits, |n, &d| n.checked_mul(d)).map(|b| b.div_ceil(8));
        let size = size.filter(|&s| s <= 4096 && rng.percent(90)).unwrap_or_else(|| rng.below(64) as u64);
        let end = offset + size;
        let offsets = match rng.below(12) {
            0 => json!([rng.pick(&INTERESTING), rng.pick(&INTERESTING)]),
            1 => json!([end, offset]),
            2 => json!([offset]),
            3 => json!([offset, end, end]),
            4 => json!([offset + 1, end + 1]),
            5 => json!([-1, end]),
            6 => json!([offset, end as f64 + 0.5]),
            _ => json!([offset, end]),
        };
        offset = end;
        let mut info = json!({"dtype": dtype, "shape": shape, "data_offsets": offsets});
        match rng.below(14) {
            0 => info["shape"] = json!("(2, 3)"),
            1 => info["shape"] = json!([-1, 2]),
            2 => info["shape"] = json!([1.5]),
            3 => info["dtype"] = json!(1),
            4 => {
                info.as_object_mut().expect("an object").remove(rng.pick(&["dtype", "shape", "data_offsets"]));
            }
            5 => info["extra"] = json!(true),
            6 => info = json!([1, 2, 3]),
            _ => {}
        }
        header.insert(rng.pick(&NAMES).to_string(), info);
    }
    let mut text = Json::Object(header).to_string();
    // The format pads the header with spaces to a multiple of 8 bytes.
    text.extend(std::iter::repeat_n(' ', if rng.percent(70) { (8 - text.len() % 8) % 8 } else { rng.below(9) }));
    let len = match rng.below(10) {
        0 => rng.pick(&INTERESTING),
        1 => (text.len() as u64).wrapping_add(rng.below(5) as u64).wrapping_sub(2),
        _ => text.len() as u64,
    };
    let mut bytes = len.to_le_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    let data_len = match rng.below(10) {
        0 => offset.saturating_sub(1),
        1 => offset + 1,
        2 => rng.below(100) as u64,
        _ => offset,
    };
    let data = rng.bytes(data_len.min(1 << 16) as usize);
    bytes.extend(data);
    bytes
}

/// The keys and contents of a state dict, in order, to compare two loads.
fn all_contents(state: &StateDict) -> Result<Vec<(String, Contents)>, String> {
    state.iter().map(|(k, t)| Ok((k.to_string(), contents(t).map_err(|e| e.to_string())?))).collect()
}

/// Whether an error is a `ValueError` of `func` that names `source`.
fn from_reader(err: &torchfn::Error, func: &str, source: &str) -> Verdict {
    let message = err.to_string();
    if err.kind() == ErrorKind::Value && message.starts_with(&format!("{func}(): {source} ")) {
        return Ok(false);
    }
    if err.kind() == ErrorKind::Value && message.starts_with(&format!("{func}(): tensor ")) && message.contains(source)
    {
        return Ok(false);
    }
    Err(format!("an error that does not name the reader: {:?}: {message}", err.kind()))
}

/// Loads `bytes`, checking what comes out.
fn check(bytes: &[u8], n: usize) -> Verdict {
    let loaded = safetensors::load(bytes);
    if n.is_multiple_of(8) {
        let path = std::env::temp_dir().join(format!(
            "torchfn-untrusted-{}-{:?}.safetensors",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        let from_file = safetensors::load_file(&path);
        std::fs::remove_file(&path).ok();
        match (&loaded, &from_file) {
            (Ok(a), Ok(b)) if all_contents(a)? == all_contents(b)? => {}
            (Err(_), Err(e)) => {
                from_reader(e, "safetensors::load_file", &path.display().to_string())?;
            }
            (a, b) => {
                return Err(format!(
                    "a file loads differently: {:?} from the bytes, {:?} from a file",
                    a.as_ref().err(),
                    b.as_ref().err()
                ));
            }
        }
    }
    let state = match loaded {
        Ok(state) => state,
        Err(e) => return from_reader(&e, "safetensors::load", "argument 'data'"),
    };
    for (name, t) in state.iter() {
        exercise(t).map_err(|e| format!("tensor '{name}' fails to print, sum or copy: {e}"))?;
    }
    let saved = safetensors::save(&state).map_err(|e| format!("the state dict loaded does not save: {e}"))?;
    let back = safetensors::load(&saved).map_err(|e| format!("the bytes saved do not load: {e}"))?;
    // Saving orders the tensors by alignment and name, so the order may change.
    let sorted = |state: &StateDict| {
        all_contents(state).map(|mut c| {
            c.sort_by(|a, b| a.0.cmp(&b.0));
            c
        })
    };
    if sorted(&back)? != sorted(&state)? {
        return Err("the state dict loaded saves and loads back different".into());
    }
    Ok(true)
}

#[test]
fn safetensors_loading_never_panics_whatever_the_bytes() {
    fuzz(
        "safetensors",
        INPUTS,
        |rng| {
            let n = rng.next() as usize;
            (file(rng), n)
        },
        |(bytes, _)| escaped(bytes, 800),
        |(bytes, n)| check(bytes, *n),
    );
}

/// A file of the tensors `header` describes (a JSON object), with `data`.
fn file_of(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// An input the fuzzer found: an empty tensor whose other dimensions multiply past
/// `isize::MAX` bytes loaded, and overflowed in the kernels when copied or summed.
#[test]
fn an_empty_tensor_with_huge_dimensions_is_an_error() {
    let bytes = b"b\x00\x00\x00\x00\x00\x00\x00{\"w\":{\"data_offsets\":[0,0],\"dtype\":\"F32\",\"shape\":[0,\
                  4611686018427387904,18446744073709551615]}}   ";
    let err = safetensors::load(bytes).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert_eq!(
        err.to_string(),
        "safetensors::load(): tensor 'w' of argument 'data' has shape [0, 4611686018427387904, \
         18446744073709551615]: it is empty, but its other dimensions multiply to more elements of 4 bytes than \
         memory can hold"
    );
    let fits = file_of(r#"{"w":{"dtype":"F64","shape":[0,1152921504606846975],"data_offsets":[0,0]}}"#, &[]);
    let t = safetensors::load(&fits).unwrap().get("w").unwrap().clone();
    exercise(&t).unwrap();
}

/// An input the fuzzer found: empty tensors share an offset with the next tensor, and came
/// out in the order of a hash map, which changes from one load to the next.
#[test]
fn tensors_at_one_offset_load_in_the_same_order_every_time() {
    let bytes =
        b"x\x00\x00\x00\x00\x00\x00\x00{\"fc.bias\":{\"dtype\":\"F64\",\"shape\":[0,2],\"data_offsets\":[0,0]},\
                  \"w \":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[0,1]}}    \x00";
    for _ in 0..32 {
        let state = safetensors::load(bytes).unwrap();
        assert_eq!(state.keys().collect::<Vec<_>>(), ["fc.bias", "w "]);
    }
    let header = r#"{"c":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"I32","shape":[0],"data_offsets":[4,4]}}"#;
    let bytes = file_of(header, &[0; 4]);
    for _ in 0..32 {
        let state = safetensors::load(&bytes).unwrap();
        assert_eq!(state.keys().collect::<Vec<_>>(), ["b", "a", "c"]);
    }
}
