"""div: c = a / b (true division) (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise import elementwise_op

SPEC = elementwise_op(
    name="div",
    stem="Div",
    out="c",
    ins=("a", "b"),
    cuda="a / b",
    numpy=np.true_divide,
    dtypes=F,
    reference=lambda a, b: a / b,
    torch="torch.div(a, b)",
    summary="c = a / b (true division)",
)
