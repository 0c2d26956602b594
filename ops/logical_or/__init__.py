"""logical_or: c = (a != 0) or (b != 0) (ops.md §1.8); C-style alias Or, GGUF alias op_or."""

from infiniop_py.elementwise.logical import logical_op

SPEC = logical_op("or", "||")
