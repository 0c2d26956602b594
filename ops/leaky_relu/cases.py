from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
CASES = elementwise_cases("output", ("input",), SPEC.dtypes) + [
    Case({"output": T((13, 4)), "input": T((13, 4))}, DT, "negative_slope 0.2", attrs={"negative_slope": 0.2}),
    Case(
        {"output": T((7, 9)), "input": T((7, 9), (1, 7))}, DT, "negative_slope -1.5, transposed", attrs={"negative_slope": -1.5}
    ),
]
