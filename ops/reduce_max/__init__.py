"""reduce_max: torch.amax(input, dim, keepdim) with keepdim implied by the output (ops.md §2.2)."""

from infiniop_py.dtypes import SI, F
from infiniop_py.reduce.single import single_dim_spec

SPEC = single_dim_spec(
    "reduce_max", "ReduceMax", "max", F | SI, "torch.amax(input, dim, keepdim)", "max over one dim (NaN propagates)"
)
