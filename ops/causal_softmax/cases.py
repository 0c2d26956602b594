from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.reduce_cases import large_magnitude, with_neg_inf

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def case(shape, xs=None, ys=None, desc="", data=None, suites=("quick",), inplace=False):
    return Case(
        {"y": T(shape, ys), "x": T(shape, xs)},
        DT,
        desc,
        data=data,
        suites=suites,
        inplace={"y": "x"} if inplace else {},
    )


CASES = [
    case((5, 5), desc="square 5x5 (lower triangle)"),
    case((3, 7, 9), desc="3-d, total > seq (bottom-right aligned)"),
    case((2, 4, 40), xs=(200, 50, 1), ys=(200, 50, 1), desc="padded rows"),
    case((2, 4, 40), xs=(40, 80, 1), desc="permuted batch/seq dims"),
    case((6, 6), xs=(1, 6), ys=(1, 6), desc="transposed (column kernel)"),
    case((2, 3, 2100), desc="rows longer than a block"),
    case((1, 3, 17), desc="rows shorter than a warp"),
    case((4, 2049), desc="rows of 2049"),
    case((2, 5, 20000), desc="rows of 20000 (16-bit raw cache with the causal mask)"),
    case((3, 4, 33000), desc="rows longer than the register cache", suites=("full",)),
    case((2, 6, 37), desc="-inf entries", data=with_neg_inf),
    case((2, 4, 300), desc="large magnitudes", data=large_magnitude),
    case((2, 4, 40), xs=(200, 50, 1), ys=(200, 50, 1), desc="in-place, padded", inplace=True),
    case((0, 4, 8), desc="empty batch"),
    case((32, 20, 512), desc="32x20x512", suites=("full",)),
    case((8, 128, 128), desc="8x128x128", suites=("full",)),
]
