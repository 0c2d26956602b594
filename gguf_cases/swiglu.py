"""GGUF cases for ``swiglu``: the quick and full instances of ops/swiglu/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("swiglu")
