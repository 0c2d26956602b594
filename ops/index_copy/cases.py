import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
I32, I64 = DType.I32, DType.I64


def idx(values):
    def data(rng, name, dtype, shape):
        if name == "index":
            return np.asarray(values(rng, shape))
        return None

    return data


def perm(size):
    return idx(lambda rng, shape: rng.permutation(size)[: shape[0]])


def dups(size):
    return idx(lambda rng, shape: rng.integers(0, size, size=shape))


def oob(size):
    return idx(lambda rng, shape: rng.integers(-2, size + 2, size=shape))


def make(dest="output", base="input"):
    def t(o, x, i, s):
        d = {dest: o, "index": i, "source": s}
        if base:
            d[base] = x
        return d

    inp = {"inplace": {dest: base}} if base else {}
    return [
        Case(t(T((6, 5)), T((6, 5)), T((3,), None, I64), T((3, 5))), DT, "dim 0 permutation", attrs={"dim": 0}, data=perm(6)),
        Case(t(T((4, 7)), T((4, 7)), T((5,), None, I32), T((4, 5))), DT, "dim -1 i32", attrs={"dim": -1}, data=perm(7)),
        Case(t(T((6, 5)), T((6, 5)), T((8,), None, I64), T((8, 5))), DT, "duplicates: last wins", attrs={"dim": 0}, data=dups(6)),
        Case(t(T((6, 5)), T((6, 5)), T((8,), None, I64), T((8, 5))), DT, "out-of-range skipped", attrs={"dim": 0}, data=oob(6)),
        Case(
            t(T((3, 6, 4), (1, 12, 3)), T((3, 6, 4), (24, 1, 6)), T((4,), (2,), I64), T((3, 4, 4), (1, 3, 12))),
            DT,
            "3-d dim 1, strided everything",
            attrs={"dim": 1},
            data=dups(6),
        ),
        Case(
            t(T((6, 5), (8, 1)), T((6, 5), (8, 1)), T((4,), None, I64), T((4, 5))),
            DT,
            "in-place padded",
            attrs={"dim": 0},
            data=dups(6),
            **inp,
        ),
        Case(t(T((6,)), T((6,)), T((0,), None, I64), T((0,))), DT, "empty index", attrs={"dim": 0}, data=dups(6)),
        Case(t(T((0, 5)), T((0, 5)), T((0,), None, I64), T((0, 5))), DT, "empty", attrs={"dim": 0}, data=dups(1)),
        Case(
            t(T((256, 300)), T((256, 300)), T((200,), None, I64), T((256, 200))),
            DT,
            "256x300 dim 1",
            attrs={"dim": 1},
            data=dups(300),
            suites=("full",),
        ),
    ]


CASES = make()
