"""hardswish: output = x*min(max(x+3, 0), 6)/6 (ops.md §1.2)."""

import numpy as np

from infiniop_py.elementwise import writes_into
from infiniop_py.elementwise.declare import unary_op


@writes_into
def _numpy(out, x):
    # x * min(max(x + 3, 0), 6) / 6, the division as a multiplication by 1/6 (as torch and the
    # NVIDIA kernel; within 1 ulp)
    np.add(x, x.dtype.type(3), out=out)
    np.clip(out, x.dtype.type(0), x.dtype.type(6), out=out)
    np.multiply(out, x, out=out)
    np.multiply(out, x.dtype.type(1) / x.dtype.type(6), out=out)


SPEC = unary_op(
    "hardswish",
    stem="HardSwish",
    torch_fn="nn.functional.hardswish",
    # f32/half compute multiplies by 1/6 (as torch; <= 1 ulp from the division), f64 divides
    cuda="T v = input + T(3); v = v < T(0) ? T(0) : v; v = v > T(6) ? T(6) : v; "
    "if constexpr (sizeof(T) == 8) { return input * v / T(6); } else { return input * v * T(1.0 / 6); }",
    numpy=_numpy,
    summary="output = x*min(max(x+3, 0), 6)/6",
)
