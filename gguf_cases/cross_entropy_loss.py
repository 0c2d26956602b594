"""GGUF cases for ``cross_entropy_loss``: the quick and full instances of ops/cross_entropy_loss/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("cross_entropy_loss")
