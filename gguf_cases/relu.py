"""GGUF cases for ``relu``: the quick and full instances of ops/relu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("relu")
