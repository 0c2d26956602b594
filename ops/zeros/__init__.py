"""zeros: fill y with 0 of its dtype; x supplies only the shape (ops.md §1.10)."""

from infiniop_py.elementwise.declare import fill_op

SPEC = fill_op("zeros", 0)
