"""scatter: output = input.clone().scatter_(axis, indices, updates[, reduce]) (ops.md §5.3).

reduction 0 replace, 1 add, 2 multiply. Positions of ``indices`` apply in row-major order:
with replace the last write wins, add / multiply apply every contribution in that order, on
both backends. Out-of-range values are skipped. The copy input -> output is skipped when
output aliases input (in place). NVIDIA (see index.cu): replace with a destination extent of
at most 12032 uses a per-line last-writer table in shared memory, all positions in parallel:
out of place, when the index covers every output line and input and output share a layout,
``scatter_line_kernel`` also builds the output line in shared memory and writes it once (the
copy is merged in); otherwise the copy then ``scatter_table_kernel``. Other cases: one warp per line walks the axis in order.

GGUF: ``scatter`` (upstream form) and the in-place ``scatter_`` dialect, where ``input``
holds the updates, ``output`` starts from zeros and there is no ``updates`` tensor.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from infiniop_py import index as common
from infiniop_py.cuda.compiler import Launch, Slot
from infiniop_py.cuda.kernel import ctype, runtime
from infiniop_py.dtypes import DType
from infiniop_py.elementwise import copy as staging
from infiniop_py.index import UTYPE
from infiniop_py.planner import Rule, always, first_match
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status

try:
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover
    GGUFDialect = object

ARITH = sorted(common.DATA - {DType.BOOL})


def validate(check: Checker) -> Info:
    o, x, i, u = check["output"], check["input"], check["indices"], check["updates"]
    check.dtype_in("input", common.DATA)
    check.same_dtype("input", "output", "updates")
    common.check_index_dtype(check, "indices")
    common.check_ndim(check, "input")
    red = check.attrs["reduction"]
    if red not in (0, 1, 2):
        check.fail(Status.BAD_PARAM, f"attribute 'reduction'={red} must be 0 (replace), 1 (add) or 2 (multiply)")
    if red and x.dtype is DType.BOOL:
        check.fail(Status.BAD_TENSOR_DTYPE, "bool data supports only reduction 0 (replace)")
    if x.ndim == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'input' must have at least 1 dim")
    for n, d in (("output", o), ("indices", i), ("updates", u)):
        if d.ndim != x.ndim:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{n}' has {d.ndim} dims but 'input' has {x.ndim}")
    axis = check.axis("axis", check.attrs["axis"], x.ndim)
    check.same_shape("input", "output")
    check.same_shape("indices", "updates")
    for d in range(x.ndim):
        if d != axis and i.shape[d] > x.shape[d]:
            check.fail(
                Status.BAD_TENSOR_SHAPE, f"tensor 'indices' shape {list(i.shape)} exceeds 'input' {list(x.shape)} at dim {d}"
            )
    check.writable("output")
    return Info(check.op, check.tensors, check.attrs, axis=axis, reduction=red)


def _same(a, b):
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides


def cpu(info: Info):
    axis, red = info.axis, info.reduction
    size = info["output"].shape[axis]

    def run(views, ws, rt):
        o, x, i, u = views["output"], views["input"], views["indices"], views["updates"]
        if o.size and not _same(o, x):
            np.copyto(o, x)
        if i.size == 0 or o.size == 0:
            return
        k = i.astype(np.int64)
        ok = (k >= 0) & (k < size)
        grid = [np.broadcast_to(c, i.shape) for c in common.coords(i.shape)]
        grid[axis] = k
        sel = tuple(c[ok] for c in grid)  # row-major order of the index positions
        vals = u[ok]
        if red == 0:
            flat = np.ravel_multi_index(sel, o.shape)
            _, first = np.unique(flat[::-1], return_index=True)
            last = flat.size - 1 - first
            o[tuple(c[last] for c in sel)] = vals[last]
        elif red == 1:
            np.add.at(o, sel, vals)
        else:
            np.multiply.at(o, sel, vals)

    return run


# Table entries per block: 48 KiB of shared memory in all (no opt-in) less the kernel's 768
# static bytes of line offsets.
STMAX = common.TMAX - 256


def line_ok(o, x, i, axis: int) -> bool:
    """The line kernel writes whole output lines: the index must cover every output line and
    input and output must share one layout (one set of line offsets serves both)."""
    return o.strides == x.strides and all(i.shape[d] == o.shape[d] for d in range(o.ndim) if d != axis)


def uses_table(red: int, dim_size: int, length: int) -> bool:
    """Replace with a destination extent that fits one shared-memory table (and is not much
    larger than the line, whose table is cleared per line) and lines long enough to pay."""
    return red == 0 and dim_size <= STMAX and 32 <= length < 2**31 - 1 and dim_size <= 4 * length


class ScatterProblem(NamedTuple):
    reduction: int
    dim_size: int  # the destination extent along the axis
    length: int  # index positions per line
    line_lpb: int  # lines per block of scatter_line_kernel (0: its layout or shared memory does not fit)


# docs/perf/gemm_index.md, "Planner rules": the line kernel (copy merged in) where the index
# covers whole output lines of input's layout, else copy + the last-writer table kernel, else
# the warp kernel (add / multiply, short lines, wide extents).
RULES = (
    Rule("scatter.line", lambda p: uses_table(p.reduction, p.dim_size, p.length) and p.line_lpb > 0, "line"),
    Rule("scatter.table", lambda p: uses_table(p.reduction, p.dim_size, p.length), "table"),
    Rule("scatter.warp", always, "warp"),
)


# Line kernel (copy merged in): 4-byte table + one value per destination, 16-byte aligned parts.
LINE_SMEM = 48 * 1024 - 3 * 32 * 8


def line_smem(lpb: int, dim_size: int, item: int) -> int:
    return -(-4 * lpb * dim_size // 16) * 16 + item * lpb * dim_size


def line_lpb(lpb: int, dim_size: int, item: int, length: int) -> int:
    """Lines per block for ``scatter_line_kernel`` (<= the table kernel's), 0 when it does not fit."""
    while lpb > 1 and line_smem(lpb, dim_size, item) > LINE_SMEM:
        lpb //= 2
    if line_smem(lpb, dim_size, item) > LINE_SMEM or lpb * length >= 2**31:
        return 0
    return lpb


def kernel_names():
    names = [f"scatter_kernel<{UTYPE[s]}, {it}, 0>" for s in UTYPE for it in common.ITYPE.values()]
    names += [f"scatter_table_kernel<{UTYPE[s]}, {it}>" for s in UTYPE for it in common.ITYPE.values()]
    names += [f"scatter_line_kernel<{UTYPE[s]}, {it}>" for s in UTYPE for it in common.ITYPE.values()]
    names += [f"scatter_kernel<{ctype(d)}, {it}, {m}>" for d in ARITH for it in common.ITYPE.values() for m in (1, 2)]
    return names


class ScatterKernel(common.IndexKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        o, x, i, u = info["output"], info["input"], info["indices"], info["updates"]
        self.empty = o.numel == 0
        if self.empty:
            return
        copy = staging.Copy(handle, o, x)
        same_layout = o.strides == x.strides

        def copy_step(ptrs, ws, stream):
            if not (ptrs[0] == ptrs[1] and same_layout):
                copy(ptrs[0], ptrs[1], stream)

        self.steps.append(copy_step)
        if i.numel == 0:
            return
        axis, red = info.axis, info.reduction
        shape = list(i.shape)
        length = shape[axis]
        shape[axis] = 1
        lines = int(np.prod(shape))
        dim_size = o.shape[axis]
        lpb = 1 if (i.strides[axis] == 1 or lines == 1) else max(1, min(32, STMAX // max(dim_size, 1), lines))
        llpb = line_lpb(lpb, dim_size, o.itemsize, length) if line_ok(o, x, i, axis) else 0
        plan = first_match(RULES, ScatterProblem(red, dim_size, length, llpb), "scatter planner")[1]
        if plan != "warp":
            sm = runtime.properties(handle.device_id)["sm_count"]
            groups = -(-lines // lpb)
            name = f"scatter_table_kernel<{UTYPE[o.itemsize]}, {common.ITYPE[i.dtype]}>"
            mod = common.module([name], handle.device_id)
            meta = common.pack_tab(
                shape, o.strides, i.strides, u.strides, dim_size=dim_size, length=length, chunk=0, n=lines,
                st=(o.strides[axis], i.strides[axis], u.strides[axis], 0), lpb=lpb,
            )  # fmt: skip
            blocks = max(1, min(groups, sm * 4))
            args = [Slot(0), Slot(2), Slot(3), meta]
            table = Launch(mod.ptr[name], (blocks,), (common.TBLOCK,), args, shmem=4 * lpb * dim_size)
            if plan == "line":
                # out of place: the copy is merged into the line kernel; in place: table kernel alone
                lname = f"scatter_line_kernel<{UTYPE[o.itemsize]}, {common.ITYPE[i.dtype]}>"
                lmod = common.module([lname], handle.device_id)
                lmeta = common.pack_tab(
                    shape, o.strides, i.strides, u.strides, dim_size=dim_size, length=length, chunk=0, n=lines,
                    st=(o.strides[axis], i.strides[axis], u.strides[axis], o.strides[axis]), lpb=llpb,
                )  # fmt: skip
                lblocks = max(1, min(-(-lines // llpb), sm * 4))
                line = Launch(
                    lmod.ptr[lname], (lblocks,), (common.TBLOCK,), [Slot(0), Slot(2), Slot(3), Slot(1), lmeta],
                    shmem=line_smem(llpb, dim_size, o.itemsize),
                )  # fmt: skip
                self.steps[-1] = lambda ptrs, ws, stream: (line if ptrs[0] != ptrs[1] else table)(ptrs, ws, stream)
                self.table, self.line = table, line
                return
            self.steps.append(table)
            self.table, self.line = table, None
            return
        t = UTYPE[o.itemsize] if red == 0 else ctype(o.dtype)
        name = f"scatter_kernel<{t}, {common.ITYPE[i.dtype]}, {red}>"
        mod = common.module([name], handle.device_id)
        meta = common.pack_meta(
            shape, o.strides, i.strides, u.strides, lines, o.shape[axis], o.strides[axis],
            length, (o.strides[axis], i.strides[axis], u.strides[axis]),
        )  # fmt: skip
        blocks = common.grid(lines * 32, handle.device_id)
        self.steps.append(Launch(mod.ptr[name], (blocks,), (common.BLOCK,), [Slot(0), Slot(2), Slot(3), meta]))


def nvidia(info, handle):
    return ScatterKernel(info, handle)


nvidia.compile_units = lambda: [(common.SOURCE, kernel_names())] + staging.compile_units()


def reference(input, indices, updates, axis, reduction=0):
    out = input.clone()
    ax = axis % input.ndim
    size = out.shape[ax]
    flat_i = indices.reshape(-1).tolist()
    coords = np.array(np.unravel_index(np.arange(len(flat_i)), tuple(indices.shape))).T if flat_i else []
    upd = updates.reshape(-1)
    for n, (k, c) in enumerate(zip(flat_i, coords)):
        if not 0 <= k < size:
            continue
        q = list(int(v) for v in c)
        q[ax] = k
        q = tuple(q)
        if reduction == 0:
            out[q] = upd[n]
        elif reduction == 1:
            out[q] = out[q] + upd[n]
        else:
            out[q] = out[q] * upd[n]
    return out


class Dialect(GGUFDialect):
    """The in-place ``scatter_`` form: input = updates (leading corner of index's shape),
    output starts from zeros and is also the destination read as input."""

    def prepare(self, raw) -> None:
        if raw.tensor("updates") is not None or raw.tensor("src") is not None:
            return
        raw.iop_inplace = True
        idx_name = "index" if raw.tensor("index") is not None else "indices"
        src = raw.data("input")
        ishape = raw.data(idx_name).shape
        corner = src[tuple(slice(0, d) for d in ishape)] if src.ndim == len(ishape) else src
        st = raw.tensor("input")
        raw.drop("input")
        raw.put_tensor("updates", np.ascontiguousarray(corner), st.dtype)
        raw.put_tensor("input", np.zeros(1, dtype=corner.dtype), st.dtype)

    def adapt(self, test, raw) -> None:
        if not getattr(raw, "iop_inplace", False):
            return
        o, x = test.tensors["output"], test.tensors["input"]
        x.shape, x.strides, x.dtype = o.shape, o.strides, o.dtype
        from infiniop_py.dtypes import to_numpy

        x.data = np.zeros(o.shape, dtype=to_numpy(o.dtype))
        o.inplace = "input"
        test.attrs["reduction"] = 0


SPEC = declare(
    globals(),
    name="scatter",
    stem="Scatter",
    tensors=(out("output"), inp("input"), inp("indices", aliases=("index",)), inp("updates", aliases=("src",))),
    attrs=(Attr("axis", "int", aliases=("dim",)), Attr("reduction", "int", 0)),
    dtypes=common.DATA,
    torch="input.clone().scatter_(axis, indices, updates[, reduce])",
    summary="output = input with updates scattered along axis (replace/add/multiply, row-major order)",
    gguf_names=("scatter_",),
    inplace=(("output", "input"),),
    gguf=Dialect(),
    kernel_sources=("../../infiniop_py/index/index.cu",),
)
