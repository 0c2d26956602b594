from infiniop_py.reduce.row_cases import softmax_cases

from . import SPEC

CASES = softmax_cases(SPEC.dtypes)
