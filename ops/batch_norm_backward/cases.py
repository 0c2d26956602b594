from infiniop_py.dtypes import DType
from infiniop_py.testing.batch_norm_cases import HALF, case_maker
from infiniop_py.testing.cases import T

from . import SPEC

C = case_maker(SPEC)


def bb(shape, x=None, gi=None, dy=None, w=None, gw=None, stats=None):
    c = (shape[1],)
    return {
        "grad_input": T(shape, gi),
        "grad_weight": T(c, gw),
        "grad_bias": T(c),
        "input": T(shape, x),
        "grad_output": T(shape, dy),
        "weight": T(c, w),
        "running_mean": T(c, None, stats),
        "running_var": T(c, None, stats),
    }


CASES = [
    C(bb((4, 3, 5)), "(4, 3, 5)"),
    C(bb((16, 6)), "2-d (B, C) = (16, 6)"),
    C(bb((2, 3)), "2-d, B = 2"),
    C(bb((3, 5, 1024)), "(3, 5, 1024) rows path"),
    C(bb((2, 4, 1000)), "(2, 4, 1000) rows path, unvectorised"),
    C(bb((2, 2, 4097)), "(2, 2, 4097) odd D"),
    C(bb((8, 3, 520)), "several chunks per channel"),
    C(bb((4, 6, 7), x=(1, 28, 4), dy=(42, 1, 6)), "permuted input and grad_output"),
    C(bb((5, 4, 9), gi=(36, 1, 4)), "permuted grad_input"),
    C(bb((3, 4, 16), x=(128, 32, 1)), "padded input rows"),
    C(bb((6, 5), w=(2,), gw=(3,)), "strided weight and grad_weight"),
    C(bb((4, 3, 16), stats=DType.F32), "f32 running stats", dtypes=HALF),
    C(bb((4, 3, 5)), "eps 1e-3", attrs={"eps": 1e-3}),
    C(bb((32, 64, 256)), "(32, 64, 256)", suites=("full",)),
    C(bb((256, 512)), "(256, 512)", suites=("full",)),
]
