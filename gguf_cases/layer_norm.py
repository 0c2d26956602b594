"""GGUF cases for ``layer_norm``: the quick and full instances of ops/layer_norm/cases.py; quick instances
with a tensor of more than 64K elements (the many-row GPU cases) are written to the full suite."""

from ._common import QUICK_ELEMENTS, OpGenerator

GENERATOR = OpGenerator("layer_norm", quick_elements=QUICK_ELEMENTS)
