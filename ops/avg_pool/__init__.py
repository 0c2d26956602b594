"""avg_pool: average over each window with count_include_pad=True, 1-3 spatial dims (ops.md
§6.4-6.5). The divisor counts zero-padding positions but not the positions past L + p that only
ceil_mode reaches. Shared code: infiniop_py/pool (NumPy backend, CUDA kernels in pool.cu)."""

from infiniop_py.pool import pool_op

SPEC = pool_op(
    "avg_pool",
    torch="F.avg_pool{n}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad=True)",
    summary="average pooling over 1-3 spatial dims (count_include_pad=True)",
)
