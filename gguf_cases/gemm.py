"""GGUF cases for ``gemm``: the quick and full instances of ops/gemm/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("gemm")
