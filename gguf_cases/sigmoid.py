"""GGUF cases for ``sigmoid``: the quick and full instances of ops/sigmoid/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("sigmoid")
