"""The dtype enum and the one table that maps each dtype to NumPy, CUDA, GGUF and PyTorch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import ml_dtypes
import numpy as np

from .status import Status, error


class DType(IntEnum):
    INVALID = 0
    BYTE = 1
    BOOL = 2
    I8 = 3
    I16 = 4
    I32 = 5
    I64 = 6
    U8 = 7
    U16 = 8
    U32 = 9
    U64 = 10
    F8 = 11
    F16 = 12
    F32 = 13
    F64 = 14
    C16 = 15
    C32 = 16
    C64 = 17
    C128 = 18
    BF16 = 19


@dataclass(frozen=True)
class DTypeInfo:
    """Everything the library needs to know about one dtype."""

    dtype: DType
    numpy: np.dtype | None  # None: no unambiguous NumPy format
    itemsize: int
    ctype: str | None  # CUDA C++ type name used in kernels (None: no kernel support)
    ggml: int | None  # GGUF tensor type code (None: not storable in GGUF)
    torch: str | None  # attribute name in the torch module
    kind: str  # "float", "int", "uint", "bool", "complex", "other"


# ggml codes used by the test-case files: F32 0, F16 1, Q8_K 15 (bool), I8 24, I16 25,
# I32 26, I64 27, F64 28, BF16 30.
_TABLE = [
    DTypeInfo(DType.BYTE, np.dtype(np.uint8), 1, "uint8_t", None, "uint8", "other"),
    DTypeInfo(DType.BOOL, np.dtype(np.bool_), 1, "bool", 15, "bool", "bool"),
    DTypeInfo(DType.I8, np.dtype(np.int8), 1, "int8_t", 24, "int8", "int"),
    DTypeInfo(DType.I16, np.dtype(np.int16), 2, "int16_t", 25, "int16", "int"),
    DTypeInfo(DType.I32, np.dtype(np.int32), 4, "int32_t", 26, "int32", "int"),
    DTypeInfo(DType.I64, np.dtype(np.int64), 8, "int64_t", 27, "int64", "int"),
    DTypeInfo(DType.U8, np.dtype(np.uint8), 1, "uint8_t", None, "uint8", "uint"),
    DTypeInfo(DType.U16, np.dtype(np.uint16), 2, "uint16_t", None, "uint16", "uint"),
    DTypeInfo(DType.U32, np.dtype(np.uint32), 4, "uint32_t", None, "uint32", "uint"),
    DTypeInfo(DType.U64, np.dtype(np.uint64), 8, "uint64_t", None, "uint64", "uint"),
    DTypeInfo(DType.F8, None, 1, None, None, "float8_e4m3fn", "float"),
    DTypeInfo(DType.F16, np.dtype(np.float16), 2, "iop_half", 1, "float16", "float"),
    DTypeInfo(DType.F32, np.dtype(np.float32), 4, "float", 0, "float32", "float"),
    DTypeInfo(DType.F64, np.dtype(np.float64), 8, "double", 28, "float64", "float"),
    DTypeInfo(DType.C16, None, 2, None, None, None, "complex"),
    DTypeInfo(DType.C32, None, 4, None, None, "complex32", "complex"),
    DTypeInfo(DType.C64, np.dtype(np.complex64), 8, None, None, "complex64", "complex"),
    DTypeInfo(DType.C128, np.dtype(np.complex128), 16, None, None, "complex128", "complex"),
    DTypeInfo(DType.BF16, np.dtype(ml_dtypes.bfloat16), 2, "iop_bf16", 30, "bfloat16", "float"),
]
INFO: dict[DType, DTypeInfo] = {row.dtype: row for row in _TABLE}

# Named dtype sets from ops.md.
F = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64})
H = frozenset({DType.F16, DType.BF16})
SI = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})
UI = frozenset({DType.U8, DType.U16, DType.U32, DType.U64})
IDX = frozenset({DType.I32, DType.I64})
ALL = F | SI | UI | {DType.BOOL}

float16, bfloat16, float32, float64 = DType.F16, DType.BF16, DType.F32, DType.F64
int8, int16, int32, int64 = DType.I8, DType.I16, DType.I32, DType.I64
uint8, uint16, uint32, uint64 = DType.U8, DType.U16, DType.U32, DType.U64
bool_ = DType.BOOL

_BY_NUMPY = {}
for _row in _TABLE:
    if _row.numpy is not None and _row.dtype is not DType.BYTE:
        _BY_NUMPY.setdefault(_row.numpy, _row.dtype)
_BY_NAME = {d.name.lower(): d for d in DType}
_BY_NAME.update({r.torch: r.dtype for r in _TABLE if r.torch and r.dtype is not DType.BYTE})
_BY_NAME.update({"half": DType.F16, "float": DType.F32, "double": DType.F64, "bool_": DType.BOOL})
_BY_GGML = {r.ggml: r.dtype for r in _TABLE if r.ggml is not None}


def info(dtype: DType) -> DTypeInfo:
    return INFO[dtype]


def itemsize(dtype: DType) -> int:
    return INFO[dtype].itemsize


def to_numpy(dtype: DType) -> np.dtype:
    npd = INFO[DType(dtype)].numpy
    if npd is None:
        raise error(Status.BAD_TENSOR_DTYPE, f"dtype {DType(dtype).name} has no NumPy equivalent")
    return npd


def to_torch(dtype: DType):
    """The torch dtype for ``dtype`` (imports torch lazily)."""
    import torch

    name = INFO[DType(dtype)].torch
    if name is None or not hasattr(torch, name):
        raise error(Status.BAD_TENSOR_DTYPE, f"dtype {DType(dtype).name} has no torch equivalent")
    return getattr(torch, name)


def from_ggml(code: int) -> DType | None:
    return _BY_GGML.get(code)


def parse_dtype(value) -> DType:
    """Accept a DType, its int value, a name ('f16', 'float16', 'bfloat16'), a NumPy or torch dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return DType(int(value))
        except ValueError:
            pass
    elif isinstance(value, str):
        got = _BY_NAME.get(value.lower())
        if got is not None:
            return got
    else:
        try:
            npd = np.dtype(value)
        except TypeError:
            npd = None
        if npd is not None and npd in _BY_NUMPY:
            return _BY_NUMPY[npd]
        tname = str(value)
        if tname.startswith("torch."):
            got = _BY_NAME.get(tname[6:])
            if got is not None:
                return got
    raise error(Status.BAD_TENSOR_DTYPE, f"unknown dtype {value!r}")


def is_float(d: DType) -> bool:
    return INFO[d].kind == "float"


def is_int(d: DType) -> bool:
    return INFO[d].kind in ("int", "uint")


def acc_size(d: DType) -> int:
    """Bytes of the reduction accumulator of ``d`` (``Acc<T>`` in reduce.cuh): f32 for f32 and the
    half types, f64 for f64, int64 for integers."""
    return 4 if is_float(d) and d is not DType.F64 else 8


def acc_numpy(d: DType):
    """The NumPy type of that accumulator."""
    if d is DType.F64:
        return np.float64
    return np.float32 if is_float(d) else np.int64
