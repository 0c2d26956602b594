"""GGUF cases for ``conv_transpose``: the quick and full instances of ops/conv_transpose/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("conv_transpose")
