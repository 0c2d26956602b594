from infiniop_py.testing.families import index_copy_cases

from . import SPEC

CASES = [c for c in index_copy_cases(SPEC.dtypes, base=None) if "in-place" not in c.description]
