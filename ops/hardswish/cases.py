from infiniop_py.testing.cases import elementwise_cases

from . import SPEC

CASES = elementwise_cases("output", ("input",), SPEC.dtypes)
