"""leaky_relu: output = x if x >= 0 else negative_slope * x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op
from infiniop_py.spec import Attr


def _numpy(x, slope):
    return np.where(x >= 0, x, x * x.dtype.type(slope))  # NaN: slope * NaN = NaN


def _reference(input, negative_slope=0.01):
    import torch

    return torch.nn.functional.leaky_relu(input, negative_slope)


SPEC = elementwise_op(
    name="leaky_relu",
    stem="LeakyRelu",
    out="output",
    ins=("input",),
    cuda="input >= T(0) ? input : input * negative_slope",
    numpy=_numpy,
    attrs=(Attr("negative_slope", "float", 0.01, doc="slope for x < 0"),),
    dtypes=F,
    reference=_reference,
    torch="F.leaky_relu(input, negative_slope)",
    summary="output = x if x >= 0 else negative_slope * x",
    tensor_aliases={"x": "input", "y": "output"},
    gguf_names=("leakyrelu",),
)
