"""sigmoid_backward: grad_input = grad_output * s * (1 - s), s = sigmoid(input) (ops.md §1.3)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, sigmoid_into, writes_into


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


SPEC = elementwise_op(
    name="sigmoid_backward",
    stem="SigmoidBackward",
    out="grad_input",
    ins=("input", "grad_output"),
    # s: for f32/half compute __frcp_rn, the same bits as the IEEE division, cheaper
    cuda="T sg; if constexpr (sizeof(T) == 8) { sg = T(1) / (T(1) + exp(-input)); } else { sg = __frcp_rn(1.0f + expf(-input)); } "
    "return grad_output * sg * (T(1) - sg);",
    numpy=_numpy,
    dtypes=F,
    inplace=("grad_output",),
    reference=_reference,
    torch="torch.ops.aten.sigmoid_backward(grad_output, torch.sigmoid(input))",
    summary="grad_input = grad_output * s * (1 - s), s = sigmoid(input)",
)
