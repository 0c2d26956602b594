"""swiglu: c = a * b * sigmoid(b) (a: up projection, b: gate) (ops.md §1.4)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import writes_into
from infiniop_py.elementwise.declare import binary_op


@writes_into
def _numpy(out, a, b):
    """a * b * sigmoid(b) = a * b / (1 + exp(-b)) in place."""
    np.negative(b, out=out)
    np.exp(out, out=out)
    np.add(out, out.dtype.type(1), out=out)
    np.divide(b, out, out=out)
    np.multiply(out, a, out=out)


def _reference(a, b):
    import torch

    return a * torch.nn.functional.silu(b)


SPEC = binary_op(
    "swiglu",
    stem="SwiGLU",
    # f32/half compute: a * b * (correctly rounded 1/(1 + e^-b)), no IEEE division; f64 divides
    cuda="if constexpr (sizeof(T) == 8) { return a * b / (T(1) + exp(-b)); } else { return a * b * __frcp_rn(1.0f + expf(-b)); }",
    numpy=_numpy,
    dtypes=F,
    reference=_reference,
    torch="a * F.silu(b)",
    summary="c = a * b * sigmoid(b)",
)
