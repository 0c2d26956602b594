"""GGUF quirks of linear and linear_backward (ops.md §4.2-§4.3): a false ``bias_exist`` /
``has_bias`` flag means no bias; for linear_backward the presence of ``b`` (data unused)
requests ``grad_b``.

Some public generators for these two operators write strides in natural order instead of GGUF's
reversed order (gguf.md §6). A layout that overlaps itself cannot hold distinct stored data, so a
tensor whose strides overlap as read but not reversed is read with them reversed; this cannot
change a valid file.
"""

from __future__ import annotations

from .dialect import GGUFDialect


def _flag(raw) -> bool | None:
    from .values import as_kind

    for name in ("bias_exist", "has_bias"):
        v = raw.value(name)
        if v is not None:
            return bool(as_kind(v, "bool", raw.key(name)))
    return None


def _natural_order_strides(raw) -> None:
    from .overlap import self_overlaps

    for name in list(raw.tensors):
        strides = raw.strides_of(name)
        if strides is None:
            continue
        shape = raw.shape_of(name)
        if len(strides) != len(shape):
            continue  # the reader reports it
        if self_overlaps(shape, strides) is True and self_overlaps(shape, strides[::-1]) is False:
            raw.set_strides(name, strides[::-1])


class LinearDialect(GGUFDialect):
    def prepare(self, raw) -> None:
        _natural_order_strides(raw)
        if _flag(raw) is False:
            for name in ("b", "bias"):
                raw.drop(name)


class LinearBackwardDialect(GGUFDialect):
    def prepare(self, raw) -> None:
        _natural_order_strides(raw)
        has_b = any(raw.tensor(n) is not None for n in ("b", "bias"))
        if _flag(raw) is False or not has_b:
            for name in ("grad_b", "ans_grad_b"):
                raw.drop(name)
        for name in ("b", "bias"):
            raw.drop(name)


DIALECT = LinearDialect()
BACKWARD_DIALECT = LinearBackwardDialect()
