import numpy as np

from infiniop_py.dtypes import DType, is_float
from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.data import random_data
from infiniop_py.testing.families import truth_output_cases

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def mostly_equal(rng, name, dtype, shape):
    """b copies a except where a coin says otherwise, so both outcomes occur."""
    a = random_data(np.random.Generator(np.random.PCG64(1234)), dtype, shape)
    if name == "a":
        return a
    b = a.copy()
    flip = rng.integers(0, 3, size=shape) == 0
    other = random_data(rng, dtype, shape)
    return np.where(flip, other, b)


def all_equal(rng, name, dtype, shape):
    a = random_data(np.random.Generator(np.random.PCG64(99)), dtype, shape)
    if is_float(dtype) and a.size:
        a.reshape(-1)[0] = 0.0  # +0 == -0
        if name == "b":
            a.reshape(-1)[0] = -0.0
    return a


def one_diff(rng, name, dtype, shape):
    a = all_equal(rng, name, dtype, shape)
    if name == "b" and a.size:
        flat = a.reshape(-1)
        flat[-1] = np.logical_not(flat[-1]) if dtype is DType.BOOL else flat[-1] + 1
    return a


def _c(shape, strides=None):
    return T(shape, strides, DType.BOOL)


CASES = truth_output_cases(SPEC, mostly_equal)
# whole-tensor mode (torch.equal)
CASES += [
    Case({"c": _c((1,)), "a": T((13, 7)), "b": T((13, 7))}, DT, "whole: equal, c [1]", data=all_equal),
    Case({"c": _c(()), "a": T((13, 7)), "b": T((13, 7))}, DT, "whole: equal, c 0-d", data=all_equal),
    Case({"c": _c((1,)), "a": T((4097,)), "b": T((4097,))}, DT, "whole: last element differs", data=one_diff),
    Case({"c": _c((1,)), "a": T((13, 7)), "b": T((13, 7))}, DT, "whole: random differences", data=mostly_equal),
    Case(
        {"c": _c((1,)), "a": T((9, 11), (1, 9)), "b": T((9, 11), (12, 1))},
        DT,
        "whole: transposed / padded, equal",
        data=all_equal,
    ),
    Case({"c": _c((1,)), "a": T((9, 11), (0, 1)), "b": T((9, 11), (0, 1))}, DT, "whole: broadcast rows", data=all_equal),
    Case({"c": _c((1,)), "a": T((0, 5)), "b": T((0, 5))}, DT, "whole: empty gives true"),
    Case({"c": T((1,), dtype=DType.U8), "a": T((6, 5)), "b": T((6, 5))}, DT, "whole: c u8", data=one_diff),
]
