"""swiglu: c = a * b * sigmoid(b) (a: up projection, b: gate) (ops.md §1.4)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op


def _reference(a, b):
    import torch

    return a * torch.nn.functional.silu(b)


SPEC = elementwise_op(
    name="swiglu",
    stem="SwiGLU",
    out="c",
    ins=("a", "b"),
    # f32/half compute: a * b * (correctly rounded 1/(1 + e^-b)), no IEEE division; f64 divides
    cuda="if constexpr (sizeof(T) == 8) { return a * b / (T(1) + exp(-b)); } else { return a * b * __frcp_rn(1.0f + expf(-b)); }",
    numpy=lambda a, b: a * b / (1 + np.exp(-b)),
    dtypes=F,
    reference=_reference,
    torch="a * F.silu(b)",
    summary="c = a * b * sigmoid(b)",
)
