"""GGUF cases for ``equal``: the quick and full instances of ops/equal/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("equal")
