"""GGUF cases for ``ones``: the quick and full instances of ops/ones/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("ones")
