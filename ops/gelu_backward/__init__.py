"""gelu_backward: gradient of GELU, exact (erf) or tanh form (ops.md §1.3)."""

import numpy as np

from infiniop_py.dtypes import H
from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.cuda import dense_by_width
from infiniop_py.elementwise.declare import backward_op
from infiniop_py.elementwise.erf import INV_SQRT2, INV_SQRT_2PI, SQRT_2_OVER_PI, erf
from infiniop_py.elementwise.gelu import APPROXIMATE, gelu_backward_half_body
from infiniop_py.halfconv import copy_into

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
    if choices["approximate"] == "tanh":
        return float_expr(_TANH_BODY)
    # f16/bf16 outputs: Phi(x) + x phi(x) with one exp shared by both (infiniop_py/elementwise/gelu.py)
    return gelu_backward_half_body() if dtype in H else float_expr(_ERF_BODY)


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


SPEC = backward_op(
    "gelu_backward",
    cuda=float_expr(_BODY),
    cuda_variant=_variant,
    numpy=_numpy,
    attrs=(APPROXIMATE,),
    reference=_reference,
    torch="torch.ops.aten.gelu_backward(grad_output, input, approximate=approximate)",
    summary='grad_input = grad_output * GELU\'(input), approximate "none" or "tanh"',
    # NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
    dense_rules=dense_by_width("gelu_backward", f32="ex4", half="ex2w", f64="pipe"),
)


def _cpu(info):
    """f32/f16/bf16, erf form: g (Phi + x phi) with Phi and exp(-x^2/2) from elementwise/gelu.py,
    in f32 with in-place ufuncs on chunks; f64 and the tanh form: the framework."""
    from infiniop_py.dtypes import DType
    from infiniop_py.elementwise import make_cpu, parallel_chunks
    from infiniop_py.elementwise.gelu import phi_parts, to_f32

    generic = make_cpu(_numpy, ("approximate",))(info)
    if info.attrs["approximate"] != "none" or info.tensors["grad_input"].dtype not in H | {DType.F32}:
        return generic
    f32 = np.float32

    def compute(dst, x, g):
        xf = to_f32(x)
        cdf, e, tmp = (np.empty(x.shape, f32) for _ in range(3))
        with np.errstate(all="ignore"):
            phi_parts(xf, cdf, e, tmp)
            np.multiply(e, f32(INV_SQRT_2PI), out=e)
            np.multiply(e, xf, out=e)
            np.add(cdf, e, out=cdf)
            if dst.dtype == f32:
                np.multiply(cdf, g, out=dst)
            else:
                np.multiply(cdf, to_f32(g), out=cdf)
                copy_into(dst, cdf)

    def run(views, ws, rt):
        dst = views["grad_input"]
        if dst.size:
            parallel_chunks(compute, dst, [views["input"], views["grad_output"]])

    return run


SPEC.cpu = _cpu
