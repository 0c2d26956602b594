from infiniop_py.testing.reduce_cases import reduce_cases

from . import SPEC

CASES = reduce_cases(SPEC.dtypes, lambda axes, keepdim: {"dims": list(axes), "keepdim": keepdim})
