import numpy as np

from infiniop_py.testing.cases import Case, T, elementwise_cases
from infiniop_py.testing.data import random_data

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def bounds(rng, name, dtype, shape):
    """x in [-2, 2]; min_val around -1, max_val around +1 (so both bounds bite)."""
    x = random_data(rng, dtype, shape)
    if name == "min_val":
        return (x.astype(np.float64) * 0.25 - 1).astype(x.dtype)
    if name == "max_val":
        return (x.astype(np.float64) * 0.25 + 1).astype(x.dtype)
    return x


def crossed(rng, name, dtype, shape):
    """min_val > max_val everywhere: the result is min_val."""
    x = random_data(rng, dtype, shape)
    if name == "min_val":
        return np.full(shape, 1, dtype=x.dtype)
    if name == "max_val":
        return np.full(shape, -1, dtype=x.dtype)
    return x


_base = elementwise_cases("y", ("x", "min_val", "max_val"), SPEC.dtypes, inplace=("x",))
_t = ("y", "x", "min_val", "max_val")
CASES = [Case(**{**c.__dict__, "data": bounds}) for c in _base] + [
    Case(
        {**{n: T((9, 11)) for n in _t}, "min_val": T((9, 11), (0, 0)), "max_val": T((9, 11), (0, 0))},
        DT,
        "scalar bounds (stride 0)",
        data=bounds,
    ),
    Case({n: T((13, 4)) for n in _t}, DT, "min_val > max_val gives min_val", data=crossed),
]
