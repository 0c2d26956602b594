"""equal: elementwise torch.eq, or torch.equal when c has one element (ops.md §1.7).

The mode is chosen by c's shape at create: c.shape == a.shape -> elementwise (the elementwise
framework); otherwise a one-element c ([1] or ()) -> whole-tensor equality (true iff every
element pair is equal; an empty a gives true): ``cuda.py`` runs a set-true kernel followed by
a check kernel in which any thread that finds a differing pair stores false -- every writer
stores the same byte, so the result is deterministic without atomics or workspace.
NaN != NaN, +0 == -0, half values are compared exactly.
"""

import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.elementwise import check_same_shape, make_cpu
from infiniop_py.elementwise.declare import binary_op
from infiniop_py.elementwise.logical import DATA, LOGICAL_OUT, TRUTH_TYPES, truth_type
from infiniop_py.spec import Info
from infiniop_py.status import Status


def _kernel_types(name, dtype):
    # c: a 0/1 byte; ints and bool compare equal iff their bits do; floats compare as floats
    return DType.U8 if name == "c" else truth_type(dtype)


def _combos():
    return [(DType.U8, (t, t)) for t in TRUTH_TYPES]


def _reference(a, b, out_shapes=None):
    import torch

    shape = (out_shapes or {}).get("c", tuple(a.shape))
    if tuple(shape) == tuple(a.shape):
        return torch.eq(a, b)
    return torch.eq(a, b).all().reshape(shape)  # torch.equal, with NaN != NaN


def _validate(check):
    for n in ("c", "a", "b"):
        if check[n] is None:
            check.fail(Status.NULL_POINTER, f"tensor '{n}' is required")
    check_same_shape(check, ("a", "b"))
    check.dtype_in("a", DATA)
    check.same_dtype("a", "b")
    check.dtype_in("c", LOGICAL_OUT)
    check.writable("c")
    a, c = check["a"], check["c"]
    if c.shape == a.shape:
        mode = "elementwise"
    elif c.numel == 1 and c.ndim <= 1:
        mode = "all"
    else:
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor 'c' shape {list(c.shape)} must equal a's shape {list(a.shape)} (elementwise) or have one element "
            "([1] or [], whole-tensor equality)",
        )
    return Info(check.op, check.tensors, check.attrs, out_name="c", reads=("a", "b"), mode=mode)


_BASE = binary_op(
    "equal",
    cuda="return a == b;",
    numpy=np.equal,
    dtypes=DATA,
    type_combos=_combos,
    kernel_types=_kernel_types,
    reference=_reference,
    torch="torch.eq(a, b) / torch.equal(a, b)",
    summary="c = (a == b) elementwise, or torch.equal(a, b) when c has one element",
)


def _cpu(info):
    if info.mode == "elementwise":
        return make_cpu(np.equal, ())(info)

    def run(views, ws, rt):
        a, b, c = views["a"], views["b"], views["c"]
        if a.dtype.itemsize == 2 and a.dtype.kind not in "iub":
            a, b = a.astype(np.float32), b.astype(np.float32)
        c[...] = bool(np.all(a == b))  # NaN != NaN; an empty a gives True

    return run


_ELEMENTWISE_NVIDIA = _BASE.nvidia


def _nvidia(info, handle):
    if info.mode == "elementwise":
        return _ELEMENTWISE_NVIDIA(info, handle)
    from .cuda import EqualAllKernel

    return EqualAllKernel(info, handle)


def _compile_units():
    from .cuda import compile_units

    return _ELEMENTWISE_NVIDIA.compile_units() + compile_units()


_nvidia.compile_units = _compile_units
_BASE.validate = _validate
_BASE.cpu = _cpu
_BASE.nvidia = _nvidia
_BASE.kernel_sources = ("<elementwise>", "kernel.cu")
SPEC = _BASE
