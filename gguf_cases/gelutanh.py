"""GGUF cases for ``gelutanh``: the quick and full instances of ops/gelutanh/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("gelutanh")
