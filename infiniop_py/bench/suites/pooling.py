"""Pooling family: max_pool2d k3 s2 p1 and avg_pool2d k2 s2, forward and backward, against torch
eager on the same buffers.

GPU: (32, 64, 112, 112), NCHW and channels-last (every tensor), f32, f16, bf16. CPU (``--cpu``):
(4, 16, 56, 56) NCHW.

Peers: ``F.max_pool2d`` / ``F.avg_pool2d`` (count_include_pad=True); the backward peers are
``torch.autograd.grad`` of the same call (graph built once, ``retain_graph=True``, so only the
backward kernel is timed; torch's max backward reads the indices its forward saved, ours
recomputes the argmax from the input). For max backward, ``fwd+bwd`` is what a torch user
holding only the input and dy pays: the forward with its indices, then that backward, one
autograd call. torch.compile of the forward calls with ``--compile``.

Minimal bytes (the bytes-moved metric for % of copy bandwidth): forward reads x and writes y;
avg backward reads dy and writes dx (x only gives the shape); max backward reads dy and x and
writes dx.
"""

from __future__ import annotations

from infiniop_py.testing.pool_cases import out_shape as pool_out_shape

from ..core import BenchCase, standard_workload, traffic
from ..peers import Peer

NAME = "pooling"
PEERS = ("fwd+bwd",)  # max_pool_backward's peer of its own: torch's forward and backward in one call
DTYPES = ("f32", "f16", "bf16")
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
# the check compares with torch's own, differently ordered result: a few ulps of the dtype
TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (2e-2, 2e-2)}
POOLS = {
    "max": {"kernel_size": [3], "stride": [2], "padding": [1]},
    "avg": {"kernel_size": [2], "stride": [2], "padding": [0]},
}
NCHW, CHANNELS_LAST = "NCHW", "channels-last"


def _torch_pool(F, kind):  # noqa: N803 - torch.nn.functional
    a = POOLS[kind]
    k, s, p = a["kernel_size"][0], a["stride"][0], a["padding"][0]
    if kind == "max":
        return lambda x: F.max_pool2d(x, k, s, p)
    return lambda x: F.avg_pool2d(x, k, s, p, count_include_pad=True)


def pool_case(kind: str, backward: bool, dtype: str, shape: tuple, layout: str, quick=False) -> BenchCase:
    op = f"{kind}_pool" + ("_backward" if backward else "")

    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        pool = _torch_pool(torch.nn.functional, kind)
        fmt = torch.channels_last if layout == CHANNELS_LAST else torch.contiguous_format
        out_shape = pool_out_shape(shape, POOLS[kind])

        def lay(t):
            return t.contiguous(memory_format=fmt)

        def make_set():
            x = lay(env.random(shape, tdt))
            if not backward:
                return [lay(env.poisoned(out_shape, tdt)), x], (x,)
            dy = lay(env.random(out_shape, tdt))
            xr = x.detach().clone().requires_grad_()
            y = pool(xr)

            def grad():
                return torch.autograd.grad(y, xr, dy, retain_graph=True)[0]

            return [lay(env.poisoned(shape, tdt)), dy, x], (grad,)

        if backward:
            work = standard_workload(env, op, make_set, lambda grad: grad(), attrs=POOLS[kind], assign=True)
            dx, dy, x = work.buffers[0]
            work.nbytes = traffic(reads=[dy] + ([x] if kind == "max" else []), writes=[dx])[0]
            if kind == "max":

                def forward_backward(s):
                    _, dy_s, x_s = work.buffers[s]
                    xr = x_s.detach().requires_grad_()
                    return torch.autograd.grad(pool(xr), xr, dy_s)[0]

                work.peers["fwd+bwd"] = Peer(forward_backward)
        else:
            work = standard_workload(env, op, make_set, pool, pool, attrs=POOLS[kind], assign=True)
        work.atol, work.rtol = TOL[dtype]
        return work

    a = POOLS[kind]
    desc = f"{'x'.join(map(str, shape))} k{a['kernel_size'][0]} s{a['stride'][0]} p{a['padding'][0]} {layout}"
    return BenchCase(NAME, op, desc, dtype, shape, build, quick=quick, compile=not backward)


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    shape = (32, 64, 112, 112) if env.gpu else (4, 16, 56, 56)
    layouts = (NCHW, CHANNELS_LAST) if env.gpu else (NCHW,)
    for kind in ("max", "avg"):
        for backward in (False, True):
            for dt in DTYPES:
                for layout in layouts:
                    out.append(pool_case(kind, backward, dt, shape, layout, quick=layout == NCHW))
    return out
