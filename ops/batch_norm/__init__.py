"""batch_norm (training mode) on (B, C) or (B, C, D) (ops.md §3.5).

Statistics per channel over n = B·D values (n >= 2 is required: the unbiased variance that
updates running_var needs it, so a batch of one (B, C) sample is BAD_TENSOR_SHAPE).
running_mean/running_var are [rw]: updated in place with momentum m:
running_mean ← (1−m)·running_mean + m·μ, running_var ← (1−m)·running_var + m·v_b·n/(n−1).
"""

import math

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, contiguous, f32vec, run_rows, split
from infiniop_py.dtypes import F, acc_numpy
from infiniop_py.norm import batch as cuda
from infiniop_py.norm import check_positive, check_shape
from infiniop_py.norm.batch import as3, check_bn_input, check_stats_dtype
from infiniop_py.spec import Attr, Checker, Info, declare, inout, inp, out
from infiniop_py.status import Status

try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.norm import BatchNormFiles
except ImportError:  # pragma: no cover
    BatchNormFiles = None


def validate(check: Checker) -> Info:
    dt = check.dtype_in("input", F)
    check.same_dtype("input", "output", "weight", "bias")
    check.same_shape("input", "output")
    shape = check_bn_input(check, "input", 2)
    for n in ("weight", "bias", "running_mean", "running_var"):
        check_shape(check, n, (shape[1],))
    check_stats_dtype(check, dt, "running_mean", "running_var")
    check.writable("output", "running_mean", "running_var")
    check_positive(check, "eps")
    m = check.attrs["momentum"]
    if not (math.isfinite(m) and 0.0 <= m <= 1.0):
        check.fail(Status.BAD_PARAM, f"attribute 'momentum' must be in [0, 1], got {m!r}")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    acc = acc_numpy(info.tensors["input"].dtype)
    eps = info.attrs["eps"]
    mom = info.attrs["momentum"]

    def compiled(k, views):
        """The compiled kernel (any layout, through contiguous copies): (mean, var) in float64,
        or None for dtypes it does not take."""
        if bits(views["input"]) is None:
            return None
        out = Outputs()
        x3, y3 = contiguous(as3(views["input"])), out.full(as3(views["output"]))
        xb, yb = bits(x3), bits(y3)
        c = x3.shape[1]
        mean, var = np.empty(c, np.float64), np.empty(c, np.float64)
        w, b = f32vec(views["weight"], c), f32vec(views["bias"], c)
        run_rows(lambda _, c0, c1: k.batch_norm(xb, w, b, float(eps), yb, mean, var, c0, c1), split(c, x3.size // c))
        out.done()
        return mean, var

    def run(views, ws, rt):
        x = as3(views["input"])
        if x.shape[1] == 0:
            return
        n = x.shape[0] * x.shape[2]
        k = jit.kernels()
        stats = compiled(k, views) if k is not None else None
        if stats is not None:
            mean, var = stats
        else:
            x = x.astype(acc)
            mean = np.mean(x, axis=(0, 2), dtype=np.float64)
            var = np.mean((x - mean[None, :, None].astype(acc)) ** 2, axis=(0, 2), dtype=np.float64)
            rstd = 1.0 / np.sqrt(var + eps)
            a = (views["weight"].astype(np.float64) * rstd).astype(acc)
            y = (x - mean[None, :, None].astype(acc)) * a[None, :, None] + views["bias"].astype(acc)[None, :, None]
            as3(views["output"])[...] = y.astype(views["output"].dtype)
        rm, rv = views["running_mean"], views["running_var"]
        rm[...] = ((1 - mom) * rm.astype(np.float64) + mom * mean).astype(rm.dtype)
        rv[...] = ((1 - mom) * rv.astype(np.float64) + mom * var * n / (n - 1)).astype(rv.dtype)

    return run


def reference(input, weight, bias, running_mean, running_var, momentum=0.1, eps=1e-5):  # noqa: A002
    import torch

    rm, rv = running_mean.clone(), running_var.clone()
    y = torch.nn.functional.batch_norm(input, rm, rv, weight, bias, training=True, momentum=momentum, eps=eps)
    return {"output": y, "running_mean": rm, "running_var": rv}


SPEC = declare(
    globals(),
    name="batch_norm",
    stem="BatchNorm",
    tensors=(
        out("output"),
        inout("running_mean", init=0.0),
        inout("running_var", init=1.0),
        inp("input", aliases=("x",)),
        inp("weight", aliases=("w",)),
        inp("bias", aliases=("b",)),
    ),
    attrs=(Attr("momentum", "float", 0.1), Attr("eps", "float", 1e-5, aliases=("epsilon",))),
    dtypes=F,
    nvidia=cuda.factory,
    infer=lambda input, weight, bias, **_: {"output": input},  # noqa: A006
    torch="torch.nn.functional.batch_norm(input, running_mean, running_var, weight, bias, training=True, momentum, eps)",
    summary="training-mode batch norm over (B, D) per channel; running stats updated in place (unbiased var)",
    inplace=(("output", "input"),),
    kernel_sources=("../../infiniop_py/norm/batch_norm.cu",),
    gguf=BatchNormFiles() if BatchNormFiles else None,
)
