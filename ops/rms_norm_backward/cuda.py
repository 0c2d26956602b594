"""NVIDIA rms_norm_backward, declared: the kernels are in kernel.cu (grad_x and per-block grad_w
partial rows, then the fixed-order column sum); planning, compilation and launch are
infiniop_py.norm's (rows.py)."""

from pathlib import Path

from infiniop_py.dtypes import DType
from infiniop_py.norm import RowOp, row_factory

F16, BF16, F32, F64 = DType.F16, DType.BF16, DType.F32, DType.F64

factory = row_factory(
    RowOp(
        stem="rms_norm",
        source=Path(__file__).parent / "kernel.cu",
        order=("grad_x", "grad_w", "grad_y", "x", "w"),
        rows=("grad_x", "grad_y", "x"),
        params=("w", "grad_w"),
        grads=("grad_w",),
        types=("x", "w"),
        dtypes=((F16, F16), (F16, F32), (BF16, BF16), (BF16, F32), (F32, F32), (F64, F64)),
        scalars=("epsilon",),
    )
)
