"""index_copy: output <- input, then output.select(dim, index[i]) = source.select(dim, i),
last i wins, out-of-range skipped; in place when output aliases input (ops.md §5.4).

C-style create is upstream's odd order ``(output, input, dim, index, source)``; calculate is
``(output, input, index, source)``."""

from __future__ import annotations

from infiniop_py.index.copy import copy_op
from infiniop_py.spec import inp, out

SPEC = copy_op(
    base="input",
    slots={"output": 0, "input": 1, "index": 2, "source": 3},
    name="index_copy",
    stem="IndexCopy",
    tensors=(out("output"), inp("input"), inp("index"), inp("source")),
    torch="input.index_copy(dim, index, source)",
    summary="output = input with slices index[i] along dim replaced by source slices i (last wins)",
    inplace=(("output", "input"),),
    c_create_args=("output", "input", "dim", "index", "source"),  # upstream: dim between input and index
)
