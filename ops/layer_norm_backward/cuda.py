"""NVIDIA layer_norm_backward: persistent row-wise stage 1 (grad_input + per-block partial rows
of grad_weight and grad_bias in the workspace), then fixed-order column sums."""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, F
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
    persistent_grid,
    pipe_grid,
    pipe_smem,
    pipe_stages,
    sm_count,
    source,
)  # fmt: skip
from infiniop_py.spec import Info

SOURCE = source(Path(__file__).parent / "kernel.cu")
ORDER = ("grad_input", "grad_weight", "grad_bias", "grad_output", "weight", "input_standardization", "input_std_deviation")
VEC = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.F64: 2}


def name(t: DType, vec: int, tpr: int | None, stages: int = 0, opt: int = 0) -> str:
    if stages:
        return f"layer_norm_bwd_cp<{ctype(t)}, {vec}, {tpr}, {stages}, {opt}>"
    if tpr is None:
        return f"layer_norm_bwd_big<{ctype(t)}>"
    return f"layer_norm_bwd<{ctype(t)}, {vec}, {tpr}>"


def col_name(t: DType) -> str:
    return f"norm_col_sum2<{ctype(t)}, {acc_ctype(t)}>"


class LayerNormBackwardKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        ti = info.tensors
        t = ti["grad_output"].dtype
        has_bias = ti.get("grad_bias") is not None
        plan = RowPlan(
            info,
            ORDER,
            ("grad_input", "grad_output", "input_standardization"),
            params=("weight", "grad_weight", "grad_bias"),
            row_extra=("input_std_deviation",),
            np_=NP_BWD,
        )
        sms = sm_count(handle)
        D = plan.D
        variants = ([(plan.vec, plan.vec_tpr, pipe_stages("bwd", plan.vec_tpr, 2, NP_BWD))] if plan.vec > 1 else []) + [
            (1, plan.tpr, 0)
        ]
        opt = bwd_opt("layer", plan.vec_tpr)
        exprs = [name(t, v, p, st, opt if st else 0) for v, p, st in variants] + [col_name(t)]
        mod = get_module(SOURCE, exprs, handle.device_id)
        v0, p0, s0 = variants[0]
        if s0 and not allow_dyn_smem(getattr(mod, "kernels", {}).get(exprs[0]), pipe_smem(s0, 2, NP_BWD, bwd_block(p0, opt))):
            variants[0] = (v0, p0, 0)  # no opt-in for the ring: the register-prefetch kernel
            exprs = [name(t, v, p, st, opt if st else 0) for v, p, st in variants] + [col_name(t)]
            mod = get_module(SOURCE, exprs, handle.device_id)
        col = mod.ptr[exprs[-1]]
        grids, shms = [], []
        for (_v, p, st), e in zip(variants, exprs):
            shm = 0
            if st:
                shm = pipe_smem(st, 2, NP_BWD, bwd_block(p, opt))
                grids.append(pipe_grid(plan, p, sms, getattr(mod, "kernels", {}).get(e), shm, bwd_block(p, opt)))
            else:
                grids.append(persistent_grid(plan, p, sms, bwd_per_sm(mod, e, p)))
            shms.append(shm)
        part = align_up(max(g for g, _b in grids) * D * acc_size(t)) if plan.rows else 0
        gw_s = ti["grad_weight"].strides[0]
        gb_s = ti["grad_bias"].strides[0] if has_bias else 0
        seqs = []
        for e, (grid, block), shm in zip(exprs, grids, shms):
            nparts = grid if plan.rows else 0
            launches = []
            if plan.rows:
                args = [Slot(0), Slot("ws"), Slot("ws", part), Slot(3), Slot(4), Slot(5), Slot(6), plan.meta]
                launches.append(Launch(mod.ptr[e], (grid,), (block,), [*args, ctypes.c_int(int(has_bias))], shmem=shm))
            outs = [(1, 0, gw_s)] + ([(2, part, gb_s)] if has_bias else [])
            launches.append(col_sum2_launch(col, outs, D, nparts))
            seqs.append(Seq(*launches))
        self.workspace_size = 2 * part if has_bias else part
        self.pick = Pick(seqs[0] if len(seqs) == 2 else None, seqs[-1], plan.aligned)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def factory(info: Info, handle):
    return LayerNormBackwardKernel(info, handle)


def compile_units():
    # What a descriptor can select: per row-group size the register-prefetch kernels on both
    # paths, the ring kernel (depth by pipe_stages, OPT by bwd_opt) where planned, the
    # block-per-row kernel and the column sum. One unit per dtype combination, so the compile
    # check's workers share the family.
    units = []
    for t in sorted(F):
        exprs = []
        for p in TPRS:
            exprs += [name(t, VEC[t], p), name(t, 1, p)]
            st = pipe_stages("bwd", p, 2, NP_BWD)
            if st:
                exprs.append(name(t, VEC[t], p, st, bwd_opt("layer", p)))
        exprs += [name(t, 1, None), col_name(t)]
        units.append((SOURCE, exprs))
    return units


factory.compile_units = compile_units
