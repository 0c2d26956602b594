"""sin: output = sin x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op, float_expr

SPEC = elementwise_op(
    name="sin",
    stem="Sin",
    out="output",
    ins=("input",),
    cuda=float_expr("{sin}(input)"),
    numpy=np.sin,
    dtypes=F,
    reference=lambda input: __import__("torch").sin(input),
    torch="torch.sin(input)",
    summary="output = sin x",
    tensor_aliases={"x": "input", "y": "output"},
)
