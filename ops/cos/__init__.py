"""cos: output = cos x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="cos",
    stem="Cos",
    out="output",
    ins=("input",),
    cuda=float_expr("{cos}(input)"),
    numpy=np.cos,
    dtypes=F,
    reference=lambda input: __import__("torch").cos(input),
    torch="torch.cos(input)",
    summary="output = cos x",
    tensor_aliases={"x": "input", "y": "output"},
)
