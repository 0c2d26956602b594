"""gelu_backward: gradient of GELU, exact (erf) or tanh form (ops.md §1.3)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr
from infiniop_py.spec import Attr

from ..gelu.npmath import INV_SQRT2, INV_SQRT_2PI, SQRT_2_OVER_PI, erf

# none: g (Phi(x) + x phi(x)); tanh: t = tanh(k (x + 0.044715 x^3)),
# g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 0.134145 x^2)), k = sqrt(2/pi)
_BODY = (
    "if (approximate != T(0)) {{ "
    "const T t = {tanh}(T(0.79788456080286535588) * (input + T(0.044715) * input * input * input)); "
    "return grad_output * (T(0.5) * (T(1) + t) + T(0.5) * input * (T(1) - t * t) * T(0.79788456080286535588) "
    "* (T(1) + T(0.134145) * input * input)); }} "
    "const T cdf = T(0.5) * (T(1) + {erf}(input * T(0.70710678118654752440))); "
    "const T pdf = {exp}(T(-0.5) * input * input) * T(0.39894228040143267794); "
    "return grad_output * (cdf + input * pdf);"
)


_TANH_BODY = (
    "const T t = {tanh}(T(0.79788456080286535588) * (input + T(0.044715) * input * input * input)); "
    "return grad_output * (T(0.5) * (T(1) + t) + T(0.5) * input * (T(1) - t * t) * T(0.79788456080286535588) "
    "* (T(1) + T(0.134145) * input * input));"
)
_ERF_BODY = (
    "const T cdf = T(0.5) * (T(1) + {erf}(input * T(0.70710678118654752440))); "
    "const T pdf = {exp}(T(-0.5) * input * input) * T(0.39894228040143267794); "
    "return grad_output * (cdf + input * pdf);"
)


def _variant(dtype, choices) -> str:
    """One form per descriptor, chosen at create (no run-time branch, fewer registers)."""
    return float_expr(_TANH_BODY if choices["approximate"] == "tanh" else _ERF_BODY)


def _numpy(x, g, approximate="none"):
    t = x.dtype.type
    if approximate == "tanh":
        th = np.tanh(t(SQRT_2_OVER_PI) * (x + t(0.044715) * x * x * x))
        return g * (t(0.5) * (1 + th) + t(0.5) * x * (1 - th * th) * t(SQRT_2_OVER_PI) * (1 + t(0.134145) * x * x))
    cdf = t(0.5) * (1 + erf(x * t(INV_SQRT2)))
    pdf = np.exp(t(-0.5) * x * x) * t(INV_SQRT_2PI)
    return g * (cdf + x * pdf)


def _reference(input, grad_output, approximate="none"):
    import math

    import torch

    x, g = input, grad_output
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = torch.tanh(k * (x + 0.044715 * x**3))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 0.134145 * x * x))
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return g * (cdf + x * pdf)


SPEC = elementwise_op(
    name="gelu_backward",
    stem="GeluBackward",
    out="grad_input",
    ins=("input", "grad_output"),
    cuda=float_expr(_BODY),
    cuda_variant=_variant,
    numpy=_numpy,
    attrs=(Attr("approximate", "str", "none", choices=("none", "tanh"), doc='"none" (erf) or "tanh"'),),
    dtypes=F,
    inplace=("grad_output",),
    reference=_reference,
    torch="torch.ops.aten.gelu_backward(grad_output, input, approximate=approximate)",
    summary='grad_input = grad_output * GELU\'(input), approximate "none" or "tanh"',
)
