"""topksoftmax: per row of x [ntoken, nexpert], softmax then the top-k (ops.md §8.2).

values [ntoken, k] f32 and indices [ntoken, k] i32, descending, ties -> lower index; with
``norm`` the k values are divided by their sum (no epsilon). The softmax is computed in f32
(f64 for f64 input); the ranking uses the exact input values (softmax is monotone), so it never
depends on rounding. Runtime scalars: ``topk`` (must equal values.shape[1], BAD_PARAM) and
``norm``. x, values and indices may have any strides.

C-style (upstream's form): ``infiniopCreateTopksoftmaxDescriptor(handle, x_desc)`` and
``infiniopTopksoftmax(desc, ws, ws_size, values, indices, x, topk, norm, stream)``; values and
indices are then contiguous [ntoken, topk] (``OpSpec.c_create_tensors`` / ``c_infer``).
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np

from infiniop_py import topk as common
from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, contiguous, run_rows, split
from infiniop_py.cuda.kernel import ctype
from infiniop_py.dtypes import DType, F
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status

SOURCE_FILE = Path(__file__).with_name("kernel.cu")
ROWS = 4  # TK_ROWS: one warp per row


def _source() -> str:
    from infiniop_py.reduce import REDUCE_CUH

    return REDUCE_CUH + SOURCE_FILE.read_text()


def validate(check: Checker) -> Info:
    check.dtype_in("x", F)
    common.check_output_dtypes(check)
    ntoken, nexpert = common.rows(check.op, check["x"], "nexpert")
    if nexpert >= 2**31:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' has {nexpert} experts, at most 2^31 - 1 are supported")
    return common.topk_info(check, ntoken, nexpert, f"nexpert = {nexpert}")


def topk_rows(a: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest entries of each row, descending, ties -> lower index."""
    a = a + a.dtype.type(0)  # -0 ranks with +0
    return np.argsort(-a, axis=1, kind="stable")[:, :k]


def compute(x: np.ndarray, k: int, norm: bool, acc) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x).astype(acc, copy=False)
    idx = topk_rows(a, k)
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        m = np.max(a, axis=1, keepdims=True) if a.shape[1] else np.zeros((a.shape[0], 1), acc)
        e = np.exp(a - m)
        p = (e / np.sum(e, axis=1, keepdims=True)).astype(acc)
        vals = np.take_along_axis(p, idx, axis=1).astype(np.float32)
        if norm:
            vals = vals / np.sum(vals, axis=1, keepdims=True, dtype=np.float32)
    return vals, idx


def split_runtime(rt) -> tuple[int, int]:
    topk, norm = rt
    return topk, int(bool(norm))


def cpu(info: Info):
    acc = np.float64 if info["x"].dtype is DType.F64 else np.float32

    def rows(views, norm):
        k = jit.kernels()
        if k is not None and bits(views["x"]) is not None:
            out = Outputs()
            x2, v2, i2 = contiguous(views["x"]), out.full(views["values"]), out.full(views["indices"])
            xb = bits(x2)
            run_rows(lambda _, r0, r1: k.topk_softmax(xb, bool(norm), v2, i2, r0, r1), split(*x2.shape))
            out.done()
            return None
        return compute(views["x"], info.topk, norm, acc)

    return common.cpu_run(info, split_runtime, rows)


def kernel_name(dtype: DType) -> str:
    return f"topk_softmax<{ctype(dtype)}>"


def nvidia(info: Info, handle):
    x, v, i = info["x"], info["values"], info["indices"]
    meta = struct.pack("<9q", *x.shape, info.topk, *x.strides, *v.strides, *i.strides)
    return common.RowsKernel(info, handle, _source(), kernel_name(x.dtype), ROWS, meta, ctypes.c_int(0), split_runtime)


nvidia.compile_units = lambda: [(_source(), [kernel_name(dt) for dt in sorted(F)])]


def c_infer(given: dict, runtime):
    """C-style create(x): values/indices contiguous [ntoken, topk] (topk from calculate)."""
    ntoken, nexpert = common.rows("topksoftmax", given["x"], "nexpert")
    k = min(1, nexpert) if runtime is None else runtime["topk"]
    return common.infer_outputs("topksoftmax", ntoken, k, nexpert, f"nexpert={nexpert}")


def reference(x, topk, norm=False):
    """Softmax in float64, top-k by value (stable: ties -> lower index), optional renormalisation."""
    import torch

    p = torch.softmax(x, -1)
    idx = torch.from_numpy(np.ascontiguousarray(topk_rows(x.numpy(), topk)))
    vals = torch.gather(p, 1, idx)
    if norm:
        vals = vals / vals.sum(-1, keepdim=True)
    return {"values": vals, "indices": idx}


SPEC = declare(
    globals(),
    name="topksoftmax",
    stem="Topksoftmax",
    tensors=(out("values"), out("indices"), inp("x")),
    runtime=(Attr("topk", "int"), Attr("norm", "bool", False)),
    dtypes=F,
    torch="torch.topk(torch.softmax(x.float(), -1), topk) (values / their sum if norm)",
    summary="per-row softmax then top-k values (f32) and indices (i32), optional renormalisation",
    kernel_sources=("kernel.cu",),
    c_create_tensors=("x",),
    gguf=common.lable_dialect({"topk": "i32", "norm": "bool"}),
)
