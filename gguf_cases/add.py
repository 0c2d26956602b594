"""GGUF cases for ``add``: the quick and full instances of ops/add/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("add")
