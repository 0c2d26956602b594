"""GGUF cases for ``scatter``: the quick and full instances of ops/scatter/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("scatter")
