"""add: c = a + b (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import SI, DType, F
from infiniop_py.elementwise import elementwise_op

SPEC = elementwise_op(
    name="add",
    stem="Add",
    out="c",
    ins=("a", "b"),
    cuda="a + b",
    numpy=np.add,
    dtypes=F | SI | {DType.U8},
    reference=lambda a, b: a + b,
    torch="torch.add(a, b)",
    summary="c = a + b",
)
