"""GGUF cases for ``gelu``: the quick and full instances of ops/gelu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("gelu")
