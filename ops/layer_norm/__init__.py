"""layer_norm: output, input_standardization and input_std_deviation over the last dim
(ops.md §3.3). bias is optional; weight and bias may be strided; input_std_deviation has shape
input.shape[:-1] or input.shape[:-1] + (1,).
"""

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, f32vec, rows2d, run_rows, split
from infiniop_py.dtypes import F, acc_numpy
from infiniop_py.norm import check_positive, check_rows, check_shape, check_std_shape
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.tensor import create_tensor_descriptor

from . import cuda

try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.norm import LayerNormFiles
except ImportError:  # pragma: no cover
    LayerNormFiles = None


def validate(check: Checker) -> Info:
    check.dtype_in("input", F)
    check.same_dtype("input", "output", "input_standardization", "input_std_deviation", "weight", "bias")
    shape = check_rows(check, "input", "output", "input_standardization")
    check_shape(check, "weight", (shape[-1],))
    check_shape(check, "bias", (shape[-1],))
    check_std_shape(check, "input_std_deviation", shape)
    check.writable("output", "input_standardization", "input_std_deviation")
    check_positive(check, "eps")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    acc = acc_numpy(info.tensors["input"].dtype)
    eps = acc(info.attrs["eps"])

    def numpy_run(views):
        x = views["input"].astype(acc)
        mean = np.mean(x, axis=-1, keepdims=True)
        d = x - mean
        sd = np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + eps)
        xh = d / sd
        o = xh * views["weight"].astype(acc)
        if views["bias"] is not None:
            o = o + views["bias"].astype(acc)
        std = views["input_std_deviation"]
        std[...] = sd.reshape(std.shape).astype(std.dtype)
        views["input_standardization"][...] = xh.astype(views["input_standardization"].dtype)
        views["output"][...] = o.astype(views["output"].dtype)

    def run(views, ws, rt):
        x = views["input"]
        if x.size == 0:
            return
        k = jit.kernels()
        if k is None or bits(x) is None:
            numpy_run(views)
            return
        out = Outputs()
        x2, y2, h2 = rows2d(x), out.rows(views["output"]), out.rows(views["input_standardization"])
        sd = out.flat(views["input_std_deviation"])
        d = x2.shape[1]
        w, b = f32vec(views["weight"], d), f32vec(views["bias"], d)
        xb, yb, hb, sb = bits(x2), bits(y2), bits(h2), bits(sd)
        run_rows(lambda _, r0, r1: k.layer_norm(xb, w, b, float(eps), yb, hb, sb, r0, r1), split(*x2.shape))
        out.done()

    return run


def reference(input, weight, bias=None, eps=1e-5, out_shapes=None):  # noqa: A002 - ops.md name
    mean = input.mean(-1, keepdim=True)
    var = (input - mean).pow(2).mean(-1, keepdim=True)
    sd = (var + eps).sqrt()
    xh = (input - mean) / sd
    o = xh * weight + (bias if bias is not None else 0.0)
    res = {"output": o, "input_standardization": xh}
    if out_shapes and "input_std_deviation" in out_shapes:
        res["input_std_deviation"] = sd.reshape(out_shapes["input_std_deviation"])
    else:
        res["input_std_deviation"] = sd.squeeze(-1)
    return res


def infer(input, weight, bias=None, **_):  # noqa: A002
    std = create_tensor_descriptor(tuple(input.shape[:-1]), None, input.dtype)
    return {"output": input, "input_standardization": input, "input_std_deviation": std}


SPEC = declare(
    globals(),
    name="layer_norm",
    stem="LayerNorm",
    tensors=(
        out("output"),
        out("input_standardization"),
        out("input_std_deviation"),
        inp("input", aliases=("x",)),
        inp("weight", aliases=("w",)),
        inp("bias", optional=True, aliases=("b",)),
    ),
    attrs=(Attr("eps", "float", 1e-5, aliases=("epsilon",)),),
    dtypes=F,
    nvidia=cuda.factory,
    torch="torch.nn.functional.layer_norm(input, (D,), weight, bias, eps)",
    summary="layer norm over the last dim; also returns the standardized input and the std per row",
    inplace=(("output", "input"), ("input_standardization", "input")),
    kernel_sources=("kernel.cu",),
    gguf=LayerNormFiles() if LayerNormFiles else None,
)
