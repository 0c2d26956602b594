"""What the top-k operators (topksoftmax, topkrouter; ops.md §8.2-8.3) share: x [ntoken, width]
in, values [ntoken, k] f32 and indices [ntoken, k] i32 out with k from values' shape, the
runtime scalar ``topk`` that must equal it, upstream's C-style short create (x and the other
inputs only; values and indices inferred contiguous), one warp-per-row kernel launch with one
per-call scalar, and upstream's GGUF spelling of the expected outputs (``lable_values`` /
``lable_indices``).
"""

from __future__ import annotations

import numpy as np

from .cuda.compiler import Launch, Slot, get_module
from .cuda.kernel import CudaKernel
from .dtypes import DType
from .spec import Checker, Info
from .status import Status, error

OUTPUTS = ("values", "indices")


def rows(op: str, x, width: str) -> tuple[int, int]:
    """(ntoken, width) of x, which must be 2-D (``width`` names the second dim in the message)."""
    if x.ndim != 2:
        raise error(Status.BAD_TENSOR_SHAPE, f"{op}: tensor 'x' must be 2-D [ntoken, {width}], got shape {list(x.shape)}")
    return x.shape


def check_output_dtypes(check: Checker) -> None:
    check.dtype_in("values", {DType.F32})
    check.dtype_in("indices", {DType.I32})


def topk_info(check: Checker, ntoken: int, limit: int, limit_text: str) -> Info:
    """Validate values / indices for ``ntoken`` rows of at most ``limit`` entries
    (``limit_text`` says which in the message) and return the Info with ``topk``."""
    v = check["values"]
    if v.ndim != 2 or v.shape[0] != ntoken:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'values' must be [ntoken={ntoken}, topk], got shape {list(v.shape)}")
    check.same_shape(*OUTPUTS)
    if v.shape[1] > limit:
        check.fail(Status.BAD_PARAM, f"topk = values.shape[1] = {v.shape[1]} exceeds {limit_text}")
    check.writable(*OUTPUTS)
    return Info(check.op, check.tensors, check.attrs, topk=v.shape[1])


def check_topk(info: Info, topk: int) -> None:
    if topk != info.topk:
        raise error(Status.BAD_PARAM, f"{info.op}: runtime scalar 'topk'={topk} must equal values.shape[1] = {info.topk}")


def infer_outputs(op: str, ntoken: int, k: int, limit: int, limit_text: str) -> dict:
    """C-style short create: values / indices contiguous [ntoken, k], k in [0, limit]."""
    from .tensor import create_tensor_descriptor

    if not 0 <= k <= limit:
        raise error(Status.BAD_PARAM, f"{op}: runtime scalar 'topk'={k} must be in [0, {limit_text}]")
    return {
        "values": create_tensor_descriptor((ntoken, k), None, DType.F32),
        "indices": create_tensor_descriptor((ntoken, k), None, DType.I32),
    }


def cpu_run(info: Info, split_runtime, compute):
    """The CPU ``run``: ``split_runtime(rt)`` gives (topk, the operator's scalar); after the topk
    check and unless the outputs are empty, ``compute(views, scalar)`` either writes values and
    indices itself (returning None) or returns them as arrays."""

    def run(views, ws, rt):
        topk, scalar = split_runtime(rt)
        check_topk(info, topk)
        if views["values"].size == 0:
            return
        res = compute(views, scalar)
        if res is not None:
            views["values"][...], views["indices"][...] = res[0], res[1].astype(np.int32)

    return run


class RowsKernel(CudaKernel):
    """One launch of ``name`` over the rows of x, ``rows_per_block`` rows a block; its arguments
    are the tensor pointers, ``meta`` and a per-call scalar: ``scalar``, a ctypes value set to
    the second of ``split_runtime(rt)`` (the first is topk, checked)."""

    def __init__(self, info: Info, handle, source: str, name: str, rows_per_block: int, meta: bytes, scalar, split_runtime):
        super().__init__(handle)
        self.info = info
        ntoken = info["x"].shape[0]
        self.empty = ntoken == 0 or info.topk == 0
        self.scalar = scalar
        self.split_runtime = split_runtime
        if self.empty:
            return
        mod = get_module(source, [name], handle.device_id)
        slots = [Slot(i) for i in range(len(info.tensors))]
        grid = (-(-ntoken // rows_per_block),)
        self.main = Launch(mod.ptr[name], grid, (32 * rows_per_block,), [*slots, meta, scalar])

    def launch(self, ptrs, ws_ptr, rt, stream):
        topk, value = self.split_runtime(rt)
        check_topk(self.info, topk)
        if self.empty:
            return
        self.scalar.value = value
        self.main(ptrs, ws_ptr, stream)


def lable_dialect(attr_types: dict):
    """The GGUF dialect writing the expected outputs as upstream does, ``lable_values`` /
    ``lable_indices`` (the reader takes those spellings anyway), with ``attr_types``; None
    where the gguf package is not importable (the registry must import without it)."""
    try:
        from .gguf import GGUFDialect
    except ImportError:  # pragma: no cover
        return None

    class LableFiles(GGUFDialect):
        def write(self, record) -> None:
            for name in OUTPUTS:
                record.rename(f"ans_{name}", f"lable_{name}")

    files = LableFiles()
    files.attr_types = dict(attr_types)
    return files
