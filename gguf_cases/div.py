"""GGUF cases for ``div``: the quick and full instances of ops/div/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("div")
