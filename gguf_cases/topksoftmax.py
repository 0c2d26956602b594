"""GGUF cases for ``topksoftmax``: the quick and full instances of ops/topksoftmax/cases.py.

The dialect (ops/topksoftmax) stores the expected values as upstream does: `lable_values`,
`lable_indices`.
"""

from ._common import OpGenerator

GENERATOR = OpGenerator("topksoftmax")
