"""GGUF cases for ``random_sample``: the quick and full instances of ops/random_sample/cases.py.

The dialect (ops/random_sample) writes upstream's layout: the logits as `data` plus `voc`.
"""

from ._common import OpGenerator

GENERATOR = OpGenerator("random_sample")
