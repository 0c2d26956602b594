from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T, elementwise_cases
from infiniop_py.testing.families import cond_data

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))

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
