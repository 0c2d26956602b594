"""GGUF cases for ``index_copy``: the quick and full instances of ops/index_copy/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("index_copy")
