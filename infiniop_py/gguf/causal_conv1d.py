"""GGUF quirks of the causal conv1d family (ops.md §7): causal_conv1d, causal_conv1d_backward
and causal_conv1d_update."""

from __future__ import annotations

from .dialect import GGUFDialect


class ConvFiles(GGUFDialect):
    """GGUF quirks of the family (ops.md §7): a bool ``silu`` key stands for ``activation``
    when that string is absent; with ``single_ans``, the first output's expected value is
    written as ``ans`` (the forward's file form; ``ans_final_states`` stays as it is)."""

    def __init__(self, single_ans: bool = False):
        self.single_ans = single_ans

    def adapt(self, test, raw) -> None:
        v = raw.value("silu")
        if v is not None and raw.value("activation") is None:
            from .values import as_kind

            test.attrs["activation"] = "silu" if as_kind(v, "bool", raw.key("silu")) else "none"

    def write(self, record) -> None:
        if self.single_ans and "ans_out" in record.tensors:
            record.rename("ans_out", "ans")
