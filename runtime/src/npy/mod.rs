//! Reading and writing NumPy's `.npy` files, so that tensors move to and from NumPy and
//! PyTorch (`np.save` / `np.load`, `torch.from_numpy(np.load(...))`).
//!
//! ```
//! let t = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])?;
//! let path = std::env::temp_dir().join(format!("torchfn-npy-example-{}.npy", std::process::id()));
//! torchfn::npy::save(&path, &t)?; // np.load(path) reads it back in Python
//! let back = torchfn::npy::load(&path)?;
//! std::fs::remove_file(&path).ok();
//! assert_eq!(back.shape()?, [2, 3]);
//! assert_eq!(back.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! Files of format version 1.0, 2.0 and 3.0 are read, with dtypes float32 (`<f4`), float64
//! (`<f8`), int32 (`<i4`), int64 (`<i8`) and bool (`|b1`), little- or big-endian, in C or
//! Fortran order; a Fortran-order file gives a tensor with column-major strides, as
//! `torch.from_numpy` does. Files are written as NumPy writes them: version 1.0 (2.0 for a
//! header over 64 KiB), C order, little-endian, byte for byte what `np.save` writes.
//!
//! A file that is not a `.npy` file, is truncated, or holds a dtype tensors do not have gives
//! an error that names the operation, the file and what was expected; reading never panics,
//! and never allocates more than the data present (a header cannot make it reserve memory
//! for a huge shape). A file that cannot be opened, read or written gives an `OSError`
//! ([`ErrorKind::Os`](crate::ErrorKind::Os)); an unsupported dtype a `TypeError`, as in
//! `torch.from_numpy`; anything else wrong with the contents a `ValueError`.

mod codec;
mod header;

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use ndarray::ArrayViewD;

use self::codec::Codec;
use self::header::{Header, MAGIC, Problem};
use crate::backend::host;
use crate::backend::{Array, Buffer, Storage};
use crate::error::{Error, Result};
use crate::tensor::{Dense, Layout, Shape, Tensor, with_dtype};

crate::overrides::ignored! {
    "torchfn.npy.load": "reads a file, without dispatch",
    "torchfn.npy.save": "reads the data directly, without dispatch",
    "torchfn.npy.read": "reads a stream, without dispatch",
    "torchfn.npy.write": "reads the data directly, without dispatch",
}

/// Bytes read or written at a time.
const CHUNK: usize = 1 << 16;

/// Reads the `.npy` file at `path` (`np.load`).
///
/// Fails with an `OSError` when the file cannot be opened or read, and as [`read`] does when
/// its contents are not a `.npy` file of a supported dtype. Bytes after the array data are
/// ignored, as NumPy does.
///
/// ```
/// let path = std::env::temp_dir().join(format!("torchfn-npy-load-{}.npy", std::process::id()));
/// torchfn::npy::save(&path, &torchfn::tensor([true, false])?)?;
/// assert_eq!(torchfn::npy::load(&path)?.to_vec::<bool>()?, [true, false]);
/// std::fs::remove_file(&path).ok();
///
/// let err = torchfn::npy::load(&path).unwrap_err();
/// assert_eq!(err.kind(), torchfn::ErrorKind::Os);
/// assert!(err.to_string().starts_with("npy::load(): cannot open file"), "{err}");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let ctx = Ctx { func: "npy::load", source: Source::File(path) };
    let mut file = File::open(path).map_err(|e| ctx.os("cannot open", e))?;
    // The size of a regular file bounds what its header may ask to allocate.
    let size = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    ctx.read(&mut file, size)
}

/// Writes `tensor` to a `.npy` file at `path`, replacing any file there (`np.save`).
///
/// The elements are written in row-major order whatever the tensor's strides, so a
/// transposed or sliced tensor is saved as the array it shows. A subclass instance is saved
/// as its data; a duck has none, and gives a `TypeError`. Fails with an `OSError` when the
/// file cannot be created or written.
///
/// ```
/// let path = std::env::temp_dir().join(format!("torchfn-npy-save-{}.npy", std::process::id()));
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?.t()?;
/// torchfn::npy::save(&path, &t)?;
/// assert_eq!(torchfn::npy::load(&path)?.to_vec::<i64>()?, [1, 3, 2, 4]);
/// std::fs::remove_file(&path).ok();
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn save(path: impl AsRef<Path>, tensor: &Tensor) -> Result<()> {
    let path = path.as_ref();
    let ctx = Ctx { func: "npy::save", source: Source::File(path) };
    let dense = tensor.data(ctx.func, "tensor")?;
    let mut file = File::create(path).map_err(|e| ctx.os("cannot create", e))?;
    ctx.write(&mut file, dense)?;
    file.flush().map_err(|e| ctx.os("cannot write", e))
}

/// Reads one array in `.npy` format from `reader`, leaving it just after the array's data,
/// where the next array of a stream of them starts (NumPy's `np.load` of an open file).
///
/// Fails with a `ValueError` when the data is not a `.npy` array (wrong magic string,
/// unsupported format version, malformed header, shape too large, fewer bytes than the
/// shape needs), a `TypeError` when its dtype is not one tensors have, and an `OSError`
/// when reading fails.
///
/// ```
/// let mut bytes = Vec::new();
/// torchfn::npy::write(&mut bytes, &torchfn::tensor([1.5f64, 2.5])?)?;
/// let t = torchfn::npy::read(bytes.as_slice())?;
/// assert_eq!(t.to_vec::<f64>()?, [1.5, 2.5]);
///
/// let err = torchfn::npy::read(&bytes[..bytes.len() - 1]).unwrap_err();
/// assert_eq!(err.to_string(), "npy::read(): argument 'reader' ends early: expected 16 bytes of array data, found 15");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn read(mut reader: impl Read) -> Result<Tensor> {
    Ctx { func: "npy::read", source: Source::Arg("reader") }.read(&mut reader, None)
}

/// Writes `tensor` in `.npy` format to `writer`: exactly the bytes [`save`] writes to a file.
/// Unbuffered writers are fine: the data is written in large blocks.
///
/// Fails with a `TypeError` for a duck, and an `OSError` when writing fails.
///
/// ```
/// let mut bytes = Vec::new();
/// torchfn::npy::write(&mut bytes, &torchfn::tensor([[1i32, 2, 3]])?)?;
/// assert!(bytes.starts_with(b"\x93NUMPY\x01\x00"));
/// assert_eq!(bytes.len(), 128 + 3 * 4); // the header fills 128 bytes
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn write(mut writer: impl Write, tensor: &Tensor) -> Result<()> {
    let ctx = Ctx { func: "npy::write", source: Source::Arg("writer") };
    ctx.write(&mut writer, tensor.data(ctx.func, "tensor")?)
}

/// Where the bytes come from or go to, for error messages.
#[derive(Clone, Copy)]
enum Source<'a> {
    File(&'a Path),
    Arg(&'static str),
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "file '{}'", path.display()),
            Source::Arg(name) => write!(f, "argument '{name}'"),
        }
    }
}

/// One call of a public function: its name and its source, to name both in errors.
struct Ctx<'a> {
    func: &'static str,
    source: Source<'a>,
}

impl Ctx<'_> {
    /// A `ValueError`: `npy::load(): file 'x.npy' {what}`.
    fn invalid(&self, what: impl fmt::Display) -> Error {
        Error::value_error(format!("{}(): {} {what}", self.func, self.source))
    }

    /// An `OSError`: `npy::load(): cannot open file 'x.npy': {error}`.
    fn os(&self, doing: &str, error: io::Error) -> Error {
        Error::os_error(format!("{}(): {doing} {}: {error}", self.func, self.source))
    }

    /// Fills `buf` from `reader`; the number of bytes read, fewer only at the end of the data.
    fn fill(&self, reader: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match reader.read(&mut buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os("cannot read", e)),
            }
        }
        Ok(done)
    }

    /// Reads one array; `size`, when known, is the number of bytes `reader` holds.
    fn read(&self, reader: &mut impl Read, size: Option<u64>) -> Result<Tensor> {
        let (header, header_end) = self.read_header(reader, size)?;
        let numel = header.shape.checked_numel().ok_or_else(|| {
            self.invalid(format_args!("has shape {:?}, of more than usize::MAX elements", header.shape.as_ref()))
        })?;
        let itemsize = header.dtype.itemsize();
        let nbytes = numel.checked_mul(itemsize).filter(|&n| isize::try_from(n).is_ok()).ok_or_else(|| {
            self.invalid(format_args!(
                "has shape {:?}: {numel} elements of {itemsize} bytes are more than memory can hold",
                header.shape.as_ref()
            ))
        })?;
        // An empty tensor holds nothing, but its other dimensions must fit in memory as those of
        // a tensor with data would: strides, views and copies (and ndarray) multiply them.
        if numel == 0 && !header.shape.fits_in_memory(itemsize) {
            return Err(self.invalid(format_args!(
                "has shape {:?}: it is empty, but its other dimensions multiply to more elements of {itemsize} \
                 bytes than memory can hold",
                header.shape.as_ref()
            )));
        }
        // Before allocating anything: does the file hold that much?
        if let Some(available) = size.map(|s| s.saturating_sub(header_end))
            && (nbytes as u64) > available
        {
            return Err(self.truncated(nbytes, available));
        }
        let dtype = header.dtype;
        let buffer =
            with_dtype!(dtype, T => Buffer::from_vec(self.read_data::<T>(reader, &header, nbytes, size.is_some())?));
        let strides = if header.fortran_order {
            // Column-major: the strides of the reversed shape, reversed.
            let reversed: Shape = header.shape.iter().rev().copied().collect();
            reversed.contiguous_strides().into_iter().rev().collect()
        } else {
            header.shape.contiguous_strides()
        };
        let layout = Layout { shape: header.shape, strides, offset: 0 };
        Ok(Tensor::from_array(Array { storage: Storage::host(buffer), layout, dtype }))
    }

    /// The header, and the number of bytes read up to its end.
    fn read_header(&self, reader: &mut impl Read, size: Option<u64>) -> Result<(Header, u64)> {
        let mut prelude = [0u8; 8];
        let got = self.fill(reader, &mut prelude)?;
        let magic = &prelude[..got.min(MAGIC.len())];
        if got > 0 && got < MAGIC.len() && MAGIC.starts_with(magic) {
            return Err(self.invalid(format_args!(
                "ends after {got} bytes, inside the magic string b\"\\x93NUMPY\" a .npy file starts with"
            )));
        }
        if magic != MAGIC {
            let what = if got == 0 { "is empty".to_string() } else { "is not a .npy file".to_string() };
            return Err(self.invalid(format_args!(
                "{what}: expected the magic string b\"\\x93NUMPY\" at its start, found b\"{}\"",
                magic.escape_ascii()
            )));
        }
        if got < prelude.len() {
            return Err(self.invalid(format_args!(
                "ends after {got} bytes, inside the header: expected the format version after the magic string"
            )));
        }
        let (major, minor) = (prelude[6], prelude[7]);
        let len_size = match (major, minor) {
            (1, 0) => 2,
            (2 | 3, 0) => 4,
            _ => {
                return Err(
                    self.invalid(format_args!("has .npy format version {major}.{minor}: expected 1.0, 2.0 or 3.0"))
                );
            }
        };
        let mut len_bytes = [0u8; 4];
        let got = self.fill(reader, &mut len_bytes[..len_size])?;
        if got < len_size {
            return Err(self.invalid(format_args!(
                "ends after {} bytes, inside the header: expected a {len_size}-byte header length",
                prelude.len() + got
            )));
        }
        let header_len = u32::from_le_bytes(len_bytes) as usize;
        let header_start = (prelude.len() + len_size) as u64;
        let header_end = header_start + header_len as u64;
        if let Some(size) = size
            && size < header_end
        {
            return Err(self.short_header(header_len, size.saturating_sub(header_start)));
        }
        let text = self.read_up_to(reader, header_len)?;
        if text.len() < header_len {
            return Err(self.short_header(header_len, text.len() as u64));
        }
        let text = if major >= 3 {
            String::from_utf8(text).map_err(|e| {
                self.invalid(format_args!(
                    "has a malformed header: expected UTF-8 text (format version 3.0), found an invalid byte at byte {} \
                     of the header",
                    e.utf8_error().valid_up_to()
                ))
            })?
        } else {
            text.iter().map(|&b| char::from(b)).collect() // latin-1
        };
        let header = header::parse(&text).map_err(|problem| match problem {
            Problem::Malformed(m) => self.invalid(format_args!("has a malformed header: {m}")),
            Problem::Dtype(m) => Error::type_error(format!("{}(): {} {m}", self.func, self.source)),
        })?;
        Ok((header, header_end))
    }

    /// Up to `n` bytes, fewer at the end of the data; memory grows as bytes arrive, so that a
    /// huge length announced by a short stream allocates little.
    fn read_up_to(&self, reader: &mut impl Read, n: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut block = vec![0u8; CHUNK.min(n)];
        while out.len() < n {
            let want = (n - out.len()).min(block.len());
            let got = self.fill(reader, &mut block[..want])?;
            out.extend_from_slice(&block[..got]);
            if got < want {
                break;
            }
        }
        Ok(out)
    }

    fn short_header(&self, expected: usize, found: u64) -> Error {
        self.invalid(format_args!("ends inside the header: expected {expected} bytes of header, found {found}"))
    }

    fn truncated(&self, expected: usize, found: u64) -> Error {
        self.invalid(format_args!("ends early: expected {expected} bytes of array data, found {found}"))
    }

    /// The `nbytes` bytes of array data, decoded; memory is reserved up front only when
    /// `trusted_size` (the size of the data was checked), and otherwise as data arrives.
    fn read_data<T: Codec>(
        &self,
        reader: &mut impl Read,
        header: &Header,
        nbytes: usize,
        trusted_size: bool,
    ) -> Result<Vec<T>> {
        let itemsize = size_of::<T>();
        let numel = nbytes / itemsize;
        let mut data = Vec::new();
        self.reserve(&mut data, if trusted_size { numel } else { numel.min(CHUNK / itemsize) })?;
        let mut buf = vec![0u8; CHUNK.min(nbytes)];
        let mut done = 0;
        while done < nbytes {
            let want = (nbytes - done).min(buf.len());
            let got = self.fill(reader, &mut buf[..want])?;
            self.reserve(&mut data, got / itemsize)?;
            T::decode_into(&buf[..got - got % itemsize], header.big_endian, &mut data);
            done += got;
            if got < want {
                return Err(self.truncated(nbytes, done as u64));
            }
        }
        Ok(data)
    }

    /// Room for `n` more elements, or an error (never an abort) when memory runs out.
    fn reserve<T>(&self, data: &mut Vec<T>, n: usize) -> Result<()> {
        crate::backend::host::reserve(data, n).map_err(|_| {
            Error::runtime_error(format!(
                "{}(): not enough memory: you tried to allocate {} elements",
                self.func,
                data.len().saturating_add(n)
            ))
        })
    }

    /// Writes the header and the elements of `dense`, in row-major order.
    fn write(&self, writer: &mut impl Write, dense: &Dense) -> Result<()> {
        let shape = &dense.layout.shape;
        if codec::type_code(dense.dtype).is_none() {
            return Err(Error::type_error(format!(
                "{}(): NumPy has no {} type, so a .npy file cannot hold the tensor: convert it with \
                 .to(torch.float32) first",
                self.func, dense.dtype
            )));
        }
        let header = header::encode(dense.dtype, shape).ok_or_else(|| {
            self.invalid(format_args!(
                "cannot take a tensor of {} dimensions: its header would exceed 4 GiB",
                shape.len()
            ))
        })?;
        writer.write_all(&header).map_err(|e| self.os("cannot write", e))?;
        let host = crate::backend::host::on_host(dense)?;
        with_dtype!(dense.dtype, T => host::read(&host, |view: ArrayViewD<'_, T>| write_elements(writer, view)))?
            .map_err(|e| self.os("cannot write", e))
    }
}

/// Writes the elements of `view` in logical (row-major) order, in blocks.
fn write_elements<T: Codec>(writer: &mut impl Write, view: ArrayViewD<'_, T>) -> io::Result<()> {
    let mut block = Vec::with_capacity(CHUNK.min(view.len() * size_of::<T>()));
    for &x in view.iter() {
        x.encode(&mut block);
        if block.len() + size_of::<T>() > CHUNK {
            writer.write_all(&block)?;
            block.clear();
        }
    }
    writer.write_all(&block)
}
