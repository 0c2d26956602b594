"""GGUF cases for ``max_pool``: the quick and full instances of ops/max_pool/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("max_pool")
