"""NVIDIA layer_norm_backward, declared: the kernels are in kernel.cu (grad_input and per-block
partial rows of grad_weight and grad_bias, then fixed-order column sums); planning, compilation
and launch are infiniop_py.norm's (rows.py)."""

from pathlib import Path

from infiniop_py.dtypes import F
from infiniop_py.norm import RowOp, row_factory

factory = row_factory(
    RowOp(
        stem="layer_norm",
        source=Path(__file__).parent / "kernel.cu",
        order=("grad_input", "grad_weight", "grad_bias", "grad_output", "weight", "input_standardization", "input_std_deviation"),
        rows=("grad_input", "grad_output", "input_standardization"),
        params=("weight", "grad_weight", "grad_bias"),
        row_extra=("input_std_deviation",),
        grads=("grad_weight", "grad_bias"),
        types=("grad_output",),
        dtypes=tuple((t,) for t in sorted(F)),
        scalars=("grad_bias",),
    )
)
