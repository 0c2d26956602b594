"""relu_backward: grad_input = grad_output where input > 0 or input is NaN, else 0 (ops.md §1.3)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op


def _numpy(x, g):
    return np.where((x > 0) | np.isnan(x), g, g.dtype.type(0))


def _reference(input, grad_output):
    import torch

    return torch.where((input > 0) | torch.isnan(input), grad_output, torch.zeros_like(grad_output))


SPEC = elementwise_op(
    name="relu_backward",
    stem="ReluBackward",
    out="grad_input",
    ins=("input", "grad_output"),
    cuda="return (input > T(0) || input != input) ? grad_output : T(0);",
    numpy=_numpy,
    dtypes=F,
    inplace=("grad_output",),
    reference=_reference,
    torch="torch.where(input > 0, grad_output, 0)",
    summary="grad_input = grad_output where input > 0 (or NaN), else 0",
)
