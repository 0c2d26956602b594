"""GGUF cases for ``rope``: the quick and full instances of ops/rope/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("rope")
