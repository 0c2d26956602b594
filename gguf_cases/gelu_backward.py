"""GGUF cases for ``gelu_backward``: the quick and full instances of ops/gelu_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("gelu_backward")
