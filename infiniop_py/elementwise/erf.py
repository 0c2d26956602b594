"""Vectorised NumPy error function (NumPy has none and SciPy is not a dependency).

``erf(x)`` picks the precision from the array dtype: float64 gets a full-precision evaluation
(a Taylor series in Horner form for |x| < 2.5, a continued fraction for erfc beyond; error
below 1e-15); float32 (the compute type of f16/bf16/f32) gets Abramowitz & Stegun 7.1.26
evaluated in float64 (absolute error < 1.5e-7, far inside the f32 tolerances of gelu).
"""

from __future__ import annotations

import math

import numpy as np

_TAYLOR_TERMS = 48
# erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)): coefficients of x^(2n+1)
_TAYLOR = np.array(
    [(-1) ** n / (math.factorial(n) * (2 * n + 1)) * 2 / math.sqrt(math.pi) for n in range(_TAYLOR_TERMS)], dtype=np.float64
)
_CF_DEPTH = 60
_SPLIT = 2.5


def _erf64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    out = np.empty_like(x)
    small = z < _SPLIT
    if small.any():
        xs = x[small]
        x2 = xs * xs
        acc = np.full_like(xs, _TAYLOR[-1])
        for c in _TAYLOR[-2::-1]:
            acc *= x2
            acc += c
        out[small] = xs * acc
    big = ~small
    if big.any():
        zb = z[big]
        # erfc(z) = exp(-z^2)/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + 2/(z + ...)))))
        with np.errstate(all="ignore"):
            k = zb.copy()
            for j in range(_CF_DEPTH, 0, -1):
                k = zb + (j / 2.0) / k
            erfc = np.exp(-zb * zb) / math.sqrt(math.pi) / k
        erfc = np.where(np.isinf(zb), 0.0, erfc)
        out[big] = np.copysign(1.0 - erfc, x[big])
    return out  # NaN lands in `big` (NaN < 2.5 is false) and stays NaN


_AS = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf32(x: np.ndarray) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    z = np.abs(x64)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (_AS[0] + t * (_AS[1] + t * (_AS[2] + t * (_AS[3] + t * _AS[4]))))
    with np.errstate(all="ignore"):
        r = 1.0 - poly * np.exp(-z * z)
    return np.copysign(r, x64).astype(np.float32)


def erf(x: np.ndarray) -> np.ndarray:
    """erf of a float32 or float64 array (result in the same dtype)."""
    x = np.asarray(x)
    return _erf64(x) if x.dtype == np.float64 else _erf32(x)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
