"""reduce_max: torch.amax(input, dim, keepdim) with keepdim implied by the output (ops.md §2.2)."""

from infiniop_py.dtypes import SI, F
from infiniop_py.reduce.ops import single_dim_op

SPEC = single_dim_op(
    name="reduce_max",
    stem="ReduceMax",
    op="max",
    dtypes=F | SI,
    torch="amax",
    summary="max over one dim (NaN propagates)",
    empty_extent=False,
)
