//! Gradient checking, as PyTorch's `torch.autograd.gradcheck` and `gradgradcheck`: the
//! gradients backward computes are compared with finite differences.
//!
//! [`gradcheck`] compares, for each output that requires grad and each input that requires
//! grad, the Jacobian backward gives (one vector-Jacobian product per output element) with the
//! one central differences give (two calls of the function per input element); its
//! documentation shows how it is called. [`gradgradcheck`] checks the first-order gradients,
//! recorded with `create_graph`, the same way: second derivatives. [`GradcheckOptions`] holds
//! PyTorch's keyword arguments (tolerances, `fast_mode`...), and what the function returns is
//! anything [`Outputs`] flattens into tensors.

use super::{Outputs, grad, meta};
use crate::error::{Error, Result, bail};
use crate::tensor::{DEFAULT_SEED, DType, Dense, Generator, Tensor};

/// The options of [`gradcheck`] and [`gradgradcheck`], PyTorch's keyword arguments, with a
/// builder method for each: `GradcheckOptions::new().eps(1e-6).atol(1e-4)`.
#[derive(Clone, Debug)]
pub struct GradcheckOptions {
    /// Perturbation of the central differences (default `1e-6`).
    pub eps: f64,
    /// Absolute tolerance (default `1e-5`): an element fails when
    /// `|analytical - numerical| > atol + rtol * |numerical|`.
    pub atol: f64,
    /// Relative tolerance (default `1e-3`).
    pub rtol: f64,
    /// Whether a failed check is an error (default) or `Ok(false)`. Errors of the function
    /// itself, or of backward, are errors either way.
    pub raise_exception: bool,
    /// How far two backward runs with the same grad_output may differ (default `0.0`: they
    /// must agree exactly).
    pub nondet_tol: f64,
    /// Whether to check that backward copes with missing output gradients (default `true`);
    /// see [`gradcheck`] for what that means in torchfn.
    pub check_undefined_grad: bool,
    /// Compare projections `vᵀJu` of the Jacobians on random vectors rather than whole
    /// Jacobians (default `false`): two calls per input rather than two per input element.
    pub fast_mode: bool,
    /// Also check forward-mode AD (default `false`): the Jacobian from tangents (one
    /// [`make_dual`](crate::autograd::forward_ad::make_dual) per input element, or, in fast
    /// mode, one projection) against the numerical one. Enters a dual level of its own.
    pub check_forward_ad: bool,
    /// Seed of the random vectors of `fast_mode` and of [`gradgradcheck`]'s default
    /// grad_outputs (default [`DEFAULT_SEED`], a fresh PyTorch generator's), so a check
    /// gives the same verdict every run.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
            raise_exception: true,
            nondet_tol: 0.0,
            check_undefined_grad: true,
            fast_mode: false,
            check_forward_ad: false,
            seed: DEFAULT_SEED,
        }
    }
}

impl GradcheckOptions {
    /// PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`eps`](Self::eps).
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Sets [`atol`](Self::atol).
    pub fn atol(mut self, atol: f64) -> Self {
        self.atol = atol;
        self
    }

    /// Sets [`rtol`](Self::rtol).
    pub fn rtol(mut self, rtol: f64) -> Self {
        self.rtol = rtol;
        self
    }

    /// Sets [`raise_exception`](Self::raise_exception).
    pub fn raise_exception(mut self, raise_exception: bool) -> Self {
        self.raise_exception = raise_exception;
        self
    }

    /// Sets [`nondet_tol`](Self::nondet_tol).
    pub fn nondet_tol(mut self, nondet_tol: f64) -> Self {
        self.nondet_tol = nondet_tol;
        self
    }

    /// Sets [`check_undefined_grad`](Self::check_undefined_grad).
    pub fn check_undefined_grad(mut self, check_undefined_grad: bool) -> Self {
        self.check_undefined_grad = check_undefined_grad;
        self
    }

    /// Sets [`fast_mode`](Self::fast_mode).
    pub fn fast_mode(mut self, fast_mode: bool) -> Self {
        self.fast_mode = fast_mode;
        self
    }

    /// Sets [`check_forward_ad`](Self::check_forward_ad).
    pub fn check_forward_ad(mut self, check_forward_ad: bool) -> Self {
        self.check_forward_ad = check_forward_ad;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// Checks the gradients backward computes for `f` at `inputs` against finite differences, as
/// PyTorch's `torch.autograd.gradcheck`: `Ok(true)` when they agree.
///
/// ```
/// use torchfn::DType;
/// use torchfn::autograd::{GradcheckOptions, gradcheck};
///
/// let x = torchfn::randn([3, 4], None, DType::Float64, None)?.requires_grad_(true)?;
/// assert!(gradcheck(|x| x[0].sin(), &[x], &GradcheckOptions::new().eps(1e-6).atol(1e-4))?);
///
/// // A wrong backward is caught: this hook doubles the gradient flowing back through `y`.
/// let x = torchfn::randn([3], None, DType::Float64, None)?.requires_grad_(true)?;
/// let doubled = |x: &[torchfn::Tensor]| {
///     let y = x[0].sin()?;
///     y.register_hook(|g| Ok(Some((g * 2.0)?)))?;
///     &y * 3.0
/// };
/// let err = gradcheck(doubled, &[x], &GradcheckOptions::new()).unwrap_err();
/// assert!(err.to_string().starts_with("Jacobian mismatch for output 0 with respect to input 0"));
/// # Ok::<(), torchfn::Error>(())
/// ```
///
/// The inputs differentiated are the floating-point tensors among `inputs` that require grad
/// (there must be one; float64 is what the default tolerances are for, float32 is accepted);
/// the others reach `f` unchanged. What is checked, in PyTorch's order:
///
/// - **The Jacobians.** For each input element, `f` is called with that element shifted by
///   `±eps` (in a fresh tensor of the input's dtype, shape and device that requires grad, as
///   the input does, so that `f` runs as it does at the input, hooks and all), and central
///   differences give a column of the numerical Jacobians. Backward is run once per element of
///   each output that requires grad (a one-hot grad_output), giving a row of the analytical
///   Jacobians; it is run twice, and the two must agree within `nondet_tol` (else backward "is
///   not reentrant"). An element fails when
///   `|analytical - numerical| > atol + rtol * |numerical|` (or either is NaN); the error,
///   PyTorch's, reads `Jacobian mismatch for output {o} with respect to input {i}` and shows
///   both Jacobians (rows: the input's elements, columns: the output's) and where they differ
///   most. `o` and `i` are positions in `f`'s outputs and in `inputs`.
/// - When no output requires grad, the numerical Jacobians of the floating-point outputs must
///   be zero (within `nondet_tol`). Outputs that do not require grad are otherwise not
///   checked, as in PyTorch.
/// - **Backward is multiplied by grad_output**: a zero grad_output for every output gives zero
///   (or no) gradients, of each input's dtype, device and shape.
/// - **`check_undefined_grad`**: PyTorch passes backward undefined output gradients; in torchfn
///   an output gradient that is not given reaches backward as zeros, so this checks what is left
///   of it: for a function with several outputs that require grad, backward through each one
///   alone (the others' gradients missing) with a zero grad_output runs and gives zero (or no)
///   gradients.
///
/// With `fast_mode`, PyTorch's fast gradcheck: rather than whole Jacobians, random unit vectors
/// `u` (per input) and `v` (per output), drawn from a generator seeded with `seed`, give the
/// projections `vᵀJu`: numerically from central differences along `u`, analytically from one
/// backward with grad_output `v` dotted with `u`. The tolerance is PyTorch's: `atol` scaled by
/// `Σu·Σv`.
///
/// A failed check is an error of kind [`Runtime`](crate::ErrorKind::Runtime), or `Ok(false)`
/// without `raise_exception`. An error of `f` or of backward is returned as it is, and so is
/// an input without one that requires grad (a [`Value`](crate::ErrorKind::Value) error), or
/// an `f` whose outputs change shape or dtype when the inputs are perturbed.
pub fn gradcheck<O: Outputs>(
    f: impl Fn(&[Tensor]) -> Result<O>,
    inputs: &[Tensor],
    options: &GradcheckOptions,
) -> Result<bool> {
    let f = |x: &[Tensor]| f(x).map(Outputs::into_tensors);
    verdict(check(&f, inputs, options), options)
}

/// Checks second derivatives, as PyTorch's `torch.autograd.gradgradcheck`: [`gradcheck`] of
/// the function that gives the gradients of `f`'s outputs (those that require grad) with
/// respect to the inputs that require grad, for `grad_outputs`, recorded with `create_graph`.
/// Gradients that come back `None` (an input the outputs do not depend on) are left out.
///
/// ```
/// use torchfn::DType;
/// use torchfn::autograd::{GradcheckOptions, gradgradcheck};
///
/// let x = torchfn::randn([4], None, DType::Float64, None)?.requires_grad_(true)?;
/// let cube = |x: &[torchfn::Tensor]| &(&x[0] * &x[0])? * &x[0];
/// assert!(gradgradcheck(cube, &[x], None, &GradcheckOptions::new())?);
/// # Ok::<(), torchfn::Error>(())
/// ```
///
/// `grad_outputs` gives one tensor per output of `f` that requires grad; by default they are
/// normal samples of each such output's shape, dtype and device, from a generator seeded with
/// the options' `seed`. Unlike PyTorch, grad_outputs are held fixed (detached): the check does
/// not differentiate with respect to them.
pub fn gradgradcheck<O: Outputs>(
    f: impl Fn(&[Tensor]) -> Result<O>,
    inputs: &[Tensor],
    grad_outputs: Option<&[Tensor]>,
    options: &GradcheckOptions,
) -> Result<bool> {
    let f = |x: &[Tensor]| f(x).map(Outputs::into_tensors);
    let wrt = differentiated(inputs)?;
    let grad_outputs: Vec<Tensor> = match grad_outputs {
        Some(g) => g.iter().map(Tensor::detach).collect::<Result<_>>()?,
        None => {
            let generator = Generator::new().manual_seed(options.seed);
            let outputs = requiring_grad(f(inputs)?)?;
            outputs
                .iter()
                .map(|out| {
                    let normal = crate::randn([numel(out)?], &generator, DType::Float64, None)?;
                    tensor_like(out, normal.to_vec::<f64>()?)
                })
                .collect::<Result<_>>()?
        }
    };
    let first_order = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let outputs = requiring_grad(f(x)?)?;
        if outputs.is_empty() {
            return Ok(Vec::new());
        }
        let wrt: Vec<Tensor> = wrt.iter().map(|&i| x[i].clone()).collect();
        Ok(grad(&outputs, &wrt, Some(&grad_outputs), None, true, true)?.into_iter().flatten().collect())
    };
    verdict(check(&first_order, inputs, options), options)
}

/// Why a check did not pass: a comparison that failed (`Ok(false)` without `raise_exception`),
/// or an error of the function or of backward, which is returned either way.
enum Failed {
    Check(String),
    Error(Error),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Self {
        Failed::Error(e)
    }
}

type Checked<T = ()> = std::result::Result<T, Failed>;

fn verdict(checked: Checked, options: &GradcheckOptions) -> Result<bool> {
    match checked {
        Ok(()) => Ok(true),
        Err(Failed::Check(message)) if options.raise_exception => Err(Error::runtime_error(message)),
        Err(Failed::Check(_)) => Ok(false),
        Err(Failed::Error(e)) => Err(e),
    }
}

/// A function checked: its tensors in, its tensors out.
type Function<'a> = &'a dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>;

fn check(f: Function<'_>, inputs: &[Tensor], options: &GradcheckOptions) -> Checked {
    let problem = Problem::new(f, inputs, options)?;
    if options.fast_mode {
        problem.check_projections()?;
    } else {
        problem.check_jacobians()?;
    }
    if !problem.differentiable.is_empty() {
        problem.check_zero_grad_outputs()?;
        if options.check_undefined_grad && problem.differentiable.len() > 1 {
            problem.check_outputs_one_at_a_time()?;
        }
    }
    Ok(())
}

/// The data of a tensor gradcheck reads: a duck has none, and is an error.
fn dense(t: &Tensor) -> Result<&Dense> {
    t.data("gradcheck", "tensors")
}

fn numel(t: &Tensor) -> Result<usize> {
    Ok(dense(t)?.layout.numel())
}

/// The elements of `t` as float64, in row-major order, read on the host.
fn values(t: &Tensor) -> Result<Vec<f64>> {
    crate::backend::host::elements::<f64>("gradcheck", &*crate::backend::host::on_host(dense(t)?)?)
}

/// A new tensor of `values` with `like`'s shape, dtype and device, not requiring grad.
fn tensor_like(like: &Tensor, values: Vec<f64>) -> Result<Tensor> {
    let d = dense(like)?;
    Tensor::from_vec(values, d.layout.shape.clone())?.to_device(d.device(), Some(d.dtype), false, false)
}

/// The positions of the inputs that are differentiated: floating-point tensors requiring grad.
fn differentiated(inputs: &[Tensor]) -> Result<Vec<usize>> {
    let wrt: Vec<usize> = (0..inputs.len())
        .filter(|&i| dense(&inputs[i]).is_ok_and(|d| d.dtype.is_floating_point()) && meta::requires_grad(&inputs[i]))
        .collect();
    if wrt.is_empty() {
        bail!(
            Value,
            "gradcheck expects at least one input tensor to require gradient, but none of them have \
             requires_grad=True."
        );
    }
    Ok(wrt)
}

/// The outputs that require grad (ducks are an error).
fn requiring_grad(outputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    for out in &outputs {
        dense(out)?;
    }
    Ok(outputs.into_iter().filter(meta::requires_grad).collect())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// A random unit vector of `n` elements, uniform on `[0, 1)` then normalized (PyTorch's
/// `_vec_from_tensor`).
fn unit_vector(n: usize, generator: &Generator) -> Result<Vec<f64>> {
    let mut v = crate::rand([n], generator, DType::Float64, None)?.to_vec::<f64>()?;
    let norm = dot(&v, &v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    Ok(v)
}

/// `torch.allclose` of one element: equal, or a finite difference within `atol + rtol * |n|`.
fn close(a: f64, n: f64, atol: f64, rtol: f64) -> bool {
    let diff = (a - n).abs();
    a == n || (diff.is_finite() && diff <= atol + rtol * n.abs())
}

/// Where `a` and `n` differ most (NaN most of all), and by how much.
fn largest_difference(n: &[f64], a: &[f64]) -> (usize, f64) {
    let mut worst = (0, f64::NEG_INFINITY);
    for (k, (n, a)) in n.iter().zip(a).enumerate() {
        let d = (a - n).abs();
        if d.is_nan() || d > worst.1 {
            worst = (k, d);
            if d.is_nan() {
                break;
            }
        }
    }
    worst
}

/// A `rows × cols` matrix, printed as PyTorch prints a tensor (summarized when large).
fn matrix(values: &[f64], rows: usize, cols: usize) -> String {
    Tensor::from_vec(values.to_vec(), [rows, cols]).map_or_else(|e| e.to_string(), |t| t.to_string())
}

/// The function, its inputs, which of them are differentiated, and its outputs at the inputs.
struct Problem<'a> {
    f: Function<'a>,
    inputs: &'a [Tensor],
    options: &'a GradcheckOptions,
    /// Positions of the differentiated inputs, and those inputs.
    wrt: Vec<usize>,
    wrt_tensors: Vec<Tensor>,
    outputs: Vec<Tensor>,
    /// Positions of the outputs that require grad.
    differentiable: Vec<usize>,
}

impl<'a> Problem<'a> {
    fn new(f: Function<'a>, inputs: &'a [Tensor], options: &'a GradcheckOptions) -> Result<Problem<'a>> {
        let wrt = differentiated(inputs)?;
        let wrt_tensors = wrt.iter().map(|&i| inputs[i].clone()).collect();
        let outputs = f(inputs)?;
        let mut differentiable = Vec::new();
        for (o, out) in outputs.iter().enumerate() {
            dense(out)?;
            if meta::requires_grad(out) {
                differentiable.push(o);
            }
        }
        Ok(Problem { f, inputs, options, wrt, wrt_tensors, outputs, differentiable })
    }

    /// The outputs whose derivatives are compared: those that require grad, or, when none
    /// does, the floating-point ones (whose derivatives must then be zero).
    fn checked_outputs(&self) -> Result<Vec<usize>> {
        if !self.differentiable.is_empty() {
            return Ok(self.differentiable.clone());
        }
        let mut floating = Vec::new();
        for (o, out) in self.outputs.iter().enumerate() {
            if dense(out)?.dtype.is_floating_point() {
                floating.push(o);
            }
        }
        Ok(floating)
    }

    /// Central differences of the outputs at `selected` along `direction` at input `i` (whose
    /// values are `x`): `(f(x + eps d) - f(x - eps d)) / 2 eps`, one flat vector per output.
    fn central_difference(&self, i: usize, x: &[f64], direction: &[f64], selected: &[usize]) -> Result<Vec<Vec<f64>>> {
        let eps = self.options.eps;
        let at = |sign: f64| -> Result<Vec<Tensor>> {
            let shifted: Vec<f64> = x.iter().zip(direction).map(|(x, d)| x + sign * eps * d).collect();
            // Requiring grad, as the input it stands for, so that `f` runs as it does there
            // (PyTorch shifts the input in place, and `f` can register hooks, take gradients).
            let shifted = tensor_like(&self.inputs[i], shifted)?.requires_grad_(true)?;
            // A tensor passed several times is shifted everywhere, as PyTorch's in-place shift.
            let args: Vec<Tensor> =
                self.inputs.iter().map(|t| if t.is(&self.inputs[i]) { shifted.clone() } else { t.clone() }).collect();
            (self.f)(&args)
        };
        let (minus, plus) = (at(-1.0)?, at(1.0)?);
        selected
            .iter()
            .map(|&o| {
                let (a, b) = (self.perturbed_output(&minus, o)?, self.perturbed_output(&plus, o)?);
                Ok(a.iter().zip(&b).map(|(a, b)| (b - a) / (2.0 * eps)).collect())
            })
            .collect()
    }

    /// The values of output `o` of a call at perturbed inputs, which must have the shape and
    /// dtype it has at the inputs.
    fn perturbed_output(&self, outputs: &[Tensor], o: usize) -> Result<Vec<f64>> {
        let expected = dense(&self.outputs[o])?;
        let Some(out) = outputs.get(o) else {
            bail!(
                Runtime,
                "gradcheck: expected the function to return {} outputs when inputs are perturbed by {}, but got {}.",
                self.outputs.len(),
                self.options.eps,
                outputs.len()
            );
        };
        let got = dense(out)?;
        if got.layout.shape != expected.layout.shape || got.dtype != expected.dtype {
            bail!(
                Runtime,
                "gradcheck: expected the function to return outputs with the same shape and dtype when inputs are \
                 perturbed by {}, but output {o} is {:?} {} at the inputs and {:?} {} perturbed.",
                self.options.eps,
                expected.layout.shape.as_ref(),
                expected.dtype,
                got.layout.shape.as_ref(),
                got.dtype
            );
        }
        values(out)
    }

    /// vᵀJ: backward through output `o` with grad_output `v`, the gradient of each
    /// differentiated input, flat (zeros where backward gives none).
    fn vjp(&self, o: usize, v: &[f64]) -> Checked<Vec<Vec<f64>>> {
        let out = &self.outputs[o];
        let v = tensor_like(out, v.to_vec())?;
        let grads = grad(std::slice::from_ref(out), &self.wrt_tensors, Some(&[v]), Some(true), false, true)?;
        let mut rows = Vec::with_capacity(grads.len());
        for ((g, x), &i) in grads.iter().zip(&self.wrt_tensors).zip(&self.wrt) {
            let Some(g) = g else {
                rows.push(vec![0.0; numel(x)?]);
                continue;
            };
            let (gs, xs) = (&dense(g)?.layout.shape, &dense(x)?.layout.shape);
            if gs != xs {
                return Err(Failed::Check(format!(
                    "Analytical gradient has incorrect size: backward through output {o} gives input {i} a gradient \
                     of shape {:?}, but the input has shape {:?}.",
                    gs.as_ref(),
                    xs.as_ref()
                )));
            }
            rows.push(values(g)?);
        }
        Ok(rows)
    }

    /// Fails unless two backward runs agree within `nondet_tol`.
    fn check_reentrant(&self, first: &[Vec<f64>], second: &[Vec<f64>]) -> Checked {
        let tol = self.options.nondet_tol;
        let differ = first.iter().zip(second).flat_map(|(a, b)| a.iter().zip(b)).any(|(a, b)| (a - b).abs() > tol);
        if differ {
            return Err(Failed::Check(format!(
                "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times \
                 gives different values, although analytical gradient matches numerical gradient. The tolerance for \
                 nondeterminism was {tol}."
            )));
        }
        Ok(())
    }

    /// Fails unless every numerical derivative is zero (within `nondet_tol`): what a function
    /// none of whose outputs requires grad must have.
    fn check_zero_numerical<'v>(&self, derivatives: impl IntoIterator<Item = &'v Vec<f64>>) -> Checked {
        let tol = self.options.nondet_tol;
        if derivatives.into_iter().flatten().any(|d| d.is_nan() || d.abs() > tol) {
            return Err(Failed::Check(
                "Numerical gradient for function expected to be zero: no output requires grad, but the outputs \
                 change with the inputs that do."
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Jacobians of the `selected` outputs, one column (an input element) at a time, by
    /// `derivative` (central differences, or tangents) along each unit direction:
    /// `jacobians[p][q]` for differentiated input p × output q, row-major (the input's
    /// elements × the output's).
    fn jacobians_by(
        &self,
        selected: &[usize],
        derivative: impl Fn(usize, &[f64], &[f64]) -> Result<Vec<Vec<f64>>>,
    ) -> Result<Vec<Vec<Vec<f64>>>> {
        let widths = selected.iter().map(|&o| numel(&self.outputs[o])).collect::<Result<Vec<_>>>()?;
        let mut all = Vec::with_capacity(self.wrt.len());
        for &i in &self.wrt {
            let x = values(&self.inputs[i])?;
            let mut jacobians: Vec<Vec<f64>> = widths.iter().map(|w| vec![0.0; x.len() * w]).collect();
            let mut e = vec![0.0; x.len()];
            for k in 0..x.len() {
                e[k] = 1.0;
                let columns = derivative(i, &x, &e)?;
                e[k] = 0.0;
                for ((jacobian, column), w) in jacobians.iter_mut().zip(columns).zip(&widths) {
                    jacobian[k * w..(k + 1) * w].copy_from_slice(&column);
                }
            }
            all.push(jacobians);
        }
        Ok(all)
    }

    /// Slow mode: whole Jacobians, numerical against analytical (and against forward mode).
    fn check_jacobians(&self) -> Checked {
        let selected = self.checked_outputs()?;
        let numerical = self.jacobians_by(&selected, |i, x, e| self.central_difference(i, x, e, &selected))?;
        if self.differentiable.is_empty() {
            return self.check_zero_numerical(numerical.iter().flatten());
        }
        for (q, &o) in selected.iter().enumerate() {
            let analytical = self.analytical_jacobians(o)?;
            for (p, &i) in self.wrt.iter().enumerate() {
                self.compare("", o, i, &numerical[p][q], &analytical[p])?;
            }
        }
        if self.options.check_forward_ad {
            let forward = self.jacobians_by(&selected, |i, _, e| self.forward_derivative(i, e, &selected))?;
            for (q, &o) in selected.iter().enumerate() {
                for (p, &i) in self.wrt.iter().enumerate() {
                    self.compare(" computed with forward mode", o, i, &numerical[p][q], &forward[p][q])?;
                }
            }
        }
        Ok(())
    }

    /// Fails unless the Jacobians `n` (numerical) and `a` of output `o` with respect to input
    /// `i` agree; `how` says how `a` was computed.
    fn compare(&self, how: &str, o: usize, i: usize, n: &[f64], a: &[f64]) -> Checked {
        let (rows, cols) = (numel(&self.inputs[i])?, numel(&self.outputs[o])?);
        let (atol, rtol) = (self.options.atol, self.options.rtol);
        if n.iter().zip(a).all(|(&n, &a)| close(a, n, atol, rtol)) {
            return Ok(());
        }
        let (worst, diff) = largest_difference(n, a);
        let (r, c) = (worst / cols.max(1), worst % cols.max(1));
        Err(Failed::Check(format!(
            "Jacobian{how} mismatch for output {o} with respect to input {i},\nnumerical:{}\nanalytical:{}\n\n\
             The largest absolute difference is {diff} at row {r}, column {c}: the derivative of element {c} of \
             output {o} with respect to element {r} of input {i} is {} numerically and {} analytically (atol \
             {atol}, rtol {rtol}).\n",
            matrix(n, rows, cols),
            matrix(a, rows, cols),
            n[worst],
            a[worst]
        )))
    }

    /// The derivatives of the outputs at `selected` along `direction` at input `i`, by forward
    /// mode: `f` at the inputs with input `i` a dual tensor carrying `direction` as its tangent
    /// (an output without a tangent has a zero one), one flat vector per output.
    fn forward_derivative(&self, i: usize, direction: &[f64], selected: &[usize]) -> Result<Vec<Vec<f64>>> {
        use super::forward_ad;
        let _level = forward_ad::dual_level()?;
        let dual = forward_ad::make_dual(&self.inputs[i], &tensor_like(&self.inputs[i], direction.to_vec())?)?;
        let args: Vec<Tensor> =
            self.inputs.iter().map(|t| if t.is(&self.inputs[i]) { dual.clone() } else { t.clone() }).collect();
        let outputs = (self.f)(&args)?;
        selected
            .iter()
            .map(|&o| {
                let out = outputs.get(o).ok_or_else(|| Error::runtime_error("gradcheck: an output went missing"))?;
                match forward_ad::unpack_dual(out)?.tangent {
                    Some(t) => values(&t),
                    None => Ok(vec![0.0; numel(out)?]),
                }
            })
            .collect()
    }

    /// The analytical Jacobians of output `o`, one per differentiated input, row-major (the
    /// input's elements × the output's): one backward per output element, all run twice.
    fn analytical_jacobians(&self, o: usize) -> Checked<Vec<Vec<f64>>> {
        let cols = numel(&self.outputs[o])?;
        let jacobians = || -> Checked<Vec<Vec<f64>>> {
            let mut jacobians =
                self.wrt_tensors.iter().map(|x| Ok(vec![0.0; numel(x)? * cols])).collect::<Result<Vec<_>>>()?;
            let mut v = vec![0.0; cols];
            for j in 0..cols {
                v[j] = 1.0;
                let rows = self.vjp(o, &v)?;
                v[j] = 0.0;
                for (jacobian, row) in jacobians.iter_mut().zip(rows) {
                    for (k, g) in row.into_iter().enumerate() {
                        jacobian[k * cols + j] = g;
                    }
                }
            }
            Ok(jacobians)
        };
        let first = jacobians()?;
        self.check_reentrant(&first, &jacobians()?)?;
        Ok(first)
    }

    /// Fast mode: projections `vᵀJu` on random unit vectors, numerical against analytical.
    fn check_projections(&self) -> Checked {
        let generator = Generator::new().manual_seed(self.options.seed);
        let selected = self.checked_outputs()?;
        let u = self.wrt_tensors.iter().map(|x| unit_vector(numel(x)?, &generator)).collect::<Result<Vec<_>>>()?;
        let v =
            selected.iter().map(|&o| unit_vector(numel(&self.outputs[o])?, &generator)).collect::<Result<Vec<_>>>()?;
        // ju[p][q]: the derivative of output q along u_p.
        let ju = self
            .wrt
            .iter()
            .zip(&u)
            .map(|(&i, u)| self.central_difference(i, &values(&self.inputs[i])?, u, &selected))
            .collect::<Result<Vec<_>>>()?;
        if self.differentiable.is_empty() {
            return self.check_zero_numerical(ju.iter().flatten());
        }
        for (q, (&o, v)) in selected.iter().zip(&v).enumerate() {
            let vj = self.vjp(o, v)?;
            self.check_reentrant(&vj, &self.vjp(o, v)?)?;
            for (p, (&i, u)) in self.wrt.iter().zip(&u).enumerate() {
                let n = dot(v, &ju[p][q]);
                let mut analytical = vec![("", dot(&vj[p], u))];
                if self.options.check_forward_ad {
                    let forward = self.forward_derivative(i, u, &selected)?;
                    analytical.push((" computed with forward mode", dot(v, &forward[q])));
                }
                for (how, a) in analytical {
                    self.compare_projections(how, o, i, n, a, u, v)?;
                }
            }
        }
        Ok(())
    }

    /// Fails unless the projections `n` (numerical) and `a` of output `o`'s Jacobian with
    /// respect to input `i` on `u` and `v` agree.
    #[allow(clippy::too_many_arguments)]
    fn compare_projections(&self, how: &str, o: usize, i: usize, n: f64, a: f64, u: &[f64], v: &[f64]) -> Checked {
        let atol = self.options.atol * u.iter().sum::<f64>() * v.iter().sum::<f64>();
        if close(a, n, atol, self.options.rtol) {
            return Ok(());
        }
        Err(Failed::Check(format!(
            "Jacobian{how} mismatch for output {o} with respect to input {i},\nnumerical:{n}\nanalytical:{a}\n\n\
             Fast mode compares vᵀJu, the Jacobians projected on random unit vectors u (over the input's elements) \
             and v (over the output's), seeded with {}; rerun with fast_mode(false) to see the full Jacobians.\n",
            self.options.seed
        )))
    }

    /// Backward through `outputs` (positions) with zero grad_outputs: the gradients, or the error.
    fn zero_backward(&self, outputs: &[usize]) -> Result<Vec<Option<Tensor>>> {
        let outputs: Vec<Tensor> = outputs.iter().map(|&o| self.outputs[o].clone()).collect();
        let zeros = outputs.iter().map(|out| tensor_like(out, vec![0.0; numel(out)?])).collect::<Result<Vec<_>>>()?;
        grad(&outputs, &self.wrt_tensors, Some(&zeros), Some(true), false, true)
    }

    /// Zero grad_outputs must give zero gradients, of the inputs' dtype, device and shape.
    fn check_zero_grad_outputs(&self) -> Checked {
        let grads = self.zero_backward(&self.differentiable)?;
        for ((g, x), &i) in grads.iter().zip(&self.wrt_tensors).zip(&self.wrt) {
            let Some(g) = g else { continue };
            if values(g)?.iter().any(|&e| e != 0.0) {
                return Err(Failed::Check(format!(
                    "backward not multiplied by grad_output: zero grad_outputs give input {i} a non-zero gradient."
                )));
            }
            let (gd, xd) = (dense(g)?, dense(x)?);
            if gd.dtype != xd.dtype || gd.device() != xd.device() {
                return Err(Failed::Check(format!(
                    "grad is incorrect type: input {i} is {} on {}, its gradient {} on {}.",
                    xd.dtype,
                    xd.device(),
                    gd.dtype,
                    gd.device()
                )));
            }
            if gd.layout.shape != xd.layout.shape {
                return Err(Failed::Check(format!(
                    "grad is incorrect size: input {i} has shape {:?}, its gradient {:?}.",
                    xd.layout.shape.as_ref(),
                    gd.layout.shape.as_ref()
                )));
            }
        }
        Ok(())
    }

    /// `check_undefined_grad`, as torchfn has it: backward through each output alone, the
    /// others' gradients missing (they reach backward as zeros), with a zero grad_output, runs
    /// and gives zero (or no) gradients.
    fn check_outputs_one_at_a_time(&self) -> Checked {
        for &o in &self.differentiable {
            let grads = self.zero_backward(&[o]).map_err(|e| {
                Failed::Check(format!(
                    "Expected backward function to handle undefined output grads: backward through output {o} alone \
                     (the other outputs' gradients missing) failed: {e}"
                ))
            })?;
            for (g, &i) in grads.iter().zip(&self.wrt) {
                if let Some(g) = g
                    && values(g)?.iter().any(|&e| e != 0.0)
                {
                    return Err(Failed::Check(format!(
                        "Expected all input grads to be undefined or zero when all output grads are undefined or \
                         zero: backward through output {o} alone with a zero gradient gives input {i} a non-zero \
                         gradient."
                    )));
                }
            }
        }
        Ok(())
    }
}
