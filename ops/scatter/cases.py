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


def C(tensors, description, axis, indices, dtypes=DT, reduction=None, **kw):  # noqa: N802
    """A case along ``axis`` with index values in ``indices`` = [lo, hi) and ``reduction`` (the
    default, replace, when None); multiply gets data near 1."""
    attrs = {"axis": axis} if reduction is None else {"axis": axis, "reduction": reduction}
    return Case(tensors, dtypes, description, attrs=attrs, data=idx(*indices, small=reduction == 2), **kw)


CASES = [
    C(s(T((6, 5)), T((6, 5)), T((4, 5), None, I64)), "replace dim 0, duplicates", 0, (0, 6)),
    C(s(T((5, 9)), T((5, 9)), T((5, 7), None, I32)), "replace axis -1, i32", -1, (0, 9)),
    C(s(T((6, 5)), T((6, 5)), T((40, 5), None, I64)), "replace, 40 positions per line (2 warp chunks)", 0, (0, 6)),
    C(
        s(T((6, 5)), T((6, 5)), T((40, 5), None, I64)),
        "add, many duplicates",
        0,
        (0, 6),
        dtypes=tuple(d for d in AR if d is not DType.BF16),
        reduction=1,
        atol=2e-2,
    ),
    # bf16 rounds after every addition (ops.md): ~7 roundings of 2^-8 per cell; over 40 seeds
    # the largest error against float64 was 0.086
    C(
        s(T((6, 5)), T((6, 5)), T((40, 5), None, I64)),
        "add, many duplicates, bf16",
        0,
        (0, 6),
        dtypes=(DType.BF16,),
        reduction=1,
        atol=1e-1,
    ),
    C(s(T((6, 5)), T((6, 5)), T((9, 5), None, I64)), "multiply", 0, (0, 6), dtypes=AR, reduction=2),
    C(s(T((6, 5)), T((6, 5)), T((4, 5), None, I64)), "out-of-range skipped", 0, (-3, 9)),
    C(
        s(T((3, 6, 4), (1, 12, 3)), T((3, 6, 4), (24, 1, 6)), T((2, 5, 3), (1, 2, 10), I64), T((2, 5, 3), (15, 3, 1))),
        "3-d axis 1 add, strided everything",
        1,
        (0, 6),
        dtypes=AR,
        reduction=1,
    ),
    C(s(T((6, 5), (8, 1)), T((6, 5), (8, 1)), T((4, 5), None, I64)), "in-place", 0, (0, 6), inplace={"output": "input"}),
    C(s(T((6, 5)), T((6, 5)), T((0, 5), None, I64)), "empty indices", 0, (0, 6)),
    # line kernel (copy merged in): index covers every output line, input and output share a layout
    C(
        s(T((5, 70)), T((5, 70)), T((5, 64), None, I64)),
        "replace axis -1, 64 positions, out-of-range (line kernel)",
        -1,
        (-2, 72),
    ),
    C(
        s(T((40, 33)), T((40, 33)), T((150, 33), None, I32)),
        "replace dim 0, 32 + 1 lines per block group, positions looped (line kernel)",
        0,
        (0, 40),
    ),
    C(
        s(T((3, 48, 5), (1, 15, 3)), T((3, 48, 5), (1, 15, 3)), T((3, 60, 5), (300, 5, 1), I64), T((3, 60, 5), (1, 3, 180))),
        "replace axis 1, permuted layouts (line kernel)",
        1,
        (0, 48),
    ),
    C(s(T((40, 33)), T((40, 33)), T((50, 30), None, I64)), "replace, index narrower than output (copy + table)", 0, (0, 40)),
    C(
        s(T((40, 33), (1, 40)), T((40, 33)), T((50, 33), None, I64)),
        "replace, output layout differs from input (copy + table)",
        0,
        (0, 40),
    ),
    C(
        s(T((40, 33)), T((40, 33)), T((50, 33), None, I64)),
        "replace in place (table kernel)",
        0,
        (0, 40),
        inplace={"output": "input"},
    ),
]
del np
