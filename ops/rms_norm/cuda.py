"""NVIDIA rms_norm, declared: the kernels are in kernel.cu; planning, compilation and launch are
infiniop_py.norm's (rows.py)."""

from pathlib import Path

from infiniop_py.dtypes import DType
from infiniop_py.norm import RowOp, row_factory

F16, BF16, F32, F64 = DType.F16, DType.BF16, DType.F32, DType.F64

factory = row_factory(
    RowOp(
        stem="rms_norm",
        source=Path(__file__).parent / "kernel.cu",
        order=("y", "x", "w"),
        rows=("y", "x"),
        params=("w",),
        types=("x", "w"),
        dtypes=((F16, F16), (F16, BF16), (F16, F32), (BF16, BF16), (BF16, F16), (BF16, F32), (F32, F32), (F64, F64)),
        scalars=("epsilon",),
        ring=2,
    )
)
