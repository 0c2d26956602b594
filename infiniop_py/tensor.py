"""Tensor descriptors: shape, strides (in elements) and dtype. Plain immutable values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtypes import DType, itemsize, parse_dtype
from .status import InfiniopError, Status, error


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


# Largest dimension, stride, element count and byte span a descriptor may have: offsets are
# int64 on every backend (NumPy's intp, the CUDA kernels' long long).
INT64_MAX = (1 << 63) - 1


_SIZES = {dt: itemsize(dt) for dt in DType if dt is not DType.INVALID}  # the fast path's dtypes


def _as_int_tuple(values, what: str, status: Status) -> tuple[int, ...]:
    """``values`` as a tuple of non-negative Python ints that fit int64, else ``status``."""
    if type(values) is tuple:  # the common case, a tuple of small ints: nothing to convert
        for v in values:
            if type(v) is not int or not 0 <= v <= INT64_MAX:
                break
        else:
            return values
    if isinstance(values, (str, bytes)) or values is None:
        raise error(status, f"tensor descriptor: {what} must be a sequence of integers, got {values!r}")
    try:
        seq = tuple(values)
    except TypeError:
        raise error(status, f"tensor descriptor: {what} must be a sequence of integers, got {values!r}") from None
    out = []
    for v in seq:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise error(status, f"tensor descriptor: {what} entries must be integers, got {v!r} in {list(seq)!r}")
        v = int(v)
        if v < 0:
            raise error(
                status, f"tensor descriptor: negative {what[:-1] if what == 'strides' else 'dimension'} in {what} {list(seq)}"
            )
        if v > INT64_MAX:
            raise error(status, f"tensor descriptor: {what} entry {v} does not fit int64")
        out.append(v)
    return tuple(out)


def _as_dtype(dtype) -> DType:
    if type(dtype) is DType and dtype is not DType.INVALID:
        return dtype
    if dtype is None:
        raise error(Status.BAD_TENSOR_DTYPE, "tensor descriptor: dtype is None")
    try:
        dt = parse_dtype(dtype)
    except InfiniopError:
        raise
    except Exception:  # objects NumPy fails to read as a dtype in some other way
        raise error(Status.BAD_TENSOR_DTYPE, f"tensor descriptor: unknown dtype {dtype!r}") from None
    if dt is DType.INVALID:
        raise error(Status.BAD_TENSOR_DTYPE, "tensor descriptor: dtype INVALID")
    return dt


def _validated(shape, strides, dtype) -> tuple[tuple[int, ...], tuple[int, ...], DType]:
    """Checked and normalised (shape, strides, dtype) of a descriptor (``strides=None``: row-major)."""
    shape = _as_int_tuple(shape, "shape", Status.BAD_TENSOR_SHAPE)
    if strides is None:
        strides = contiguous_strides(shape)
    else:
        strides = _as_int_tuple(strides, "strides", Status.BAD_TENSOR_STRIDES)
        if len(strides) != len(shape):
            raise error(
                Status.BAD_TENSOR_STRIDES,
                f"tensor descriptor: {len(strides)} strides for a {len(shape)}-d shape {list(shape)}",
            )
    dtype = _as_dtype(dtype)
    numel = math.prod(shape)
    if numel > INT64_MAX:
        raise error(Status.BAD_TENSOR_SHAPE, f"tensor descriptor: shape {list(shape)} has more than 2^63 elements")
    size = itemsize(dtype)
    last = sum((d - 1) * s for d, s in zip(shape, strides)) if numel else 0  # offset of the last element
    if (last + 1) * size > INT64_MAX or (strides and max(strides) * size > INT64_MAX):
        raise error(
            Status.BAD_TENSOR_STRIDES,
            f"tensor descriptor: strides {list(strides)} of shape {list(shape)} span more than 2^63 bytes",
        )
    return shape, strides, dtype


@dataclass(frozen=True)
class TensorDescriptor:
    """Layout of one tensor. ``strides`` are in elements, one per dimension (``None``: row-major).

    Every way of making one validates: integer, non-negative dims and strides, one stride per
    dim, a known dtype, and an element count and byte span that fit int64 (BAD_TENSOR_SHAPE,
    BAD_TENSOR_STRIDES, BAD_TENSOR_DTYPE). Shape and strides are stored as tuples of ints.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: DType

    def __post_init__(self):
        shape, strides, dtype = self.shape, self.strides, self.dtype
        # Fast path: tuples of non-negative ints and a DType (how the library itself makes them).
        size = _SIZES.get(dtype) if type(dtype) is DType else None
        if size and type(shape) is tuple and type(strides) is tuple and len(shape) == len(strides):
            numel, last, top = 1, 0, 0
            for d, st in zip(shape, strides):
                if type(d) is not int or type(st) is not int or d < 0 or st < 0:
                    break
                numel *= d
                last += (d - 1) * st
                if st > top:
                    top = st
            else:
                if numel <= INT64_MAX and top * size <= INT64_MAX and (not numel or (last + 1) * size <= INT64_MAX):
                    return
        shape, strides, dtype = _validated(shape, strides, dtype)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "dtype", dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def span(self) -> int:
        """Elements from the first to the last addressed one (0 for an empty tensor)."""
        if any(d == 0 for d in self.shape):
            return 0
        return 1 + sum((d - 1) * s for d, s in zip(self.shape, self.strides))

    @property
    def span_bytes(self) -> int:
        return self.span * self.itemsize

    def is_contiguous(self) -> bool:
        return all(s == c for d, s, c in zip(self.shape, self.strides, contiguous_strides(self.shape)) if d != 1)

    def has_broadcast(self) -> bool:
        """True when some dimension of size > 1 has stride 0."""
        return any(d > 1 and s == 0 for d, s in zip(self.shape, self.strides))

    def may_self_overlap(self) -> bool:
        """Conservative test: True unless the strides provably address distinct elements."""
        dims = sorted((s, d) for d, s in zip(self.shape, self.strides) if d > 1)
        reach = 0  # largest offset reachable with the dims seen so far
        for s, d in dims:
            if s <= reach:
                return True
            reach += (d - 1) * s
        return False

    def with_dtype(self, dtype: DType) -> TensorDescriptor:
        return TensorDescriptor(self.shape, self.strides, dtype)

    def shape_text(self) -> str:
        """Short form for messages: ``F32 [4, 5] strides [5, 1]``."""
        return f"{self.dtype.name} {list(self.shape)} strides {list(self.strides)}"

    def __str__(self) -> str:
        return f"Shape: {list(self.shape)}, Strides: {list(self.strides)}, Type: {self.dtype.name}"


def create_tensor_descriptor(shape, strides=None, dtype=DType.F32) -> TensorDescriptor:
    """Validate and build a descriptor. ``strides=None`` means row-major contiguous."""
    return TensorDescriptor(shape, strides, dtype)


def destroy_tensor_descriptor(desc: TensorDescriptor) -> None:
    """Descriptors are plain values; destroying one is a no-op kept for API symmetry."""
    if not isinstance(desc, TensorDescriptor):
        raise error(Status.BAD_PARAM, f"destroy_tensor_descriptor: not a tensor descriptor: {desc!r}")


def infiniopCreateTensorDescriptor(ndim, shape, strides, dtype) -> TensorDescriptor:  # noqa: N802
    """C-style create: ``shape`` and ``strides`` (or None: row-major) hold exactly ``ndim`` entries."""
    fn = "infiniopCreateTensorDescriptor"
    if isinstance(ndim, (bool, np.bool_)) or not isinstance(ndim, (int, np.integer)) or ndim < 0:
        raise error(Status.BAD_PARAM, f"{fn}: ndim must be a non-negative integer, got {ndim!r}")
    ndim = int(ndim)
    if shape is None:
        if ndim:
            raise error(Status.NULL_POINTER, f"{fn}: ndim={ndim} but shape is None")
        shape = ()
    shape = _as_int_tuple(shape, "shape", Status.BAD_TENSOR_SHAPE)
    if len(shape) != ndim:
        raise error(Status.BAD_TENSOR_SHAPE, f"{fn}: ndim={ndim} but shape {list(shape)}")
    if strides is not None:
        strides = _as_int_tuple(strides, "strides", Status.BAD_TENSOR_STRIDES)
        if len(strides) != ndim:
            raise error(Status.BAD_TENSOR_STRIDES, f"{fn}: ndim={ndim} but strides {list(strides)}")
    return TensorDescriptor(shape, strides, dtype)


infiniopDestroyTensorDescriptor = destroy_tensor_descriptor  # noqa: N816
