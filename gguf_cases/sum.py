"""GGUF cases for ``sum``: the quick and full instances of ops/sum/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("sum")
