"""NVIDIA layer_norm: one row per group of TPR threads held in registers (mean and centred
variance from registers), or a block per row for long rows."""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, F
from infiniop_py.norm import (
    NP,
    TPRS,
    Pick,
    RowPlan,
    allow_dyn_smem,
    forward_grid,
    fwd_rows,
    noop,
    pipe_grid,
    pipe_smem,
    pipe_stages,
    sm_count,
    source,
)  # fmt: skip
from infiniop_py.spec import Info

SOURCE = source(Path(__file__).parent / "kernel.cu")
ORDER = ("output", "input_standardization", "input_std_deviation", "input", "weight", "bias")
VEC = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.F64: 2}


def name(t: DType, vec: int, tpr: int | None, r: int = 1, stages: int = 0) -> str:
    if stages:
        return f"layer_norm_fwd_cp<{ctype(t)}, {vec}, {tpr}, {stages}>"
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
        variants = ([(plan.vec, plan.vec_tpr, pipe_stages("fwd", plan.vec_tpr, 1, NP))] if plan.vec > 1 else []) + [
            (1, plan.tpr, 0)
        ]
        exprs = [name(t, v, p, fwd_rows(p), st) for v, p, st in variants]
        mod = get_module(SOURCE, exprs, handle.device_id)
        v0, p0, s0 = variants[0]
        if s0 and not allow_dyn_smem(getattr(mod, "kernels", {}).get(exprs[0]), pipe_smem(s0, 1, NP, RowPlan.block(p0))):
            variants[0] = (v0, p0, 0)  # no opt-in for the ring: the register-prefetch kernel
            exprs = [name(t, v, p, fwd_rows(p), st) for v, p, st in variants]
            mod = get_module(SOURCE, exprs, handle.device_id)
        eps = ctypes.c_double(info.attrs["eps"])
        launches = []
        for (_v, p, st), e in zip(variants, exprs):
            args = [Slot(i) for i in range(6)] + [plan.meta, eps]
            if st:
                shm = pipe_smem(st, 1, NP, RowPlan.block(p))
                grid, block = pipe_grid(plan, p, sms, getattr(mod, "kernels", {}).get(e), shm)
                launches.append(Launch(mod.ptr[e], (grid,), (block,), args, shmem=shm))
            else:
                grid, block = forward_grid(plan, p, sms, fwd_rows(p))
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
    # What a descriptor can select: per row-group size the register kernels (rows per step by
    # fwd_rows) on both paths, the ring kernel where pipe_stages plans one, and the block-per-row
    # kernel. One unit per dtype, so the compile check's workers share the family.
    units = []
    for t in sorted(F):
        exprs = []
        for p in TPRS:
            exprs += [name(t, v, p, fwd_rows(p)) for v in (VEC[t], 1)]
            st = pipe_stages("fwd", p, 1, NP)
            if st:
                exprs.append(name(t, VEC[t], p, 1, st))
        exprs.append(name(t, 1, None))
        units.append((SOURCE, exprs))
    return units


factory.compile_units = compile_units
