"""GGUF cases for ``log_softmax``: the quick and full instances of ops/log_softmax/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("log_softmax")
