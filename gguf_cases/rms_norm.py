"""GGUF cases for ``rms_norm``: the quick and full instances of ops/rms_norm/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("rms_norm")
