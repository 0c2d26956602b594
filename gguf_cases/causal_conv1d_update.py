"""GGUF cases for ``causal_conv1d_update``: the quick and full instances of ops/causal_conv1d_update/cases.py; quick instances
with a tensor of more than 64K elements (the seed report's larger configurations) are written to
the full suite."""

from ._common import QUICK_ELEMENTS, OpGenerator

GENERATOR = OpGenerator("causal_conv1d_update", quick_elements=QUICK_ELEMENTS)
