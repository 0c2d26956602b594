"""gather: output[p] = input[p with p[dim] <- index[p]] (torch.gather; ops.md §5.2).

Out-of-range index values (negative included) write 0 and read nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from infiniop_py import index as common
from infiniop_py.index import UTYPE, Launch, Slot
from infiniop_py.planner import Rule, always, first_match
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status


def validate(check: Checker) -> Info:
    o, i, x = check["output"], check["index"], check["input"]
    check.dtype_in("input", common.DATA)
    check.same_dtype("input", "output")
    common.check_index_dtype(check, "index")
    common.check_ndim(check, "input")
    if i.ndim != x.ndim:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'index' has {i.ndim} dims but 'input' has {x.ndim}")
    if x.ndim == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'input' must have at least 1 dim")
    dim = check.axis("dim", check.attrs["dim"], x.ndim)
    for d in range(x.ndim):
        if d != dim and i.shape[d] > x.shape[d]:
            check.fail(
                Status.BAD_TENSOR_SHAPE, f"tensor 'index' shape {list(i.shape)} exceeds 'input' {list(x.shape)} at dim {d}"
            )
    if o.shape != i.shape:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'output' shape {list(o.shape)} does not match 'index' shape {list(i.shape)}")
    check.writable("output")
    return Info(check.op, check.tensors, check.attrs, dim=dim)


def cpu(info: Info):
    dim = info.dim
    size = info["input"].shape[dim]

    def run(views, ws, rt):
        o, i, x = views["output"], views["index"], views["input"]
        if o.size == 0:
            return
        k = i.astype(np.int64)
        ok = (k >= 0) & (k < size)
        grid = common.coords(i.shape)
        grid[dim] = np.where(ok, k, 0)
        vals = x[tuple(grid)]
        o[...] = np.where(ok, vals, np.zeros((), o.dtype))

    return run


LINE_BYTES = 32768  # largest input line staged in shared memory by gather_line_kernel


def names_for(size, itype):
    return [f"gather_kernel<{UTYPE[size]}, {itype}, {ix}>" for ix in ("unsigned int", "unsigned long long")] + [
        f"gather_line_kernel<{UTYPE[size]}, {itype}>"
    ]


def use_lines(index_len: int, dim_size: int, itemsize: int) -> bool:
    """Stage input lines in shared memory when a line fits and the index reads most of it."""
    return 0 < dim_size * itemsize <= LINE_BYTES and 4 * index_len >= dim_size


class GatherProblem(NamedTuple):
    index_len: int  # index positions per line
    dim_size: int  # the input extent along dim
    itemsize: int


RULES = (
    Rule("gather.lines", lambda p: use_lines(p.index_len, p.dim_size, p.itemsize), "lines"),
    Rule("gather.elements", always, "elements"),
)


class GatherKernel(common.IndexKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        o, i, x = info["output"], info["index"], info["input"]
        n = o.numel
        self.empty = n == 0
        if self.empty:
            return
        dim = info.dim
        itype = common.ITYPE[i.dtype]
        plan = first_match(RULES, GatherProblem(i.shape[dim], x.shape[dim], o.itemsize), "gather planner")[1]
        if plan == "lines":
            line_shape = list(i.shape)
            line_shape[dim] = 1
            lines = n // i.shape[dim]
            st = (o.strides[dim], i.strides[dim], 0)
            meta = common.pack_meta(
                line_shape, o.strides, i.strides, x.strides, lines, x.shape[dim], x.strides[dim], i.shape[dim], st
            )
            name = f"gather_line_kernel<{UTYPE[o.itemsize]}, {itype}>"
            mod = common.module([name], handle.device_id)
            grid = (max(1, min(lines, 1 << 20)),)
            shmem = x.shape[dim] * o.itemsize
            self.steps = [Launch(mod.ptr[name], grid, (common.BLOCK,), [Slot(0), Slot(2), Slot(1), meta], shmem=shmem)]
            return
        s2 = list(x.strides)
        s2[dim] = 0
        meta = common.pack_meta(o.shape, o.strides, i.strides, s2, n, x.shape[dim], x.strides[dim])
        name = f"gather_kernel<{UTYPE[o.itemsize]}, {itype}, {common.index_type(n)}>"
        mod = common.module([name], handle.device_id)
        launch = Launch(mod.ptr[name], (common.grid(n, handle.device_id),), (common.BLOCK,), [Slot(0), Slot(2), Slot(1), meta])
        self.steps = [launch]


def nvidia(info, handle):
    return GatherKernel(info, handle)


nvidia.compile_units = lambda: [(common.SOURCE, [nm for s in UTYPE for it in common.ITYPE.values() for nm in names_for(s, it)])]


def reference(input, index, dim):
    import torch

    size = input.shape[dim]
    ok = (index >= 0) & (index < size)
    vals = torch.gather(input, dim, torch.where(ok, index, 0))
    return torch.where(ok, vals, torch.zeros((), dtype=vals.dtype))


SPEC = declare(
    globals(),
    name="gather",
    stem="Gather",
    tensors=(out("output"), inp("input"), inp("index")),
    attrs=(Attr("dim", "int"),),
    dtypes=common.DATA,
    torch="torch.gather(input, dim, index)",
    summary="output[p] = input[p with p[dim] = index[p]]",
    kernel_sources=("../../infiniop_py/index/index.cu",),
)
