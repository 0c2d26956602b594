"""NVIDIA layer_norm: one row per group of TPR threads held in registers (mean and centred
variance from registers), or a block per row for long rows."""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, F
from infiniop_py.norm import FWD_RS, TPRS, Pick, RowPlan, forward_grid, fwd_rows, noop, sm_count, source
from infiniop_py.spec import Info

SOURCE = source(Path(__file__).parent / "kernel.cu")
ORDER = ("output", "input_standardization", "input_std_deviation", "input", "weight", "bias")
VEC = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.F64: 2}


def name(t: DType, vec: int, tpr: int | None, r: int = 1) -> str:
    if tpr is None:
        return f"layer_norm_fwd_big<{ctype(t)}>"
    return f"layer_norm_fwd<{ctype(t)}, {vec}, {tpr}, {r}>"


class LayerNormKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        t = info.tensors["input"].dtype
        plan = RowPlan(
            info,
            ORDER,
            ("output", "input_standardization", "input"),
            params=("weight", "bias"),
            row_extra=("input_std_deviation",),
        )
        sms = sm_count(handle)
        variants = ([(plan.vec, plan.vec_tpr)] if plan.vec > 1 else []) + [(1, plan.tpr)]
        exprs = [name(t, v, p, fwd_rows(p)) for v, p in variants]
        mod = get_module(SOURCE, exprs, handle.device_id)
        eps = ctypes.c_double(info.attrs["eps"])
        launches = []
        for (_v, p), e in zip(variants, exprs):
            grid, block = forward_grid(plan, p, sms, fwd_rows(p))
            args = [Slot(i) for i in range(6)] + [plan.meta, eps]
            launches.append(Launch(mod.ptr[e], (grid,), (block,), args))
        self.pick = Pick(launches[0] if len(launches) == 2 else None, launches[-1], plan.aligned)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def factory(info: Info, handle):
    if info.tensors["output"].numel == 0:
        k = CudaKernel(handle)
        k.launch = noop
        return k
    return LayerNormKernel(info, handle)


def compile_units():
    exprs = []
    for t in sorted(F):
        for p in TPRS:
            exprs += [name(t, v, p, r) for v in (VEC[t], 1) for r in (FWD_RS if p <= 256 else (1,))]
        exprs.append(name(t, 1, None))
    return [(SOURCE, exprs)]


factory.compile_units = compile_units
