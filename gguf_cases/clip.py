"""GGUF cases for ``clip``: the quick and full instances of ops/clip/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("clip")
