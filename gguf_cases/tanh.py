"""GGUF cases for ``tanh``: the quick and full instances of ops/tanh/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("tanh")
