"""NVIDIA rms_norm_backward: persistent row-wise stage 1 (grad_x + per-block grad_w partial rows
in the workspace), then the fixed-order column sum."""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType
from infiniop_py.norm import (
    NP_BWD,
    TPRS,
    Pick,
    RowPlan,
    Seq,
    acc_ctype,
    acc_size,
    align_up,
    allow_dyn_smem,
    bwd_block,
    bwd_opt,
    bwd_per_sm,
    col_sum2_launch,
    noop,
    persistent_grid,
    pipe_grid,
    pipe_smem,
    pipe_stages,
    sm_count,
    source,
)  # fmt: skip
from infiniop_py.spec import Info

SOURCE = source(Path(__file__).parent / "kernel.cu")
ORDER = ("grad_x", "grad_w", "grad_y", "x", "w")
COMBOS = [(DType.F16, DType.F16), (DType.F16, DType.F32), (DType.BF16, DType.BF16), (DType.BF16, DType.F32),
          (DType.F32, DType.F32), (DType.F64, DType.F64)]  # fmt: skip
VEC = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.F64: 2}


def name(t: DType, tw: DType, vec: int, tpr: int | None, stages: int = 0, opt: int = 0) -> str:
    if stages:
        return f"rms_norm_bwd_cp<{ctype(t)}, {ctype(tw)}, {vec}, {tpr}, {stages}, {opt}>"
    if tpr is None:
        return f"rms_norm_bwd_big<{ctype(t)}, {ctype(tw)}>"
    return f"rms_norm_bwd<{ctype(t)}, {ctype(tw)}, {vec}, {tpr}>"


def col_name(tw: DType, t: DType) -> str:
    return f"norm_col_sum2<{ctype(tw)}, {acc_ctype(t)}>"


class RMSNormBackwardKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        ti = info.tensors
        t, tw = ti["x"].dtype, ti["w"].dtype
        plan = RowPlan(info, ORDER, ("grad_x", "grad_y", "x"), params=("w", "grad_w"), np_=NP_BWD)
        sms = sm_count(handle)
        D = plan.D
        variants = ([(plan.vec, plan.vec_tpr, pipe_stages("bwd", plan.vec_tpr, 2, NP_BWD))] if plan.vec > 1 else []) + [
            (1, plan.tpr, 0)
        ]
        opt = bwd_opt("rms", plan.vec_tpr)
        exprs = [name(t, tw, v, p, st, opt if st else 0) for v, p, st in variants] + [col_name(tw, t)]
        mod = get_module(SOURCE, exprs, handle.device_id)
        v0, p0, s0 = variants[0]
        if s0 and not allow_dyn_smem(getattr(mod, "kernels", {}).get(exprs[0]), pipe_smem(s0, 2, NP_BWD, bwd_block(p0, opt))):
            variants[0] = (v0, p0, 0)  # no opt-in for the ring: the register-prefetch kernel
            exprs = [name(t, tw, v, p, st, opt if st else 0) for v, p, st in variants] + [col_name(tw, t)]
            mod = get_module(SOURCE, exprs, handle.device_id)
        eps = ctypes.c_double(info.attrs["epsilon"])
        gw_stride = ti["grad_w"].strides[0]

        def col(nparts):
            return col_sum2_launch(mod.ptr[exprs[-1]], [(1, 0, gw_stride)], D, nparts)

        seqs, need = [], 0
        for (_v, p, st), e in zip(variants, exprs):
            if plan.rows == 0:
                seqs.append(col(0))
                continue
            shm = 0
            if st:
                shm = pipe_smem(st, 2, NP_BWD, bwd_block(p, opt))
                grid, block = pipe_grid(plan, p, sms, getattr(mod, "kernels", {}).get(e), shm, bwd_block(p, opt))
            else:
                grid, block = persistent_grid(plan, p, sms, bwd_per_sm(mod, e, p))
            need = max(need, grid * D * acc_size(t))
            args = [Slot(0), Slot("ws"), Slot(2), Slot(3), Slot(4), plan.meta, eps]
            stage1 = Launch(mod.ptr[e], (grid,), (block,), args, shmem=shm)
            seqs.append(Seq(stage1, col(grid)))
        self.workspace_size = align_up(need)
        self.pick = Pick(seqs[0] if len(seqs) == 2 else None, seqs[-1], plan.aligned)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def factory(info: Info, handle):
    if info.tensors["grad_x"].numel == 0 and info.tensors["grad_w"].numel == 0:
        k = CudaKernel(handle)
        k.launch = noop
        return k
    return RMSNormBackwardKernel(info, handle)


def compile_units():
    # What a descriptor can select: per row-group size the register-prefetch kernels on both
    # paths, the ring kernel (depth by pipe_stages, OPT by bwd_opt) where planned, the
    # block-per-row kernel and the column sum. One unit per dtype combination, so the compile
    # check's workers share the family.
    units = []
    for t, tw in COMBOS:
        exprs = []
        for p in TPRS:
            exprs += [name(t, tw, VEC[t], p), name(t, tw, 1, p)]
            st = pipe_stages("bwd", p, 2, NP_BWD)
            if st:
                exprs.append(name(t, tw, VEC[t], p, st, bwd_opt("rms", p)))
        exprs += [name(t, tw, 1, None), col_name(tw, t)]
        units.append((SOURCE, exprs))
    return units


factory.compile_units = compile_units
