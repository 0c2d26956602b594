"""GGUF cases for ``linear``: the quick and full instances of ops/linear/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("linear")
