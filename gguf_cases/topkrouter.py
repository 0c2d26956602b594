"""GGUF cases for ``topkrouter``: the quick and full instances of ops/topkrouter/cases.py.

The dialect (ops/topkrouter) stores the expected values as upstream does: `lable_values`,
`lable_indices`.
"""

from ._common import OpGenerator

GENERATOR = OpGenerator("topkrouter")
