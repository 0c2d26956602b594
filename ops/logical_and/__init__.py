"""logical_and: c = (a != 0) and (b != 0) (ops.md §1.8); C-style alias And, GGUF alias op_and."""

from infiniop_py.elementwise.logical import logical_op

SPEC = logical_op("and", "&&")
