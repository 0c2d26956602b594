"""GGUF cases for ``linear_backward``: the quick and full instances of ops/linear_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("linear_backward")
