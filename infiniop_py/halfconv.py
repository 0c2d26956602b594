"""float32 <-> float16 / bfloat16 conversion for the CPU backend.

Every half-precision tensor the CPU backend reads or writes goes through these two functions
(the arithmetic happens in float32). NumPy converts float16 one element at a time (on the dev
box ~1.8 ns per element f16 -> f32, ~2.6 ns f32 -> f16) and ml_dtypes' bfloat16 casts take
0.2-0.4 ns, against ~0.12 ns for a copy. Two paths, bit-identical for every non-NaN value
(NaNs stay NaNs; ``test/test_halfconv.py`` checks both directions bit for bit on both paths):

- compiled (:mod:`infiniop_py.cpu.jit`, when numba is installed): the hardware's conversions
  (F16C on x86) and bit moves for bfloat16, at memory speed (~0.12 ns per element), large
  arrays split over the CPU thread pool;
- pure NumPy: ml_dtypes registers ``complex32``, a complex number of two float16 parts, with
  compiled casts from and to ``complex64``: viewing a contiguous float32 array of even length
  as complex64 and casting it to complex32 rounds every element to float16 with NumPy's
  rounding, ~2-3x faster than NumPy's own cast (an odd last element, and ml_dtypes releases
  without ``complex32``, take NumPy's path); bfloat16 through ml_dtypes' casts.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .cpu import jit, pool

_C32 = getattr(ml_dtypes, "complex32", None)
_C32 = np.dtype(_C32) if _C32 is not None else None
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
U16 = np.dtype(np.uint16)
U32 = np.dtype(np.uint32)
HALF = (F16, BF16)

PART = 1 << 18  # elements per pool task of a large conversion


def _convert(fn, src: np.ndarray, dst: np.ndarray) -> None:
    """``fn(src, dst)`` on 1-D contiguous arrays, large ones split over the thread pool."""
    n = src.size
    if n < 2 * PART or not pool.parallel():
        fn(src, dst)
        return
    parts = pool.bounds(n, min(pool.PARTS_PER_THREAD * pool.THREADS, n // PART))
    pool.run_all(fn, [(src[lo:hi], dst[lo:hi]) for lo, hi in parts])


def to_f32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 values of ``x`` (same shape): ``x`` itself if float32, else ``out`` (a
    C-contiguous float32 array of ``x``'s shape, e.g. a scratch block) or a new array, holding
    float16/bfloat16 converted as described above and other dtypes cast by NumPy."""
    if x.dtype == F32:
        return x
    if out is None:
        out = np.empty(x.shape, np.float32)
    if x.dtype not in HALF or x.size == 0:
        np.copyto(out, x, casting="unsafe")
        return out
    k = jit.kernels()
    if k is None:
        _pure_to_f32(x, out)
        return out
    bits = np.ascontiguousarray(x.view(U16)).reshape(-1)
    if x.dtype == F16:
        _convert(k.f16_to_f32, bits, out.reshape(-1))
    else:
        _convert(k.bf16_to_f32, bits, out.reshape(-1).view(U32))
    return out


def copy_into(dst: np.ndarray, src) -> None:
    """``np.copyto(dst, src, casting="unsafe")`` (``src`` broadcast to ``dst``), faster when a
    float32 value goes into float16/bfloat16 or a half value into float32."""
    src = np.asarray(src)
    k = jit.kernels()
    if k is not None and dst.size >= 16:
        if dst.dtype in HALF and src.dtype == F32:
            if src.shape != dst.shape:
                src = np.broadcast_to(src, dst.shape)
            flat = np.ascontiguousarray(src).reshape(-1)
            direct = dst.flags.c_contiguous
            out = dst.view(U16).reshape(-1) if direct else np.empty(dst.size, U16)
            if dst.dtype == F16:
                _convert(k.f32_to_f16, flat, out)
            else:
                _convert(k.f32_to_bf16, flat.view(U32), out)
            if not direct:
                np.copyto(dst.view(U16), out.reshape(dst.shape))
            return
        if dst.dtype == F32 and src.dtype in HALF:
            if src.shape == dst.shape and dst.flags.c_contiguous:
                to_f32(src, dst)
            else:
                np.copyto(dst, to_f32(src))
            return
    _pure_copy_into(dst, src)


def _pure_copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    if _C32 is None or dst.dtype != F16 or src.dtype != F32 or dst.size < 64:
        np.copyto(dst, src, casting="unsafe")
        return
    if src.shape != dst.shape:
        src = np.broadcast_to(src, dst.shape)
    flat = np.ascontiguousarray(src).reshape(-1)
    direct = dst.flags.c_contiguous
    out = dst.reshape(-1) if direct else np.empty(dst.size, np.float16)
    even = flat.size & ~1
    np.copyto(out[:even].view(_C32), flat[:even].view(np.complex64), casting="unsafe")
    if even < flat.size:
        out[even:] = flat[even:]
    if not direct:
        np.copyto(dst, out.reshape(dst.shape))


def _pure_to_f32(x: np.ndarray, out: np.ndarray) -> None:
    if _C32 is None or x.dtype != F16 or x.size < 64:
        np.copyto(out, x)  # bfloat16: ml_dtypes' cast (0.2 ns per element)
        return
    flat = np.ascontiguousarray(x).reshape(-1)
    dst = out.reshape(-1)
    even = flat.size & ~1
    np.copyto(dst[:even].view(np.complex64), flat[:even].view(_C32), casting="unsafe")
    if even < flat.size:
        dst[even:] = flat[even:]
