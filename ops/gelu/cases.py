from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
CASES = elementwise_cases("output", ("input",), SPEC.dtypes) + [
    Case({"output": T((13, 4)), "input": T((13, 4))}, DT, "approximate tanh", attrs={"approximate": "tanh"}),
    Case({"output": T((7, 9)), "input": T((7, 9), (1, 7))}, DT, "approximate tanh, transposed", attrs={"approximate": "tanh"}),
    Case({"output": T((4097,)), "input": T((4097,))}, DT, "approximate none (explicit), 4097", attrs={"approximate": "none"}),
]
