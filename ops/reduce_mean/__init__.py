"""reduce_mean: torch.mean(input, dim, keepdim) with keepdim implied by the output (ops.md §2.2)."""

from infiniop_py.dtypes import F
from infiniop_py.reduce.single import single_dim_spec

SPEC = single_dim_spec("reduce_mean", "ReduceMean", "mean", F, "torch.mean(input, dim, keepdim)", "mean over one dim")
