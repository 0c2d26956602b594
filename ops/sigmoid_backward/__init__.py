"""sigmoid_backward: grad_input = grad_output * s * (1 - s), s = sigmoid(input) (ops.md §1.3)."""

import numpy as np

from infiniop_py.elementwise import sigmoid_into, writes_into
from infiniop_py.elementwise.declare import backward_op


@writes_into
def _numpy(out, x, g):
    sigmoid_into(out, x)  # s
    t = np.subtract(out.dtype.type(1), out)  # 1 - s
    np.multiply(out, g, out=out)
    np.multiply(out, t, out=out)


def _reference(input, grad_output):
    import torch

    s = torch.sigmoid(input)
    return grad_output * s * (1 - s)


SPEC = backward_op(
    "sigmoid_backward",
    # s: for f32/half compute __frcp_rn, the same bits as the IEEE division, cheaper
    cuda="T sg; if constexpr (sizeof(T) == 8) { sg = T(1) / (T(1) + exp(-input)); } else { sg = __frcp_rn(1.0f + expf(-input)); } "
    "return grad_output * sg * (T(1) - sg);",
    numpy=_numpy,
    reference=_reference,
    torch="torch.ops.aten.sigmoid_backward(grad_output, torch.sigmoid(input))",
    summary="grad_input = grad_output * s * (1 - s), s = sigmoid(input)",
)
