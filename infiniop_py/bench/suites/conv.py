"""Convolution family: conv, conv_backward and conv_transpose against torch eager (cuDNN on the
GPU, ``cudnn.benchmark`` on, TF32 off) on the same buffers, f32, f16 and bf16.

GPU shapes (batch 32 unless stated):
- conv2d: the seed (C512 7² → 512, k3 p1); ResNet-style layers at 56², 28², 14², 7² with 3×3
  and 1×1 kernels, stride 1 and 2; depthwise C256 56² k3 p1 (memory bound: % of copy
  bandwidth is the figure); the tiny grid N2 Cin4 → 8 at 32²/64²/128² × k3/5/7 (from
  ``conv_grid``, here in every dtype; launch overhead dominates, per-call time is the figure).
- conv_backward (grad_input + grad_weight + grad_bias): the seed and C64 56² → 256 k1.
- conv_transpose2d: s2 k4 p1, C256 28² → 128.
CPU (``--cpu``): the same kinds of layers scaled down (N4, 28² and below).

Peers: ``F.conv2d`` / ``F.conv_transpose2d``; the backward peer is ``torch.autograd.grad`` of the
forward with respect to input, weight and bias (graph built once, ``retain_graph=True``, so only
the backward kernels are timed). FLOPs: 2·MACs per call (3 convolutions' worth for backward
without the bias sum). Minimal bytes: every input read once and every output written once.
"""

from __future__ import annotations

import dataclasses

from ..core import BenchCase, Skip, Workload, rotation, standard_workload, traffic
from . import conv_grid

NAME = "conv"
DTYPES = ("f32", "f16", "bf16")
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
# the check compares with torch's own, differently ordered result: a few ulps of the dtype,
# scaled for sums of hundreds to thousands of terms
TOL = {"f32": (1e-3, 1e-3), "f16": (2e-2, 2e-2), "bf16": (6e-2, 6e-2)}


def _out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def _tag(n, cin, size, cout, k, s, p, groups=1) -> str:
    text = f"N{n} {cin}->{cout} {size}x{size} k{k}"
    text += f" s{s}" if s > 1 else ""
    text += f" p{p}" if p else ""
    return text + (f" g{groups}" if groups > 1 else "")


def conv_case(n, cin, size, cout, k, s=1, p=0, groups=1, dtype="f32", quick=False, note="") -> BenchCase:
    o = _out(size, k, s, p)

    def build(env):
        torch = env.torch
        F = torch.nn.functional  # noqa: N806
        tdt = getattr(torch, TDT[dtype])

        def make_set():
            x = env.random((n, cin, size, size), tdt, -1.0, 1.0)
            w = env.random((cout, cin // groups, k, k), tdt, -0.5, 0.5)
            b = env.random((cout,), tdt, -0.5, 0.5)
            return [env.poisoned((n, cout, o, o), tdt), x, w, b], (x, w, b)

        def conv(x, w, b):
            return F.conv2d(x, w, b, stride=s, padding=p, groups=groups)

        attrs = {"pads": [p], "strides": [s], "groups": groups}
        work = standard_workload(env, "conv", make_set, conv, conv, attrs=attrs, assign=True)
        work.atol, work.rtol = TOL[dtype]
        return work

    macs = n * cout * o * o * (cin // groups) * k * k
    return BenchCase(
        NAME, "conv", _tag(n, cin, size, cout, k, s, p, groups), dtype, (n, cin, size, size, cout, k, s, p, groups), build,
        quick=quick, flops=2 * macs, notes=note,
    )  # fmt: skip


def transpose_case(n, cin, size, cout, k, s, p, dtype="f32", quick=False) -> BenchCase:
    o = (size - 1) * s - 2 * p + k

    def build(env):
        torch = env.torch
        F = torch.nn.functional  # noqa: N806
        tdt = getattr(torch, TDT[dtype])

        def make_set():
            x = env.random((n, cin, size, size), tdt, -1.0, 1.0)
            w = env.random((cin, cout, k, k), tdt, -0.5, 0.5)
            b = env.random((cout,), tdt, -0.5, 0.5)
            return [env.poisoned((n, cout, o, o), tdt), x, w, b], (x, w, b)

        def ct(x, w, b):
            return F.conv_transpose2d(x, w, b, stride=s, padding=p)

        attrs = {"pads": [p], "strides": [s]}
        work = standard_workload(env, "conv_transpose", make_set, ct, ct, attrs=attrs, assign=True)
        work.atol, work.rtol = TOL[dtype]
        return work

    macs = n * cin * size * size * cout * k * k
    return BenchCase(
        NAME, "conv_transpose", _tag(n, cin, size, cout, k, s, p), dtype, (n, cin, size, size, cout, k, s, p), build,
        quick=quick, flops=2 * macs,
    )  # fmt: skip


def backward_case(n, cin, size, cout, k, s=1, p=0, dtype="f32", quick=False) -> BenchCase:
    o = _out(size, k, s, p)

    def build(env):
        from infiniop_py.registry import resolve

        if resolve("conv_backward") is None:
            raise Skip("operator 'conv_backward' is not registered")
        torch = env.torch
        F = torch.nn.functional  # noqa: N806
        tdt = getattr(torch, TDT[dtype])

        def make_set():
            x = env.random((n, cin, size, size), tdt, -1.0, 1.0)
            w = env.random((cout, cin, k, k), tdt, -0.5, 0.5)
            dy = env.random((n, cout, o, o), tdt, -1.0, 1.0)
            xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
            br = torch.zeros(cout, dtype=tdt, device=x.device, requires_grad=True)
            y = F.conv2d(xr, wr, br, stride=s, padding=p)

            def peer():
                return torch.autograd.grad(y, (xr, wr, br), dy, retain_graph=True)[0]

            bufs = [
                env.poisoned((n, cin, size, size), tdt),
                env.poisoned((cout, cin, k, k), tdt),
                env.poisoned((cout,), tdt),
                dy,
                x,
                w,
            ]
            return bufs, peer

        first = make_set()
        set_bytes, _ = traffic(reads=[t for t in first[0] if t is not None])
        sets = [first] + [make_set() for _ in range(rotation(env, set_bytes) - 1)]
        descs = [env.descriptor_of(t) for t in first[0]]
        attrs = {"pads": [p], "strides": [s]}
        d = env.iop.create_descriptor("conv_backward", env.handle, *descs, **attrs)
        results = {}
        peers = [st[1] for st in sets]

        def run(i):
            results[i] = peers[i]()
            return results[i]

        work = Workload(
            descriptor=d,
            buffers=[st[0] for st in sets],
            torch_eager=run,
            out_torch=results,
            inputs=[() for _ in sets],
            attrs=attrs,
        )
        work.nbytes = traffic(reads=first[0][3:], writes=first[0][:3])[0]
        work.atol, work.rtol = TOL[dtype]
        return work

    macs = n * cout * o * o * cin * k * k
    return BenchCase(
        NAME, "conv_backward", _tag(n, cin, size, cout, k, s, p), dtype, (n, cin, size, size, cout, k, s, p), build,
        quick=quick, compile=False, flops=2 * 2 * macs,
    )  # fmt: skip


# (N, Cin, size, Cout, k, stride, pad)
GPU_LAYERS = [
    (32, 512, 7, 512, 3, 1, 1),  # the seed
    (32, 64, 56, 64, 3, 1, 1),
    (32, 256, 56, 256, 3, 1, 1),
    (32, 64, 56, 256, 1, 1, 0),
    (32, 256, 56, 64, 1, 1, 0),
    (32, 128, 56, 128, 3, 2, 1),
    (32, 256, 56, 512, 1, 2, 0),
    (32, 128, 28, 128, 3, 1, 1),
    (32, 512, 28, 128, 1, 1, 0),
    (32, 512, 28, 512, 3, 2, 1),
    (32, 256, 14, 256, 3, 1, 1),
    (32, 1024, 14, 256, 1, 1, 0),
    (32, 2048, 7, 512, 1, 1, 0),
]
CPU_LAYERS = [
    (4, 64, 28, 64, 3, 1, 1),
    (4, 128, 7, 128, 3, 1, 1),
    (4, 64, 28, 128, 1, 1, 0),
    (4, 64, 28, 64, 3, 2, 1),
]


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    gpu = env.gpu
    layers = GPU_LAYERS if gpu else CPU_LAYERS
    for dt in DTYPES:
        q = dt == "f32"
        for i, (n, cin, size, cout, k, s, p) in enumerate(layers):
            out.append(
                conv_case(n, cin, size, cout, k, s, p, dtype=dt, quick=q and i == 0, note="seed" if i == 0 and gpu else "")
            )
        dw = (32, 256, 56) if gpu else (4, 64, 28)
        out.append(
            conv_case(dw[0], dw[1], dw[2], dw[1], 3, 1, 1, groups=dw[1], dtype=dt, quick=q, note="depthwise: % of copy BW")
        )
        bwd = (
            [(32, 512, 7, 512, 3, 1, 1), (32, 64, 56, 256, 1, 1, 0)]
            if gpu
            else [(4, 64, 28, 64, 3, 1, 1), (4, 64, 28, 128, 1, 1, 0)]
        )
        for j, (n, cin, size, cout, k, s, p) in enumerate(bwd):
            out.append(backward_case(n, cin, size, cout, k, s, p, dtype=dt, quick=q and j == 0))
        tr = (32, 256, 28, 128) if gpu else (4, 64, 14, 32)
        out.append(transpose_case(tr[0], tr[1], tr[2], tr[3], 4, 2, 1, dtype=dt, quick=q))
        for size in conv_grid.SIZES:
            for k in conv_grid.KERNELS:
                c = conv_grid.grid_case(size, k, dt)
                out.append(dataclasses.replace(c, suite=NAME, quick=c.quick and q))
    return out
