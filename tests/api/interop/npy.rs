//! `.npy` files: round trips, the bytes NumPy writes, and every way a file can be wrong.

use std::io::{self, Write};

use super::{Quack, kind_and_message, temp};
use torchfn::npy;
use torchfn::prelude::*;
use torchfn::{ErrorKind, Shape};

/// A file as the format specifies it: magic string, version, header length (2 bytes for
/// version 1.0, 4 after), the header dict followed by `spaces` spaces and a newline, the data.
fn file(version: u8, dict: &str, spaces: usize, data: &[u8]) -> Vec<u8> {
    let header_len = dict.len() + spaces + 1;
    let mut out = b"\x93NUMPY".to_vec();
    out.extend([version, 0]);
    if version == 1 {
        out.extend(u16::try_from(header_len).unwrap().to_le_bytes());
    } else {
        out.extend(u32::try_from(header_len).unwrap().to_le_bytes());
    }
    out.extend(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', spaces));
    out.push(b'\n');
    out.extend(data);
    out
}

/// A version 1.0 file whose header is padded to 128 bytes, as NumPy pads a short header.
fn file128(dict: &str, data: &[u8]) -> Vec<u8> {
    file(1, dict, 128 - 10 - dict.len() - 1, data)
}

fn read_err(bytes: &[u8]) -> (ErrorKind, String) {
    kind_and_message(npy::read(bytes))
}

/// Writes `t` to bytes and reads it back.
fn round_trip(t: &Tensor) -> Tensor {
    let mut bytes = Vec::new();
    npy::write(&mut bytes, t).unwrap();
    npy::read(bytes.as_slice()).unwrap()
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    a.shape().unwrap() == b.shape().unwrap()
        && a.dtype().unwrap() == b.dtype().unwrap()
        && a.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
            == b.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
}

#[test]
fn every_dtype_and_shape_round_trips() {
    let tensors = [
        torchfn::tensor([[1.5f32, -2.0, 3.25], [4.0, f32::MAX, f32::MIN_POSITIVE]]).unwrap(),
        torchfn::tensor([1e300f64, -0.0, 2.5]).unwrap(),
        torchfn::tensor([[[1i64, -2], [i64::MAX, i64::MIN]], [[5, 6], [7, 8]]]).unwrap(),
        torchfn::tensor([i32::MIN, 0, i32::MAX]).unwrap(),
        torchfn::tensor([[true, false], [false, true]]).unwrap(),
        torchfn::tensor(7.5f64).unwrap(),
        torchfn::tensor(true).unwrap(),
        torchfn::zeros([0], DType::Float32, None).unwrap(),
        torchfn::zeros([2, 0, 3], DType::Int32, None).unwrap(),
    ];
    for t in &tensors {
        let back = round_trip(t);
        assert!(same(t, &back), "{t} came back as {back}");
        assert!(back.is_contiguous().unwrap());
    }
    // Views are written as the array they show, in row-major order.
    let t = Tensor::from_vec((0..24i64).collect(), [2, 3, 4]).unwrap();
    let views = [
        t.permute([2, 0, 1]).unwrap(),
        t.narrow(2, 1, 2).unwrap(),
        t.select(1, 2).unwrap().t().unwrap(),
        torchfn::tensor([1.0f32, 2.0]).unwrap().expand([3, 2]).unwrap(),
        torchfn::flip(&t, [0, 2]).unwrap(),
    ];
    for v in &views {
        assert!(same(v, &round_trip(v)), "{v}");
    }
    // Through a file, a subclass instance saves its data.
    let path = temp("round-trip");
    let tagged = t.as_subclass(super::Tagged).unwrap();
    npy::save(&path, &tagged).unwrap();
    let back = npy::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(same(&t, &back) && !back.is_instance::<super::Tagged>());
}

#[test]
fn writing_gives_the_bytes_numpy_writes() {
    // np.save(f, np.arange(6, dtype='<i8').reshape(2, 3)): NumPy pads the header with spaces
    // (20 to leave room for the first dimension to grow, then alignment) to 128 bytes.
    let data: Vec<u8> = (0..6i64).flat_map(i64::to_le_bytes).collect();
    let expected = file(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 58, &data);
    assert_eq!(expected.len(), 128 + 48);
    assert_eq!(&expected[8..10], b"\x76\x00");
    let mut bytes = Vec::new();
    npy::write(&mut bytes, &Tensor::from_vec((0..6i64).collect(), [2, 3]).unwrap()).unwrap();
    assert_eq!(bytes, expected);

    // np.save of np.array(3.5), np.array([True, False, True]), np.zeros((0, 3), '<i4').
    let cases = [
        (
            torchfn::tensor(3.5f64).unwrap(),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            62,
            &b"\0\0\0\0\0\0\x0c@"[..],
        ),
        (
            torchfn::tensor([true, false, true]).unwrap(),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
            60,
            b"\x01\x00\x01",
        ),
        (
            torchfn::zeros([0, 3], DType::Int32, None).unwrap(),
            "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3), }",
            58,
            b"",
        ),
    ];
    for (t, dict, spaces, data) in cases {
        let mut bytes = Vec::new();
        npy::write(&mut bytes, &t).unwrap();
        assert_eq!(bytes, file(1, dict, spaces, data), "{dict}");
        assert!(same(&npy::read(bytes.as_slice()).unwrap(), &t));
    }
}

#[test]
fn numpy_files_read_in_every_layout_byte_order_and_version() {
    // np.save(f, np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3))): column-major.
    let data = b"\0\0\0\0\0\0@@\0\0\x80?\0\0\x80@\0\0\0@\0\0\xa0@";
    let bytes = file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 59, data);
    let t = npy::read(bytes.as_slice()).unwrap();
    assert_eq!(t.shape().unwrap(), [2, 3]);
    assert_eq!(t.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert!(!t.is_contiguous().unwrap(), "column-major strides, as torch.from_numpy gives");
    assert!(t.t().unwrap().is_contiguous().unwrap());
    let cube: Vec<u8> = (0..24i32).flat_map(i32::to_le_bytes).collect();
    let t = npy::read(file128("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", &cube).as_slice());
    let t = t.unwrap();
    assert_eq!(t.select(0, 1).unwrap().select(0, 2).unwrap().to_vec::<i32>().unwrap(), [5, 11, 17, 23]);

    // Big-endian, as np.save(f, np.arange(3, dtype='>f4')) writes it.
    let bytes = file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 60, b"\0\0\0\0?\x80\0\0@\0\0\0");
    assert_eq!(npy::read(bytes.as_slice()).unwrap().to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0]);
    let data: Vec<u8> = [-5i64, 1 << 40].iter().flat_map(|x| x.to_be_bytes()).collect();
    let t = npy::read(file128("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", &data).as_slice());
    assert_eq!(t.unwrap().to_vec::<i64>().unwrap(), [-5, 1 << 40]);

    // Versions 2.0 and 3.0 have a 4-byte header length; 3.0 headers are UTF-8.
    let data: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    for version in [2, 3] {
        let bytes = file(version, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 0, &data);
        assert_eq!(npy::read(bytes.as_slice()).unwrap().to_vec::<f64>().unwrap(), [1.0, 2.0]);
    }

    // Several arrays in one stream: each read leaves the stream at the next one.
    let mut stream = Vec::new();
    npy::write(&mut stream, &torchfn::tensor([1i32, 2]).unwrap()).unwrap();
    npy::write(&mut stream, &torchfn::tensor([[true]]).unwrap()).unwrap();
    let mut reader = stream.as_slice();
    assert_eq!(npy::read(&mut reader).unwrap().to_vec::<i32>().unwrap(), [1, 2]);
    assert_eq!(npy::read(&mut reader).unwrap().shape().unwrap(), [1, 1]);
    assert!(reader.is_empty());
}

#[test]
fn files_that_are_not_npy_files_say_what_was_expected() {
    let prefix = "npy::read(): argument 'reader'";
    let cases: Vec<(Vec<u8>, ErrorKind, String)> = vec![
        (b"".to_vec(), ErrorKind::Value, "is empty: expected the magic string b\"\\x93NUMPY\" at its start, found b\"\"".into()),
        (b"PK\x03\x04zip".to_vec(), ErrorKind::Value, "is not a .npy file: expected the magic string b\"\\x93NUMPY\" at its start, found b\"PK\\x03\\x04zi\"".into()),
        (
            b"\x93NUM".to_vec(),
            ErrorKind::Value,
            "ends after 4 bytes, inside the magic string b\"\\x93NUMPY\" a .npy file starts with".into(),
        ),
        (b"\x93NUMPY\x01".to_vec(), ErrorKind::Value, "ends after 7 bytes, inside the header: expected the format version after the magic string".into()),
        (b"\x93NUMPY\x04\x00\x10\x00".to_vec(), ErrorKind::Value, "has .npy format version 4.0: expected 1.0, 2.0 or 3.0".into()),
        (b"\x93NUMPY\x02\x00\x10\x00".to_vec(), ErrorKind::Value, "ends after 10 bytes, inside the header: expected a 4-byte header length".into()),
        (b"\x93NUMPY\x01\x00\x76\x00{'descr'".to_vec(), ErrorKind::Value, "ends inside the header: expected 118 bytes of header, found 8".into()),
        (b"\x93NUMPY\x02\x00\xff\xff\xff\xff{}".to_vec(), ErrorKind::Value, "ends inside the header: expected 4294967295 bytes of header, found 2".into()),
        (file128("{'descr': '<f8', 'shape': (2,), }", &[0; 16]), ErrorKind::Value, "has a malformed header: the key 'fortran_order' is missing".into()),
        (file128("{'descr': '<f8', 'fortran_order': False, 'shape': [2], }", &[0; 16]), ErrorKind::Value, "has a malformed header: 'shape' must be a tuple of ints, not a list".into()),
        (file128("{'descr': '<f8' 'fortran_order': False}", &[]), ErrorKind::Value, "has a malformed header: expected ',' or '}' in the dict at character 16 of the header, found '\\''".into()),
        (file(3, "{'descr': '<f8', \u{e9}}", 0, &[]).into_iter().map(|b| if b == 0xa9 { 0xff } else { b }).collect(), ErrorKind::Value, "has a malformed header: expected UTF-8 text (format version 3.0), found an invalid byte at byte 17 of the header".into()),
        (file128("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", &[0; 4]), ErrorKind::Type, "holds dtype '<u2' (uint16), which tensors do not support: expected '<f2' (float16), '<f4' (float32), '<f8' (float64), '|u1' (uint8), '|i1' (int8), '<i2' (int16), '<i4' (int32), '<i8' (int64) or '|b1' (bool), little- or big-endian ('>f4', ...)".into()),
        (file128("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (), }", &[0; 4]), ErrorKind::Type, "holds a structured dtype (a list of fields), which tensors do not support: expected '<f2' (float16), '<f4' (float32), '<f8' (float64), '|u1' (uint8), '|i1' (int8), '<i2' (int16), '<i4' (int32), '<i8' (int64) or '|b1' (bool), little- or big-endian ('>f4', ...)".into()),
        (file128("{'descr': '|O', 'fortran_order': False, 'shape': (), }", &[]), ErrorKind::Type, "holds dtype '|O', which tensors do not support: expected '<f2' (float16), '<f4' (float32), '<f8' (float64), '|u1' (uint8), '|i1' (int8), '<i2' (int16), '<i4' (int32), '<i8' (int64) or '|b1' (bool), little- or big-endian ('>f4', ...)".into()),
        (file128("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", &[0; 47]), ErrorKind::Value, "ends early: expected 48 bytes of array data, found 47".into()),
    ];
    for (bytes, kind, message) in cases {
        assert_eq!(read_err(&bytes), (kind, format!("{prefix} {message}")));
    }
}

#[test]
fn huge_shapes_are_errors_before_anything_is_allocated() {
    let dict = |shape: &str| format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    assert_eq!(
        read_err(&file128(&dict("(4611686018427387904, 4)"), &[])),
        (
            ErrorKind::Value,
            "npy::read(): argument 'reader' has shape [4611686018427387904, 4], of more than usize::MAX elements"
                .into()
        )
    );
    assert_eq!(
        read_err(&file128(&dict("(1152921504606846976,)"), &[])).1,
        "npy::read(): argument 'reader' has shape [1152921504606846976]: 1152921504606846976 elements of 8 bytes are \
         more than memory can hold"
    );
    // 8 TiB announced, 16 bytes present: from a stream, memory is reserved as data arrives...
    let bytes = file128(&dict("(1099511627776,)"), &[0; 16]);
    assert_eq!(
        read_err(&bytes).1,
        "npy::read(): argument 'reader' ends early: expected 8796093022208 bytes of array data, found 16"
    );
    // ...and from a file, its size is checked first.
    let path = temp("huge");
    std::fs::write(&path, &bytes).unwrap();
    let (kind, message) = kind_and_message(npy::load(&path));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(kind, ErrorKind::Value);
    assert_eq!(
        message,
        format!(
            "npy::load(): file '{}' ends early: expected 8796093022208 bytes of array data, found 16",
            path.display()
        )
    );
    // A shape with a zero holds nothing, but its other dimensions must fit in memory as those
    // of an array with data would (the kernels and ndarray multiply them).
    let empty = npy::read(file128(&dict("(1152921504606846975, 0)"), &[]).as_slice()).unwrap();
    assert_eq!(empty.shape().unwrap(), Shape::from([(1 << 60) - 1, 0]));
    assert_eq!(
        read_err(&file128(&dict("(1152921504606846976, 0)"), &[])).1,
        "npy::read(): argument 'reader' has shape [1152921504606846976, 0]: it is empty, but its other dimensions \
         multiply to more elements of 8 bytes than memory can hold"
    );
    // Deep nesting is refused without exhausting the stack.
    let deep = file(2, &format!("{{'shape': {}}}", "(".repeat(100_000)), 0, &[]);
    assert!(read_err(&deep).1.contains("nests more than 16 levels"));
}

#[test]
fn truncated_or_corrupted_files_are_errors_never_panics() {
    let mut files = Vec::new();
    for t in [
        Tensor::from_vec((0..6i64).collect(), [2, 3]).unwrap(),
        torchfn::tensor([true, false, true]).unwrap(),
        torchfn::tensor(1.5f32).unwrap(),
        torchfn::zeros([0, 2], DType::Float64, None).unwrap(),
    ] {
        let mut bytes = Vec::new();
        npy::write(&mut bytes, &t).unwrap();
        files.push(bytes);
    }
    let data: Vec<u8> = (0..6i32).flat_map(i32::to_le_bytes).collect();
    files.push(file(3, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", 0, &data));
    for bytes in &files {
        for cut in 0..bytes.len() {
            assert!(npy::read(&bytes[..cut]).is_err(), "a file cut at byte {cut} of {} was read", bytes.len());
        }
        let header_end = match bytes[6] {
            1 => 10 + usize::from(u16::from_le_bytes([bytes[8], bytes[9]])),
            _ => 12 + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        };
        for at in 0..bytes.len() {
            for mask in [0xff, 0x01, 0x02, 0x10, 0x20, 0x40, 0x80] {
                let mut corrupted = bytes.clone();
                corrupted[at] ^= mask;
                match npy::read(corrupted.as_slice()) {
                    // Every byte of the header is needed: inverting any one is an error.
                    Ok(_) if at < header_end && mask == 0xff => panic!("inverting header byte {at} went unnoticed"),
                    Ok(t) => {
                        let nbytes = t.shape().unwrap().numel().checked_mul(t.dtype().unwrap().itemsize());
                        assert!(nbytes.is_some_and(|n| n <= bytes.len()));
                    }
                    Err(e) => assert!(e.to_string().starts_with("npy::read(): argument 'reader' "), "{e}"),
                }
            }
        }
    }
}

/// A writer whose disk is always full.
struct Full;
impl Write for Full {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn files_that_cannot_be_opened_or_written_are_os_errors() {
    let missing = std::env::temp_dir().join("torchfn-no-such-directory").join("x.npy");
    let (kind, message) = kind_and_message(npy::load(&missing));
    assert_eq!(kind, ErrorKind::Os);
    assert!(message.starts_with(&format!("npy::load(): cannot open file '{}': ", missing.display())), "{message}");
    let t = torchfn::tensor([1.0f32]).unwrap();
    let (kind, message) = kind_and_message(npy::save(&missing, &t));
    assert_eq!(kind, ErrorKind::Os);
    assert!(message.starts_with(&format!("npy::save(): cannot create file '{}': ", missing.display())), "{message}");
    let (kind, message) = kind_and_message(npy::write(Full, &t));
    assert_eq!(
        (kind, message.as_str()),
        (ErrorKind::Os, "npy::write(): cannot write argument 'writer': no space left on device")
    );
    // A directory is not a file.
    assert_eq!(npy::load(std::env::temp_dir()).unwrap_err().kind(), ErrorKind::Os);
}

#[test]
fn ducks_have_no_data_to_save() {
    let duck = Tensor::from_duck(Quack);
    let (kind, message) = kind_and_message(npy::write(Vec::new(), &duck));
    assert_eq!(
        (kind, message.as_str()),
        (ErrorKind::Type, "npy::write(): argument 'tensor' must be Tensor, not Quack")
    );
    let path = temp("duck");
    assert_eq!(kind_and_message(npy::save(&path, &duck)).1, "npy::save(): argument 'tensor' must be Tensor, not Quack");
    assert!(!path.exists(), "nothing is created for a duck");
}
