"""max_pool_backward: grad_input of max_pool, 1-3 spatial dims (ops.md §6.8). The argmax is
recomputed from ``input``: the first maximum in row-major window order wins ties, the last NaN
wins when there is one (torch's rule). Overlapping windows accumulate in a fixed order (each
grad_input element gathers over its covering windows; no atomics); other positions get 0."""

from infiniop_py.pool import pool_op

SPEC = pool_op(
    "max_pool_backward",
    torch="autograd of F.max_pool{n}d(input, kernel_size, stride, padding, ceil_mode=ceil_mode)",
    summary="gradient of max_pool with respect to its input (argmax recomputed; deterministic gather)",
)
