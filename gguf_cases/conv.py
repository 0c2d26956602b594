"""GGUF cases for ``conv``: the quick and full instances of ops/conv/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("conv")
