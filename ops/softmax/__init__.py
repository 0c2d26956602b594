"""softmax: torch.softmax(input, dim), max-subtracted, f32 accumulation, any strides (ops.md §2.3)."""

from infiniop_py.reduce.softmax_ops import softmax_op

SPEC = softmax_op(
    name="softmax", stem="Softmax", log=False, torch="softmax", summary="softmax along dim (any strides, in-place ok)"
)
