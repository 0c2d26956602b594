from infiniop_py.dtypes import DType
from infiniop_py.testing.batch_norm_cases import HALF, case_maker
from infiniop_py.testing.cases import T

from . import SPEC

C = case_maker(SPEC)


def bn(shape, x=None, y=None, stats=None, w=None):
    c = (shape[1],)
    return {
        "output": T(shape, y),
        "running_mean": T(c, None, stats),
        "running_var": T(c, None, stats),
        "input": T(shape, x),
        "weight": T(c, w),
        "bias": T(c),
    }


CASES = [
    C(bn((4, 3, 5)), "(4, 3, 5)"),
    C(bn((16, 6)), "2-d (B, C) = (16, 6)"),
    C(bn((2, 3)), "2-d, B = 2 (smallest batch)"),
    C(bn((1, 4, 2)), "B = 1, D = 2 (n = 2)"),
    C(bn((3, 5, 1024)), "(3, 5, 1024) rows path"),
    C(bn((2, 4, 1000)), "(2, 4, 1000) rows path, unvectorised"),
    C(bn((2, 2, 4097)), "(2, 2, 4097) odd D"),
    C(bn((8, 3, 520)), "several chunks per channel"),
    C(bn((4, 6, 7), x=(1, 28, 4)), "permuted input strides"),
    C(bn((5, 4, 9), y=(36, 1, 4)), "permuted output"),
    C(bn((3, 4, 16), x=(128, 32, 1)), "padded input rows"),
    C(bn((6, 5), w=(2,)), "strided weight"),
    C(bn((4, 3, 8)), "in-place output = input", inplace={"output": "input"}),
    C(bn((4, 3, 16), stats=DType.F32), "f32 running stats", dtypes=HALF + (DType.F64,)),
    C(bn((4, 3, 5)), "momentum 0.5, eps 1e-3", attrs={"momentum": 0.5, "eps": 1e-3}),
    C(bn((4, 3, 5)), "momentum 0 (running stats kept)", attrs={"momentum": 0.0}),
    C(bn((32, 64, 256)), "(32, 64, 256)", suites=("full",)),
    C(bn((256, 512)), "(256, 512)", suites=("full",)),
]
