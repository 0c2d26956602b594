"""relu: output = max(x, 0), NaN stays NaN (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import SI, F
from infiniop_py.elementwise import writes_into
from infiniop_py.elementwise.declare import unary_op


@writes_into
def _numpy(out, x):
    if x.dtype.kind == "f":  # np.clip with two finite-typed bounds takes NumPy's SIMD loop (~4x maximum)
        np.clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=out)  # NaN stays NaN
    else:
        np.maximum(x, x.dtype.type(0), out=out)


SPEC = unary_op(
    "relu",
    cuda="input < T(0) ? T(0) : input",  # NaN < 0 is false: NaN passes through
    numpy=_numpy,
    cpu_kernel="relu",
    dtypes=F | SI,
    summary="output = max(x, 0); NaN -> NaN",
)
