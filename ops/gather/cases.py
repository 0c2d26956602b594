import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
I32, I64 = DType.I32, DType.I64


def idx_data(limit_of):
    """Index values in range for the case (``limit_of(shape)`` -> size of the indexed dim)."""

    def data(rng, name, dtype, shape):
        if name == "index":
            return rng.integers(0, limit_of, size=shape)
        return None

    return data


def oob(limit):
    """Mostly valid, with some negative and too-large values (gather must write 0)."""

    def data(rng, name, dtype, shape):
        if name == "index":
            return rng.integers(-3, limit + 3, size=shape)
        return None

    return data


def g(o, x, i):
    return {"output": o, "input": x, "index": i}


CASES = [
    Case(g(T((4, 5)), T((6, 5)), T((4, 5), None, I64)), DT, "dim 0", attrs={"dim": 0}, data=idx_data(6)),
    Case(g(T((6, 3)), T((6, 5)), T((6, 3), None, I32)), DT, "dim -1, smaller index, i32", attrs={"dim": -1}, data=idx_data(5)),
    Case(g(T((2, 3, 4)), T((3, 5, 4)), T((2, 3, 4), None, I64)), DT, "3-d dim 1", attrs={"dim": 1}, data=idx_data(5)),
    Case(
        g(T((4, 5), (1, 4)), T((6, 5), (1, 6)), T((4, 5), (10, 2), I64)),
        DT,
        "strided everything",
        attrs={"dim": 0},
        data=idx_data(6),
    ),
    Case(g(T((4, 5)), T((6, 5)), T((4, 5), None, I64)), DT, "out-of-range indices write 0", attrs={"dim": 0}, data=oob(6)),
    Case(g(T((7,)), T((9,)), T((7,), None, I32)), DT, "1-d", attrs={"dim": 0}, data=idx_data(9)),
    Case(g(T((0, 5)), T((6, 5)), T((0, 5), None, I64)), DT, "empty", attrs={"dim": 0}, data=idx_data(6)),
    Case(
        g(T((64, 300)), T((64, 512)), T((64, 300), None, I64)),
        DT,
        "64x512 -> 300",
        attrs={"dim": 1},
        data=idx_data(512),
        suites=("full",),
    ),
]
del np
