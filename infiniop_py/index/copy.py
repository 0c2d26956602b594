"""The implementation index_copy and index_copy_inplace share (ops.md §5.4-§5.5).

output <- input (skipped when output aliases input), then for i in increasing order
output.select(dim, index[i]) = source.select(dim, i); with duplicates the last i wins, and
out-of-range values are skipped. NVIDIA (see index.cu): a last-writer table per chunk of
destination values in shared memory (shared atomicMax of positions, order-independent), so
exactly one slice writes each destination: deterministic, race-free, no workspace; out of
place the same launch copies the rows of input that are not overwritten. When the index is
short and the destination extent huge (more table chunks than index positions), a block per
source slice scans the later positions instead (O(len) each).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import index as common
from ..cuda.compiler import Launch, Slot
from ..cuda.kernel import runtime
from ..elementwise import copy as staging
from ..layout import collapse
from ..planner import Rule, always, first_match
from ..spec import Attr, Checker, Info, OpSpec
from ..status import Status
from . import UTYPE


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
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor 'source' shape {list(s.shape)} must equal '{refname}' {list(ref.shape)} except at dim {dim}",
        )
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


def table_names_for(size, itype):
    return [
        f"index_copy_table_kernel<{UTYPE[size]}, {itype}, {ix}, {v}>"
        for ix in ("unsigned int", "unsigned long long") for v in sorted({1, 16 // size})
    ]  # fmt: skip


def compile_units():
    names = [nm for s in UTYPE for it in common.ITYPE.values() for nm in names_for(s, it) + table_names_for(s, it)]
    return [(common.SOURCE, names)] + staging.compile_units()


UNR = 4  # work items per thread per pass in index_copy_table_kernel


def uses_table(dim_size: int, length: int) -> bool:
    """The table kernel costs O(chunks * len) index reads, the scan kernel O(len^2)."""
    chunks = -(-dim_size // common.TMAX)
    return length < 2**31 - 1 and chunks <= max(1, length)


class CopyProblem(NamedTuple):
    dim_size: int  # the destination extent along dim
    length: int  # index positions


# docs/perf/gemm_index.md, "Last-writer tables"
RULES = (
    Rule("index_copy.table", lambda p: uses_table(p.dim_size, p.length), "table"),
    Rule("index_copy.scan", always, "scan"),
)


class IndexCopyKernel(common.IndexKernel):
    """ptr slots: dest, [base], index, source in spec order (``slots``).

    Table path (``uses_table``): one launch of ``index_copy_table_kernel``; out of place
    (mode 0) it also does the input -> output copy, skipping rows that get overwritten; in
    place (output aliases input with the same layout, or index_copy_inplace) it is mode 1.
    Each mode has a vectorised (16-byte) variant used when layouts and pointers allow.
    Scan path: copy input -> output, then ``index_copy_kernel`` (O(len) duplicate scan per row).
    """

    def __init__(self, info: Info, handle, slots: dict):
        super().__init__(handle)
        dest, base, dim = info.dest, info.base, info.dim
        o, i, s = info[dest], info["index"], info["source"]
        self.empty = o.numel == 0
        if self.empty:
            return
        self.slots = slots
        self.base = base
        self.table = first_match(RULES, CopyProblem(o.shape[dim], i.shape[0]), "index_copy planner")[1] == "table"
        if self.table:
            self.same_layout = base is None or o.strides == info[base].strides
            self.plans = {}
            if base is not None:
                self.plans[0] = self._table_plans(info, handle, 0)
            if s.numel:
                self.plans[1] = self._table_plans(info, handle, 1)
            return
        self._scan_plan(info, handle)

    # ---------------------------------------------------------------- table path
    def _table_plans(self, info: Info, handle, mode: int):
        """[(vector bytes, Launch)]: the vectorised launch first (when the layout allows it), then the scalar one."""
        dest, base, dim = info.dest, info.base, info.dim
        o, i, s = info[dest], info["index"], info["source"]
        x = info[base] if (base is not None and mode == 0) else o
        nd = o.ndim
        other = [d for d in range(nd) if d != dim]
        key = 0 if mode == 0 else 2
        cshape, (cso, csi, css) = collapse(
            [o.shape[d] for d in other], [[o.strides[d] for d in other], [x.strides[d] for d in other], [s.strides[d] for d in other]],
            order_by=key,
        )  # fmt: skip
        cshape, cso, csi, css = list(cshape), list(cso), list(csi), list(css)
        axis_key = o.strides[dim] if mode == 0 else s.strides[dim]
        keys = cso if mode == 0 else css
        pos = sum(1 for k in keys if k >= axis_key)
        dim_size, length = o.shape[dim], i.shape[0]
        st = (o.strides[dim], i.strides[0], s.strides[dim], x.strides[dim])
        size = o.itemsize
        dev = handle.device_id
        sm = runtime.properties(dev)["sm_count"]
        chunk = min(dim_size, common.TMAX)
        chunks = -(-dim_size // chunk)
        gy = min(chunks, 65535)
        plans = []
        vec = 16 // size
        can_vec = (
            vec > 1 and pos < len(cshape) and cso[-1] == csi[-1] == css[-1] == 1 and cshape[-1] % vec == 0
            and all(v % vec == 0 for v in (*cso[:-1], *csi[:-1], *css[:-1], *st[:1], *st[2:]))
        )  # fmt: skip
        for v in [vec, 1] if can_vec else [1]:
            sh, so, si, ss = list(cshape), list(cso), list(csi), list(css)
            if v > 1:
                sh[-1] //= v
                so[-1] = si[-1] = ss[-1] = v
            n = 1
            for d in sh:
                n *= d
            sh.insert(pos, 1)
            for lst in (so, si, ss):
                lst.insert(pos, 0)
            ext = chunk if mode == 0 else length
            work = n * ext
            bpc = max(1, min(-(-work // (common.TBLOCK * UNR)), max(1, sm * 4 // gy)))
            it = "unsigned int" if work + bpc * common.TBLOCK * UNR < 2**32 else "unsigned long long"
            name = f"index_copy_table_kernel<{UTYPE[size]}, {common.ITYPE[i.dtype]}, {it}, {v}>"
            mod = common.module([name], dev)
            meta = common.pack_tab(sh, so, si, ss, dim_size=dim_size, length=length, chunk=chunk, n=n, st=st,
                                   axis=pos, mode=mode)  # fmt: skip
            sl = self.slots
            xs = sl[base] if (base is not None and mode == 0) else sl[dest]
            args = [Slot(sl[dest]), Slot(xs), Slot(sl["index"]), Slot(sl["source"]), meta]
            plans.append(
                (
                    v * size,
                    (sl[dest], xs, sl["source"]),
                    Launch(mod.ptr[name], (bpc, gy), (common.TBLOCK,), args, shmem=4 * chunk),
                )
            )
        return plans

    # ---------------------------------------------------------------- scan path
    def _scan_plan(self, info: Info, handle):
        dest, base, dim = info.dest, info.base, info.dim
        o, i, s = info[dest], info["index"], info["source"]
        slots = self.slots
        dev = handle.device_id
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

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.empty:
            return
        if not self.table:
            for step in self.steps:
                step(ptrs, ws_ptr, stream)
            return
        mode = 1
        if self.base is not None:
            aliased = ptrs[self.slots[self.base]] == ptrs[self.slots["output"]] and self.same_layout
            mode = 1 if aliased else 0
        plans = self.plans.get(mode)
        if not plans:
            return
        for nbytes, used, run in plans:
            if all(ptrs[u] % nbytes == 0 for u in used):
                run(ptrs, ws_ptr, stream)
                return


def reference(dest_init, index, source, dim):
    """index_copy with last-write-wins duplicates and out-of-range values skipped (torch, f64)."""

    out = dest_init.clone()
    size = out.shape[dim]
    for i in range(index.shape[0]):
        k = int(index[i])
        if 0 <= k < size:
            out.select(dim, k).copy_(source.select(dim, i))
    return out


def copy_op(*, base: str | None, slots: dict, **fields) -> OpSpec:
    """The OpSpec of index_copy (``base="input"``: output starts as a copy of input) or
    index_copy_inplace (``base=None``: output is its own starting value): the dim attribute,
    validation, both backends (``slots``: each tensor's pointer slot in the kernel's argument
    order) and the reference; ``fields``: the rest of the OpSpec."""

    def validate_(check: Checker) -> Info:
        return validate(check, "output", base)

    def nvidia(info: Info, handle):
        return IndexCopyKernel(info, handle, slots)

    nvidia.compile_units = compile_units

    def reference_(index, source, dim, **dest):
        return reference(dest[base or "output"], index, source, dim)

    return OpSpec(
        attrs=(Attr("dim", "int"),),
        validate=validate_,
        dtypes=common.DATA,
        cpu=cpu,
        nvidia=nvidia,
        reference=reference_,
        kernel_sources=("../../infiniop_py/index/index.cu",),
        **fields,
    )
