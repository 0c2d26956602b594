"""GGUF cases for ``sin``: the quick and full instances of ops/sin/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("sin")
