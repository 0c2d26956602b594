"""The tiny-convolution grid of the comparison report: conv2d, batch 2, Cin 4 -> Cout 8, input
32², 64², 128², kernel 3, 5, 7 ("same" padding k // 2, stride 1, bias), f32, on the GPU and on the
CPU alike.

Peers: torch eager (``F.conv2d``: cuDNN on the GPU, benchmark on, TF32 off), ``im2col`` (the
classic baseline in torch: ``F.unfold`` then one matrix product with the weights viewed as
(Cout, Cin·k²), plus the bias), and with ``--peers all`` (or ``compile,jax``) torch.compile of
``F.conv2d`` and JAX (``jax.lax.conv_general_dilated`` under ``jax.jit``, precision HIGHEST so
that f32 means f32, like TF32 off on the torch side), each with its compile time reported apart.

FLOPs: 2·N·Cout·Cin·k²·H·W per call (TFLOP/s and % of the run's matrix rate). Minimal bytes:
x, w, b read once and y written once. While the ``conv`` operator is not registered the cases
are skipped with a note.
"""

from __future__ import annotations

from ..core import BenchCase, standard_workload
from ..peers import Peer

NAME = "conv_grid"
PAGE = "conv"  # its perf page
PEERS = ("im2col",)  # the peers of its own (``Workload.peers``) besides torch, compile and jax
N, CIN, COUT = 2, 4, 8
SIZES = (32, 64, 128)
KERNELS = (3, 5, 7)
DTYPES = ("f32",)
QUICK = {(32, 3), (64, 5), (128, 7)}


def im2col(torch, x, w, b, pad):
    """y = w (Cout, Cin·k²) @ unfold(x) + b: the im2col convolution, in torch."""
    n, _, h, wd = x.shape
    cout, k = w.shape[0], w.shape[-1]
    cols = torch.nn.functional.unfold(x, k, padding=pad)  # (N, Cin·k², H·W)
    y = torch.matmul(w.reshape(cout, -1), cols)  # (N, Cout, H·W)
    return (y + b.view(1, cout, 1)).view(n, cout, h, wd)


def jax_conv(pad):
    """make(jax) -> f(x, w, b): the same convolution in JAX."""

    def make(jax):
        lax = jax.lax

        def f(x, w, b):
            y = lax.conv_general_dilated(
                x,
                w,
                (1, 1),
                ((pad, pad), (pad, pad)),
                dimension_numbers=("NCHW", "OIHW", "NCHW"),
                precision=lax.Precision.HIGHEST,
            )
            return y + b[None, :, None, None]

        return f

    return make


def grid_case(size: int, k: int, dtype: str = "f32") -> BenchCase:
    pad = k // 2

    def build(env):
        torch = env.torch
        F = torch.nn.functional  # noqa: N806
        tdt = getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])

        def make_set():
            x = env.random((N, CIN, size, size), tdt, -1.0, 1.0)
            w = env.random((COUT, CIN, k, k), tdt, -0.5, 0.5)
            b = env.random((COUT,), tdt, -0.5, 0.5)
            y = env.poisoned((N, COUT, size, size), tdt)
            return [y, x, w, b], (x, w, b)

        def conv(x, w, b):
            return F.conv2d(x, w, b, padding=pad)

        attrs = {"pads": [pad, pad], "strides": [1, 1], "dilations": [1, 1]}
        work = standard_workload(env, "conv", make_set, conv, conv, attrs=attrs, assign=True)
        ins = work.inputs
        work.peers["im2col"] = Peer(lambda s: im2col(torch, *ins[s], pad))
        work.jax_fn = jax_conv(pad)
        return work

    return BenchCase(
        NAME,
        "conv",
        f"N{N} {CIN}->{COUT} {size}x{size} k{k} p{pad}",
        dtype,
        (N, CIN, size, size, COUT, k),
        build,
        host_wall=size == SIZES[0] and k == KERNELS[0],
        quick=(size, k) in QUICK,
        flops=2 * N * COUT * CIN * k * k * size * size,
        notes="torch eager = cuDNN on the GPU (benchmark on, TF32 off)",
    )


def cases(env, quick: bool = False) -> list[BenchCase]:
    return [grid_case(size, k, dt) for dt in DTYPES for size in SIZES for k in KERNELS]
