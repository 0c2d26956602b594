"""GGUF cases for ``index_copy_inplace``: the quick and full instances of ops/index_copy_inplace/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("index_copy_inplace")
