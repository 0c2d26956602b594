import numpy as np

from infiniop_py.dtypes import DType, to_numpy
from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def cond_data(rng, name, dtype, shape):
    """condition holds 0 and nonzero values (-1, 1, 2 where the dtype allows); data: default."""
    if name != "condition":
        return None
    v = rng.integers(-1, 3, size=shape)
    if dtype is DType.BOOL:
        return v > 0
    if dtype in (DType.U8, DType.U16, DType.U32, DType.U64):
        v = np.abs(v)
    return v.astype(to_numpy(dtype))


_base = elementwise_cases("c", ("condition", "a", "b"), SPEC.dtypes, inplace=("a", "b"))
_t = ("c", "condition", "a", "b")
CASES = [Case(**{**c.__dict__, "data": cond_data}) for c in _base]
for cd in (DType.BOOL, DType.U8, DType.I8, DType.I32, DType.I64, DType.F16, DType.BF16, DType.F32, DType.F64):
    CASES.append(
        Case({**{n: T((13, 7)) for n in _t}, "condition": T((13, 7), dtype=cd)}, DT, f"condition {cd.name}", data=cond_data)
    )
CASES += [
    Case(
        {**{n: T((9, 11)) for n in _t}, "condition": T((9, 11), (1, 0), dtype=DType.BOOL), "a": T((9, 11), (0, 1))},
        DT,
        "bool condition broadcast column, a broadcast row",
        data=cond_data,
    ),
    Case(
        {**{n: T((13, 4), (10, 1)) for n in _t}, "condition": T((13, 4), (1, 13), dtype=DType.BOOL)},
        DT,
        "bool condition transposed, padded data",
        data=cond_data,
    ),
]
