"""GGUF cases for ``interpolate_nearest``: the quick and full instances of ops/interpolate_nearest/cases.py."""

from ._common import OpGenerator

GENERATOR = OpGenerator("interpolate_nearest")
