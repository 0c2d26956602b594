"""GGUF cases for ``softmax``: the quick and full instances of ops/softmax/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("softmax")
