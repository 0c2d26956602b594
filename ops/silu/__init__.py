"""silu: output = x*sigmoid(x) (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="silu",
    stem="Silu",
    out="output",
    ins=("input",),
    cuda=float_expr("input / (T(1) + {exp}(-input))"),
    numpy=lambda x: x / (1 + np.exp(-x)),
    dtypes=F,
    reference=lambda input: __import__("torch").nn.functional.silu(input),
    torch="F.silu(input)",
    summary="output = x*sigmoid(x)",
    tensor_aliases={"x": "input", "y": "output"},
)
