"""batch_norm_backward (training mode) on (B, C) or (B, C, D) (ops.md §3.6).

The batch statistics are recomputed from input; running_mean/running_var are shape-checked and
unused. n = B·D >= 1 is required. grad_weight/grad_bias come from a fixed-order per-channel
combination of chunk partials: bitwise identical run to run.
"""

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, contiguous, f32vec, run_rows, split
from infiniop_py.dtypes import F
from infiniop_py.norm import batch as bn_cuda
from infiniop_py.norm import check_positive, check_shape
from infiniop_py.norm.batch import as3, check_bn_input, check_stats_dtype
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out


def validate(check: Checker) -> Info:
    dt = check.dtype_in("input", F)
    check.same_dtype("input", "grad_input", "grad_output", "weight", "grad_weight", "grad_bias")
    check.same_shape("input", "grad_input", "grad_output")
    shape = check_bn_input(check, "input", 1)
    for n in ("weight", "grad_weight", "grad_bias", "running_mean", "running_var"):
        check_shape(check, n, (shape[1],))
    check_stats_dtype(check, dt, "running_mean", "running_var")
    check.writable("grad_input", "grad_weight", "grad_bias")
    check_positive(check, "eps")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    eps = info.attrs["eps"]

    def compiled(k, views) -> bool:
        if bits(views["input"]) is None:
            return False
        out = Outputs()
        x3, dy3 = contiguous(as3(views["input"])), contiguous(as3(views["grad_output"]))
        gx3 = out.full(as3(views["grad_input"]))
        xb, dyb, gxb = bits(x3), bits(dy3), bits(gx3)
        c = x3.shape[1]
        gw, gb = np.empty(c, np.float64), np.empty(c, np.float64)
        w = f32vec(views["weight"], c)
        run_rows(lambda _, c0, c1: k.batch_norm_backward(xb, dyb, w, float(eps), gxb, gw, gb, c0, c1), split(c, x3.size // c))
        out.done()
        views["grad_bias"][...] = gb.astype(views["grad_bias"].dtype)
        views["grad_weight"][...] = gw.astype(views["grad_weight"].dtype)
        return True

    def run(views, ws, rt):
        if as3(views["input"]).shape[1] == 0:
            return
        k = jit.kernels()
        if k is not None and compiled(k, views):
            return
        # Everything in f64: sum dy*(x - mean) cancels heavily when dy has a nonzero mean, and
        # an f32 mean or f32 products lose ~1e-3 of it (the grad_weight of f32 data).
        x = as3(views["input"]).astype(np.float64)
        dy = as3(views["grad_output"]).astype(np.float64)
        n = x.shape[0] * x.shape[2]
        mean = np.mean(x, axis=(0, 2))
        xc = x - mean[None, :, None]
        var = np.einsum("bcd,bcd->c", xc, xc) / n
        rstd = 1.0 / np.sqrt(var + eps)
        sdy = np.sum(dy, axis=(0, 2))
        pdx = np.einsum("bcd,bcd->c", dy, xc)
        a = views["weight"].astype(np.float64) * rstd
        k = a * rstd * rstd * pdx / n
        gi = a[None, :, None] * dy - (a * sdy / n)[None, :, None] - k[None, :, None] * xc
        as3(views["grad_input"])[...] = gi.astype(views["grad_input"].dtype)
        views["grad_bias"][...] = sdy.astype(views["grad_bias"].dtype)
        views["grad_weight"][...] = (rstd * pdx).astype(views["grad_weight"].dtype)

    return run


def reference(input, grad_output, weight, running_mean=None, running_var=None, eps=1e-5):  # noqa: A002
    x = input if input.ndim == 3 else input[:, :, None]
    dy = grad_output if grad_output.ndim == 3 else grad_output[:, :, None]
    n = x.shape[0] * x.shape[2]
    mean = x.mean((0, 2), keepdim=True)
    var = (x - mean).pow(2).mean((0, 2), keepdim=True)
    rstd = 1.0 / (var + eps).sqrt()
    xh = (x - mean) * rstd
    w = weight[None, :, None]
    gi = w * rstd * (dy - dy.sum((0, 2), keepdim=True) / n - xh * (dy * xh).sum((0, 2), keepdim=True) / n)
    return {
        "grad_input": gi.reshape(input.shape),
        "grad_weight": (dy * xh).sum((0, 2)),
        "grad_bias": dy.sum((0, 2)),
    }


def factory(info, handle):
    return bn_cuda.BatchNormKernel(info, handle, bwd=True)


factory.compile_units = lambda: bn_cuda.compile_units(bwd=True)

SPEC = declare(
    globals(),
    name="batch_norm_backward",
    stem="BatchNormBackward",
    tensors=(
        out("grad_input"),
        out("grad_weight"),
        out("grad_bias"),
        inp("input", aliases=("x",)),
        inp("grad_output"),
        inp("weight", aliases=("w",)),
        inp("running_mean"),
        inp("running_var"),
    ),
    attrs=(Attr("eps", "float", 1e-5, aliases=("epsilon",)),),
    dtypes=F,
    nvidia=factory,
    infer=lambda input, grad_output, weight, **_: {"grad_input": input, "grad_weight": weight, "grad_bias": weight},  # noqa: A006
    torch="torch.autograd.grad(F.batch_norm(input, rm, rv, weight, bias, training=True, eps=eps), (input, weight, bias), grad_output)",
    summary="training-mode batch norm gradients; batch statistics recomputed from input (deterministic)",
    kernel_sources=("../../infiniop_py/norm/batch_norm.cu",),
)
