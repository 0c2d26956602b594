"""GGUF cases for ``batch_norm``: the quick and full instances of ops/batch_norm/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("batch_norm")
