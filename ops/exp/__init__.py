"""exp: output = e^x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="exp",
    stem="Exp",
    out="output",
    ins=("input",),
    cuda=float_expr("{exp}(input)"),
    numpy=np.exp,
    dtypes=F,
    reference=lambda input: __import__("torch").exp(input),
    torch="torch.exp(input)",
    summary="output = e^x",
    tensor_aliases={"x": "input", "y": "output"},
)
