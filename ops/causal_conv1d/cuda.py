"""NVIDIA causal_conv1d: one launch per call (two on the generic path with final_states).
Paths and grids: infiniop_py/causal/plan.py; kernels: kernel.cu after infiniop_py/causal/common.cuh."""

from __future__ import annotations

from pathlib import Path

from infiniop_py.causal import plan
from infiniop_py.causal.plan import CF_WARPS, CL_BLOCK, CL_E, GEN_BLOCK, CcKernel, Pick, launch, names
from infiniop_py.cuda.compiler import Slot
from infiniop_py.cuda.launch import sm_count
from infiniop_py.spec import Info


class CausalConv1dKernel(CcKernel):
    SOURCE = plan.source(Path(__file__).parent / "kernel.cu")

    def __init__(self, info: Info, handle):
        super().__init__(handle)
        ti = info.tensors
        T = ti["x"].dtype  # noqa: N806
        B, D, L, W = info.B, info.D, info.L, info.W  # noqa: N806
        xs, os_ = ti["x"].strides, ti["out"].strides
        a = plan.row_args(info, "final_states", "out")
        if B * D == 0:
            return
        sms = sm_count(handle)
        seq = ti["seq_idx"] is not None
        slots = [Slot(i) for i in range(7)]
        self.path = path = plan.path_for(W, L, [xs, os_])
        if path == "cf":
            e, nseg, rseg, ntask, blocks = plan.cf_plan(B, D, L, T, sms, plan.CF_FWD_RUNS)
            fn = self.fn(names("ccf_cf", T, W, seq))
            a = plan.with_(a, nseg=nseg, ntask=ntask, rseg=rseg)
            grid, block = (blocks,), (32 * CF_WARPS,)
            ok = plan.vec_ok((B, D, L), [xs, os_], (0, 1), e)
            align = [(0, 16), (2, 16)]
        elif path == "cl":
            rseg, ntile, ntask, grid = plan.cl_plan(B, D, L, sms, CL_E, plan.cl_chunk(T, W))
            fn = self.fn(names("ccf_cl", T, W, seq))
            a = plan.with_(a, nseg=ntile, ntask=ntask, rseg=rseg)
            block = CL_BLOCK
            ok = plan.vec_ok((B, D, L), [xs, os_], (0, 2), plan.pack_of(T))
            align = [(0, 16), (2, 16)]
        if path in ("cf", "cl"):
            self.pick = plan.pick_vec(fn, grid, block, slots, a, ok, align)
            return
        runs = []
        if L:
            a = plan.with_(a, rseg=1 if os_[1] < os_[2] else 0)  # channels fastest for channel-last outputs
            runs.append(launch(self.fn(names("ccf_gen", T)), (plan.gen_grid(B * D * L, sms),), (GEN_BLOCK,), slots, a))
        if ti["final_states"] is not None:
            fn = self.fn(names("cc_final", T))
            runs.append(launch(fn, (plan.gen_grid(B * D * (W - 1), sms),), (GEN_BLOCK,), [Slot(1), Slot(2), Slot(5)], a))
        self.pick = Pick(None, runs, [])


factory = plan.nvidia_factory(
    CausalConv1dKernel, lambda t: [*plan.width_names(("ccf_cf", "ccf_cl"), t), names("ccf_gen", t), names("cc_final", t)]
)
