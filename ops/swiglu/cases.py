from infiniop_py.testing.cases import elementwise_cases

from . import SPEC

CASES = elementwise_cases("c", ("a", "b"), SPEC.dtypes)
