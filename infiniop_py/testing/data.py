"""Laying logical data out in strided buffers, with poison in every gap, and reading it back."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, is_float, to_numpy

POISON_BYTE = 0xA5


def span(shape, strides) -> int:
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, strides))


def poisoned(n: int, dtype: DType) -> np.ndarray:
    """A host buffer of ``n`` elements of poison: NaN for floats, 0xA5 bytes otherwise."""
    npd = to_numpy(dtype)
    if is_float(dtype):
        return np.full(n, np.nan, dtype=npd)
    return np.full(n * npd.itemsize, POISON_BYTE, dtype=np.uint8).view(npd)


def strided_view(flat: np.ndarray, shape, strides) -> np.ndarray:
    if any(d == 0 for d in shape) or flat.size == 0:
        return np.empty(shape, dtype=flat.dtype)
    item = flat.dtype.itemsize
    return np.lib.stride_tricks.as_strided(flat, shape=tuple(shape), strides=tuple(s * item for s in strides))


def layout(data: np.ndarray, shape, strides, dtype: DType) -> np.ndarray:
    """A flat poisoned buffer covering the span, with ``data`` scattered through ``strides``."""
    flat = poisoned(span(shape, strides), dtype)
    if flat.size:
        view = strided_view(flat, shape, strides)
        view[...] = np.broadcast_to(np.asarray(data, dtype=flat.dtype), tuple(shape))
    return flat


def gap_mask(shape, strides) -> np.ndarray:
    """Boolean mask over the span: True where no logical element lives."""
    mask = np.ones(span(shape, strides), dtype=bool)
    if mask.size:
        strided_view(mask, shape, strides)[...] = False
    return mask


def gaps_intact(flat: np.ndarray, shape, strides, dtype: DType) -> int:
    """Number of gap elements of an output buffer that no longer hold poison."""
    mask = gap_mask(shape, strides)
    if not mask.any():
        return 0
    ref = poisoned(int(mask.sum()), dtype)
    got = flat[mask]
    return int(
        (got.view(np.uint8).reshape(-1, flat.dtype.itemsize) != ref.view(np.uint8).reshape(-1, flat.dtype.itemsize))
        .any(axis=1)
        .sum()
    )


def gather(flat: np.ndarray, shape, strides) -> np.ndarray:
    return np.array(strided_view(flat, shape, strides), copy=True)


def random_data(rng: np.random.Generator, dtype: DType, shape, low=-2.0, high=2.0) -> np.ndarray:
    """Fresh random values already rounded to ``dtype`` (never zeros)."""
    npd = to_numpy(dtype)
    if dtype is DType.BOOL:
        return np.asarray(rng.integers(0, 2, size=shape)).astype(np.bool_)
    if is_float(dtype):
        return np.asarray(rng.uniform(low, high, size=shape)).astype(npd)
    info = np.iinfo(npd)
    lo = max(info.min, int(low)) if low is not None else info.min
    hi = min(info.max, int(high)) if high is not None else info.max
    return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)).astype(npd)
