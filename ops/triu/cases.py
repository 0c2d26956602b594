from infiniop_py.testing.families import tri_cases

from . import SPEC

CASES = tri_cases(SPEC.dtypes)
