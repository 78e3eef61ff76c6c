//! The optimizers' fused kernels: one pass over a parameter's memory per step (PyTorch's
//! `_fused_adam_`, `_fused_adamw_` and `_fused_sgd_` on the CPU) instead of one per operation
//! of the step.

use super::map::vectorised;
use super::threads::GRAIN;
use crate::backend::{AdamArrays, AdamStep, Array, SgdArrays, SgdStep};
use crate::error::{Error, Result};
use crate::types::DType;

/// One Adam or AdamW step of each parameter, in place, computed in its dtype as PyTorch's
/// fused CPU kernel computes it (the scalars rounded to the dtype first; the first moment by
/// `lerp`'s formula with one fused multiply-add, as its vector loop does). Every parameter's
/// arrays are checked before any is written.
pub fn fused_adam(params: &[AdamArrays<'_>], h: &AdamStep) -> Result<()> {
    let func = if h.decoupled { "_fused_adamw_" } else { "_fused_adam_" };
    fn all<'a>(a: &AdamArrays<'a>) -> Vec<(&'static str, &'a Array)> {
        let named = [("param", a.param), ("grad", a.grad), ("exp_avg", a.exp_avg), ("exp_avg_sq", a.exp_avg_sq)];
        named.into_iter().chain(a.max_exp_avg_sq.map(|m| ("max_exp_avg_sq", m))).collect()
    }
    let dtypes = params.iter().map(|a| checked(func, &all(a))).collect::<Result<Vec<_>>>()?;
    for (a, dtype) in params.iter().zip(dtypes) {
        match dtype {
            DType::Float32 => adam_step::<f32>(func, &all(a), h, a.step)?,
            DType::Float64 => adam_step::<f64>(func, &all(a), h, a.step)?,
            DType::Float16 => adam_step::<crate::types::half::f16>(func, &all(a), h, a.step)?,
            _ => adam_step::<crate::types::half::bf16>(func, &all(a), h, a.step)?,
        }
    }
    Ok(())
}

/// One SGD step of each parameter, in place, as PyTorch's fused CPU kernel computes it (the
/// weight decay and the momentum each with one fused multiply-add, as its vector loop does).
/// Every parameter's arrays are checked before any is written.
pub fn fused_sgd(params: &[SgdArrays<'_>], h: &SgdStep) -> Result<()> {
    let func = "_fused_sgd_";
    fn all<'a>(a: &SgdArrays<'a>) -> Vec<(&'static str, &'a Array)> {
        let buffer = a.momentum_buffer.map(|b| ("momentum_buffer", b));
        [("param", a.param), ("grad", a.grad)].into_iter().chain(buffer).collect()
    }
    for a in params {
        if (h.hyper.momentum != 0.0) != a.momentum_buffer.is_some() {
            return Err(Error::runtime_error(format!(
                "{func}(): a momentum buffer goes with a momentum, and only then"
            )));
        }
    }
    let dtypes = params.iter().map(|a| checked(func, &all(a))).collect::<Result<Vec<_>>>()?;
    for (a, dtype) in params.iter().zip(dtypes) {
        match dtype {
            DType::Float32 => sgd_step::<f32>(func, &all(a), h)?,
            DType::Float64 => sgd_step::<f64>(func, &all(a), h)?,
            DType::Float16 => sgd_step::<crate::types::half::f16>(func, &all(a), h)?,
            _ => sgd_step::<crate::types::half::bf16>(func, &all(a), h)?,
        }
    }
    Ok(())
}

/// The parameter's dtype, once every array (the parameter first) is a contiguous float32 or
/// float64 one of its dtype and size, in a storage of its own.
fn checked(func: &str, all: &[(&str, &Array)]) -> Result<DType> {
    let param = all[0].1;
    if !param.layout.is_contiguous() {
        return Err(Error::runtime_error(format!("{func}(): the parameter must be contiguous")));
    }
    let n = param.layout.numel();
    for (name, a) in &all[1..] {
        if a.dtype != param.dtype || a.layout.numel() != n || !a.layout.is_contiguous() {
            return Err(Error::runtime_error(format!(
                "{func}(): {name} must be a contiguous {} tensor of {n} elements, like the parameter",
                param.dtype
            )));
        }
    }
    for (i, (first, a)) in all.iter().enumerate() {
        if let Some((second, _)) = all[i + 1..].iter().find(|(_, b)| a.shares(b)) {
            return Err(Error::runtime_error(format!("{func}(): {first} and {second} share memory")));
        }
    }
    match param.dtype {
        DType::Float32 | DType::Float64 | DType::Float16 | DType::BFloat16 => Ok(param.dtype),
        other => Err(Error::runtime_error(format!("{func}(): the CPU kernel takes float parameters, not {other}"))),
    }
}

/// The elements of each array, locked for writing. The caller's arrays are distinct, and the
/// locks are taken in the order of their storages' addresses, so two steps over the same
/// tensors in different roles cannot each hold a lock the other waits for.
fn locked<'a, T: crate::types::Element>(
    func: &str,
    arrays: &[(&str, &'a Array)],
) -> Result<Vec<parking_lot::MappedRwLockWriteGuard<'a, [T]>>> {
    let mut order: Vec<usize> = (0..arrays.len()).collect();
    order.sort_by_key(|&i| std::sync::Arc::as_ptr(&arrays[i].1.storage) as usize);
    let mut guards: Vec<Option<parking_lot::MappedRwLockWriteGuard<'a, [T]>>> = arrays.iter().map(|_| None).collect();
    for i in order {
        let (name, a) = arrays[i];
        let range = a.layout.offset..a.layout.offset + a.layout.numel();
        let guard =
            a.storage.write().ok_or_else(|| Error::runtime_error(format!("{func}(): {name} is not in host memory")))?;
        let slice = parking_lot::RwLockWriteGuard::try_map(guard, |b| b.as_mut_slice::<T>()?.get_mut(range))
            .map_err(|_| Error::runtime_error(format!("{func}(): {name}'s storage is too small")))?;
        guards[i] = Some(slice);
    }
    guards.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| Error::runtime_error(format!("{func}(): a lock")))
}

/// The Adam step for one stored element type: the arrays locked, [`adam_math`] over chunks of
/// them on the thread pool.
fn adam_step<S: Stored>(func: &str, arrays: &[(&str, &Array)], h: &AdamStep, step: f64) -> Result<()>
where
    S::Wide: AdamMath,
{
    let c = Coefficients::<S::Wide>::new(h, step);
    // Written: the parameter, the moments, the maximum, and the gradient when it is unscaled.
    let written: Vec<bool> = (0..arrays.len()).map(|i| i != 1 || h.grad_scale.is_some()).collect();
    over_chunks::<S>(func, arrays, &written, |chunk| {
        if let [p, g, m, v, rest @ ..] = chunk {
            let max = rest.first_mut().map(|m| &mut **m);
            vectorised(
                #[inline(always)]
                || adam_math(p, g, m, v, max, &c),
            )
        }
    })
}

/// The SGD step for one stored element type.
fn sgd_step<S: Stored>(func: &str, arrays: &[(&str, &Array)], h: &SgdStep) -> Result<()> {
    let one = <S::Wide as Real>::ONE;
    let of = <S::Wide as Rounded>::of;
    let grad_scale = h.grad_scale;
    let h = &h.hyper;
    let c = SgdCoefficients {
        grad_scale: grad_scale.map(of),
        sign: if h.maximize { -one } else { one },
        weight_decay: of(h.weight_decay),
        momentum: of(h.momentum),
        dampened: of(1.0 - h.dampening),
        neg_lr: of(-h.lr),
        first_step: h.is_first_step,
    };
    let (decays, nesterov) = (h.weight_decay != 0.0, h.nesterov);
    let written: Vec<bool> = (0..arrays.len()).map(|i| i != 1 || grad_scale.is_some()).collect();
    over_chunks::<S>(func, arrays, &written, |chunk| {
        if let [p, g, rest @ ..] = chunk {
            let mut none: [S::Wide; 0] = [];
            let b: &mut [S::Wide] = match rest.first_mut() {
                Some(b) => b,
                None => &mut none,
            };
            vectorised(
                #[inline(always)]
                || match (decays, nesterov) {
                    (false, false) => sgd_loop::<S::Wide, false, false>(p, g, b, &c),
                    (false, true) => sgd_loop::<S::Wide, false, true>(p, g, b, &c),
                    (true, false) => sgd_loop::<S::Wide, true, false>(p, g, b, &c),
                    (true, true) => sgd_loop::<S::Wide, true, true>(p, g, b, &c),
                },
            )
        }
    })
}

/// A stored element type of the fused kernels and the type it computes in: float32 and
/// float64 their own, float16 and bfloat16 float32 (PyTorch's "opmath"), each element widened
/// as it is read and rounded once as it is written.
trait Stored: crate::types::Element + Send + Sync {
    type Wide: Real + Rounded + Default + Send + Sync;
    /// The chunk itself, when the type computes in itself.
    fn computes_in_place(chunk: &mut [Self]) -> Option<&mut [Self::Wide]>;
    fn widen(self) -> Self::Wide;
    fn narrow(x: Self::Wide) -> Self;
}

macro_rules! computes_in_place {
    ($($t:ty),*) => {$(
        impl Stored for $t {
            type Wide = $t;
            fn computes_in_place(chunk: &mut [Self]) -> Option<&mut [Self]> {
                Some(chunk)
            }
            fn widen(self) -> Self {
                self
            }
            fn narrow(x: Self) -> Self {
                x
            }
        }
    )*};
}

computes_in_place!(f32, f64);

macro_rules! computes_in_float {
    ($($t:ty: $to_f32:ident, $from_f32:ident);*) => {$(
        impl Stored for $t {
            type Wide = f32;
            fn computes_in_place(_: &mut [Self]) -> Option<&mut [f32]> {
                None
            }
            #[inline(always)]
            fn widen(self) -> f32 {
                crate::types::dtype_reduced::$to_f32(self.to_bits())
            }
            #[inline(always)]
            fn narrow(x: f32) -> Self {
                <$t>::from_bits(crate::types::dtype_reduced::$from_f32(x))
            }
        }
    )*};
}

computes_in_float!(crate::types::half::f16: f16_to_f32, f32_to_f16; crate::types::half::bf16: bf16_to_f32, f32_to_bf16);

/// Runs `body` on matching chunks of the arrays (locked for writing), in parallel: the chunks
/// themselves for a type that computes in itself, else float32 copies of them, rounded back
/// into the arrays `written` marks.
fn over_chunks<S: Stored>(
    func: &str,
    arrays: &[(&str, &Array)],
    written: &[bool],
    body: impl Fn(&mut [&mut [S::Wide]]) + Sync,
) -> Result<()> {
    let mut guards = locked::<S>(func, arrays)?;
    let mut per_array: Vec<std::slice::ChunksMut<'_, S>> = guards.iter_mut().map(|g| g.chunks_mut(GRAIN)).collect();
    let mut chunks: Vec<Vec<&mut [S]>> = Vec::new();
    while let Some(first) = per_array.first_mut().and_then(|c| c.next()) {
        let mut chunk = vec![first];
        chunk.extend(per_array[1..].iter_mut().filter_map(|c| c.next()));
        chunks.push(chunk);
    }
    super::threads::for_each(chunks, |mut chunk| {
        let in_place: Option<Vec<&mut [S::Wide]>> = chunk.iter_mut().map(|c| S::computes_in_place(c)).collect();
        match in_place {
            Some(mut slices) => body(&mut slices),
            None => {
                let mut wide: Vec<Vec<S::Wide>> =
                    chunk.iter().map(|c| c.iter().map(|&x| x.widen()).collect()).collect();
                let mut slices: Vec<&mut [S::Wide]> = wide.iter_mut().map(|w| &mut w[..]).collect();
                body(&mut slices);
                for ((c, w), &write) in chunk.iter_mut().zip(&wide).zip(written) {
                    if write {
                        for (x, &y) in c.iter_mut().zip(w) {
                            *x = S::narrow(y);
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

/// SGD's scalars, rounded to the element type.
struct SgdCoefficients<T> {
    grad_scale: Option<T>,
    sign: T,
    weight_decay: T,
    momentum: T,
    dampened: T,
    neg_lr: T,
    first_step: bool,
}

/// One chunk's SGD step: `DECAYS` (weight decay into the gradient), `NESTEROV`; `buf` is the
/// momentum buffer (empty without momentum).
#[inline(always)]
fn sgd_loop<T: Real, const DECAYS: bool, const NESTEROV: bool>(
    p: &mut [T],
    g: &mut [T],
    buf: &mut [T],
    c: &SgdCoefficients<T>,
) {
    if let Some(scale) = c.grad_scale {
        for g in g.iter_mut() {
            *g = *g / scale;
        }
    }
    let grad_of = |p: T, g: T| {
        let g = g * c.sign;
        if DECAYS { p.mul_add(c.weight_decay, g) } else { g }
    };
    if buf.is_empty() {
        for (p, &g) in p.iter_mut().zip(g.iter()) {
            *p = *p + grad_of(*p, g) * c.neg_lr;
        }
        return;
    }
    for ((p, &g), b) in p.iter_mut().zip(g.iter()).zip(buf.iter_mut()) {
        let grad = grad_of(*p, g);
        *b = if c.first_step { grad } else { c.dampened.mul_add(grad, *b * c.momentum) };
        let step = if NESTEROV { b.mul_add(c.momentum, grad) } else { *b };
        *p = *p + step * c.neg_lr;
    }
}

/// The step's scalars, rounded to the element type as PyTorch's vector loop rounds them.
struct Coefficients<T> {
    grad_scale: Option<T>,
    maximize: bool,
    /// Adam's weight decay (added to the gradient), when not zero.
    coupled_decay: Option<T>,
    /// AdamW's factor `1 - lr · weight_decay`, when the decay is not zero.
    decoupled_factor: Option<T>,
    /// `lerp`'s coefficient and whether it starts from the moment (weight under 0.5).
    lerp_coefficient: T,
    lerp_from_moment: bool,
    beta2: T,
    sq_coefficient: T,
    bias_correction2_sqrt: T,
    eps: T,
    neg_step_size: T,
    amsgrad: bool,
}

/// The element types the kernels compute in: a float64 scalar rounded to them.
trait Rounded: Copy + Send + Sync + PartialOrd {
    fn of(x: f64) -> Self;
}

impl Rounded for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
}

impl Rounded for f64 {
    fn of(x: f64) -> Self {
        x
    }
}

impl<T: Rounded> Coefficients<T> {
    fn new(s: &AdamStep, step: f64) -> Self {
        let h = &s.hyper;
        // In float64, as PyTorch (and its single-tensor step) computes them.
        let bias_correction1 = 1.0 - h.beta1.powf(step);
        let bias_correction2 = 1.0 - h.beta2.powf(step);
        let weight = T::of(1.0 - h.beta1);
        let decays = h.weight_decay != 0.0;
        Coefficients {
            grad_scale: s.grad_scale.map(T::of),
            maximize: h.maximize,
            coupled_decay: (decays && !s.decoupled).then(|| T::of(h.weight_decay)),
            decoupled_factor: (decays && s.decoupled).then(|| T::of(1.0 - h.lr * h.weight_decay)),
            lerp_from_moment: T::of(0.5) > weight && weight > T::of(-0.5),
            lerp_coefficient: weight,
            beta2: T::of(h.beta2),
            sq_coefficient: T::of(1.0 - h.beta2),
            bias_correction2_sqrt: T::of(bias_correction2.sqrt()),
            eps: T::of(h.eps),
            neg_step_size: T::of(-(h.lr / bias_correction1)),
            amsgrad: h.amsgrad,
        }
    }
}

/// The element loop, for `f32` and `f64`: PyTorch's `adam_math` for a float or double
/// parameter. The options that change the formula are constants of each compiled loop (and
/// the slices are zipped, not indexed), so that the loop has no branch and vectorises.
macro_rules! adam_math {
    ($($t:ty),*) => {
        /// The step over one chunk of each array.
        trait AdamMath: Sized {
            fn adam_math(p: &mut [Self], g: &mut [Self], m: &mut [Self], v: &mut [Self], max: Option<&mut [Self]>, c: &Coefficients<Self>);
        }
        $(
            impl AdamMath for $t {
                #[inline(always)]
                fn adam_math(p: &mut [$t], g: &mut [$t], m: &mut [$t], v: &mut [$t], max: Option<&mut [$t]>, c: &Coefficients<$t>) {
                    if let Some(scale) = c.grad_scale {
                        for g in g.iter_mut() {
                            *g /= scale;
                        }
                    }
                    let mut none: [$t; 0] = [];
                    let max = match max {
                        Some(max) if c.amsgrad => max,
                        _ => &mut none[..],
                    };
                    let coupled = c.coupled_decay.is_some();
                    let decoupled = c.decoupled_factor.is_some();
                    match (coupled, decoupled, !max.is_empty()) {
                        (false, false, false) => adam_loop::<$t, false, false, false>(p, g, m, v, max, c),
                        (false, false, true) => adam_loop::<$t, false, false, true>(p, g, m, v, max, c),
                        (true, _, false) => adam_loop::<$t, true, false, false>(p, g, m, v, max, c),
                        (true, _, true) => adam_loop::<$t, true, false, true>(p, g, m, v, max, c),
                        (false, true, false) => adam_loop::<$t, false, true, false>(p, g, m, v, max, c),
                        (false, true, true) => adam_loop::<$t, false, true, true>(p, g, m, v, max, c),
                    }
                }
            }
        )*
    };
}

adam_math!(f32, f64);

/// What the loop needs of its element type.
trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const ONE: Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn sqrt(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! real {
    ($($t:ty),*) => {$(
        impl Real for $t {
            const ONE: Self = 1.0;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    )*};
}

real!(f32, f64);

/// One chunk's step with the formula's options fixed: `COUPLED` (Adam's weight decay into
/// the gradient), `DECOUPLED` (AdamW's into the parameter), `AMSGRAD` (`max` holds the running
/// maxima; empty otherwise).
#[inline(always)]
fn adam_loop<T: Real, const COUPLED: bool, const DECOUPLED: bool, const AMSGRAD: bool>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    max: &mut [T],
    c: &Coefficients<T>,
) {
    // Exact either way: a multiplication by ±1.
    let sign = if c.maximize { -T::ONE } else { T::ONE };
    let decay = c.coupled_decay.unwrap_or(T::ONE);
    let factor = c.decoupled_factor.unwrap_or(T::ONE);
    let coefficient = if c.lerp_from_moment { c.lerp_coefficient } else { c.lerp_coefficient - T::ONE };
    let step = |p: &mut T, g: T, m: &mut T, v: &mut T| -> T {
        let mut grad = g * sign;
        let mut param = *p;
        if COUPLED {
            grad = grad + param * decay;
        }
        if DECOUPLED {
            param = param * factor;
        }
        let base = if c.lerp_from_moment { *m } else { grad };
        *m = coefficient.mul_add(grad - *m, base);
        *v = *v * c.beta2 + c.sq_coefficient * grad * grad;
        *p = param;
        *v
    };
    let finish = |p: &mut T, m: T, second: T| {
        let denom = second.sqrt() / c.bias_correction2_sqrt + c.eps;
        *p = *p + c.neg_step_size * m / denom;
    };
    if AMSGRAD {
        for ((((p, &g), m), v), max) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()).zip(max.iter_mut()) {
            let second = step(p, g, m, v);
            // NaN wins, as in PyTorch's vector `maximum`.
            if !(*max > second || max.is_nan()) {
                *max = second;
            }
            finish(p, *m, *max);
        }
    } else {
        for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
            let second = step(p, g, m, v);
            finish(p, *m, second);
        }
    }
}

#[inline(always)]
fn adam_math<T: AdamMath>(
    p: &mut [T],
    g: &mut [T],
    m: &mut [T],
    v: &mut [T],
    max: Option<&mut [T]>,
    c: &Coefficients<T>,
) {
    T::adam_math(p, g, m, v, max, c)
}
