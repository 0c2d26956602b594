"""tanh: output = tanh x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="tanh",
    stem="Tanh",
    out="output",
    ins=("input",),
    cuda=float_expr("{tanh}(input)"),
    numpy=np.tanh,
    dtypes=F,
    reference=lambda input: __import__("torch").tanh(input),
    torch="torch.tanh(input)",
    summary="output = tanh x",
    tensor_aliases={"x": "input", "y": "output"},
)
