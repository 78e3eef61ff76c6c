//! Printing through the protocol: `Tensor.__repr__` (what `{}` and `{:?}` show) and
//! `Tensor.__format__` (what `{:.2}`, `{:>30}` and the other format specs show), so that a
//! subclass or a mode can change how tensors print. Ducks print with their own `Debug`, as a
//! Python object that is no tensor prints with its own `__repr__`.

use std::fmt;

use crate::error::{Result, bail};
use crate::protocol::TensorLike;
use crate::tensor::{Scalar, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

impl Tensor {
    /// The text PyTorch prints for this tensor (Python's `repr(t)`, `Tensor.__repr__`), which is
    /// what `{}` and `{:?}` show: `tensor([1., 2.])`, `Meters([1.])` for a subclass instance.
    ///
    /// A hook that prints its arguments (a logging subclass) sees this call too and must not
    /// print while handling it, or it recurses until the recursion limit (seed 001's
    /// LoggingTensor: `if func is not torch.Tensor.__repr__`).
    ///
    /// ```
    /// let t = torchfn::tensor([1.0f32, 2.5])?;
    /// assert_eq!(t.__repr__()?, "tensor([1.0000, 2.5000])");
    /// assert_eq!(format!("{t}"), t.__repr__()?);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn __repr__(&self) -> Result<String> {
        Ok(self.repr_text(None))
    }

    /// The tensor formatted by `format_spec`, Python's format mini-language without a type
    /// other than `f` or `e` (`[[fill]align][sign][#][0][width][.precision][type]`;
    /// `format(t, spec)`, `Tensor.__format__`), which is what a Rust format spec shows
    /// (`{:.2}`, `{:>12}`). A zero-dimensional tensor of the base class formats its number, as
    /// PyTorch's does; other tensors print their repr with `precision` decimals, padded to
    /// `width` (PyTorch refuses a non-empty spec there).
    ///
    /// ```
    /// let x = torchfn::tensor(3.14159f32)?;
    /// assert_eq!(format!("{x:.2}"), "3.14");
    /// assert_eq!(format!("[{x:>8.3}]"), "[   3.142]");
    /// let v = torchfn::tensor([1.0f32, 2.5])?;
    /// assert_eq!(format!("{v:.1}"), "tensor([1.0, 2.5])");
    /// assert_eq!(v.__format__(".2")?, "tensor([1.00, 2.50])");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn __format__(&self, format_spec: &str) -> Result<String> {
        let spec = FormatSpec::parse(format_spec)?;
        let x = self.data("__format__", "self")?;
        // A number only where there is one: a 0-d tensor of the base class holding data (not a
        // fake or meta tensor, not a subclass instance, as PyTorch's `type(self) is Tensor`).
        let number = std::ptr::eq(self.class_of(), Tensor::class()) && x.layout.ndim() == 0 && !x.device().is_meta();
        let text = if number { spec.number(self.item()?)? } else { self.repr_text(spec.precision) };
        Ok(spec.pad(text))
    }
}

/// Prints like PyTorch through `Tensor.__repr__` (or, with a format spec, `Tensor.__format__`),
/// so subclasses and modes see it; ducks print with their `Debug`. An override that fails
/// prints as `<__repr__ failed: ...>`: printing never panics.
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_duck() {
            return f.write_str(&self.repr_text(None));
        }
        let spec = FormatSpec::of(f);
        let (dunder, text) =
            if spec.is_empty() { ("__repr__", self.__repr__()) } else { ("__format__", self.__format__(&spec)) };
        match text {
            Ok(text) => f.write_str(&text),
            Err(err) => write!(f, "<{dunder} failed: {err}>"),
        }
    }
}

/// As `{}`: `Tensor.__repr__` (a format spec given to `{:?}` is not passed on).
impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A parsed format spec.
#[derive(Default)]
struct FormatSpec {
    fill: Option<char>,
    align: Option<char>,
    sign: Option<char>,
    alternate: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
    kind: Option<char>,
}

impl FormatSpec {
    /// The spec Python would write for a Rust formatter's flags (`{:>8.3}` is `>8.3`).
    fn of(f: &fmt::Formatter<'_>) -> String {
        let mut spec = String::new();
        if let Some(align) = f.align() {
            spec.push(f.fill());
            spec.push(match align {
                fmt::Alignment::Left => '<',
                fmt::Alignment::Right => '>',
                fmt::Alignment::Center => '^',
            });
        }
        if f.sign_plus() {
            spec.push('+');
        }
        if f.alternate() {
            spec.push('#');
        }
        if f.sign_aware_zero_pad() {
            spec.push('0');
        }
        if let Some(width) = f.width() {
            spec.push_str(&width.to_string());
        }
        if let Some(precision) = f.precision() {
            spec.push_str(&format!(".{precision}"));
        }
        spec
    }

    /// Parses Python's `[[fill]align][sign][#][0][width][.precision][type]`.
    fn parse(text: &str) -> Result<FormatSpec> {
        let chars: Vec<char> = text.chars().collect();
        let mut spec = FormatSpec::default();
        let mut i = 0;
        let is_align = |c: &char| matches!(c, '<' | '>' | '^' | '=');
        if chars.get(1).is_some_and(is_align) {
            (spec.fill, spec.align, i) = (Some(chars[0]), Some(chars[1]), 2);
        } else if chars.first().is_some_and(is_align) {
            (spec.align, i) = (Some(chars[0]), 1);
        }
        if let Some(&c @ ('+' | '-' | ' ')) = chars.get(i) {
            (spec.sign, i) = (Some(c), i + 1);
        }
        if chars.get(i) == Some(&'#') {
            (spec.alternate, i) = (true, i + 1);
        }
        if chars.get(i) == Some(&'0') {
            (spec.zero, i) = (true, i + 1);
        }
        let digits = |i: &mut usize| -> Option<usize> {
            let start = *i;
            while chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            chars[start..*i].iter().collect::<String>().parse().ok()
        };
        spec.width = digits(&mut i).unwrap_or(0);
        if chars.get(i) == Some(&'.') {
            i += 1;
            spec.precision = digits(&mut i);
            if spec.precision.is_none() {
                bail!(Value, "Format specifier missing precision");
            }
        }
        if let Some(&c) = chars.get(i) {
            spec.kind = Some(c);
            i += 1;
        }
        if i < chars.len() || spec.kind.is_some_and(|k| !matches!(k, 'f' | 'e')) {
            bail!(Value, "Invalid format specifier '{text}' for a tensor (types f and e are known)");
        }
        Ok(spec)
    }

    /// A number formatted by the spec, without the padding.
    fn number(&self, value: Scalar) -> Result<String> {
        let body = match (value, self.kind, self.precision) {
            (Scalar::Bool(b), None, None) => if b { "True" } else { "False" }.to_string(),
            (Scalar::Int(n), None, None) => n.to_string(),
            (v, Some('e'), p) => format!("{:.*e}", p.unwrap_or(6), v.to_f64()),
            (v, Some('f'), p) => format!("{:.*}", p.unwrap_or(6), v.to_f64()),
            (v, _, Some(p)) => format!("{:.*}", p, v.to_f64()),
            (v, _, None) => v.to_f64().to_string(),
        };
        Ok(match self.sign {
            Some('+') if !body.starts_with('-') => format!("+{body}"),
            Some(' ') if !body.starts_with('-') => format!(" {body}"),
            _ => body,
        })
    }

    /// `text` padded to the width: right-aligned numbers and left-aligned text by default, as
    /// Python pads them; zero padding after the sign.
    fn pad(&self, text: String) -> String {
        let len = text.chars().count();
        if len >= self.width {
            return text;
        }
        let gap = self.width - len;
        if self.zero && self.align.is_none() {
            let (sign, digits) = text.split_at(usize::from(text.starts_with(['+', '-', ' '])));
            return format!("{sign}{}{digits}", "0".repeat(gap));
        }
        let fill = self.fill.unwrap_or(' ').to_string();
        let numeric = text.chars().next().is_some_and(|c| c.is_ascii_digit() || "+- ".contains(c));
        match self.align.unwrap_or(if numeric { '>' } else { '<' }) {
            '>' | '=' => format!("{}{text}", fill.repeat(gap)),
            '^' => format!("{}{text}{}", fill.repeat(gap / 2), fill.repeat(gap - gap / 2)),
            _ => format!("{text}{}", fill.repeat(gap)),
        }
    }
}

crate::samples! {
    Tensor::__REPR__ => [sample([f32s(&[2, 3])]), sample([i64s(&[4])])],
    Tensor::__FORMAT__ => [sample([f32s(&[]), Value::Str(".2".into())]), sample([f32s(&[3]), Value::Str(">40.1".into())])],
}
