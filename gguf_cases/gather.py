"""GGUF cases for ``gather``: the quick and full instances of ops/gather/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("gather")
