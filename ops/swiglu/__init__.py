"""swiglu: c = a * b * sigmoid(b) (a: up projection, b: gate) (ops.md §1.4)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr


def _reference(a, b):
    import torch

    return a * torch.nn.functional.silu(b)


SPEC = elementwise_op(
    name="swiglu",
    stem="SwiGLU",
    out="c",
    ins=("a", "b"),
    cuda=float_expr("a * b / (T(1) + {exp}(-b))"),
    numpy=lambda a, b: a * b / (1 + np.exp(-b)),
    dtypes=F,
    reference=_reference,
    torch="a * F.silu(b)",
    summary="c = a * b * sigmoid(b)",
)
