"""mul: c = a * b (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import SI, DType, F
from infiniop_py.elementwise import elementwise_op

SPEC = elementwise_op(
    name="mul",
    stem="Mul",
    out="c",
    ins=("a", "b"),
    cuda="a * b",
    numpy=np.multiply,
    dtypes=F | SI | {DType.U8},
    reference=lambda a, b: a * b,
    torch="torch.mul(a, b)",
    summary="c = a * b",
)
