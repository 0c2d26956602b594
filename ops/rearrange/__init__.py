"""rearrange: dst[i] = src[i] between any two layouts, copied bitwise (ops.md §5.1).

C-style form is odd: ``infiniopRearrange(desc, dst, src, stream)`` has no workspace arguments
and there is no workspace-size function.
"""

import numpy as np

from infiniop_py.dtypes import ALL
from infiniop_py.elementwise import _executor, parallel_chunks
from infiniop_py.spec import Checker, Info, OpSpec, inp, out
from infiniop_py.status import Status

from . import cuda


def validate(check: Checker) -> Info:
    dst, src = check["dst"], check["src"]
    if dst.ndim != src.ndim or dst.shape != src.shape:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'src' shape {list(src.shape)} does not match 'dst' shape {list(dst.shape)}")
    check.dtype_in("dst", ALL)
    check.same_dtype("dst", "src")
    check.writable("dst")
    return Info(check.op, check.tensors, check.attrs)


def _copy(dst, src):
    np.copyto(dst, src)


def cpu(info: Info):
    """Bit copy on unsigned views. A transpose (dst contiguous along its last dim, src not) is
    copied in column slabs one cache line wide: each slab reads src lines that stay in L1 while
    dst is written in short contiguous runs (a plain strided copy misses cache on every src
    element). Measured on 4096x4096 f32: 44 ms in 16-wide slabs against 240 ms plain."""
    dst_d, src_d = info.tensors["dst"], info.tensors["src"]
    uint = np.dtype(f"u{dst_d.itemsize}")
    slabs = dst_d.ndim >= 2 and dst_d.strides[-1] == 1 and src_d.strides[-1] not in (0, 1)
    width = max(1, 64 // dst_d.itemsize)

    def run(views, ws, rt):
        dst, src = views["dst"].view(uint), views["src"].view(uint)
        if not dst.size:
            return
        if not slabs:
            parallel_chunks(_copy, dst, [src])
            return
        n = dst.shape[-1]
        futures = [_executor().submit(_copy, dst[..., lo : lo + width], src[..., lo : lo + width]) for lo in range(0, n, width)]
        for f in futures:
            f.result()

    return run


def reference(src):
    return {"dst": np.array(src, copy=True)}


SPEC = OpSpec(
    name="rearrange",
    stem="Rearrange",
    tensors=(out("dst", compare="bitwise"), inp("src")),
    validate=validate,
    dtypes=ALL,
    cpu=cpu,
    nvidia=cuda.factory,
    reference=reference,
    reference_inputs="numpy",
    infer=lambda src: {"dst": src},
    torch="dst.copy_(src)",
    summary="dst = src (strided copy between any layouts)",
    c_workspace_args=False,
)
