"""GGUF cases for ``layer_norm``: the quick and full instances of ops/layer_norm/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("layer_norm")
