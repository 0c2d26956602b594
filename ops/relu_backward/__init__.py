"""relu_backward: grad_input = grad_output where input > 0 or input is NaN, else 0 (ops.md §1.3)."""

import numpy as np

from infiniop_py.elementwise import UINT_OF, writes_into
from infiniop_py.elementwise.declare import backward_op


@writes_into
def _numpy(out, x, g):
    # g where x > 0 or x is NaN, i.e. where not x <= 0; elsewhere +0 (the bits of g masked)
    u = UINT_OF[out.dtype.itemsize]
    keep = np.less_equal(x, x.dtype.type(0), out=np.empty(out.shape, bool)).view(np.uint8).astype(u)
    np.subtract(keep, u(1), out=keep)  # 0 where x <= 0, all ones elsewhere
    np.bitwise_and(np.asarray(g, out.dtype).view(u), keep, out=out.view(u))


def _reference(input, grad_output):
    import torch

    return torch.where((input > 0) | torch.isnan(input), grad_output, torch.zeros_like(grad_output))


SPEC = backward_op(
    "relu_backward",
    cuda="return (input > T(0) || input != input) ? grad_output : T(0);",
    numpy=_numpy,
    reference=_reference,
    torch="torch.where(input > 0, grad_output, 0)",
    summary="grad_input = grad_output where input > 0 (or NaN), else 0",
)
