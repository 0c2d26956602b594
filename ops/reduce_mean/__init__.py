"""reduce_mean: torch.mean(input, dim, keepdim) with keepdim implied by the output (ops.md §2.2)."""

from infiniop_py.dtypes import F
from infiniop_py.reduce.ops import single_dim_op

SPEC = single_dim_op(name="reduce_mean", stem="ReduceMean", op="mean", dtypes=F, torch="mean", summary="mean over one dim")
