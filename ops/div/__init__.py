"""div: c = a / b (true division) (ops.md §1.1)."""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.elementwise.declare import arithmetic_op

SPEC = arithmetic_op("div", "/", np.true_divide, F, " (true division)")
