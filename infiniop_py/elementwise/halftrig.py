"""Cheaper sin/cos bodies for f16/bf16 outputs (compute type f32, result rounded to 16 bits).

The argument is reduced to r = x - k 2pi in [-pi, pi] (k = rint(x / 2pi), 2pi split in two f32
parts, FMAs), then sin r = r + r^3 P(r^2) and cos r = 1 + r^2 Q(r^2) with degree-5 polynomials
fitted in float64 and rounded to f32 (max abs error 3.6e-7 / 2.2e-7 on [-pi, pi]): about 12
instructions instead of the ~30 of the accurate sinf/cosf (3-part reduction, two polynomials,
quadrant selection, Payne-Hanek slow path).

Checked in f32 emulation against float64 over every finite f16 and every bf16 value with
|x| < 1e5 (tools: docs/perf/pointwise.md, "Half-precision sin/cos"): after rounding to the half
type the result equals the f32-accurate-then-rounded value except for 60 of 63488 f16 inputs
(1 ulp; 6 inputs at multiples of pi such as 355 and 1775: up to 5 ulp, absolute error <= 3e-7)
and 2 of 36744 bf16 inputs (1 ulp). bf16 inputs with |x| >= 1e5 (f16 has none) take the
accurate cosf/sinf. f32 and f64 outputs keep the accurate functions.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType

SIN_COEF = (-0.1666666567325592, 0.008333307690918446, -0.00019839958986267447, 2.752484078882844e-06,
            -2.4632520023715188e-08, 1.3297553336233392e-10)  # fmt: skip
COS_COEF = (-0.4999999403953552, 0.04166652634739876, -0.0013887948589399457, 2.4772465621936135e-05,
            -2.7100784905087494e-07, 1.7314926159528454e-09)  # fmt: skip
TWO_PI_HI = float(np.float32(2 * np.pi))
TWO_PI_LO = float(np.float32(2 * np.pi - TWO_PI_HI))
INV_TWO_PI = float(np.float32(1 / (2 * np.pi)))


def lit(v: float) -> str:
    """An exact C++ f32 literal (hex float) of ``v`` rounded to f32."""
    return float(np.float32(v)).hex() + "f"


def _horner(coef) -> str:
    s = f"float p = {lit(coef[-1])}; "
    for c in coef[-2::-1]:
        s += f"p = fmaf(p, z, {lit(c)}); "
    return s


def _reduce() -> str:
    return (
        f"const float k = rintf(input * {lit(INV_TWO_PI)}); "
        f"float r = fmaf(-k, {lit(TWO_PI_HI)}, input); r = fmaf(-k, {lit(TWO_PI_LO)}, r); const float z = r * r; "
    )


def half_sin(dtype: DType) -> str:
    guard = "if (fabsf(input) >= 1e5f) return sinf(input); " if dtype is DType.BF16 else ""
    return guard + _reduce() + _horner(SIN_COEF) + "return fmaf(z * r, p, r);"


def half_cos(dtype: DType) -> str:
    guard = "if (fabsf(input) >= 1e5f) return cosf(input); " if dtype is DType.BF16 else ""
    return guard + _reduce() + _horner(COS_COEF) + "return fmaf(z, p, 1.0f);"
