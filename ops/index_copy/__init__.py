"""index_copy: output <- input, then output.select(dim, index[i]) = source.select(dim, i),
last i wins, out-of-range skipped; in place when output aliases input (ops.md §5.4).

C-style create is upstream's odd order ``(output, input, dim, index, source)``; calculate is
``(output, input, index, source)``."""

from __future__ import annotations

from infiniop_py import index as common
from infiniop_py.index import copy as impl
from infiniop_py.spec import Attr, OpSpec, inp, out


def validate(check):
    return impl.validate(check, "output", "input")


def nvidia(info, handle):
    return impl.IndexCopyKernel(info, handle, {"output": 0, "input": 1, "index": 2, "source": 3})


nvidia.compile_units = impl.compile_units


def reference(input, index, source, dim):
    return impl.reference(input, index, source, dim)


SPEC = OpSpec(
    name="index_copy",
    stem="IndexCopy",
    tensors=(out("output"), inp("input"), inp("index"), inp("source")),
    attrs=(Attr("dim", "int"),),
    validate=validate,
    dtypes=common.DATA,
    cpu=impl.cpu,
    nvidia=nvidia,
    reference=reference,
    torch="input.index_copy(dim, index, source)",
    summary="output = input with slices index[i] along dim replaced by source slices i (last wins)",
    inplace=(("output", "input"),),
    c_create_args=("output", "input", "dim", "index", "source"),  # upstream: dim between input and index
    kernel_sources=("../../infiniop_py/index/index.cu",),
)
