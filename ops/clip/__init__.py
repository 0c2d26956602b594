"""clip: y = max(min(x, max_val), min_val) with tensor bounds (ops.md §1.5).

When min_val > max_val the result is min_val (upstream's order, not torch.clamp's); a NaN x
gives NaN. Scalar bounds are full-shape tensors with zero strides.
"""

import numpy as np

from infiniop_py.dtypes import SI, F
from infiniop_py.elementwise import elementwise_op, writes_into


@writes_into
def _numpy(out, x, lo, hi):
    np.minimum(x, hi, out=out)
    np.maximum(out, lo, out=out)  # NaN propagates through both


def _reference(x, min_val, max_val):
    import torch

    return torch.maximum(torch.minimum(x, max_val), min_val)


SPEC = elementwise_op(
    name="clip",
    stem="Clip",
    out="y",
    ins=("x", "min_val", "max_val"),
    # (x > hi) and (r < lo) are false for NaN, so NaN passes through
    cuda="const T r = x > max_val ? max_val : x; return r < min_val ? min_val : r;",
    numpy=_numpy,
    dtypes=F | SI,
    inplace=("x",),
    reference=_reference,
    torch="torch.clamp(x, min_val, max_val) (min_val wins when min_val > max_val)",
    summary="y = max(min(x, max_val), min_val)",
)
