"""tanh for f16 outputs in f32 compute, without tanhf.

    |x| >= 0.55:  tanh x = sign(x) (1 - 2 / (1 + exp(2|x|)))   (__expf, rcp.approx; the result is
                  >= 0.5, so 1 - 2r does not cancel; the sign is applied last, so tanh(-0) = -0)
    |x| <  0.55:  tanh x = x + x^3 P(x^2),  P of degree 3

``fit`` computes P in float64 (least squares on the relative error of tanh at 20001 points of
y = x^2 in [0, 0.3025], reweighted toward minimax, Lawson): maximum relative error 3.9e-8.
``emulate`` models the CUDA form in f32 NumPy arithmetic (fma in float64 then rounded; the
exponent argument 2|x| log2(e) rounded to f32, ex2 perturbed by +-2 ulp and rcp by +-1 ulp):
for every finite f16 input and every perturbation it gives the float64 tanh correctly rounded
to f16 (0 inputs differ; test/test_pointwise_tanh.py checks this here and on the device).
bf16 outputs keep the MUFU tanh.approx and f32/f64 keep tanhf/tanh.
"""

from __future__ import annotations

import numpy as np

SPLIT = 0.55
DEGREE = 3
# fit() rounded to f32 (regenerate with: [float(np.float32(c)) for c in fit()[0]])
P_COEF = (-0.33332958817481995, 0.13320939242839813, -0.05268395319581032, 0.016458380967378616)
LOG2E = 1.4426950408889634


def fit(split: float = SPLIT, degree: int = DEGREE, iters: int = 300):
    """(coefficients of P, max relative error of x + x^3 P(x^2)) in float64."""
    y = np.linspace(1e-8, split * split * 1.0001, 20001)
    x = np.sqrt(y)
    target = (np.tanh(x) / x - 1.0) / y
    v = np.vander(y, degree + 1, increasing=True)
    wt = np.ones_like(y)
    c = None
    for _ in range(iters):
        w = y * np.sqrt(wt)
        c = np.linalg.lstsq(v * w[:, None], target * w, rcond=None)[0]
        e = np.abs((v @ c - target) * y)
        wt = wt * e
        wt /= wt.sum()
    rel = np.abs(x + x**3 * (v @ c) - np.tanh(x)) / np.tanh(x)
    return c, float(rel.max())


def cuda_expr() -> str:
    c = [f"{float(np.float32(v))!r}f" for v in P_COEF]
    return (
        "const float a_ = fabsf(input); "
        "float r_; "
        'asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r_) : "f"(1.0f + __expf(2.0f * a_))); '
        "const float big_ = fmaf(-2.0f, r_, 1.0f); "
        "const float y_ = input * input; "
        f"const float p_ = fmaf(fmaf(fmaf({c[3]}, y_, {c[2]}), y_, {c[1]}), y_, {c[0]}); "
        f"return copysignf(a_ >= {SPLIT}f ? big_ : fmaf(input * y_, p_, input), input);"
    )


def _fma(a, b, c):
    return (a.astype(np.float64) * b + c).astype(np.float32)


def emulate(x: np.ndarray, ex2_ulp: int = 0, rcp_ulp: int = 0) -> np.ndarray:
    """The CUDA form in f32 NumPy arithmetic (x: float32), MUFU results perturbed by whole ulps."""
    f32 = np.float32
    x = x.astype(f32)
    a = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        t = (f32(2) * a * f32(LOG2E)).astype(f32)
        e = (np.exp2(t.astype(np.float64)) * (1 + ex2_ulp * 2.0**-23)).astype(f32)
        d = (e + f32(1)).astype(f32)
        r = (1.0 / d.astype(np.float64) * (1 + rcp_ulp * 2.0**-23)).astype(f32)
        big = _fma(np.full_like(r, -2), r, np.ones_like(r))
        y = (x * x).astype(f32)
        p = np.full_like(x, f32(P_COEF[-1]))
        for k in range(DEGREE - 1, -1, -1):
            p = _fma(p, y, np.full_like(x, f32(P_COEF[k])))
        small = _fma((x * y).astype(f32), p, x)
    return np.copysign(np.where(a >= f32(SPLIT), big, small), x)
