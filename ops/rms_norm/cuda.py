"""NVIDIA rms_norm: one row per group of TPR threads held in registers, or a block per row."""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType
from infiniop_py.norm import (
    NP,
    TPRS,
    Pick,
    RowPlan,
    allow_dyn_smem,
    forward_grid,
    fwd_rows,
    pipe_grid,
    pipe_smem,
    pipe_stages,
    source,
)  # fmt: skip
from infiniop_py.spec import Info

SOURCE = source(Path(__file__).parent / "kernel.cu")
ORDER = ("y", "x", "w")
COMBOS = [
    (DType.F16, DType.F16), (DType.F16, DType.BF16), (DType.F16, DType.F32),
    (DType.BF16, DType.BF16), (DType.BF16, DType.F16), (DType.BF16, DType.F32),
    (DType.F32, DType.F32), (DType.F64, DType.F64),
]  # fmt: skip


def names(t: DType, tw: DType, vec: int, tpr: int | None, r: int = 1, stages: int = 0) -> str:
    if stages:
        return f"rms_norm_fwd_cp<{ctype(t)}, {ctype(tw)}, {vec}, {tpr}, {stages}>"
    if tpr is None:
        return f"rms_norm_fwd_big<{ctype(t)}, {ctype(tw)}>"
    return f"rms_norm_fwd<{ctype(t)}, {ctype(tw)}, {vec}, {tpr}, {r}>"


class RMSNormKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        t, tw = info.tensors["x"].dtype, info.tensors["w"].dtype
        plan = RowPlan(info, ORDER, ("y", "x"), params=("w",))
        if plan.rows == 0:
            self.launch = lambda ptrs, ws, rt, stream: None
            return
        eps = ctypes.c_double(info.attrs["epsilon"])
        from infiniop_py.cuda.runtime import properties

        sms = properties(handle.device_id)["sm_count"]
        want = []
        if plan.vec > 1:
            want.append((plan.vec, plan.vec_tpr, pipe_stages("fwd", plan.vec_tpr, 1, NP, fwd_stages=2)))
        want.append((1, plan.tpr, 0))
        exprs = [names(t, tw, v, p, fwd_rows(p), st) for v, p, st in want]
        mod = get_module(SOURCE, exprs, handle.device_id)
        v0, p0, s0 = want[0]
        if s0 and not allow_dyn_smem(getattr(mod, "kernels", {}).get(exprs[0]), pipe_smem(s0, 1, NP, RowPlan.block(p0))):
            want[0] = (v0, p0, 0)  # no opt-in for the ring: the register-prefetch kernel
            exprs = [names(t, tw, v, p, fwd_rows(p), st) for v, p, st in want]
            mod = get_module(SOURCE, exprs, handle.device_id)
        launches = []
        for (_v, p, st), e in zip(want, exprs):
            args = [Slot(0), Slot(1), Slot(2), plan.meta, eps]
            if st:
                shm = pipe_smem(st, 1, NP, RowPlan.block(p))
                grid, block = pipe_grid(plan, p, sms, getattr(mod, "kernels", {}).get(e), shm)
                launches.append(Launch(mod.ptr[e], (grid,), (block,), args, shmem=shm))
            else:
                grid, block = forward_grid(plan, p, sms, fwd_rows(p))
                launches.append(Launch(mod.ptr[e], (grid,), (block,), args))
        vec = launches[0] if len(launches) == 2 else None
        self.pick = Pick(vec, launches[-1], plan.aligned)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def factory(info: Info, handle):
    return RMSNormKernel(info, handle)


def compile_units():
    # What a descriptor can select: per row-group size the register kernels (rows per step by
    # fwd_rows) on both paths, the ring kernel where pipe_stages plans one, and the block-per-row
    # kernel. One unit per dtype combination, so the compile check's workers share the family.
    units = []
    for t, tw in COMBOS:
        vec = 16 // {DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8}[t]
        exprs = []
        for p in TPRS:
            exprs += [names(t, tw, v, p, fwd_rows(p)) for v in (vec, 1)]
            st = pipe_stages("fwd", p, 1, NP, fwd_stages=2)
            if st:
                exprs.append(names(t, tw, vec, p, 1, st))
        exprs.append(names(t, tw, 1, None))
        units.append((SOURCE, exprs))
    return units


factory.compile_units = compile_units
