"""GGUF cases for ``relu_backward``: the quick and full instances of ops/relu_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("relu_backward")
