"""tril: keep out[..., i, j] where j - i <= diagonal, zero elsewhere; in-place allowed (ops.md §5.6)."""

from infiniop_py.tri import make_spec

SPEC = make_spec("tril", lower=True)
