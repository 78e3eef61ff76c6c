//! Counting floating-point operations (`torch.utils.flop_counter`): [`FlopCounterMode`] is a
//! dispatch mode, so it sees every operator a program runs, the backward pass's included, and
//! charges each the FLOPs of PyTorch's formula for it (a multiply-add counts 2).
//!
//! ```
//! use torchfn::dispatch::push_dispatch_mode;
//! use torchfn::utils::flop_counter::FlopCounterMode;
//!
//! let a = torchfn::ones([4, 3], None, None)?.requires_grad_(true)?;
//! let b = torchfn::ones([3, 5], None, None)?;
//! let counter = push_dispatch_mode(FlopCounterMode::new());
//! a.matmul(&b)?.sum()?.backward()?;
//! // forward 2·4·3·5, and the gradient of `a`, another product of the same size
//! assert_eq!(counter.get_total_flops(), 240);
//! assert_eq!(counter.get_flop_counts()["Global"]["aten.matmul"], 240);
//! assert_eq!(
//!     counter.get_table(None),
//!     "Module            FLOP    % Total\n\
//!      -------------  -------  ---------\n\
//!      Global         240.000    100.00%\n\
//!      - aten.matmul  240.000    100.00%"
//! );
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::module_tracker::ModuleTracker;
use crate::Types;
use crate::dispatch::{Operator, TorchDispatchMode, aten};
use crate::error::Result;
use crate::{Kwargs, Value};

/// A FLOP formula: the FLOPs of one call, from its arguments and its result (shapes only).
pub type FlopFormula = fn(args: &[Value], kwargs: &Kwargs, out: &Value) -> Result<u64>;

/// The formulas users registered with [`register_flop_formula`], by operator.
static REGISTERED: RwLock<Vec<(&'static Operator, FlopFormula)>> = RwLock::new(Vec::new());

/// Whether [`REGISTERED`] holds anything (a counted call then takes its lock).
static ANY_REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers `formula` for `op` (`torch.utils.flop_counter.register_flop_formula`): a
/// [`FlopCounterMode`] then counts `op`'s calls with it, in place of torchfn's own formula.
pub fn register_flop_formula(op: &'static Operator, formula: FlopFormula) {
    let mut registered = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    registered.retain(|(o, _)| *o != op);
    registered.push((op, formula));
    ANY_REGISTERED.store(true, Ordering::Release);
}

/// The shape of a tensor value (empty for anything else).
fn shape(value: &Value) -> Vec<u64> {
    value.as_tensor().and_then(|t| t.shape().ok()).map(|s| s.iter().map(|&n| n as u64).collect()).unwrap_or_default()
}

/// The shape of argument `i` of a call, named `name` when given by keyword (empty when absent).
fn arg_shape(args: &[Value], kwargs: &Kwargs, i: usize, name: &str) -> Vec<u64> {
    args.get(i).or_else(|| kwargs.get(name)).map(shape).unwrap_or_default()
}

/// `a @ b` (torchfn's batched `matmul`, PyTorch's mm and bmm): 2 · (elements of the result) · k.
fn matmul_flop(args: &[Value], kwargs: &Kwargs, out: &Value) -> Result<u64> {
    let a = arg_shape(args, kwargs, 0, "self");
    let k = a.last().copied().unwrap_or(0);
    Ok(2 * shape(out).iter().product::<u64>() * k)
}

/// PyTorch's `conv_flop_count`: 2 · batch · C_out · C_in/groups · ∏kernel · ∏(spatial sizes of
/// the output, or of the input for a transposed convolution).
fn conv_flop_count(x: &[u64], w: &[u64], out: &[u64], transposed: bool) -> u64 {
    let rest = |s: &[u64]| s.get(2..).unwrap_or_default().iter().product::<u64>();
    let spatial = if transposed { rest(x) } else { rest(out) };
    let at = |s: &[u64], i: usize| s.get(i).copied().unwrap_or(0);
    2 * at(x, 0) * at(w, 0) * at(w, 1) * rest(w) * spatial
}

fn convolution_flop(args: &[Value], kwargs: &Kwargs, out: &Value) -> Result<u64> {
    let (x, w) = (arg_shape(args, kwargs, 0, "input"), arg_shape(args, kwargs, 1, "weight"));
    if x.len() < 3 || w.len() < 3 {
        return Ok(0);
    }
    Ok(conv_flop_count(&x, &w, &shape(out), false))
}

/// PyTorch's `conv_backward_flop`: the input's gradient is a transposed convolution of the
/// output's gradient; the weight's, a convolution of the input by it.
fn convolution_backward_flop(args: &[Value], kwargs: &Kwargs, out: &Value) -> Result<u64> {
    let grad = arg_shape(args, kwargs, 0, "grad_output");
    let (x, w) = (arg_shape(args, kwargs, 1, "input"), arg_shape(args, kwargs, 2, "weight"));
    if grad.len() < 3 || x.len() < 3 || w.len() < 3 {
        return Ok(0);
    }
    // Batch and channels exchanged (shapes of fewer than two dimensions count nothing).
    let t = |s: &[u64]| -> Vec<u64> {
        match s {
            [a, b, rest @ ..] => [*b, *a].into_iter().chain(rest.iter().copied()).collect(),
            _ => Vec::new(),
        }
    };
    let outs = out.as_slice().unwrap_or(&[]);
    let mut flops = 0;
    if let Some(gx) = outs.first().filter(|v| !v.is_none()) {
        flops += conv_flop_count(&grad, &w, &shape(gx), true);
    }
    if let Some(gw) = outs.get(1).filter(|v| !v.is_none()) {
        flops += conv_flop_count(&t(&x), &t(&grad), &t(&shape(gw)), false);
    }
    Ok(flops)
}

/// A fused LSTM layer's recurrence, forward (`_lstm_layer`) or backward (`_lstm_layer_backward`):
/// one product of `[N, 4H]` and `weight_hh` (`[4H, H]`) per step, 2 · T · N · 4H · H, what the
/// composed layer's products count.
fn lstm_layer_flop(args: &[Value], kwargs: &Kwargs, out: &Value) -> Result<u64> {
    let w = arg_shape(args, kwargs, 3, "weight_hh");
    let first = out.as_slice().and_then(|s| s.first()).map(shape).unwrap_or_default();
    let steps_and_rows = first.iter().take(2).product::<u64>();
    Ok(2 * w.iter().product::<u64>() * steps_and_rows)
}

/// The formula for `op`: a registered one, or torchfn's own.
fn formula(op: &'static Operator) -> Option<FlopFormula> {
    if ANY_REGISTERED.load(Ordering::Acquire) {
        let registered = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
        if let Some((_, f)) = registered.iter().find(|(o, _)| *o == op) {
            return Some(*f);
        }
    }
    if op == &aten::MATMUL {
        Some(matmul_flop)
    } else if op == &aten::CONVOLUTION {
        Some(convolution_flop)
    } else if op == &aten::CONVOLUTION_BACKWARD {
        Some(convolution_backward_flop)
    } else if op == &aten::LSTM_LAYER || op == &aten::LSTM_LAYER_BACKWARD {
        Some(lstm_layer_flop)
    } else {
        None
    }
}

/// The FLOPs of each operator (by overload packet, `aten.matmul`) in one module, in the order
/// they were first counted.
type OperatorCounts = Vec<(&'static str, u64)>;

/// Counts the FLOPs of every operator call while it is on the dispatch mode stack
/// (`torch.utils.flop_counter.FlopCounterMode`), by operator, under `Global` and under each
/// module the call ran in, forward and backward, as PyTorch's [`ModuleTracker`] places it.
/// Operators without a formula count nothing; [`register_flop_formula`] adds one.
#[derive(Default)]
pub struct FlopCounterMode {
    /// By module (`Global` holds every count), the FLOPs of each operator in the order the
    /// operators were first counted, as PyTorch's table lists them.
    counts: RefCell<BTreeMap<Arc<str>, OperatorCounts>>,
    /// The modules the program is in.
    tracker: ModuleTracker,
}

impl FlopCounterMode {
    /// A counter with nothing counted, following module calls (on this thread) until it is
    /// dropped.
    pub fn new() -> FlopCounterMode {
        FlopCounterMode::default()
    }

    /// Every FLOP counted.
    pub fn get_total_flops(&self) -> u64 {
        self.counts.borrow().get("Global").map_or(0, |ops| ops.iter().map(|(_, n)| n).sum())
    }

    /// The FLOPs by module (`Global` holds all of them) and by operator (`aten.matmul`).
    pub fn get_flop_counts(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let counts = self.counts.borrow();
        counts
            .iter()
            .map(|(module, ops)| (module.to_string(), ops.iter().map(|&(op, n)| (op.to_string(), n)).collect()))
            .collect()
    }

    /// The counts as PyTorch's `get_table(depth)` prints them: each module down to `depth`
    /// (every one for `None`) with its operators, FLOPs with one suffix (K, M, B, T) for the
    /// whole table, and each row's share of the total; `Global` first unless a module holds
    /// every FLOP.
    pub fn get_table(&self, depth: Option<usize>) -> String {
        let depth = depth.unwrap_or(usize::MAX);
        let counts = self.counts.borrow();
        let total = self.get_total_flops();
        let suffix = suffix_of(total);
        let rows_of = |module: &str, ops: &[(&str, u64)]| -> Vec<[String; 3]> {
            let sum: u64 = ops.iter().map(|(_, n)| n).sum();
            let mut rows = vec![[module.to_string(), with_suffix(sum, suffix), percent(sum, total)]];
            rows.extend(ops.iter().map(|(op, n)| [format!("- {op}"), with_suffix(*n, suffix), percent(*n, total)]));
            rows
        };
        let mut rows = Vec::new();
        let mut subsumed = false;
        for (module, ops) in counts.iter().filter(|(m, _)| &***m != "Global") {
            if module.matches('.').count() < depth {
                subsumed |= ops.iter().map(|(_, n)| n).sum::<u64>() >= total;
                rows.extend(rows_of(module, ops));
            }
        }
        if let Some(global) = counts.get("Global").filter(|_| !subsumed) {
            rows.splice(0..0, rows_of("Global", global));
        }
        if rows.is_empty() {
            rows.push(["Global".into(), "0".into(), "0%".into()]);
        }
        tabulate(["Module", "FLOP", "% Total"], &rows)
    }
}

/// The suffixes of FLOP counts.
const SUFFIXES: [&str; 5] = ["", "K", "M", "B", "T"];

/// PyTorch's `get_suffix_str`: the suffix for `n` (1.01B shows as 1010.000M).
fn suffix_of(n: u64) -> usize {
    (n.to_string().len().saturating_sub(2) / 3).min(SUFFIXES.len() - 1)
}

/// PyTorch's `convert_num_with_suffix`: three decimals in the table's unit.
fn with_suffix(n: u64, suffix: usize) -> String {
    format!("{:.3}{}", n as f64 / 1000f64.powi(suffix as i32), SUFFIXES[suffix])
}

/// PyTorch's `convert_to_percent_str`.
fn percent(n: u64, total: u64) -> String {
    if total == 0 { "0%".into() } else { format!("{:.2}%", n as f64 / total as f64 * 100.0) }
}

/// The rows as `tabulate` prints them with PyTorch's settings: the first column aligned left,
/// the others right, each as wide as its widest cell or its header and two spaces, columns two
/// spaces apart, a dashed line under the headers.
fn tabulate(headers: [&str; 3], rows: &[[String; 3]]) -> String {
    let widths: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).chain([headers[c].len() + 2]).max().unwrap_or(0))
        .collect();
    let line = |cells: [&str; 3]| -> String {
        let left = format!("{:<w$}", cells[0], w = widths[0]);
        let rest: Vec<String> = (1..3).map(|c| format!("{:>w$}", cells[c], w = widths[c])).collect();
        format!("{left}  {}", rest.join("  "))
    };
    let mut lines = vec![line(headers), widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  ")];
    lines.extend(rows.iter().map(|r| line([&r[0], &r[1], &r[2]])));
    lines.join("\n")
}

impl TorchDispatchMode for FlopCounterMode {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let out = func.call(args, kwargs)?;
        if let Some(formula) = formula(func) {
            let flops = formula(args, kwargs, &out)?;
            let mut counts = self.counts.borrow_mut();
            let packet = func.overload_packet();
            self.tracker.for_each_parent(|module| {
                let ops = match counts.get_mut(&**module) {
                    Some(ops) => ops,
                    None => counts.entry(module.clone()).or_default(),
                };
                // The packet's name is the operator's own string: the same address, mostly.
                match ops.iter_mut().find(|(op, _)| std::ptr::eq(*op, packet) || *op == packet) {
                    Some((_, n)) => *n += flops,
                    None => ops.push((packet, flops)),
                }
            });
        }
        Ok(out)
    }
}
