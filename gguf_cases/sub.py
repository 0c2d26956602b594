"""GGUF cases for ``sub``: the quick and full instances of ops/sub/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("sub")
