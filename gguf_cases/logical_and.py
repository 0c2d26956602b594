"""GGUF cases for ``logical_and``: the quick and full instances of ops/logical_and/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("logical_and")
