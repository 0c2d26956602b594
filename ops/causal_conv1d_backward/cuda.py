"""NVIDIA causal_conv1d_backward: the channel-first or channel-last kernel (dx, dinitial_states and
per-block partial rows of dweight/dbias in the workspace), then cc_reduce sums the partial rows
in a fixed order into dweight/dbias: two launches, bitwise reproducible. The generic path (any
strides, W > 8, L = 0) stores g in the workspace and takes three launches. ``deterministic=false``
takes the same path (the partial rows cost little)."""

from __future__ import annotations

from pathlib import Path

from infiniop_py.causal import plan
from infiniop_py.causal.plan import CF_WARPS, CL_BLOCK, CLB_E, GEN_BLOCK, CcKernel, Pick, launch, names
from infiniop_py.cuda.compiler import Slot
from infiniop_py.cuda.launch import align_up, sm_count
from infiniop_py.dtypes import itemsize
from infiniop_py.spec import Info

CL_MAX_PARTS = 1024  # channel-last: at most this many partial rows (time groups loop beyond)


class CausalConv1dBackwardKernel(CcKernel):
    SOURCE = plan.source(Path(__file__).parent / "kernel.cu")

    def __init__(self, info: Info, handle):
        super().__init__(handle)
        ti = info.tensors
        T, TW = ti["x"].dtype, ti["weight"].dtype  # noqa: N806
        B, D, L, W = info.B, info.D, info.L, info.W  # noqa: N806
        xs, gs, os_ = ti["x"].strides, ti["dout"].strides, ti["dx"].strides
        a = plan.row_args(
            info,
            "dinitial_states",
            "dx",
            g=gs,
            dw=ti["dweight"].strides,
            dbs=ti["dbias"].strides[0] if ti["dbias"] is not None else 0,
        )
        self.workspace_size = 0
        if D == 0:
            return
        sms = sm_count(handle)
        seq = ti["seq_idx"] is not None
        self.path = path = plan.path_for(W, L, [xs, gs, os_]) if B else "gen"
        main = [Slot(0), Slot("ws"), Slot(3), Slot(4), Slot(5), Slot(6), Slot(7), Slot(8), Slot(9)]
        if path == "cf":
            e, nseg, rseg, ntask, blocks = plan.cf_plan(B, D, L, T, sms, plan.CF_BWD_RUNS)
            nparts = B * -(-nseg // rseg)
            fn = self.fn(names("ccb_cf", T, W, seq))
            a = plan.with_(a, nseg=nseg, ntask=ntask, rseg=rseg, nparts=nparts)
            grid, block = (blocks,), (32 * CF_WARPS,)
            ok = plan.vec_ok((B, D, L), [xs, gs, os_], (0, 1), e)
            align = [(0, 16), (4, 16), (7, 16)]
        elif path == "cl":
            rseg, ntile, ntask, (gx, gy) = plan.cl_plan(B, D, L, sms, CLB_E, plan.cl_chunk(T, W))
            gy = min(gy, CL_MAX_PARTS)
            nparts = gy
            fn = self.fn(names("ccb_cl", T, W, seq))
            a = plan.with_(a, nseg=ntile, ntask=ntask, rseg=rseg, nparts=nparts)
            grid, block = (gx, gy), CL_BLOCK
            ok = plan.vec_ok((B, D, L), [xs, gs, os_], (0, 2), 2 * CLB_E)
            align = [(i, 2 * CLB_E * itemsize(T)) for i in (0, 4, 7)]
        if path in ("cf", "cl"):
            self.workspace_size = align_up(nparts * D * (W + 1) * 4)
            red = self.fn(names("cc_reduce", TW))
            rgrid = (max(1, min(-(-D * (W + 1) // 32), sms * 16)),)
            reduce_ = launch(red, rgrid, (32, 8), [Slot(1), Slot(2), Slot("ws")], a)
            self.pick = plan.pick_vec(fn, grid, block, main, a, ok, align, tail=[reduce_])
            return
        a = plan.with_(a, rseg=1 if os_[1] < os_[2] else 0)  # channels fastest for channel-last dx
        self.workspace_size = align_up(B * D * L * 4)
        runs = []
        if B * L:
            g = self.fn(names("ccb_g", T))
            runs.append(launch(g, (plan.gen_grid(B * D * L, sms),), (GEN_BLOCK,), [Slot("ws"), *main[3:]], a))
        ndx = B * D * (L + W - 1) if ti["dinitial_states"] is not None else B * D * L
        if ndx:
            fn = self.fn(names("ccb_dx", T))
            runs.append(launch(fn, (plan.gen_grid(ndx, sms),), (GEN_BLOCK,), [Slot(0), Slot(3), Slot("ws"), Slot(5), Slot(9)], a))
        dw = self.fn(names("ccb_dw", T))
        runs.append(
            launch(dw, (min(D * (W + 1), sms * 64),), (256,), [Slot(1), Slot(2), Slot("ws"), Slot(4), Slot(8), Slot(9)], a)
        )
        self.pick = Pick(None, runs, [])


factory = plan.nvidia_factory(
    CausalConv1dBackwardKernel,
    lambda t: [*plan.width_names(("ccb_cf", "ccb_cl"), t), *(names(k, t) for k in ("ccb_g", "ccb_dx", "ccb_dw", "cc_reduce"))],
)
