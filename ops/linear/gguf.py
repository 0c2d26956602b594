"""GGUF quirks of linear and linear_backward (ops.md §4.2-§4.3): a false ``bias_exist`` /
``has_bias`` flag means no bias; for linear_backward the presence of ``b`` (data unused)
requests ``grad_b``."""

from __future__ import annotations

try:
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover - GGUF support not installed
    GGUFDialect = object


def _flag(raw) -> bool | None:
    from infiniop_py.gguf.values import as_kind

    for name in ("bias_exist", "has_bias"):
        v = raw.value(name)
        if v is not None:
            return bool(as_kind(v, "bool", raw.key(name)))
    return None


class LinearDialect(GGUFDialect):
    def prepare(self, raw) -> None:
        if _flag(raw) is False:
            for name in ("b", "bias"):
                raw.drop(name)


class LinearBackwardDialect(GGUFDialect):
    def prepare(self, raw) -> None:
        has_b = any(raw.tensor(n) is not None for n in ("b", "bias"))
        if _flag(raw) is False or not has_b:
            for name in ("grad_b", "ans_grad_b"):
                raw.drop(name)
        for name in ("b", "bias"):
            raw.drop(name)


DIALECT = LinearDialect()
BACKWARD_DIALECT = LinearBackwardDialect()
