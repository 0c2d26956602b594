"""GGUF file quirks of the normalization family (gguf.md §3.3): layer_norm's and its backward's
bias flags, batch_norm's training flag."""

from __future__ import annotations

from .dialect import GGUFDialect


def _false(raw, key: str) -> bool:
    from .values import as_kind

    v = raw.value(key)
    return v is not None and not as_kind(v, "bool", raw.key(key))


class LayerNormFiles(GGUFDialect):
    """A `bias` tensor is ignored when `bias_exist`/`has_bias` says false (ops.md §3.3)."""

    def prepare(self, raw):
        if _false(raw, "bias_exist") or _false(raw, "has_bias"):
            raw.drop("bias")


class LayerNormBackwardFiles(GGUFDialect):
    """`bias_exist`/`has_bias` false: no grad_bias (its placeholder and answer are dropped)."""

    def prepare(self, raw):
        if _false(raw, "bias_exist") or _false(raw, "has_bias"):
            raw.drop("grad_bias")
            raw.drop("ans_grad_bias")


class BatchNormFiles(GGUFDialect):
    """A `training` key, when present, must be true (only training mode is defined)."""

    def adapt(self, test, raw):
        if _false(raw, "training"):
            from .container import TestError

            raise TestError(f"key '{raw.key('training')}' is false: only training-mode batch_norm is defined")
