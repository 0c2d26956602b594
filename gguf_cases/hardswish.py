"""GGUF cases for ``hardswish``: the quick and full instances of ops/hardswish/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("hardswish")
