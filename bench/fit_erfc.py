"""The polynomial coefficients of kernels/src/cpu/vector_math.rs's float32 error functions.

Least-squares fits of minimal relative error (Lawson's reweighting) on Chebyshev nodes, against
mpmath at 30 digits:

- ERF_SMALL: erf(x) / x for |x| < 1, in x^2 (degree 6; Cephes' erff has the same to 1e-9);
- ERFC_NEAR: e^(a^2) erfc(a) for 0.5 <= a < 2, in a - 1.25 (degree 9);
- ERFC_FAR: a e^(a^2) erfc(a) for 2 <= a <= 10, in 1 / a^2 (degree 9).

    pip install numpy mpmath && python bench/fit_erfc.py
"""
import mpmath
import numpy as np

mpmath.mp.dps = 30


def fit(f, lo, hi, degree, nodes=1500, rounds=60):
    """Coefficients c[0..degree] of the polynomial closest to f on [lo, hi] in relative error,
    and that error."""
    x = (np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes) + 1) / 2 * (hi - lo) + lo
    y = np.array([f(v) for v in x])
    relative = 1 / np.abs(y)
    vandermonde = np.vander(x, degree + 1, increasing=True)
    weights = np.ones_like(x)
    for _ in range(rounds):
        w = relative * np.sqrt(weights)
        c, *_ = np.linalg.lstsq(vandermonde * w[:, None], y * w, rcond=None)
        error = np.abs((vandermonde @ c - y) * relative)
        weights = weights * error
        weights /= weights.sum()
    return c, error.max()


def scaled_erfc(a):
    a = mpmath.mpf(a)
    return float(mpmath.exp(a * a) * mpmath.erfc(a))


def erf_over_x(z):
    return float(mpmath.erf(mpmath.sqrt(z)) / mpmath.sqrt(z)) if z > 0 else float(2 / mpmath.sqrt(mpmath.pi))


for name, f, lo, hi, degree in [
    ("ERF_SMALL", erf_over_x, 0.0, 1.0, 6),
    ("ERFC_NEAR", lambda t: scaled_erfc(t + 1.25), -0.75, 0.75, 9),
    ("ERFC_FAR", lambda u: scaled_erfc(1 / np.sqrt(u)) / np.sqrt(u), 0.01, 0.25, 9),
]:
    c, error = fit(f, lo, hi, degree)
    print(f"{name} (relative error {error:.1e}): [{', '.join(f'{float(v):.9e}' for v in c)}]")
