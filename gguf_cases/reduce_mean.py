"""GGUF cases for ``reduce_mean``: the quick and full instances of ops/reduce_mean/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("reduce_mean")
