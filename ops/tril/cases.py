from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def tri_cases():
    def p(shape, o=None, i=None):
        return {"output": T(shape, o), "input": T(shape, i)}

    return [
        Case(p((13, 17)), DT, "13x17 diag 0"),
        Case(p((13, 17)), DT, "diag 3", attrs={"diagonal": 3}),
        Case(p((17, 13)), DT, "diag -4", attrs={"diagonal": -4}),
        Case(p((8, 64)), DT, "vectorised 8x64 diag 5", attrs={"diagonal": 5}),
        Case(p((5, 8, 64)), DT, "batched vectorised", attrs={"diagonal": -1}),
        Case(p((2, 3, 9, 11), None, (1, 2, 66, 6)), DT, "batched permuted input", attrs={"diagonal": 1}),
        Case(p((9, 11), (1, 9), None), DT, "column-major output"),
        Case(p((9, 11), (16, 1), (12, 1)), DT, "padded rows"),
        Case(p((9, 11), (16, 1), (16, 1)), DT, "in-place padded", attrs={"diagonal": 2}, inplace={"output": "input"}),
        Case(p((8, 64), None, None), DT, "in-place vectorised", attrs={"diagonal": -3}, inplace={"output": "input"}),
        Case(p((4, 4)), DT, "diag beyond size", attrs={"diagonal": 100}),
        Case(p((4, 4)), DT, "diag below size", attrs={"diagonal": -100}),
        Case(p((1, 5)), DT, "one row"),
        Case(p((0, 5)), DT, "empty"),
        Case(p((256, 1024)), DT, "256x1024", attrs={"diagonal": 7}, suites=("full",)),
    ]


CASES = tri_cases()
