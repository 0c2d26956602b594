"""GGUF cases for ``exp``: the quick and full instances of ops/exp/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("exp")
