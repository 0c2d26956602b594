"""mul: c = a * b (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import SI, DType, F
from infiniop_py.elementwise.declare import arithmetic_op

SPEC = arithmetic_op("mul", "*", np.multiply, F | SI | {DType.U8})
