"""GGUF cases for ``avg_pool``: the quick and full instances of ops/avg_pool/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("avg_pool")
