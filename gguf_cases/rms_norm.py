"""GGUF cases for ``rms_norm``: the quick and full instances of ops/rms_norm/cases.py; quick instances
with a tensor of more than 64K elements (the many-row GPU cases) are written to the full suite."""

from ._common import QUICK_ELEMENTS, OpGenerator

GENERATOR = OpGenerator("rms_norm", quick_elements=QUICK_ELEMENTS)
