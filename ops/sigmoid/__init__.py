"""sigmoid: output = 1/(1+e^-x) (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="sigmoid",
    stem="Sigmoid",
    out="output",
    ins=("input",),
    cuda=float_expr("T(1) / (T(1) + {exp}(-input))"),
    numpy=lambda x: 1 / (1 + np.exp(-x)),
    dtypes=F,
    reference=lambda input: __import__("torch").sigmoid(input),
    torch="torch.sigmoid(input)",
    summary="output = 1/(1+e^-x)",
    tensor_aliases={"x": "input", "y": "output"},
)
