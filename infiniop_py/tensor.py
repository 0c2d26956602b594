"""Tensor descriptors: shape, strides (in elements) and dtype. Plain immutable values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtypes import DType, itemsize, parse_dtype
from .status import Status, error


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def _as_int_tuple(values, what: str) -> tuple[int, ...]:
    try:
        seq = tuple(values)
    except TypeError:
        raise error(Status.BAD_PARAM, f"tensor descriptor: {what} must be a sequence, got {values!r}") from None
    out = []
    for v in seq:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            status = Status.BAD_TENSOR_SHAPE if what == "shape" else Status.BAD_TENSOR_STRIDES
            raise error(status, f"tensor descriptor: {what} entries must be integers, got {v!r}")
        out.append(int(v))
    return tuple(out)


@dataclass(frozen=True)
class TensorDescriptor:
    """Layout of one tensor. ``strides`` are in elements, one per dimension."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType

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

    def __str__(self) -> str:
        return f"Shape: {list(self.shape)}, Strides: {list(self.strides)}, Type: {self.dtype.name}"


def create_tensor_descriptor(shape, strides=None, dtype=DType.F32) -> TensorDescriptor:
    """Validate and build a descriptor. ``strides=None`` means row-major contiguous."""
    shape = _as_int_tuple(shape, "shape")
    if any(d < 0 for d in shape):
        raise error(Status.BAD_TENSOR_SHAPE, f"tensor descriptor: negative dimension in shape {list(shape)}")
    if strides is None:
        strides = contiguous_strides(shape)
    else:
        strides = _as_int_tuple(strides, "strides")
        if len(strides) != len(shape):
            raise error(
                Status.BAD_TENSOR_STRIDES,
                f"tensor descriptor: {len(strides)} strides for a {len(shape)}-d shape {list(shape)}",
            )
        if any(s < 0 for s in strides):
            raise error(Status.BAD_TENSOR_STRIDES, f"tensor descriptor: negative stride in {list(strides)}")
    dt = parse_dtype(dtype)
    if dt is DType.INVALID:
        raise error(Status.BAD_TENSOR_DTYPE, "tensor descriptor: dtype INVALID")
    return TensorDescriptor(shape, strides, dt)


def destroy_tensor_descriptor(desc: TensorDescriptor) -> None:
    """Descriptors are plain values; destroying one is a no-op kept for API symmetry."""
    if not isinstance(desc, TensorDescriptor):
        raise error(Status.BAD_PARAM, f"destroy_tensor_descriptor: not a tensor descriptor: {desc!r}")


def infiniopCreateTensorDescriptor(ndim, shape, strides, dtype) -> TensorDescriptor:  # noqa: N802
    shape = list(shape)[:ndim] if shape is not None else []
    if len(shape) != ndim:
        raise error(Status.BAD_TENSOR_SHAPE, f"infiniopCreateTensorDescriptor: ndim={ndim} but shape {shape}")
    if strides is not None:
        strides = list(strides)
        if len(strides) != ndim:
            raise error(Status.BAD_TENSOR_STRIDES, f"infiniopCreateTensorDescriptor: ndim={ndim} but strides {strides}")
    return create_tensor_descriptor(shape, strides, dtype)


infiniopDestroyTensorDescriptor = destroy_tensor_descriptor  # noqa: N816
