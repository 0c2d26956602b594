"""NVIDIA layer_norm, declared: the kernels are in kernel.cu (mean and centred variance from
registers); planning, compilation and launch are infiniop_py.norm's (rows.py)."""

from pathlib import Path

from infiniop_py.dtypes import F
from infiniop_py.norm import RowOp, row_factory

factory = row_factory(
    RowOp(
        stem="layer_norm",
        source=Path(__file__).parent / "kernel.cu",
        order=("output", "input_standardization", "input_std_deviation", "input", "weight", "bias"),
        rows=("output", "input_standardization", "input"),
        params=("weight", "bias"),
        row_extra=("input_std_deviation",),
        types=("input",),
        dtypes=tuple((t,) for t in sorted(F)),
        scalars=("eps",),
        ring=3,
    )
)
