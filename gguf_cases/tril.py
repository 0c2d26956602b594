"""GGUF cases for ``tril``: the quick and full instances of ops/tril/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("tril")
