"""leaky_relu: output = x if x >= 0 else negative_slope * x (ops.md §1.2)."""

import numpy as np

from infiniop_py.elementwise import writes_into
from infiniop_py.elementwise.declare import unary_op
from infiniop_py.spec import Attr


@writes_into
def _numpy(out, x, slope):
    # max(x, 0) + slope * min(x, 0), branch-free: exactly x or slope * x (the other term is
    # +-0); NaN and +-inf come through as torch's x >= 0 ? x : slope * x gives them. A slope
    # that is not finite in x's dtype (inf, NaN, 1e39 in f32) would make that +-0 term NaN
    # (0 * inf): then a select, so that x >= 0 still passes through unchanged.
    zero, inf = x.dtype.type(0), x.dtype.type(np.inf)
    with np.errstate(over="ignore"):
        s = x.dtype.type(slope)
    if not np.isfinite(s):
        with np.errstate(invalid="ignore", over="ignore"):
            np.copyto(out, np.where(x >= zero, x, x * s))
        return
    t = np.clip(x, -inf, zero, out=np.empty(out.shape, out.dtype))  # np.clip: SIMD, unlike minimum
    np.multiply(t, s, out=t)
    np.clip(x, zero, inf, out=out)
    np.add(out, t, out=out)


def _reference(input, negative_slope=0.01):
    import torch

    return torch.nn.functional.leaky_relu(input, negative_slope)


SPEC = unary_op(
    "leaky_relu",
    cuda="input >= T(0) ? input : input * negative_slope",
    numpy=_numpy,
    attrs=(Attr("negative_slope", "float", 0.01, doc="slope for x < 0"),),
    reference=_reference,
    torch="F.leaky_relu(input, negative_slope)",
    summary="output = x if x >= 0 else negative_slope * x",
    gguf_names=("leakyrelu",),
)
