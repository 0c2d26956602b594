"""zeros: fill y with 0 of its dtype; x supplies only the shape (ops.md §1.10)."""

from infiniop_py.dtypes import ALL
from infiniop_py.elementwise import elementwise_op


def _dtypes(check, out, ins):
    check.dtype_in(out, ALL)  # x may have any dtype: it is never read


SPEC = elementwise_op(
    name="zeros",
    stem="Zeros",
    out="y",
    ins=("x",),
    reads=(),
    inplace=("x",),
    cuda="0",
    numpy=lambda: 0,
    dtypes=ALL,
    dtype_rule=_dtypes,
    reference=lambda x: __import__("torch").zeros_like(x),
    torch="torch.zeros_like(x)",
    summary="y = 0",
)
