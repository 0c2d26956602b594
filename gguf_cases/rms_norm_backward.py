"""GGUF cases for ``rms_norm_backward``: the quick and full instances of ops/rms_norm_backward/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("rms_norm_backward")
