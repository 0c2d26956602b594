"""GGUF cases for ``silu``: the quick and full instances of ops/silu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("silu")
