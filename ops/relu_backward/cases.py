from infiniop_py.testing.cases import elementwise_cases

from . import SPEC

CASES = elementwise_cases("grad_input", ("input", "grad_output"), SPEC.dtypes, inplace=("grad_output",))
