"""GGUF cases for ``triu``: the quick and full instances of ops/triu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("triu")
