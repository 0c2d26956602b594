"""rearrange: dst[i] = src[i] between any two layouts, copied bitwise (ops.md §5.1).

C-style form is odd: ``infiniopRearrange(desc, dst, src, stream)`` has no workspace arguments
and there is no workspace-size function.
"""

import numpy as np

from infiniop_py.cpu import jit, pool
from infiniop_py.dtypes import ALL, to_numpy
from infiniop_py.elementwise import parallel_chunks
from infiniop_py.spec import Checker, Info, declare, inp, out
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
    copied in column slabs 16 elements wide: each slab reads src lines that stay in cache while
    dst is written in short contiguous runs (a plain strided copy misses cache on every src
    element); a 2-D one, where the compiled CPU kernels run, in square blocks and tiles instead
    (``kernels.copy_2d``, faster for every element size). Slabs, blocks of rows, and the parts
    of other copies, are shared out over the CPU thread pool in a few contiguous runs per
    thread."""
    dst_d, src_d = info.tensors["dst"], info.tensors["src"]
    uint = np.dtype(f"u{dst_d.itemsize}")
    slabs = dst_d.ndim >= 2 and dst_d.strides[-1] == 1 and src_d.strides[-1] not in (0, 1)
    width = 16 if dst_d.itemsize <= 4 else 8

    builtin = to_numpy(dst_d.dtype).isbuiltin == 1  # NumPy's own dtypes: a same-dtype copy moves bits

    def run(views, ws, rt):
        dst, src = views["dst"], views["src"]
        n = dst.size
        if n < 1 << 16 and builtin:  # small: one call, no views, no pool
            np.copyto(dst, src)
            return
        dst, src = dst.view(uint), src.view(uint)
        if not n:
            return
        if not slabs:
            parallel_chunks(_copy, dst, [src], block=-(-n // (pool.PARTS_PER_THREAD * pool.THREADS)))
            return
        groups = pool.PARTS_PER_THREAD * pool.THREADS if pool.parallel() and n >= 1 << 16 else 1
        k = jit.kernels() if dst.ndim == 2 else None
        if k is not None:  # compiled, in blocks of rows
            rows, block = dst.shape[0], k.COPY_BLOCK

            def copy_blocks(first, last):
                k.copy_2d(src, dst, first * block, min(rows, last * block))

            pool.run_all(copy_blocks, pool.bounds(-(-rows // block), groups))
            return
        starts = range(0, dst.shape[-1], width)

        def copy_slabs(first, last):
            for lo in starts[first:last]:
                _copy(dst[..., lo : lo + width], src[..., lo : lo + width])

        pool.run_all(copy_slabs, pool.bounds(len(starts), groups))

    return run


def reference(src):
    return {"dst": np.array(src, copy=True)}


SPEC = declare(
    globals(),
    name="rearrange",
    stem="Rearrange",
    tensors=(out("dst", compare="bitwise"), inp("src")),
    dtypes=ALL,
    nvidia=cuda.factory,
    reference_inputs="numpy",
    infer=lambda src: {"dst": src},
    torch="dst.copy_(src)",
    summary="dst = src (strided copy between any layouts)",
    c_workspace_args=False,
)
