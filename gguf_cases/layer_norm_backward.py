"""GGUF cases for ``layer_norm_backward``: the quick and full instances of ops/layer_norm_backward/cases.py; quick instances
with a tensor of more than 64K elements (the many-row GPU cases) are written to the full suite."""

from ._common import QUICK_ELEMENTS, OpGenerator

GENERATOR = OpGenerator("layer_norm_backward", quick_elements=QUICK_ELEMENTS)
