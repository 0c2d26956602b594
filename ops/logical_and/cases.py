from infiniop_py.testing.families import logical_cases

from . import SPEC

CASES = logical_cases(SPEC)
