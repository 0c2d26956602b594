"""GGUF cases for ``cross_entropy_loss_backward``: the quick and full instances of ops/cross_entropy_loss_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("cross_entropy_loss_backward")
