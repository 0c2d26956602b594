"""GGUF cases for ``rearrange``: the quick and full instances of ops/rearrange/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("rearrange")
