from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def pair(shape, dst=None, src=None):
    return {"dst": T(shape, dst), "src": T(shape, src)}


CASES = [
    Case(pair((13, 4)), DT, "contiguous"),
    Case(pair((13, 4), (1, 13)), DT, "transpose into column-major dst"),
    Case(pair((13, 4), None, (1, 13)), DT, "transpose from column-major src"),
    Case(pair((33, 70), None, (1, 33)), DT, "transpose 33x70 (partial tiles)"),
    Case(pair((13, 4), (10, 1), (1, 20)), DT, "padded dst, strided src"),
    Case(pair((3, 5, 7), None, (1, 3, 15)), DT, "3-d full reversal of dims"),
    Case(pair((4, 6, 10), (60, 1, 6), None), DT, "3-d permute (0,2,1) of dst"),
    Case(pair((2, 3, 4, 5), None, (60, 1, 15, 3)), DT, "4-d permute"),
    Case(pair((6, 5), None, (0, 1)), DT, "broadcast src row (stride 0)"),
    Case(pair((6, 5), None, (1, 0)), DT, "broadcast src column (stride 0)"),
    Case(pair((4097,)), DT, "odd length 4097"),
    Case(pair((70, 130), None, (1, 70)), DT, "transpose 70x130"),
    Case(pair((3, 33, 65), (2145, 1, 33), None), DT, "batched transpose into dst"),
    Case(pair((8, 64), (72, 1), (64, 1)), DT, "padded dst rows 8x64"),
    Case(pair((5, 64), None, (0, 1)), DT, "broadcast src row 5x64"),
    Case(pair((4097,), None, (3,)), DT, "gapped src 4097/3"),
    Case(pair(()), DT, "0-d"),
    Case(pair((0, 3)), DT, "empty"),
    Case(pair((64, 2048), None, (1, 64)), DT, "transpose 64x2048", suites=("full",)),
    Case(pair((32, 20, 512), (10240, 1, 20), None), DT, "32x20x512 permuted dst", suites=("full",)),
]
