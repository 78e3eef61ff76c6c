//! Random arguments: numbers, strings, lists, indices and tensors of random shapes, dtypes,
//! elements and layouts, each with the Rust source (or the printout) that makes it again.

use torchfn::half::{bf16, f16};
use torchfn::{DType, Device, Generator, IndexItem, Slice, Tensor, Value};

/// SplitMix64: small, fast and good enough to pick test inputs.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub(crate) fn percent(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// A dimension or a size in `-6..=6`.
    pub(crate) fn small(&mut self) -> i64 {
        self.below(13) as i64 - 6
    }

    /// `n` random bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The seed of one function's stream: the run's seed mixed with the function's name (FNV-1a),
/// so that each function sees the same calls whatever else is registered.
pub(super) fn seed_for(seed: u64, name: &str) -> u64 {
    name.bytes().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Extreme integers as arguments. Sizes that overflow or could never be allocated must be
/// errors; no value here is a size that a machine could allocate, only slowly (such as `2^31`
/// elements), which would just make the test slow. `2^40 + 3` is 3 when truncated to 32 bits.
pub(super) const INTS: [i64; 8] = [i64::MIN, i64::MIN + 1, i64::MAX, 1 << 62, (1 << 40) + 3, -(1 << 40), 255, -255];

/// Floats as arguments and elements.
pub(super) const FLOATS: [f64; 16] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    1e30,
    -1e30,
    1e300,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e-45,
    9.3e18,
    -9.3e18,
    f64::MIN_POSITIVE,
];

/// Strings where a mode or a name is expected.
pub(super) const STRINGS: [&str; 16] = [
    "",
    "none",
    "mean",
    "sum",
    "floor",
    "trunc",
    "tanh",
    "cpu",
    "cuda",
    "float32",
    "bogus",
    "MEAN",
    " mean",
    "\0",
    "ünïcødé",
    "reflect",
];

/// An argument and how to write it in a reproducer.
#[derive(Clone)]
pub(super) struct Arg {
    pub(super) value: Value,
    pub(super) text: String,
}

impl Arg {
    pub(super) fn new(value: Value, text: impl Into<String>) -> Arg {
        Arg { value, text: text.into() }
    }

    /// A value, written as it prints (a tensor with its dtype and shape).
    pub(super) fn of(value: Value) -> Arg {
        let text = describe(&value);
        Arg { value, text }
    }
}

/// How a reproducer writes a value: as it prints, a tensor with its dtype and shape.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Tensor(t) => match (t.dtype(), t.shape()) {
            (Ok(dtype), Ok(shape)) => format!("{t} /* {dtype}, shape {:?} */", shape.as_ref()),
            _ => format!("{value:?}"),
        },
        Value::List(items) => seq_text(&items.iter().map(describe).collect::<Vec<_>>(), false),
        Value::Tuple(items) => seq_text(&items.iter().map(describe).collect::<Vec<_>>(), true),
        other => other.to_string(),
    }
}

/// `[a, b]`, `(a, b)`, `(a,)`.
pub(super) fn seq_text(items: &[String], tuple: bool) -> String {
    let text = items.join(", ");
    match (tuple, items.len()) {
        (false, _) => format!("[{text}]"),
        (true, 1) => format!("({text},)"),
        (true, _) => format!("({text})"),
    }
}

/// A list or tuple of arguments.
pub(super) fn seq(items: Vec<Arg>, tuple: bool) -> Arg {
    let text = seq_text(&items.iter().map(|a| a.text.clone()).collect::<Vec<_>>(), tuple);
    let values = items.into_iter().map(|a| a.value).collect();
    Arg::new(if tuple { Value::Tuple(values) } else { Value::List(values) }, text)
}

/// What the arguments of one call are built with: the random stream, and the shape and dtype
/// of the first tensor, which later tensors often share (so that calls get past the shape
/// checks and into the kernels).
pub(super) struct Gen {
    pub(super) rng: Rng,
    pub(super) shape: Option<Vec<usize>>,
    /// Whether tensors are now and then huge: one element expanded to 2^40 or more.
    pub(super) huge: bool,
    /// The call's first tensor, which later arguments now and then are again (or view), to
    /// check that operations whose arguments share storage read before they write.
    pub(super) first: Option<Arg>,
}

impl Gen {
    pub(super) fn int(&mut self) -> i64 {
        if self.rng.percent(20) { self.rng.pick(&INTS) } else { self.rng.small() }
    }

    pub(super) fn float(&mut self) -> f64 {
        if self.rng.percent(50) { self.rng.pick(&FLOATS) } else { self.rng.small() as f64 / 2.0 }
    }

    pub(super) fn dtype(&mut self) -> DType {
        self.rng.pick(&DType::ALL)
    }

    pub(super) fn int_arg(&mut self) -> Arg {
        Arg::of(Value::Int(self.int()))
    }

    pub(super) fn float_arg(&mut self) -> Arg {
        Arg::of(Value::Float(self.float()))
    }

    pub(super) fn number_arg(&mut self) -> Arg {
        match self.rng.below(4) {
            0 => Arg::of(Value::Bool(self.rng.percent(50))),
            1 => self.int_arg(),
            _ => self.float_arg(),
        }
    }

    pub(super) fn string_arg(&mut self) -> Arg {
        Arg::of(Value::Str(self.rng.pick(&STRINGS).to_string()))
    }

    /// A list or tuple of integers, of random length (now and then a long one).
    pub(super) fn int_list(&mut self) -> Arg {
        let len = match self.rng.below(20) {
            0 => 7,
            1 => 65,
            n => n % 5,
        };
        let items = (0..len)
            .map(|_| Arg::of(Value::Int(if self.rng.percent(8) { self.rng.pick(&INTS) } else { self.rng.small() })))
            .collect();
        seq(items, self.rng.percent(50))
    }

    /// A shape: four dimensions at most, each of size four at most, empty ones included.
    pub(super) fn random_shape(&mut self) -> Vec<usize> {
        let ndim = self.rng.below(5);
        (0..ndim).map(|_| self.rng.pick(&[0, 1, 1, 2, 2, 3, 3, 4])).collect()
    }

    /// The shape of the call's first tensor (or one that broadcasts with it), or a new one.
    pub(super) fn shape(&mut self) -> Vec<usize> {
        match self.shape.clone() {
            Some(shape) if self.rng.percent(60) => match self.rng.below(4) {
                0 => shape.iter().map(|&d| if self.rng.percent(30) { 1 } else { d }).collect(),
                1 => shape[self.rng.below(shape.len() + 1)..].to_vec(),
                _ => shape,
            },
            _ => {
                let shape = self.random_shape();
                self.shape.get_or_insert_with(|| shape.clone());
                shape
            }
        }
    }

    /// A tensor of random shape, dtype, elements and layout.
    pub(super) fn tensor(&mut self) -> Arg {
        if self.huge && self.rng.percent(40) {
            return self.huge_tensor();
        }
        if let Some(first) = self.first.clone().filter(|_| self.rng.percent(10)) {
            return self.alias(first);
        }
        let (shape, dtype) = (self.shape(), self.dtype());
        let made = self.tensor_of(&shape, dtype, 0);
        self.first.get_or_insert_with(|| made.clone());
        made
    }

    /// `first` again, or a view of it (transposed, reversed dimensions or narrowed).
    pub(super) fn alias(&mut self, first: Arg) -> Arg {
        let Some(t) = first.value.as_tensor() else { return first };
        let shape = t.shape().map(|s| s.to_vec()).unwrap_or_default();
        let (view, how) = match (self.rng.below(3), shape.last()) {
            (1, Some(_)) => {
                let dims: Vec<i64> = (0..shape.len() as i64).rev().collect();
                (t.permute(dims.clone()), format!(".permute({dims:?})?"))
            }
            (2, Some(&n)) if n >= 1 => {
                let length = n as i64 - 1;
                (t.narrow(-1, 1, length), format!(".narrow(-1, 1, {length})?"))
            }
            _ => return Arg::new(first.value.clone(), format!("(the same tensor: {})", first.text)),
        };
        match view {
            Ok(view) => Arg::new(Value::Tensor(view), format!("(a view of the same tensor: {}{how})", first.text)),
            Err(_) => Arg::new(first.value.clone(), format!("(the same tensor: {})", first.text)),
        }
    }

    /// One element expanded to a shape of `2^40` elements or more, which no machine can copy,
    /// or to an empty shape with a huge dimension (`expand` refuses shapes whose non-zero sizes
    /// multiply past `isize::MAX` bytes).
    pub(super) fn huge_tensor(&mut self) -> Arg {
        const HUGE: [&[i64]; 6] =
            [&[1 << 40], &[1 << 20, 1 << 20], &[0, 1 << 40], &[1 << 40, 0], &[2, 1 << 40, 1], &[1 << 58]];
        let sizes = self.rng.pick(&HUGE);
        let dtype = self.dtype();
        let Arg { value, text } = self.contiguous(&[1], dtype);
        let t = value.as_tensor().expect("a tensor").expand(sizes.to_vec()).expect("one element expands to any shape");
        Arg::new(Value::Tensor(t), format!("{text}.expand({sizes:?})?"))
    }

    /// A tensor of `shape` and `dtype` with random elements and a random layout: contiguous,
    /// permuted, narrowed (with an offset), expanded (stride 0), stepped, or a wrapped number.
    pub(super) fn tensor_of(&mut self, shape: &[usize], dtype: DType, depth: usize) -> Arg {
        let n = shape.len();
        let kind = if depth >= 2 { 0 } else { self.rng.below(8) };
        let view = match kind {
            1 | 2 if n >= 2 => {
                let mut order: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    order.swap(i, self.rng.below(i + 1));
                }
                let mut base = vec![0; n];
                for (i, &o) in order.iter().enumerate() {
                    base[o] = shape[i];
                }
                let dims: Vec<i64> = order.iter().map(|&o| o as i64).collect();
                let Arg { value, text } = self.tensor_of(&base, dtype, depth + 1);
                let t = value.as_tensor().cloned();
                t.and_then(|t| t.permute(dims.clone()).ok()).map(|t| (t, format!("{text}.permute({dims:?})?")))
            }
            3 if n >= 1 => {
                let (dim, extra) = (self.rng.below(n), 1 + self.rng.below(2));
                let start = self.rng.below(extra + 1);
                let mut base = shape.to_vec();
                base[dim] += extra;
                let Arg { value, text } = self.tensor_of(&base, dtype, depth + 1);
                let (d, s, l) = (dim as i64, start as i64, shape[dim] as i64);
                let t = value.as_tensor().cloned();
                t.and_then(|t| t.narrow(d, s, l).ok()).map(|t| (t, format!("{text}.narrow({d}, {s}, {l})?")))
            }
            4 if n >= 1 => {
                let base: Vec<usize> = shape.iter().map(|&d| if self.rng.percent(50) { 1 } else { d }).collect();
                let sizes: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                let Arg { value, text } = self.tensor_of(&base, dtype, depth + 1);
                let t = value.as_tensor().cloned();
                t.and_then(|t| t.expand(sizes.clone()).ok()).map(|t| (t, format!("{text}.expand({sizes:?})?")))
            }
            5 if n >= 1 => {
                let (dim, start) = (self.rng.below(n), self.rng.below(2));
                let mut base = shape.to_vec();
                base[dim] = 2 * shape[dim];
                let Arg { value, text } = self.tensor_of(&base, dtype, depth + 1);
                let mut index = vec![IndexItem::slice(None, None, 1); dim];
                index.push(IndexItem::slice(Some(start as i64), None, 2));
                let t = value.as_tensor().cloned();
                let t = t.and_then(|t| t.get(index).ok()).filter(|t| t.shape().is_ok_and(|s| s.as_ref() == shape));
                t.map(|t| (t, format!("{text}.get(dim {dim}: [{start}::2])?")))
            }
            6 if n == 0 => {
                let (value, text) = match self.rng.below(3) {
                    0 => (Tensor::scalar(self.rng.percent(50)), "bool"),
                    1 => (Tensor::scalar(self.int()), "int"),
                    _ => (Tensor::scalar(self.float()), "float"),
                };
                let shown = Value::Tensor(value.clone()).to_string();
                Some((value, format!("Tensor::scalar({shown} as {text})")))
            }
            _ => None,
        };
        match view {
            Some((t, text)) => Arg::new(Value::Tensor(t), text),
            None => self.contiguous(shape, dtype),
        }
    }

    /// A contiguous tensor with random elements: small numbers, and extremes now and then.
    pub(super) fn contiguous(&mut self, shape: &[usize], dtype: DType) -> Arg {
        let n = shape.iter().product::<usize>();
        let extreme = self.rng.percent(30);
        let int = |rng: &mut Rng, extremes: &[i64]| {
            if extreme && rng.percent(30) { rng.pick(extremes) } else { rng.small() }
        };
        macro_rules! made {
            ($ty:ty, $data:expr) => {{
                let data: Vec<$ty> = $data;
                let text = format!("Tensor::from_vec::<{}>(vec!{:?}, {shape:?})?", stringify!($ty), data);
                (Tensor::from_vec(data, shape), text)
            }};
        }
        let rng = &mut self.rng;
        let (made, text) = match dtype {
            DType::Bool => made!(bool, (0..n).map(|_| rng.percent(50)).collect()),
            DType::Int32 => made!(i32, (0..n).map(|_| int(rng, &[i32::MIN.into(), i32::MAX.into()]) as i32).collect()),
            DType::Int64 => made!(i64, (0..n).map(|_| int(rng, &INTS)).collect()),
            DType::Float32 => made!(f32, (0..n).map(|_| float(rng, extreme) as f32).collect()),
            DType::Float64 => made!(f64, (0..n).map(|_| float(rng, extreme)).collect()),
            DType::UInt8 => made!(u8, (0..n).map(|_| int(rng, &INTS) as u8).collect()),
            DType::Int8 => made!(i8, (0..n).map(|_| int(rng, &INTS) as i8).collect()),
            DType::Int16 => made!(i16, (0..n).map(|_| int(rng, &INTS) as i16).collect()),
            DType::Float16 => made!(f16, (0..n).map(|_| f16::from_f64(float(rng, extreme))).collect()),
            DType::BFloat16 => made!(bf16, (0..n).map(|_| bf16::from_f64(float(rng, extreme))).collect()),
        };
        Arg::new(Value::Tensor(made.expect("the data fits the shape")), text)
    }

    /// A list of tensors, often of one shape.
    pub(super) fn tensor_list(&mut self) -> Arg {
        let len = self.rng.below(4);
        let items = (0..len).map(|_| self.tensor()).collect();
        seq(items, self.rng.percent(50))
    }

    /// An index as `t[...]` takes: an integer, a slice, `None`, `...`, a tensor, or a tuple of
    /// them.
    pub(super) fn index(&mut self, depth: usize) -> Arg {
        let opt = |g: &mut Gen| if g.rng.percent(30) { None } else { Some(g.int()) };
        match self.rng.below(7) {
            0 => self.int_arg(),
            1 => Arg::of(Slice { start: opt(self), stop: opt(self), step: opt(self) }.into()),
            2 => Arg::of(Value::None),
            3 => Arg::of(Value::Ellipsis),
            4 => self.tensor(),
            _ if depth == 0 => {
                let len = self.rng.below(5);
                let items = (0..len).map(|_| self.index(1)).collect();
                seq(items, true)
            }
            _ => self.int_arg(),
        }
    }

    /// Any value at all.
    pub(super) fn any(&mut self, depth: usize) -> Arg {
        match self.rng.below(18) {
            0 => Arg::of(Value::None),
            1 => Arg::of(Value::Bool(self.rng.percent(50))),
            2 | 3 => self.int_arg(),
            4 => self.float_arg(),
            5 => self.string_arg(),
            6 => Arg::of(Value::DType(self.dtype())),
            7 => Arg::of(Value::Device(Device::CPU)),
            8 => Arg::new(Value::Generator(Generator::new().manual_seed(self.rng.next())), "Generator::new()"),
            9..=11 => self.tensor(),
            12 => self.int_list(),
            13 => self.tensor_list(),
            14 => self.index(1),
            15 if depth == 0 => {
                let len = self.rng.below(4);
                let items = (0..len).map(|_| self.any(1)).collect();
                seq(items, self.rng.percent(50))
            }
            16 => Arg::of(Value::NotImplemented),
            _ => Arg::of(Value::Ellipsis),
        }
    }

    /// A value of the type a parameter declares (`Tensor`, `int`, `tuple of ints`, ...),
    /// sometimes of another type.
    pub(super) fn of_type(&mut self, type_name: &str) -> Arg {
        if self.rng.percent(10) {
            return self.any(0);
        }
        match type_name {
            t if t.contains("Tensors") => self.tensor_list(),
            t if t.contains("slice") => self.index(0),
            "Tensor" if self.rng.percent(15) => self.number_arg(),
            "Tensor" => self.tensor(),
            t if t.contains("tuple of ints") && (t.starts_with("int") && self.rng.percent(50)) => self.int_arg(),
            t if t.contains("tuple of ints") => self.int_list(),
            "int" => self.int_arg(),
            "float" => self.float_arg(),
            "Number" => self.number_arg(),
            "bool" => Arg::of(Value::Bool(self.rng.percent(50))),
            "str" => self.string_arg(),
            "torch.dtype" => Arg::of(Value::DType(self.dtype())),
            "torch.Generator" => Arg::new(Value::Generator(Generator::new()), "Generator::new()"),
            "torch.device" => Arg::of(Value::Device(Device::CPU)),
            _ => self.any(0),
        }
    }

    /// `value` changed: usually to another value of its kind, now and then to anything.
    pub(super) fn mutate(&mut self, value: &Value) -> Arg {
        if self.rng.percent(25) {
            return self.any(0);
        }
        match value {
            Value::Tensor(t) => {
                let (shape, dtype) = match (t.shape(), t.dtype()) {
                    (Ok(shape), Ok(dtype)) => (shape.to_vec(), dtype),
                    _ => return self.tensor(),
                };
                match self.rng.below(4) {
                    0 => self.tensor(),
                    1 => {
                        let dtype = self.dtype();
                        self.tensor_of(&shape, dtype, 0)
                    }
                    2 => {
                        let shape = self.random_shape();
                        self.tensor_of(&shape, dtype, 0)
                    }
                    _ => self.tensor_of(&shape, dtype, 0),
                }
            }
            Value::Int(_) => self.int_arg(),
            Value::Float(_) => self.float_arg(),
            Value::Bool(_) => self.number_arg(),
            Value::Str(_) => self.string_arg(),
            Value::DType(_) => Arg::of(Value::DType(self.dtype())),
            Value::List(items) | Value::Tuple(items) if items.iter().any(|v| v.as_tensor().is_some()) => {
                let tuple = matches!(value, Value::Tuple(_));
                let mut items: Vec<Arg> = items.iter().cloned().map(Arg::of).collect();
                match self.rng.below(4) {
                    0 => return self.tensor_list(),
                    1 if !items.is_empty() => {
                        items.remove(self.rng.below(items.len()));
                    }
                    2 => items.push(self.tensor()),
                    _ if !items.is_empty() => {
                        let i = self.rng.below(items.len());
                        items[i] = self.mutate(&items[i].value.clone());
                    }
                    _ => {}
                }
                seq(items, tuple)
            }
            Value::List(items) | Value::Tuple(items) if !items.is_empty() && self.rng.percent(50) => {
                let mut items: Vec<Arg> = items.iter().cloned().map(Arg::of).collect();
                let i = self.rng.below(items.len());
                items[i] = self.mutate(&items[i].value.clone());
                seq(items, matches!(value, Value::Tuple(_)))
            }
            Value::List(_) | Value::Tuple(_) => self.int_list(),
            _ => self.any(0),
        }
    }

    /// `value` with every tensor in it replaced by a random one.
    pub(super) fn retensor(&mut self, value: &Value) -> Arg {
        match value {
            Value::Tensor(_) => self.tensor(),
            Value::List(items) | Value::Tuple(items) => {
                let items = items.iter().map(|v| self.retensor(v)).collect();
                seq(items, matches!(value, Value::Tuple(_)))
            }
            other => Arg::of(other.clone()),
        }
    }
}

/// A float element: small halves, or (in an extreme tensor) now and then NaN, an infinity or
/// a huge value.
pub(super) fn float(rng: &mut Rng, extreme: bool) -> f64 {
    if extreme && rng.percent(40) { rng.pick(&FLOATS) } else { rng.small() as f64 / 2.0 }
}
