"""ones: fill y with 1 of its dtype; x supplies only the shape (ops.md §1.10)."""

from infiniop_py.dtypes import ALL
from infiniop_py.elementwise import elementwise_op


def _dtypes(check, out, ins):
    check.dtype_in(out, ALL)  # x may have any dtype: it is never read


SPEC = elementwise_op(
    name="ones",
    stem="Ones",
    out="y",
    ins=("x",),
    reads=(),
    inplace=("x",),
    cuda="1",
    numpy=lambda: 1,
    dtypes=ALL,
    dtype_rule=_dtypes,
    reference=lambda x: __import__("torch").ones_like(x),
    torch="torch.ones_like(x)",
    summary="y = 1",
)
