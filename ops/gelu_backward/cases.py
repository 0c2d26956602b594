from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
_t = ("grad_input", "input", "grad_output")
CASES = elementwise_cases("grad_input", ("input", "grad_output"), SPEC.dtypes, inplace=("grad_output",)) + [
    Case({n: T((13, 4)) for n in _t}, DT, "approximate tanh", attrs={"approximate": "tanh"}),
    Case(
        {**{n: T((7, 9)) for n in _t}, "input": T((7, 9), (1, 7))},
        DT,
        "approximate tanh, transposed input",
        attrs={"approximate": "tanh"},
    ),
    Case(
        {**{n: T((6, 5)) for n in _t}, "grad_output": T((6, 5), (0, 1))},
        DT,
        "approximate tanh, broadcast grad",
        attrs={"approximate": "tanh"},
    ),
]
