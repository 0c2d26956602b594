"""GGUF cases for ``causal_softmax``: the quick and full instances of ops/causal_softmax/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("causal_softmax")
