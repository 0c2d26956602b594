"""avg_pool_backward: grad_input of avg_pool (count_include_pad=True), 1-3 spatial dims (ops.md
§6.6). Each grad_input element gathers grad_output / divisor over the windows covering it in a
fixed order (no atomics); positions no window covers get 0. ``input`` only gives the shape."""

from infiniop_py.pool import pool_op

SPEC = pool_op(
    "avg_pool_backward",
    torch="autograd of F.avg_pool{n}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad=True)",
    summary="gradient of avg_pool with respect to its input (deterministic gather)",
)
