"""GGUF cases for ``leaky_relu``: the quick and full instances of ops/leaky_relu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("leaky_relu")
