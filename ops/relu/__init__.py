"""relu: output = max(x, 0), NaN stays NaN (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import SI, F, H
from infiniop_py.elementwise import elementwise_op, make_cpu


def _numpy(x):
    return np.maximum(x, x.dtype.type(0))


SPEC = elementwise_op(
    name="relu",
    stem="Relu",
    out="output",
    ins=("input",),
    cuda="input < T(0) ? T(0) : input",  # NaN < 0 is false: NaN passes through
    numpy=_numpy,
    dtypes=F | SI,
    reference=lambda input: torch_relu(input),
    torch="torch.relu(input)",
    summary="output = max(x, 0); NaN -> NaN",
    tensor_aliases={"x": "input", "y": "output"},
)


def torch_relu(x):
    import torch

    return torch.relu(x)


def _cpu(info):
    """f32/f64/int: one ufunc straight into the output (no temporary); halves via the framework."""
    generic = make_cpu(_numpy, ())(info)
    if info.tensors["output"].dtype in H:
        return generic

    def run(views, ws, rt):
        dst = views["output"]
        if dst.size:
            np.maximum(views["input"], dst.dtype.type(0), out=dst)  # NaN propagates

    return run


SPEC.cpu = _cpu
