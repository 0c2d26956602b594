"""index_copy_inplace: output.index_copy_(dim, index, source) -- output is [rw], rows not
indexed keep their contents; last i wins, out-of-range skipped (ops.md §5.5).

GGUF: the source is stored as ``input``; the destination is ``output`` (zero-filled by the
runner) or ``target`` (its stored data is the initial value).
"""

from __future__ import annotations

from infiniop_py.index.copy import copy_op
from infiniop_py.spec import inout, inp

try:
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover
    GGUFDialect = object


class Dialect(GGUFDialect):
    def prepare(self, raw) -> None:
        raw.iop_target = raw.tensor("target") is not None and raw.tensor("output") is None
        if raw.iop_target:
            raw.rename("target", "output")

    def write(self, record) -> None:
        # Our files carry the real initial destination: write it as ``target`` (stored data
        # is the initial value), not ``output`` (which readers zero-fill).
        if "output" in record.tensors:
            record.rename("output", "target")

    def adapt(self, test, raw) -> None:
        t = test.tensors.get("output")
        if t is not None and not getattr(raw, "iop_target", False):
            t.data = None
            t.fill = 0.0


SPEC = copy_op(
    base=None,
    slots={"output": 0, "source": 1, "index": 2},
    name="index_copy_inplace",
    stem="IndexCopyInplace",
    tensors=(inout("output", init=0.0, aliases=("target",)), inp("source", aliases=("input",)), inp("index")),
    torch="output.index_copy_(dim, index, source)",
    summary="output.select(dim, index[i]) = source.select(dim, i) in place (last wins)",
    gguf=Dialect(),
)
