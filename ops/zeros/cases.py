from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

CASES = elementwise_cases("y", ("x",), SPEC.dtypes, inplace=("x",)) + [
    Case({"y": T((7, 5)), "x": T((7, 5), dtype=DType.F32)}, tuple(sorted(SPEC.dtypes)), "x of another dtype (f32)"),
]
