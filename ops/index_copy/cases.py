from infiniop_py.testing.families import index_copy_cases

from . import SPEC

CASES = index_copy_cases(SPEC.dtypes)
