"""GGUF cases for ``mul``: the quick and full instances of ops/mul/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("mul")
