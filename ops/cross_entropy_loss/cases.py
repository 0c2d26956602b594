from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def data_for(c, bad=False, all_bad=False):
    def data(rng, name, dtype, shape):
        if name != "target":
            return None
        lab = rng.integers(0, c, size=shape)
        flat = lab.reshape(-1)
        if all_bad:
            flat[:] = -100
        elif bad and flat.size > 3:
            flat[0], flat[1], flat[2] = -100, c, -5
        return lab

    return data


def case(xshape, tshape, lshape=(), ti=DType.I64, xs=None, desc="", bad=False, all_bad=False, suites=("quick",)):
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    return Case(
        {"loss": T(lshape), "logits": T(xshape, xs), "target": T(tshape, None, ti)},
        DT,
        desc,
        data=data_for(c, bad, all_bad),
        suites=suites,
    )


CASES = [
    case((8, 10), (8,), desc="(N, c)"),
    case((8, 10), (8,), (1,), DType.I32, desc="(N, c), int32 target, [1] loss"),
    case((4, 5, 3, 7), (4, 3, 7), desc="(N, c, d1, d2): class dim strided"),
    case((3, 2100), (3,), desc="rows longer than a block"),
    case((2, 6, 9), (2, 9), xs=(108, 1, 6), desc="class dim contiguous in a permuted layout"),
    case((13,), (), desc="1-d logits, 0-d target"),
    case((16, 12), (16,), bad=True, desc="-100 and out-of-range targets ignored"),
    case((6, 12), (6,), all_bad=True, desc="all targets ignored -> NaN"),
    case((64, 32000), (64,), desc="64x32000", suites=("full",)),
]
