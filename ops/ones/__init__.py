"""ones: fill y with 1 of its dtype; x supplies only the shape (ops.md §1.10)."""

from infiniop_py.elementwise.declare import fill_op

SPEC = fill_op("ones", 1)
