"""GELU forms shared by gelu, gelutanh and gelu_backward: the kernel bodies and NumPy forms
(``gelu_variant``, ``gelu_numpy``) and the normal CDF Phi(x) without cancellation (f32 compute).

GELU(x) = 0.5 x (1 + erf(x / sqrt 2)); tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

Phi:

    Phi(x) = 0.5 erfc(-x / sqrt 2),  erfc(z) = t exp(-z^2) Q(t),  t = 1 / (1 + P z),  z = |x| / sqrt 2 >= 0

so Phi(-|x|) = h = t * exp(-x^2 / 2) * Q(t) / 2 has a *relative* error bound for every x (no
``1 + erf`` that cancels below x = -3), and Phi(x) = h for x < 0, 1 - h for x >= 0. exp(-x^2/2)
is also the normal density up to 1/sqrt(2 pi), so gelu_backward (Phi + x phi) needs one exp.
Q(t) = erfc(z) exp(z^2) / t is smooth on t in (0, 1] (1 at t = 1, P / sqrt(pi) as t -> 0); ``fit``
computes its degree-8 polynomial in float64 (least squares on the relative error at Chebyshev
nodes, reweighted toward minimax): maximum relative error 1.26e-7 on t in [1e-4, 1], i.e. every
z. ``Q_HALF`` holds its coefficients times 1/2 (the 0.5 of Phi folded in), rounded to f32.

Accuracy of the CUDA form below (f32 arithmetic with ``rcp.approx`` and ``ex2.approx``, modelled
in an f32 NumPy emulation with the reciprocal perturbed by +-1 ulp and ex2 by +-2 ulp, against the
float64 value correctly rounded to the half type; see test/test_pointwise.py): gelu is within
1 ulp for every finite f16 and every finite bf16 input (the nominal model rounds correctly
except 10 f16 / 64 bf16 inputs, 1 ulp). It is used for f16/bf16 outputs only: in f32 the
rounding of x^2/2 alone makes exp(-x^2/2) err by |x^2/2| * 2^-23 (~9 ulp at x = -3), so f32
keeps erff.
"""

from __future__ import annotations

import math

import numpy as np

from .. import halfconv
from ..dtypes import H
from ..spec import Attr
from . import float_expr
from .erf import INV_SQRT2, SQRT_2_OVER_PI, erf

P = 0.4
DEGREE = 8
# fit(P, DEGREE) * 0.5, rounded to f32 (regenerate with: [float(np.float32(0.5 * c)) for c in fit()[0]])
Q_HALF = (
    0.11283793300390244,
    0.11283478140830994,
    0.10392159968614578,
    0.08426924049854279,
    0.07072215527296066,
    -0.002817064058035612,
    0.08455818146467209,
    -0.09146019071340561,
    0.02513342723250389,
)
P_OVER_SQRT2 = P / math.sqrt(2.0)
NEG_HALF_LOG2E = -0.5 / math.log(2.0)  # exp(-x^2/2) = 2^(x^2 * NEG_HALF_LOG2E)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def q_exact(t: np.ndarray, p: float = P) -> np.ndarray:
    """Q(t) = erfc(z) exp(z^2) / t in float64 (asymptotic series for z >= 25)."""
    out = np.empty(len(t))
    for i, tt in enumerate(t):
        z = (1.0 / tt - 1.0) / p
        if z < 25.0:
            out[i] = math.erfc(z) * math.exp(z * z) / tt
        else:
            w = 1.0 / (2.0 * z * z)
            s = 1.0 - w + 3.0 * w * w - 15.0 * w**3 + 105.0 * w**4 - 945.0 * w**5
            out[i] = s / (z * math.sqrt(math.pi)) / tt
    return out


def fit(p: float = P, degree: int = DEGREE, tmin: float = 1e-4, nodes: int = 400):
    """(coefficients of Q in t, lowest first; max relative error on a dense grid of [tmin, 1])."""
    u = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    t = tmin + (1.0 - tmin) * (u + 1.0) / 2.0
    q = q_exact(t, p)
    vander = np.vander(t, degree + 1, increasing=True)
    w = 1.0 / q
    for _ in range(30):
        c = np.linalg.lstsq(vander * w[:, None], q * w, rcond=None)[0]
        r = np.abs(vander @ c - q) / q
        w = w * np.sqrt(r / r.max() + 1e-3)
    grid = np.linspace(tmin, 1.0, 20001)
    qq = q_exact(grid, p)
    return c, float(np.max(np.abs(np.polynomial.polynomial.polyval(grid, c) - qq) / qq))


def _f(v: float) -> str:
    return f"{float(np.float32(v))!r}f"


def cuda_prologue(x: str) -> str:
    """C++ statements defining ``float e_`` = exp(-x^2/2) and ``float cdf_`` = Phi(x) for a float ``x``."""
    horner = _f(Q_HALF[-1])
    for c in Q_HALF[-2::-1]:
        horner = f"fmaf({horner}, t_, {_f(c)})"
    return (
        f"float t_, e_; "
        f'asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t_) : "f"(fmaf({_f(P_OVER_SQRT2)}, fabsf({x}), 1.0f))); '
        f'asm("ex2.approx.f32 %0, %1;" : "=f"(e_) : "f"(({x} * {x}) * {_f(NEG_HALF_LOG2E)})); '
        f"const float h_ = (t_ * e_) * {horner}; "
        f"const float cdf_ = {x} < 0.0f ? h_ : 1.0f - h_; "
    )


def gelu_half_body() -> str:
    return cuda_prologue("input") + "return input * cdf_;"


def gelu_backward_half_body() -> str:
    return cuda_prologue("input") + f"return grad_output * fmaf(input, e_ * {_f(INV_SQRT_2PI)}, cdf_);"


# ---------------------------------------------------------------------------------------------
# NumPy (CPU): the same formula in f32 with in-place ufuncs (exact exp instead of ex2.approx)
# ---------------------------------------------------------------------------------------------
_QH32 = np.array(Q_HALF, dtype=np.float32)


def phi_parts(x: np.ndarray, cdf: np.ndarray, e: np.ndarray, tmp: np.ndarray) -> None:
    """f32 arrays of x's shape: ``cdf`` = Phi(x), ``e`` = exp(-x^2/2); ``tmp`` is scratch."""
    f = np.float32
    np.abs(x, out=tmp)
    np.multiply(tmp, f(P_OVER_SQRT2), out=tmp)
    np.add(tmp, f(1), out=tmp)
    np.reciprocal(tmp, out=tmp)  # t
    cdf.fill(_QH32[-1])
    for c in _QH32[-2::-1]:
        np.multiply(cdf, tmp, out=cdf)
        np.add(cdf, c, out=cdf)
    np.multiply(cdf, tmp, out=cdf)  # t Q(t) / 2
    np.multiply(x, x, out=e)
    np.multiply(e, f(-0.5), out=e)
    np.exp(e, out=e)
    np.multiply(cdf, e, out=cdf)  # h = Phi(-|x|)
    # Phi = step - copysign(h, x), step = 0.5 + copysign(0.5, x): h for x < 0 (and -0), 1 - h for
    # x >= 0, NaN stays NaN; arithmetic instead of a masked copy (7x slower in NumPy)
    np.copysign(cdf, x, out=cdf)
    np.copysign(f(0.5), x, out=tmp)
    np.add(tmp, f(0.5), out=tmp)
    np.subtract(tmp, cdf, out=cdf)


def to_f32(x: np.ndarray) -> np.ndarray:
    """f32 values of an f32/f16/bf16 array (infiniop_py.halfconv.to_f32)."""
    return halfconv.to_f32(x)


# ---------------------------------------------------------------------------------------------
# GELU forms
# ---------------------------------------------------------------------------------------------
# gelu's and gelu_backward's attribute; it reaches the kernels as its index in choices
APPROXIMATE = Attr("approximate", "str", "none", choices=("none", "tanh"), doc='"none" (erf) or "tanh"')
ERF_FORM = "T(0.5) * input * (T(1) + {erf}(input * T(0.70710678118654752440)))"
TANH_FORM = "T(0.5) * input * (T(1) + {tanh}(T(0.79788456080286535588) * (input + T(0.044715) * input * input * input)))"
# f16/bf16 outputs: 0.5 x (1 + tanh u) = x sigmoid(2u) exactly; __expf (relative error <= (2 + 1.16|2u|) 2^-24)
# and a correctly rounded reciprocal, no cancellation anywhere (tanh itself is never formed)
HALF_TANH_FORM = (
    "const float u = 0.79788456080286535588f * (input + 0.044715f * input * input * input); "
    "return input * __frcp_rn(1.0f + __expf(-2.0f * u));"
)


def gelu_variant(dtype, choices) -> str:
    """The kernel body for an output dtype and ``approximate`` (fixed at create: no run-time branch)."""
    if choices.get("approximate", "tanh") == "tanh":
        return HALF_TANH_FORM if dtype in H else float_expr(TANH_FORM)
    # f16/bf16 outputs: Phi from the cancellation-free erfc form above, ~20 f32 instructions and
    # two MUFU ops instead of erff's two polynomial branches
    return gelu_half_body() if dtype in H else float_expr(ERF_FORM)


def gelu_numpy(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(x.dtype.type(SQRT_2_OVER_PI) * (x + x.dtype.type(0.044715) * x * x * x)))
    return 0.5 * x * (1 + erf(x * x.dtype.type(INV_SQRT2)))
