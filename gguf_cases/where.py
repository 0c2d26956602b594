"""GGUF cases for ``where``: the quick and full instances of ops/where/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("where")
