//! The header of a `.npy` file: a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, parsed without evaluating
//! anything, and written byte for byte as NumPy writes it.

use super::codec;
use crate::tensor::{DType, Shape};

/// The magic string every `.npy` file starts with.
pub(super) const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// NumPy aligns the array data on this many bytes.
const ALIGN: usize = 64;

/// NumPy leaves room after the header for a first dimension of this many digits, so that the
/// array can grow in place.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Deeper nesting than this is not a header NumPy writes (and would risk the stack).
const MAX_DEPTH: usize = 16;

/// What a header says about the array that follows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Header {
    pub(super) dtype: DType,
    pub(super) big_endian: bool,
    pub(super) fortran_order: bool,
    pub(super) shape: Shape,
}

/// Why a header was refused.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Problem {
    /// Not a header NumPy could have written (a `ValueError`).
    Malformed(String),
    /// A valid header for a dtype tensors do not have (a `TypeError`); the message names it.
    Dtype(String),
}

/// The dtypes a file can hold, for error messages.
pub(super) const SUPPORTED: &str = "'<f2' (float16), '<f4' (float32), '<f8' (float64), '|u1' (uint8), '|i1' \
                                    (int8), '<i2' (int16), '<i4' (int32), '<i8' (int64) or '|b1' (bool), little- or \
                                    big-endian ('>f4', ...)";

/// Parses the text of a header.
pub(super) fn parse(text: &str) -> Result<Header, Problem> {
    let mut parser = Parser { text, pos: 0 };
    parser.skip_space();
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.pos < text.len() {
        return Err(parser.expected("the end of the header after the dict"));
    }
    let Literal::Dict(entries) = value else {
        return Err(malformed(format!("expected a dict, found {}", value.describe())));
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    for (key, value) in entries {
        let slot = match &key {
            Literal::Str(k) if k == "descr" => &mut descr,
            Literal::Str(k) if k == "fortran_order" => &mut fortran_order,
            Literal::Str(k) if k == "shape" => &mut shape,
            _ => {
                return Err(malformed(format!(
                    "unexpected key {}: expected exactly the keys 'descr', 'fortran_order' and 'shape'",
                    key.repr()
                )));
            }
        };
        if slot.replace(value).is_some() {
            return Err(malformed(format!("the key {} appears twice", key.repr())));
        }
    }
    let missing = |name: &str| malformed(format!("the key '{name}' is missing"));
    let (dtype, big_endian) = dtype(descr.ok_or_else(|| missing("descr"))?)?;
    let fortran_order = match fortran_order.ok_or_else(|| missing("fortran_order"))? {
        Literal::Bool(b) => b,
        other => return Err(malformed(format!("'fortran_order' must be True or False, not {}", other.describe()))),
    };
    let shape = shape_of(shape.ok_or_else(|| missing("shape"))?)?;
    Ok(Header { dtype, big_endian, fortran_order, shape })
}

/// The magic string, version, header length and header NumPy writes for a C-order,
/// little-endian array: version 1.0, or 2.0 when the header needs more than 65535 bytes.
/// `None` only for a header of more than 4 GiB (a dtype NumPy lacks is refused before).
pub(super) fn encode(dtype: DType, shape: &[usize]) -> Option<Vec<u8>> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_repr}, }}", codec::descr(dtype)?);
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.extend(std::iter::repeat_n(' ', GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    // As NumPy: pad with 1 to 64 spaces and a newline, so that the data starts aligned.
    let padding = |len_size: usize| ALIGN - (MAGIC.len() + 2 + len_size + dict.len() + 1) % ALIGN;
    let header_len = |padding: usize| dict.len() + padding + 1;
    let (version, padding) = match padding(2) {
        p if u16::try_from(header_len(p)).is_ok() => (1u8, p),
        _ => (2u8, padding(4)),
    };
    let header_len = header_len(padding);
    let mut out = Vec::with_capacity(MAGIC.len() + 6 + header_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&u16::try_from(header_len).ok()?.to_le_bytes());
    } else {
        out.extend_from_slice(&u32::try_from(header_len).ok()?.to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', padding));
    out.push(b'\n');
    Some(out)
}

/// The dtype and byte order a `descr` names.
fn dtype(descr: Literal) -> Result<(DType, bool), Problem> {
    let descr = match descr {
        Literal::Str(s) => s,
        Literal::List(_) => {
            return Err(Problem::Dtype(format!(
                "holds a structured dtype (a list of fields), which tensors do not support: expected {SUPPORTED}"
            )));
        }
        other => return Err(malformed(format!("'descr' must be a string, not {}", other.describe()))),
    };
    let (order, code) = descr.split_at(descr.chars().next().map_or(0, char::len_utf8));
    let dtype = DType::ALL.into_iter().find(|&d| codec::type_code(d) == Some(code));
    // `|` (byte order not applicable) and `=` mean the machine's own order, as in NumPy.
    let native_big = cfg!(target_endian = "big");
    match (order, dtype) {
        ("<", Some(d)) => Ok((d, false)),
        (">", Some(d)) => Ok((d, d.itemsize() > 1)),
        ("|" | "=", Some(d)) => Ok((d, native_big && d.itemsize() > 1)),
        _ => Err(Problem::Dtype(format!(
            "holds dtype '{descr}'{}, which tensors do not support: expected {SUPPORTED}",
            numpy_name(code).map_or(String::new(), |name| format!(" ({name})"))
        ))),
    }
}

/// The NumPy name of a type code, to say what an unsupported dtype is (`u2` is `uint16`).
fn numpy_name(code: &str) -> Option<String> {
    let kind = code.chars().next()?;
    let bytes: usize = code.get(1..)?.parse().ok()?;
    let bits = bytes.checked_mul(8)?;
    Some(match kind {
        'b' => "bool".into(),
        'i' => format!("int{bits}"),
        'u' => format!("uint{bits}"),
        'f' => format!("float{bits}"),
        'c' => format!("complex{bits}"),
        'U' => format!("a string of {bytes} characters"),
        'S' => format!("{bytes} bytes"),
        'V' => format!("{bytes} raw bytes"),
        _ => return None,
    })
}

/// The shape a `shape` tuple names.
fn shape_of(shape: Literal) -> Result<Shape, Problem> {
    let Literal::Tuple(dims) = shape else {
        return Err(malformed(format!("'shape' must be a tuple of ints, not {}", shape.describe())));
    };
    dims.iter()
        .map(|d| match d {
            Literal::Int(n) => usize::try_from(*n).map_err(|_| {
                let why = if *n < 0 { "is negative" } else { "does not fit in usize" };
                malformed(format!("dimension {n} of the shape {why}"))
            }),
            other => Err(malformed(format!("'shape' must be a tuple of ints, but holds {}", other.describe()))),
        })
        .collect()
}

fn malformed(message: String) -> Problem {
    Problem::Malformed(message)
}

/// The Python literals a header may contain.
#[derive(Clone, Debug, PartialEq)]
enum Literal {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(Literal, Literal)>),
}

impl Literal {
    /// What kind of value this is, for error messages.
    fn describe(&self) -> String {
        match self {
            Literal::Str(_) => format!("the string {}", self.repr()),
            Literal::Int(n) => format!("the int {n}"),
            Literal::Bool(b) => (if *b { "True" } else { "False" }).into(),
            Literal::None => "None".into(),
            Literal::Tuple(_) => "a tuple".into(),
            Literal::List(_) => "a list".into(),
            Literal::Dict(_) => "a dict".into(),
        }
    }

    /// A string as Python prints it, for error messages.
    fn repr(&self) -> String {
        match self {
            Literal::Str(s) => format!("'{}'", s.escape_debug()),
            other => other.describe(),
        }
    }
}

/// A recursive-descent parser for the literals of a header.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| matches!(c, ' ' | '\t' | '\n' | '\r')) {
            self.pos += 1;
        }
    }

    /// An error saying what was expected where the parser stands, and what is there.
    fn expected(&self, what: &str) -> Problem {
        let found = match self.peek() {
            Some(c) => format!("{:?}", c),
            None => "the end of the header".into(),
        };
        malformed(format!("expected {what} at character {} of the header, found {found}", self.character(self.pos)))
    }

    /// The character (not byte) index of byte `pos` of the text, counting from zero.
    fn character(&self, pos: usize) -> usize {
        self.text[..pos].chars().count()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            return true;
        }
        false
    }

    fn value(&mut self, depth: usize) -> Result<Literal, Problem> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!("the header nests more than {MAX_DEPTH} levels deep")));
        }
        match self.peek() {
            Some('{') => self.dict(depth),
            Some('(') => self.sequence(depth, ')'),
            Some('[') => self.sequence(depth, ']'),
            Some(q @ ('\'' | '"')) => self.string(q),
            Some(c) if c == '-' || c.is_ascii_digit() => self.int(),
            Some(c) if c.is_ascii_alphabetic() => self.name(),
            _ => Err(self.expected("a value")),
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Literal, Problem> {
        self.pos += 1; // '{'
        let mut entries = Vec::new();
        loop {
            self.skip_space();
            if self.eat('}') {
                return Ok(Literal::Dict(entries));
            }
            let key = self.value(depth + 1)?;
            self.skip_space();
            if !self.eat(':') {
                return Err(self.expected("':' after a key"));
            }
            self.skip_space();
            entries.push((key, self.value(depth + 1)?));
            self.skip_space();
            if !self.eat(',') && self.peek() != Some('}') {
                return Err(self.expected("',' or '}' in the dict"));
            }
        }
    }

    /// A tuple (`()`, `(5,)`, `(2, 3)`; `(5)` is the int 5, as in Python) or a list.
    fn sequence(&mut self, depth: usize, close: char) -> Result<Literal, Problem> {
        self.pos += 1; // '(' or '['
        let mut items = Vec::new();
        let mut trailing_comma = false;
        loop {
            self.skip_space();
            if self.eat(close) {
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip_space();
            trailing_comma = self.eat(',');
            if !trailing_comma && self.peek() != Some(close) {
                return Err(self.expected(&format!("',' or '{close}'")));
            }
        }
        Ok(match (close, items.len(), trailing_comma) {
            (']', ..) => Literal::List(items),
            (_, 1, false) => items.pop().unwrap_or(Literal::None),
            _ => Literal::Tuple(items),
        })
    }

    /// A string in single or double quotes; a backslash takes the next character as it is.
    fn string(&mut self, quote: char) -> Result<Literal, Problem> {
        let start = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.bump() {
                Some(c) if c == quote => return Ok(Literal::Str(s)),
                Some('\\') => match self.bump() {
                    Some(c) => s.push(c),
                    None => break,
                },
                Some(c) => s.push(c),
                None => break,
            }
        }
        Err(malformed(format!(
            "the string starting at character {} of the header is not closed",
            self.character(start)
        )))
    }

    /// An int, with the `L` suffix of headers written by Python 2.
    fn int(&mut self) -> Result<Literal, Problem> {
        let start = self.pos;
        self.eat('-');
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.text[start..self.pos];
        let n = digits.parse::<i128>().map_err(|_| {
            if digits.len() > 1 { malformed(format!("the int {digits} is too large")) } else { self.expected("an int") }
        })?;
        let _ = self.eat('L') || self.eat('l');
        Ok(Literal::Int(n))
    }

    fn name(&mut self) -> Result<Literal, Problem> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.pos += 1;
        }
        match &self.text[start..self.pos] {
            "True" => Ok(Literal::Bool(true)),
            "False" => Ok(Literal::Bool(false)),
            "None" => Ok(Literal::None),
            other => Err(malformed(format!(
                "expected a value at character {} of the header, found the name '{other}'",
                self.character(start)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(dtype: DType, big_endian: bool, fortran_order: bool, shape: &[usize]) -> Header {
        Header { dtype, big_endian, fortran_order, shape: Shape::new(shape) }
    }

    #[test]
    fn headers_numpy_writes_parse() {
        let h = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n").unwrap();
        assert_eq!(h, header(DType::Float32, false, false, &[2, 3]));
        let h = parse("{'descr': '|b1', 'fortran_order': True, 'shape': (5,), }\n").unwrap();
        assert_eq!(h, header(DType::Bool, false, true, &[5]));
        let h = parse("{'descr': '>i8', 'fortran_order': False, 'shape': (), }").unwrap();
        assert_eq!(h, header(DType::Int64, true, false, &[]));
        let h = parse("{'descr': '|f8', 'fortran_order': False, 'shape': (1, 0, 2), }").unwrap();
        assert_eq!(h, header(DType::Float64, cfg!(target_endian = "big"), false, &[1, 0, 2]));
    }

    #[test]
    fn any_python_spelling_of_the_dict_parses() {
        let h = parse("{\"shape\":(0,3L,),\"fortran_order\":False,\"descr\":\">b1\"}").unwrap();
        assert_eq!(h, header(DType::Bool, false, false, &[0, 3]));
    }

    #[test]
    fn malformed_headers_say_what_was_expected() {
        let m = |text: &str| match parse(text) {
            Err(Problem::Malformed(m)) => m,
            other => panic!("{text:?} gave {other:?}"),
        };
        assert_eq!(
            m("{'descr': '<f4' 'shape': ()}"),
            "expected ',' or '}' in the dict at character 16 of the header, found '\\''"
        );
        assert_eq!(m("{'descr': '<f4', 'shape': ()}"), "the key 'fortran_order' is missing");
        assert_eq!(
            m("{'descr': '<f4', 'fortran_order': False, 'shape': (5)}"),
            "'shape' must be a tuple of ints, not the int 5"
        );
        assert_eq!(
            m("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"),
            "'fortran_order' must be True or False, not the int 0"
        );
        assert_eq!(
            m("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"),
            "dimension -1 of the shape is negative"
        );
        assert!(m("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}").starts_with("unexpected key 'x'"));
        assert!(m("{'shape': (), 'shape': ()}").contains("appears twice"));
        assert!(m("[1, 2]").starts_with("expected a dict, found a list"));
        assert!(m("{'descr': '<f4', 'fortran_order': False, 'shape': (), } x").starts_with("expected the end"));
        assert!(m(&"(".repeat(100)).contains("more than 16 levels"));
        assert!(m("{'descr: 1}").contains("not closed"));
        assert!(m("{'descr': nan}").contains("found the name 'nan'"));
        assert!(m("{'descr': -}").contains("expected an int"));
        assert!(m("{'shape': (99999999999999999999999999999999999999999,)}").contains("too large"));
        assert!(m("").contains("found the end of the header"));
    }

    #[test]
    fn unsupported_dtypes_are_named() {
        let d = |descr: &str| match parse(&format!("{{'descr': {descr}, 'fortran_order': False, 'shape': ()}}")) {
            Err(Problem::Dtype(m)) => m,
            other => panic!("{descr} gave {other:?}"),
        };
        assert!(d("'<u2'").starts_with("holds dtype '<u2' (uint16), which tensors do not support: expected '<f2'"));
        assert!(d("'<c16'").starts_with("holds dtype '<c16' (complex128)"));
        assert!(d("'|O'").starts_with("holds dtype '|O', which"));
        assert!(d("'<u4'").starts_with("holds dtype '<u4' (uint32)"));
        assert!(d("'>U3'").starts_with("holds dtype '>U3' (a string of 3 characters)"));
        assert!(d("''").starts_with("holds dtype ''"));
        assert!(d("[('x', '<f4')]").starts_with("holds a structured dtype"));
    }

    #[test]
    fn encoding_matches_numpy_byte_for_byte() {
        // np.save(f, np.arange(6, dtype='<i8').reshape(2, 3)) with NumPy 2.x.
        let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        let dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";
        expected.extend(format!("{dict:<117}\n").bytes());
        assert_eq!(encode(DType::Int64, &[2, 3]).unwrap(), expected);
        for shape in [&[][..], &[0], &[7], &[1 << 40, 3], &[2; 20]] {
            let bytes = encode(DType::Float32, shape).unwrap();
            assert_eq!(bytes.len() % ALIGN, 0);
            assert_eq!(bytes.last(), Some(&b'\n'));
            let text = std::str::from_utf8(&bytes[10..]).unwrap();
            assert_eq!(parse(text).unwrap(), header(DType::Float32, false, false, shape));
        }
    }

    #[test]
    fn a_huge_header_takes_version_2() {
        let shape = vec![1; 30_000];
        let bytes = encode(DType::Float64, &shape).unwrap();
        assert_eq!(&bytes[6..8], &[2, 0]);
        let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        assert_eq!(bytes.len(), 12 + len);
        assert_eq!(bytes.len() % ALIGN, 0);
        assert_eq!(parse(std::str::from_utf8(&bytes[12..]).unwrap()).unwrap().shape.len(), 30_000);
    }
}
