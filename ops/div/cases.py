import numpy as np

from infiniop_py.testing.cases import elementwise_cases
from infiniop_py.testing.data import random_data

from . import SPEC


def divisor_away_from_zero(rng, name, dtype, shape):
    """Divisors in ±[0.5, 2] so the quotient is well conditioned; dividends in [-2, 2]."""
    x = random_data(rng, dtype, shape)
    if name == "b":
        x = (np.sign(x.astype(np.float32)) * (0.5 + np.abs(x.astype(np.float32)) * 0.75)).astype(x.dtype)
        x = np.where(x == 0, np.ones_like(x), x)
    return x


CASES = [c.__class__(**{**c.__dict__, "data": divisor_away_from_zero}) for c in elementwise_cases("c", ("a", "b"), SPEC.dtypes)]
