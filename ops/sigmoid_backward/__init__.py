"""sigmoid_backward: grad_input = grad_output * s * (1 - s), s = sigmoid(input) (ops.md §1.3)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr


def _numpy(x, g):
    s = 1 / (1 + np.exp(-x))
    return g * s * (1 - s)


def _reference(input, grad_output):
    import torch

    s = torch.sigmoid(input)
    return grad_output * s * (1 - s)


SPEC = elementwise_op(
    name="sigmoid_backward",
    stem="SigmoidBackward",
    out="grad_input",
    ins=("input", "grad_output"),
    cuda=float_expr("const T s = T(1) / (T(1) + {exp}(-input)); return grad_output * s * (T(1) - s);"),
    numpy=_numpy,
    dtypes=F,
    inplace=("grad_output",),
    reference=_reference,
    torch="torch.ops.aten.sigmoid_backward(grad_output, torch.sigmoid(input))",
    summary="grad_input = grad_output * s * (1 - s), s = sigmoid(input)",
)
