"""layer_norm_backward: grad_input, grad_weight and optional grad_bias from grad_output, weight,
input_standardization and input_std_deviation (ops.md §3.4). x̂ and std are used as given.

grad_weight/grad_bias are reduced in two deterministic stages (per-block partial rows in the
workspace, then a fixed-order column sum): bitwise identical run to run.
"""

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, f32vec, flat, parts, rows2d, run_rows, split
from infiniop_py.dtypes import F, acc_numpy
from infiniop_py.norm import check_rows, check_shape, check_std_shape
from infiniop_py.spec import Checker, Info, declare, inp, out

from . import cuda

try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.norm import LayerNormBackwardFiles
except ImportError:  # pragma: no cover
    LayerNormBackwardFiles = None


def validate(check: Checker) -> Info:
    check.dtype_in("grad_output", F)
    names = ("grad_input", "grad_weight", "grad_bias", "weight", "input_standardization", "input_std_deviation")
    check.same_dtype("grad_output", *names)
    shape = check_rows(check, "grad_output", "grad_input", "input_standardization")
    for n in ("weight", "grad_weight", "grad_bias"):
        check_shape(check, n, (shape[-1],))
    check_std_shape(check, "input_std_deviation", shape)
    check.writable("grad_input", "grad_weight", "grad_bias")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    acc = acc_numpy(info.tensors["grad_output"].dtype)

    def run(views, ws, rt):
        D = views["grad_output"].shape[-1]
        k = jit.kernels()
        gw, gb = views["grad_weight"], views["grad_bias"]
        if k is not None and views["grad_output"].size and bits(views["grad_output"]) is not None:
            out = Outputs()
            dy2, h2, gx2 = rows2d(views["grad_output"]), rows2d(views["input_standardization"]), out.rows(views["grad_input"])
            sd = flat(views["input_std_deviation"])
            bounds = parts(*dy2.shape)  # row ranges fixed by the shape, one partial row each
            nparts = len(bounds) - 1
            pw, pb = np.zeros((nparts, D), np.float64), np.zeros((nparts, D), np.float64)
            dyb, hb, gxb, sb, wf = bits(dy2), bits(h2), bits(gx2), bits(sd), f32vec(views["weight"], D)
            run_rows(
                lambda _, p0, p1: k.layer_norm_backward(dyb, wf, hb, sb, gxb, pw, pb, bounds, p0, p1),
                split(nparts, dy2.size // nparts),
            )
            out.done()
            gw[...] = pw.sum(axis=0).astype(gw.dtype)
            if gb is not None:
                gb[...] = pb.sum(axis=0).astype(gb.dtype)
            return
        dy = views["grad_output"].astype(acc)
        h = views["input_standardization"].astype(acc)
        sd = views["input_std_deviation"].astype(acc).reshape(dy.shape[:-1] + (1,))
        g = dy * views["weight"].astype(acc)
        gi = (g - np.mean(g, axis=-1, keepdims=True) - h * np.mean(g * h, axis=-1, keepdims=True)) / sd
        if gi.size:
            views["grad_input"][...] = gi.astype(views["grad_input"].dtype)
        gw[...] = np.sum((dy * h).reshape(-1, D), axis=0, dtype=np.float64).astype(gw.dtype)
        if gb is not None:
            gb[...] = np.sum(dy.reshape(-1, D), axis=0, dtype=np.float64).astype(gw.dtype)

    return run


def reference(grad_output, weight, input_standardization, input_std_deviation):
    dy, h = grad_output, input_standardization
    D = dy.shape[-1]
    sd = input_std_deviation.reshape(dy.shape[:-1] + (1,))
    g = dy * weight
    gi = (g - g.mean(-1, keepdim=True) - h * (g * h).mean(-1, keepdim=True)) / sd
    return {
        "grad_input": gi,
        "grad_weight": (dy * h).reshape(-1, D).sum(0),
        "grad_bias": dy.reshape(-1, D).sum(0),
    }


SPEC = declare(
    globals(),
    name="layer_norm_backward",
    stem="LayerNormBackward",
    tensors=(
        out("grad_input"),
        out("grad_weight"),
        out("grad_bias", optional=True),
        inp("grad_output"),
        inp("weight"),
        inp("input_standardization"),
        inp("input_std_deviation"),
    ),
    dtypes=F,
    nvidia=cuda.factory,
    infer=lambda grad_output, weight, **_: {"grad_input": grad_output, "grad_weight": weight, "grad_bias": weight},
    torch="torch.autograd.grad(F.layer_norm(x, (D,), weight, bias, eps), (x, weight, bias), grad_output)",
    summary="gradients of layer_norm from the standardized input and std (deterministic weight/bias sums)",
    kernel_sources=("kernel.cu",),
    gguf=LayerNormBackwardFiles() if LayerNormBackwardFiles else None,
)
