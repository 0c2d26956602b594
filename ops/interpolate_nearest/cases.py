from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def p(o, i, os=None, is_=None):
    return {"output": T(o, os), "input": T(i, is_)}


CASES = [
    Case(p((2, 3, 8, 10), (2, 3, 4, 5)), DT, "2-d x2 upsample"),
    Case(p((2, 3, 7, 11), (2, 3, 5, 4)), DT, "2-d odd up/down sizes"),
    Case(p((2, 3, 3, 2), (2, 3, 7, 9)), DT, "2-d downsample"),
    Case(p((2, 3, 13), (2, 3, 5)), DT, "1-d"),
    Case(p((1, 2, 4, 6, 5), (1, 2, 3, 4, 2)), DT, "3-d"),
    Case(p((2, 3, 8, 10), (2, 3, 4, 5), (240, 1, 30, 3), (1, 2, 30, 6)), DT, "channels-last output, permuted input"),
    Case(p((2, 3, 9, 10), (2, 3, 4, 5), (400, 100, 11, 1), None), DT, "padded output rows"),
    Case(p((0, 3, 8, 10), (0, 3, 4, 5)), DT, "empty batch"),
    Case(p((2, 4, 64, 96), (2, 4, 17, 33)), DT, "64x96 from 17x33", suites=("full",)),
]
