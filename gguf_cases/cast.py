"""GGUF cases for ``cast``: the quick and full instances of ops/cast/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("cast")
