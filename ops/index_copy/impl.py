"""Shared implementation of index_copy and index_copy_inplace (ops.md §5.4-§5.5).

output <- input (skipped when output aliases input), then for i in increasing order
output.select(dim, index[i]) = source.select(dim, i); with duplicates the last i wins, and
out-of-range values are skipped. NVIDIA: one block row per source slice i; the block first
checks (in parallel) whether a later position holds the same value, so exactly one slice
writes each destination: deterministic, no atomics, no workspace.
"""

from __future__ import annotations

import numpy as np

from infiniop_py.cuda.compiler import Launch, Slot
from infiniop_py.spec import Checker, Info
from infiniop_py.status import Status

from ..gather import common
from ..gather.common import UTYPE
from ..gemm import staging


def validate(check: Checker, dest: str, base: str | None) -> Info:
    """dest: the output; base: the tensor giving the full shape ('input' or the output itself)."""
    o, i, s = check[dest], check["index"], check["source"]
    ref = check[base] if base else o
    refname = base or dest
    check.dtype_in(refname, common.DATA)
    check.same_dtype(refname, dest, "source")
    common.check_index_dtype(check, "index")
    common.check_ndim(check, refname)
    if i.ndim != 1:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'index' must be 1-d, got shape {list(i.shape)}")
    if ref.ndim == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{refname}' must have at least 1 dim")
    dim = check.axis("dim", check.attrs["dim"], ref.ndim)
    if s.ndim != ref.ndim or any(a != b for d, (a, b) in enumerate(zip(s.shape, ref.shape)) if d != dim):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'source' shape {list(s.shape)} must equal '{refname}' {list(ref.shape)} except at dim {dim}")
    if s.shape[dim] != i.shape[0]:
        check.fail(Status.BAD_TENSOR_SHAPE, f"len(index) = {i.shape[0]} does not match source.shape[{dim}] = {s.shape[dim]}")
    if o.shape != ref.shape:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{dest}' shape {list(o.shape)} does not match '{refname}' {list(ref.shape)}")
    check.writable(dest)
    return Info(check.op, check.tensors, check.attrs, dim=dim, dest=dest, base=base)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides


def cpu(info: Info):
    dim, dest, base = info.dim, info.dest, info.base
    size = info[dest].shape[dim]

    def run(views, ws, rt):
        o, i, s = views[dest], views["index"], views["source"]
        if base is not None and o.size and not _same(o, views[base]):
            np.copyto(o, views[base])
        if o.size == 0 or s.size == 0:
            return
        k = i.astype(np.int64)
        pos = np.arange(k.size)
        ok = (k >= 0) & (k < size)
        winner = np.full(size, -1, np.int64)
        np.maximum.at(winner, k[ok], pos[ok])
        rows = np.nonzero(winner >= 0)[0]
        np.moveaxis(o, dim, 0)[rows] = np.moveaxis(s, dim, 0)[winner[rows]]

    return run


def names_for(size, itype):
    return [f"index_copy_kernel<{UTYPE[size]}, {itype}, {ix}>" for ix in ("unsigned int", "unsigned long long")]


def compile_units():
    names = [nm for s in UTYPE for it in common.ITYPE.values() for nm in names_for(s, it)]
    return [(common.SOURCE, names)] + staging.compile_units()


class IndexCopyKernel(common.IndexKernel):
    """ptr slots: dest, [base], index, source in spec order (``slots``)."""

    def __init__(self, info: Info, handle, slots: dict):
        super().__init__(handle)
        dest, base, dim = info.dest, info.base, info.dim
        o, i, s = info[dest], info["index"], info["source"]
        self.empty = o.numel == 0
        if self.empty:
            return
        dev = handle.device_id
        self.slots = slots
        if base is not None:
            copy = staging.Copy(handle, o, info[base])
            same_layout = o.strides == info[base].strides
            od, bd = slots[dest], slots[base]

            def copy_step(ptrs, ws, stream):
                if not (ptrs[od] == ptrs[bd] and same_layout):
                    copy(ptrs[od], ptrs[bd], stream)

            self.steps.append(copy_step)
        length = i.shape[0]
        if s.numel == 0:
            return
        shape = list(s.shape)
        shape[dim] = 1
        n = int(np.prod(shape))
        name = f"index_copy_kernel<{UTYPE[o.itemsize]}, {common.ITYPE[i.dtype]}, {common.index_type(n)}>"
        mod = common.module([name], dev)
        meta = common.pack_meta(
            shape, o.strides, [0] * len(shape), s.strides, n, o.shape[dim], o.strides[dim],
            length, (o.strides[dim], i.strides[0], s.strides[dim]),
        )  # fmt: skip
        # One block row per slice i does the duplicate check once; threads loop ~16 elements each.
        gx = max(1, min(-(-n // (common.BLOCK * 16)), 1024))
        gy = max(1, min(length, 65535))
        args = [Slot(slots[dest]), Slot(slots["index"]), Slot(slots["source"]), meta]
        self.steps.append(Launch(mod.ptr[name], (gx, gy), (common.BLOCK,), args))


def reference(dest_init, index, source, dim):
    """index_copy with last-write-wins duplicates and out-of-range values skipped (torch, f64)."""

    out = dest_init.clone()
    size = out.shape[dim]
    for i in range(index.shape[0]):
        k = int(index[i])
        if 0 <= k < size:
            out.select(dim, k).copy_(source.select(dim, i))
    return out
