"""add: c = a + b (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import SI, DType, F
from infiniop_py.elementwise.declare import arithmetic_op

SPEC = arithmetic_op("add", "+", np.add, F | SI | {DType.U8})
