"""GGUF cases for ``avg_pool_backward``: the quick and full instances of ops/avg_pool_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("avg_pool_backward")
