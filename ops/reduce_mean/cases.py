from infiniop_py.testing.reduce_cases import reduce_cases

from . import SPEC

CASES = reduce_cases(
    SPEC.dtypes, lambda axes, keepdim: {"dim": axes[0] if axes else 0, "keepdim": keepdim}, allow_all=False, single_axis=True
)
