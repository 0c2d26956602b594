"""max_pool: maximum over the in-bounds part of each window, 1-3 spatial dims (ops.md §6.4,
§6.7); padding never wins and a NaN in the window gives NaN. Shared code: infiniop_py/pool."""

from infiniop_py.pool import pool_op

SPEC = pool_op(
    "max_pool",
    torch="F.max_pool{n}d(input, kernel_size, stride, padding, ceil_mode=ceil_mode)",
    summary="max pooling over 1-3 spatial dims (dilation 1, no indices)",
)
