"""GGUF cases for ``layer_norm_backward``: the quick and full instances of ops/layer_norm_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("layer_norm_backward")
