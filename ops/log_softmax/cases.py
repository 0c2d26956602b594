from infiniop_py.testing.reduce_cases import softmax_cases

from . import SPEC

CASES = softmax_cases(SPEC.dtypes)
