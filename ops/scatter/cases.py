import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
AR = tuple(d for d in DT if d is not DType.BOOL)
I32, I64 = DType.I32, DType.I64


def idx(lo, hi, small=False):
    """Index values in [lo, hi); multiply cases get data near 1 so products stay tame."""

    def data(rng, name, dtype, shape):
        if name == "indices":
            return rng.integers(lo, hi, size=shape)
        if small and name in ("updates", "input"):
            if dtype.name.startswith(("F", "BF")):
                return rng.uniform(0.5, 1.5, size=shape)
            return rng.integers(-2, 3, size=shape)
        return None

    return data


def s(o, x, i, u=None):
    return {"output": o, "input": x, "indices": i, "updates": u if u is not None else T(i.shape, i.strides)}


CASES = [
    Case(s(T((6, 5)), T((6, 5)), T((4, 5), None, I64)), DT, "replace dim 0, duplicates", attrs={"axis": 0}, data=idx(0, 6)),
    Case(s(T((5, 9)), T((5, 9)), T((5, 7), None, I32)), DT, "replace axis -1, i32", attrs={"axis": -1}, data=idx(0, 9)),
    Case(
        s(T((6, 5)), T((6, 5)), T((40, 5), None, I64)),
        DT,
        "replace, 40 positions per line (2 warp chunks)",
        attrs={"axis": 0},
        data=idx(0, 6),
    ),
    Case(
        s(T((6, 5)), T((6, 5)), T((40, 5), None, I64)),
        AR,
        "add, many duplicates",
        attrs={"axis": 0, "reduction": 1},
        data=idx(0, 6),
        atol=2e-2,
    ),
    Case(
        s(T((6, 5)), T((6, 5)), T((9, 5), None, I64)),
        AR,
        "multiply",
        attrs={"axis": 0, "reduction": 2},
        data=idx(0, 6, small=True),
    ),
    Case(s(T((6, 5)), T((6, 5)), T((4, 5), None, I64)), DT, "out-of-range skipped", attrs={"axis": 0}, data=idx(-3, 9)),
    Case(
        s(T((3, 6, 4), (1, 12, 3)), T((3, 6, 4), (24, 1, 6)), T((2, 5, 3), (1, 2, 10), I64), T((2, 5, 3), (15, 3, 1))),
        AR,
        "3-d axis 1 add, strided everything",
        attrs={"axis": 1, "reduction": 1},
        data=idx(0, 6),
    ),
    Case(
        s(T((6, 5), (8, 1)), T((6, 5), (8, 1)), T((4, 5), None, I64)),
        DT,
        "in-place",
        attrs={"axis": 0},
        data=idx(0, 6),
        inplace={"output": "input"},
    ),
    Case(s(T((6, 5)), T((6, 5)), T((0, 5), None, I64)), DT, "empty indices", attrs={"axis": 0}, data=idx(0, 6)),
]
del np
