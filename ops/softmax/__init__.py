"""softmax: torch.softmax(input, dim), max-subtracted, f32 accumulation, any strides (ops.md §2.3)."""

from infiniop_py.reduce.softmax_ops import softmax_spec

SPEC = softmax_spec("softmax", "Softmax", log=False)
