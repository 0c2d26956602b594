"""GGUF cases for ``batch_norm_backward``: the quick and full instances of ops/batch_norm_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("batch_norm_backward")
