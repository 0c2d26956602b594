import numpy as np

from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.reduce_cases import reduce_cases

from . import SPEC


def _with_nan(rng, name, dtype, shape):
    from infiniop_py.testing.data import random_data

    v = random_data(rng, dtype, shape).astype(np.float32)
    v[1, 3] = np.nan
    v[2, :] = -np.inf
    return v


CASES = reduce_cases(
    SPEC.dtypes,
    lambda axes, keepdim: {"dim": axes[0] if axes else 0, "keepdim": keepdim},
    allow_all=False,
    allow_empty_extent=False,
    single_axis=True,
) + [
    Case(
        {"output": T((4, 1)), "input": T((4, 9))},
        tuple(sorted(d for d in SPEC.dtypes if d.name[0] in "FB")),
        "NaN propagates, -inf row",
        attrs={"dim": 1, "keepdim": True},
        data=_with_nan,
    ),
]
