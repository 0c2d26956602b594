"""GGUF cases for ``conv_backward``: the quick and full instances of ops/conv_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("conv_backward")
