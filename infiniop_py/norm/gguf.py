"""GGUF file quirks of the normalization family (gguf.md §3.3). Imported by the op specs; the
GGUF package is optional at run time, so every GGUF import here is guarded or lazy."""

from __future__ import annotations

try:
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover - GGUF support not installed
    GGUFDialect = object


def _false(raw, key: str) -> bool:
    from infiniop_py.gguf.values import as_kind

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
            from infiniop_py.gguf import TestError

            raise TestError(f"key '{raw.key('training')}' is false: only training-mode batch_norm is defined")
