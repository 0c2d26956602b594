"""relu: output = max(x, 0), NaN stays NaN (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import SI, F
from infiniop_py.elementwise import elementwise_op, writes_into


@writes_into
def _numpy(out, x):
    if x.dtype.kind == "f":  # np.clip with two finite-typed bounds takes NumPy's SIMD loop (~4x maximum)
        np.clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=out)  # NaN stays NaN
    else:
        np.maximum(x, x.dtype.type(0), out=out)


SPEC = elementwise_op(
    name="relu",
    stem="Relu",
    out="output",
    ins=("input",),
    cuda="input < T(0) ? T(0) : input",  # NaN < 0 is false: NaN passes through
    numpy=_numpy,
    cpu_kernel="relu",
    dtypes=F | SI,
    reference=lambda input: torch_relu(input),
    torch="torch.relu(input)",
    summary="output = max(x, 0); NaN -> NaN",
    tensor_aliases={"x": "input", "y": "output"},
)


def torch_relu(x):
    import torch

    return torch.relu(x)
