"""GGUF cases for ``sigmoid_backward``: the quick and full instances of ops/sigmoid_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("sigmoid_backward")
