"""rearrange: dst[i] = src[i] between any two layouts, copied bitwise (ops.md §5.1).

C-style form is odd: ``infiniopRearrange(desc, dst, src, stream)`` has no workspace arguments
and there is no workspace-size function.
"""

import numpy as np

from infiniop_py.dtypes import ALL
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


def cpu(info: Info):
    uint = np.dtype(f"u{info.tensors['dst'].itemsize}")

    def run(views, ws, rt):
        dst, src = views["dst"], views["src"]
        if dst.size:
            np.copyto(dst.view(uint), src.view(uint))

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
