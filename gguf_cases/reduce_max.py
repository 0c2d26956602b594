"""GGUF cases for ``reduce_max``: the quick and full instances of ops/reduce_max/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("reduce_max")
