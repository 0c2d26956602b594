"""GGUF cases for ``cross_entropy``: the quick and full instances of ops/cross_entropy/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("cross_entropy")
