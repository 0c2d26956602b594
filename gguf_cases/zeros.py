"""GGUF cases for ``zeros``: the quick and full instances of ops/zeros/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("zeros")
