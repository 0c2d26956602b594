"""GGUF cases for ``max_pool_backward``: the quick and full instances of ops/max_pool_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("max_pool_backward")
