"""NVIDIA causal_conv1d_update: one launch of ``ccu`` (a block per batch row and channel range, a
thread per channel)."""

from __future__ import annotations

from pathlib import Path

from infiniop_py.causal import plan
from infiniop_py.causal.plan import GEN_BLOCK, CcKernel, Pick, launch, names
from infiniop_py.cuda.compiler import Slot
from infiniop_py.cuda.launch import sm_count
from infiniop_py.dtypes import DType
from infiniop_py.spec import Info


class CausalConv1dUpdateKernel(CcKernel):
    SOURCE = plan.source(Path(__file__).parent / "kernel.cu")

    def __init__(self, info: Info, handle):
        super().__init__(handle)
        ti = info.tensors
        T = ti["x"].dtype  # noqa: N806
        B, D, T_, W, S = info.B, info.D, info.T, info.W, info.S  # noqa: N806

        def bdt(desc):  # strides as (B, D, T)
            st = desc.strides
            return st if len(st) == 3 else (st[0], st[1], 0)

        ind = ti["conv_state_indices"]
        flags = (plan.BIAS if ti["bias"] is not None else 0) | (plan.SILU if info.silu else 0)
        if ind is not None:
            flags |= plan.SEQ | (plan.SEQ64 if ind.dtype is DType.I64 else 0)
        a = plan.make_args(
            B,
            D,
            T_,
            W,
            flags,
            ti["weight"].dtype,
            x=bdt(ti["x"]),
            o=bdt(ti["out"]),
            is_=ti["conv_state"].strides,
            sq=(ind.strides[0] if ind is not None else 0, 0),
            w=ti["weight"].strides,
            bs=ti["bias"].strides[0] if ti["bias"] is not None else 0,
            nseg=S,
        )
        runs = []
        if B * D:
            fn = self.fn(names("ccu", T, W))
            grid = (max(1, min(-(-D // GEN_BLOCK), 8 * sm_count(handle))), min(B, plan.MAX_GRID_Y))
            runs.append(launch(fn, grid, (GEN_BLOCK,), [Slot(i) for i in range(6)], a))
        self.pick = Pick(None, runs, [])


factory = plan.nvidia_factory(CausalConv1dUpdateKernel, lambda t: plan.width_names(("ccu",), t, seq=False))
