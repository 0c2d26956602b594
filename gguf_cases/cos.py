"""GGUF cases for ``cos``: the quick and full instances of ops/cos/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("cos")
