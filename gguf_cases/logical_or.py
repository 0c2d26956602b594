"""GGUF cases for ``logical_or``: the quick and full instances of ops/logical_or/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("logical_or")
