"""topkrouter: grouped sigmoid routing of x [ntoken, 256] (ops.md §8.3), in f32.

Per row: s = sigmoid(x) rounded to x's dtype (as upstream; a no-op for f32 and f64), then
widened to f32, c = s + correction_bias; each of the 8 groups of 32 experts scores
the sum of its two largest c; the 4 best groups are kept (ties -> lower group) and c = 0.0 in
the others; indices = the top-k of c, descending (ties -> lower index); values = s at those
indices (unbiased), scaled by routed_scaling_factor / (sum + 1e-20). x has last-dim stride 1
(any row stride), correction_bias is [256] f32 (any stride); values f32 and indices i32
[ntoken, topk] (any strides). Runtime scalars: routed_scaling_factor and topk (must equal
values.shape[1], BAD_PARAM).

C-style (upstream's form): ``infiniopCreateTopkrouterDescriptor(handle, x_desc, bias_desc)``
and ``infiniopTopkrouter(desc, ws, ws_size, values, indices, x, correction_bias,
routed_scaling_factor, topk, stream)``; values/indices are then contiguous [ntoken, topk].
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np

from infiniop_py import topk as common
from infiniop_py.cpu import jit
from infiniop_py.cuda.kernel import ctype
from infiniop_py.dtypes import DType, F
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status

SOURCE_FILE = Path(__file__).with_name("kernel.cu")
ROWS = 4  # TR_ROWS
EXPERTS, GROUPS, KEEP = 256, 8, 4
EPS = np.float32(1e-20)


def _source() -> str:
    from infiniop_py.reduce import REDUCE_CUH

    return REDUCE_CUH + SOURCE_FILE.read_text()


def validate(check: Checker) -> Info:
    x, b = check["x"], check["correction_bias"]
    check.dtype_in("x", F)
    check.dtype_in("correction_bias", {DType.F32})
    common.check_output_dtypes(check)
    ntoken, width = common.rows(check.op, x, "256")
    if width != EXPERTS:
        check.fail(Status.BAD_PARAM, f"tensor 'x' has {width} experts; the router is fixed at 256 (8 groups of 32, 4 kept)")
    if x.strides[1] != 1:
        check.fail(Status.BAD_TENSOR_STRIDES, f"tensor 'x' must have last-dim stride 1, got strides {list(x.strides)}")
    if b.shape != (EXPERTS,):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'correction_bias' must be [256], got shape {list(b.shape)}")
    return common.topk_info(check, ntoken, EXPERTS, "the 256 experts")


def route(x: np.ndarray, bias: np.ndarray, k: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The router in f32 on NumPy arrays (vectorised over rows); the choice of experts through
    the compiled ``router_select`` where the CPU kernels run (the same indices)."""
    f32 = np.float32
    x = np.asarray(x)
    xs = x.astype(f32)
    n = xs.shape[0]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        s = (f32(1) / (f32(1) + np.exp(-xs))).astype(f32)
        if x.dtype.itemsize < 4:  # f16 / bf16: the sigmoid is rounded to x's dtype (§8.3)
            s = s.astype(x.dtype).astype(f32)
        c = (s + np.asarray(bias).astype(f32)[None, :]).astype(f32)
        kernels = jit.kernels()
        if kernels is not None:  # the same choice, compiled (no sorts)
            idx = np.empty((n, k), np.int64)
            kernels.router_select(np.ascontiguousarray(c), GROUPS, KEEP, idx, 0, n)
        else:
            g = c.reshape(n, GROUPS, EXPERTS // GROUPS)
            top2 = np.sort(g, axis=2)[:, :, -2:]
            score = (top2[:, :, 1] + top2[:, :, 0]).astype(f32)
            order = np.argsort(-score, axis=1, kind="stable")[:, :KEEP]
            keep = np.zeros((n, GROUPS), bool)
            np.put_along_axis(keep, order, True, axis=1)
            c = np.where(keep[:, :, None], g, f32(0)).reshape(n, EXPERTS) + f32(0)
            idx = np.argsort(-c, axis=1, kind="stable")[:, :k]
        vals = np.take_along_axis(s, idx, axis=1)
        vals = (vals / (np.sum(vals, axis=1, keepdims=True, dtype=f32) + EPS) * f32(scale)).astype(f32)
    return vals, idx


def split_runtime(rt) -> tuple[int, float]:
    scale, topk = rt
    return topk, float(scale)


def cpu(info: Info):
    return common.cpu_run(info, split_runtime, lambda views, scale: route(views["x"], views["correction_bias"], info.topk, scale))


def kernel_name(dtype: DType) -> str:
    return f"topk_router<{ctype(dtype)}>"


def nvidia(info: Info, handle):
    x, b, v, i = info["x"], info["correction_bias"], info["values"], info["indices"]
    meta = struct.pack("<8q", x.shape[0], info.topk, x.strides[0], b.strides[0], *v.strides, *i.strides)
    return common.RowsKernel(info, handle, _source(), kernel_name(x.dtype), ROWS, meta, ctypes.c_float(1.0), split_runtime)


nvidia.compile_units = lambda: [(_source(), [kernel_name(dt) for dt in sorted(F)])]


def c_infer(given: dict, runtime):
    """C-style create(x, correction_bias): values/indices contiguous [ntoken, topk]."""
    ntoken, _ = common.rows("topkrouter", given["x"], "256")
    k = 1 if runtime is None else runtime["topk"]
    return common.infer_outputs("topkrouter", ntoken, k, EXPERTS, "256")


def reference(x, correction_bias, routed_scaling_factor, topk, in_dtypes=None):
    """The grouped router in torch float32 (stable sorts: ties -> lower group / index).
    ``in_dtypes["x"]``, the storage dtype of x, when x arrives widened to float64."""
    import torch

    s = torch.sigmoid(x.float())
    name = str(in_dtypes["x"]) if in_dtypes else str(x.dtype).removeprefix("torch.")
    if name in ("float16", "bfloat16"):  # the sigmoid is rounded to x's dtype (ops.md §8.3)
        s = s.to(getattr(torch, name)).float()
    c = s + correction_bias.float()
    n = c.shape[0]
    g = c.reshape(n, GROUPS, EXPERTS // GROUPS)
    score = g.topk(2, dim=-1).values.sum(-1)
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices[:, :KEEP]
    keep = torch.zeros(n, GROUPS, dtype=torch.bool).scatter_(1, order, True)
    c = torch.where(keep[:, :, None], g, torch.zeros_like(g)).reshape(n, EXPERTS)
    idx = torch.sort(c, dim=-1, descending=True, stable=True).indices[:, :topk]
    vals = torch.gather(s, 1, idx).double()
    vals = vals / (vals.sum(-1, keepdim=True) + 1e-20) * routed_scaling_factor
    return {"values": vals, "indices": idx}


SPEC = declare(
    globals(),
    name="topkrouter",
    stem="Topkrouter",
    tensors=(out("values"), out("indices"), inp("x"), inp("correction_bias")),
    runtime=(Attr("routed_scaling_factor", "float"), Attr("topk", "int")),
    dtypes=F,
    torch="none (grouped sigmoid router: 8 groups of 32, 4 kept, top-k of biased scores)",
    summary="grouped sigmoid top-k router over 256 experts: values (f32) and indices (i32)",
    kernel_sources=("kernel.cu",),
    c_create_tensors=("x", "correction_bias"),
    # the reader also takes upstream's `correction_bias_strides.strides` for `correction_bias.strides`
    gguf=common.lable_dialect({"routed_scaling_factor": "f32", "topk": "i32"}),
)
