//! PyTorch's tensor printing (`torch/_tensor_str.py`): the same element formats, widths, line
//! wrapping, summarization of large tensors and `dtype=` suffixes.

use ndarray::{ArrayViewD, Axis};

use super::{Body, DType, Dense, Element, Tensor, with_dtype};
use crate::backend::host;
use crate::protocol::TensorLike;

/// Elements before a tensor is summarized with `...` (`PRINT_OPTS.threshold`).
const THRESHOLD: usize = 1000;
/// Elements kept at each edge of a summarized dimension (`PRINT_OPTS.edgeitems`).
const EDGE_ITEMS: usize = 3;
/// Decimal places of floats (`PRINT_OPTS.precision`).
const PRECISION: usize = 4;
/// Characters per line (`PRINT_OPTS.linewidth`).
const LINE_WIDTH: usize = 80;

impl Tensor {
    /// The text PyTorch prints for this tensor, without dispatch: `tensor([[1., 2.],\n ...])`,
    /// subclass instances with their class name (`SubTensor([1.])`), ducks with their `Debug`,
    /// floats with `precision` decimals (PyTorch's default, 4, for `None`). The body of
    /// `Tensor.__repr__`, which is what `{}` prints.
    pub(crate) fn repr_text(&self, precision: Option<usize>) -> String {
        match &*self.body {
            Body::Duck(duck) => format!("{duck:?}"),
            Body::Dense(dense) => {
                let prefix = if crate::meta::stands_for(dense).is_some() {
                    // PyTorch prints a fake tensor as `FakeTensor(..., size=(2,))`.
                    "FakeTensor"
                } else if self.is_instance_of_base() {
                    "tensor"
                } else {
                    self.class_of().name()
                };
                render(dense, prefix, precision.unwrap_or(PRECISION))
            }
        }
    }

    fn is_instance_of_base(&self) -> bool {
        std::ptr::eq(self.class_of(), Tensor::class())
    }
}

fn render(dense: &Dense, prefix: &str, precision: usize) -> String {
    let indent = prefix.len() + 1;
    let shape = &dense.layout.shape;
    let mut suffixes = Vec::new();
    // A wrapper subclass or a fake tensor shows the device it stands for.
    let device = crate::dispatch::reported_device(dense);
    if !device.is_cpu() {
        suffixes.push(format!("device='{device}'"));
    }
    let body = if dense.device().is_meta() || device != dense.device() {
        // No data: PyTorch's `tensor(..., device='meta', size=(2, 3))`.
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
        suffixes.push(format!("size={tuple}"));
        if dense.dtype != crate::types::get_default_dtype() {
            suffixes.push(format!("dtype={}", dense.dtype));
        }
        "...".to_string()
    } else if shape.numel() == 0 {
        if shape.len() != 1 {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
            suffixes.push(format!("size={tuple}"));
        }
        if dense.dtype != crate::types::get_default_dtype() {
            suffixes.push(format!("dtype={}", dense.dtype));
        }
        "[]".to_string()
    } else {
        if dense.dtype != crate::types::get_default_dtype() && !matches!(dense.dtype, DType::Int64 | DType::Bool) {
            suffixes.push(format!("dtype={}", dense.dtype));
        }
        let text = host::on_host(dense).and_then(
            |array| with_dtype!(dense.dtype, T => host::read(&array, |view: ArrayViewD<'_, T>| body_str(view, indent, precision))),
        );
        text.unwrap_or_else(|e| format!("<elements not readable: {e}>"))
    };
    let mut out = format!("{prefix}({body}");
    let mut last_line = out.len() - out.rfind('\n').map_or(0, |i| i + 1) + 1;
    for suffix in suffixes {
        if last_line + suffix.len() + 2 > LINE_WIDTH {
            out.push_str(&format!(",\n{}{suffix}", " ".repeat(indent)));
            last_line = indent + suffix.len();
        } else {
            out.push_str(&format!(", {suffix}"));
            last_line += suffix.len() + 2;
        }
    }
    out.push(')');
    out
}

fn body_str<T: Element>(view: ArrayViewD<'_, T>, indent: usize, precision: usize) -> String {
    let summarize = view.len() > THRESHOLD;
    let mut sample = Vec::new();
    if summarize {
        summarized(&view, &mut sample);
    } else {
        sample.extend(view.iter().copied());
    }
    let formatter = Formatter::new(&sample, precision);
    tensor_str(&view, indent, summarize, &formatter)
}

/// The elements PyTorch's formatter looks at when summarizing: only the printed edges.
fn summarized<T: Element>(view: &ArrayViewD<'_, T>, out: &mut Vec<T>) {
    match view.ndim() {
        0 => out.extend(view.iter().copied()),
        _ => {
            for i in edge_indices(view.shape()[0], true).into_iter().flatten() {
                summarized(&view.index_axis(Axis(0), i), out);
            }
        }
    }
}

/// The positions printed along a dimension of `len`, with `None` where `...` goes.
fn edge_indices(len: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && len > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS).map(Some).chain([None]).chain((len - EDGE_ITEMS..len).map(Some)).collect()
    } else {
        (0..len).map(Some).collect()
    }
}

fn tensor_str<T: Element>(view: &ArrayViewD<'_, T>, indent: usize, summarize: bool, fmt: &Formatter) -> String {
    let ndim = view.ndim();
    if ndim == 0 {
        return view.iter().next().map_or(String::new(), |&v| fmt.format(v));
    }
    if ndim == 1 {
        let items: Vec<String> = edge_indices(view.len(), summarize)
            .into_iter()
            .map(|i| i.map_or_else(|| " ...".to_string(), |i| fmt.format(view[[i]])))
            .collect();
        let per_line = ((LINE_WIDTH.saturating_sub(indent)) / (fmt.width + 2)).max(1);
        let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
        return format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))));
    }
    let rows: Vec<String> = edge_indices(view.shape()[0], summarize)
        .into_iter()
        .map(|i| {
            i.map_or_else(
                || "...".to_string(),
                |i| tensor_str(&view.index_axis(Axis(0), i), indent + 1, summarize, fmt),
            )
        })
        .collect();
    let separator = format!(",{}{}", "\n".repeat(ndim - 1), " ".repeat(indent + 1));
    format!("[{}]", rows.join(&separator))
}

/// PyTorch's `_Formatter`: one width and one style (integer-valued, fixed or scientific) for
/// all elements of a tensor.
struct Formatter {
    precision: usize,
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    width: usize,
}

impl Formatter {
    fn new<T: Element>(values: &[T], precision: usize) -> Formatter {
        let floating = T::DTYPE.is_floating_point();
        let mut f = Formatter { precision, floating, int_mode: true, sci_mode: false, width: 1 };
        if !floating {
            f.width = values.iter().map(|&v| plain(v).len()).max().unwrap_or(1).max(1);
            return f;
        }
        let finite: Vec<f64> = values.iter().map(|v| v.to_f64()).filter(|v| v.is_finite() && *v != 0.0).collect();
        if finite.is_empty() {
            return f;
        }
        let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let min = finite.iter().fold(f64::INFINITY, |m, v| m.min(v.abs()));
        f.int_mode = finite.iter().all(|v| *v == v.ceil());
        let widest = |s: &dyn Fn(f64) -> String| finite.iter().map(|&v| s(v).len()).max().unwrap_or(1);
        if f.int_mode {
            if max / min > 1000.0 || max > 1.0e8 {
                f.sci_mode = true;
                f.width = widest(&|v| sci(v, precision));
            } else {
                f.width = widest(&|v| format!("{v:.0}")) + 1;
            }
        } else if max / min > 1000.0 || max > 1.0e8 || min < 1.0e-4 {
            f.sci_mode = true;
            f.width = widest(&|v| sci(v, precision));
        } else {
            f.width = widest(&|v| format!("{v:.precision$}"));
        }
        f
    }

    fn format<T: Element>(&self, value: T) -> String {
        let text = if !self.floating {
            plain(value)
        } else {
            let v = value.to_f64();
            if v.is_nan() {
                "nan".to_string()
            } else if v.is_infinite() {
                if v > 0.0 { "inf".to_string() } else { "-inf".to_string() }
            } else if self.sci_mode {
                sci(v, self.precision)
            } else if self.int_mode {
                format!("{v:.0}.")
            } else {
                format!("{v:.0$}", self.precision)
            }
        };
        format!("{text:>width$}", width = self.width)
    }
}

/// An integer or bool element as Python prints it.
fn plain<T: Element>(value: T) -> String {
    if T::DTYPE == DType::Bool {
        if value.to_i64() != 0 { "True".into() } else { "False".into() }
    } else {
        value.to_i64().to_string()
    }
}

/// Python's `'{:.4e}'`: `1.2346e+05`, `-3.0000e-07`.
fn sci(v: f64, precision: usize) -> String {
    let s = format!("{v:.precision$e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let exp: i32 = exp.parse().unwrap_or(0);
            let sign = if exp < 0 { '-' } else { '+' };
            format!("{mantissa}e{sign}{:02}", exp.abs())
        }
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use crate::tensor::Tensor;

    fn show<T: crate::tensor::Element>(data: Vec<T>, shape: &[usize]) -> String {
        Tensor::from_vec(data, shape).unwrap().to_string()
    }

    #[test]
    fn integer_valued_floats_print_with_a_point() {
        assert_eq!(show(vec![1.0f32, 2.0, 3.0], &[3]), "tensor([1., 2., 3.])");
        assert_eq!(show(vec![2.0f32, 0.0, 0.0, 2.0], &[2, 2]), "tensor([[2., 0.],\n        [0., 2.]])");
    }

    #[test]
    fn fractions_print_with_four_decimals_aligned() {
        assert_eq!(show(vec![0.1f32, -2.5, 10.0], &[3]), "tensor([ 0.1000, -2.5000, 10.0000])");
        assert_eq!(show(vec![0.4f64], &[]), "tensor(0.4000, dtype=torch.float64)");
    }

    #[test]
    fn wide_ranges_switch_to_scientific() {
        assert_eq!(show(vec![1e-5f32, 1.0], &[2]), "tensor([1.0000e-05, 1.0000e+00])");
        assert_eq!(show(vec![1e10f32, 1.0], &[2]), "tensor([1.0000e+10, 1.0000e+00])");
    }

    #[test]
    fn ints_bools_and_dtype_suffixes() {
        assert_eq!(show(vec![1i64, -20, 3], &[3]), "tensor([  1, -20,   3])");
        assert_eq!(show(vec![1i32, 2], &[2]), "tensor([1, 2], dtype=torch.int32)");
        assert_eq!(show(vec![true, false], &[2]), "tensor([ True, False])");
        assert_eq!(show(vec![f64::NAN, 1.0, f64::INFINITY], &[3]), "tensor([nan, 1., inf], dtype=torch.float64)");
    }

    #[test]
    fn empty_tensors_show_size_and_dtype() {
        assert_eq!(show::<f32>(vec![], &[0]), "tensor([])");
        assert_eq!(show::<i64>(vec![], &[2, 0]), "tensor([], size=(2, 0), dtype=torch.int64)");
    }

    #[test]
    fn long_rows_wrap_at_eighty_columns() {
        let s = show((0..30i64).collect(), &[30]);
        assert_eq!(
            s,
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n        \
             18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])"
        );
    }

    #[test]
    fn large_tensors_are_summarized() {
        let s = show((0..2000i64).collect(), &[2000]);
        assert_eq!(s, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
        let m = show((0..1100i64).collect(), &[100, 11]);
        assert!(m.starts_with("tensor([[   0,    1,    2,  ...,    8,    9,   10],\n"), "{m}");
        assert!(m.contains("\n        ...,\n"), "{m}");
    }
}
