"""Tensors of more than 2^31 elements (f16 / u8; structured data whose result is known exactly):
each check runs on the GPU past 2^31 elements (skipped without CuPy, a GPU and the device memory it
needs), and on the CPU at small sizes (which checks the checks).
"""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest
from conftest import requires_gpu
from hardening_support import cupy_or_skip, report

import infiniop_py as iop

GIB = 1 << 30


GOLDEN = 0x9E3779B97F4A7C15


class Scale:
    """The array module (CuPy or NumPy), device and step size of one run of a large check."""

    def __init__(self, xp, device: str, chunk: int):
        self.xp, self.device, self.chunk = xp, device, chunk

    def run(self, op, descs, bufs, **attrs) -> None:
        xp = self.xp
        h = iop.create_handle(self.device)
        d = iop.create_descriptor(op, h, *descs, **attrs)
        ws = xp.empty(d.workspace_size, xp.uint8) if d.workspace_size else None
        d.calculate(ws, *bufs)
        if self.device != "cpu":
            xp.cuda.Device().synchronize()
        d.destroy()
        iop.destroy_handle(h)

    def pattern(self, k):
        """A byte per index (k a uint64 array): the top byte of a multiplicative hash."""
        xp = self.xp
        return ((k.astype(xp.uint64) * xp.uint64(GOLDEN)) >> xp.uint64(56)).astype(xp.uint8)

    def half(self, k):
        """f16 values in [-8, 8) in steps of 1/16 (exact), from the byte pattern."""
        xp = self.xp
        return ((self.pattern(k).astype(xp.float32) - 128.0) / 16.0).astype(xp.float16)

    def fill(self, flat, fn) -> None:
        """flat[k] = fn(k) for every k (flat a 1-D contiguous array), a chunk at a time."""
        xp, n = self.xp, flat.size
        for s in range(0, n, self.chunk):
            e = min(n, s + self.chunk)
            flat[s:e] = fn(xp.arange(s, e, dtype=xp.uint64))

    def grid(self, r0, r1, cols, row_step, col_step):
        """Flat indices r * row_step + c * col_step for rows [r0, r1) and cols [0, cols) (uint64)."""
        xp = self.xp
        rows = xp.arange(r0, r1, dtype=xp.uint64)[:, None] * xp.uint64(row_step)
        return rows + xp.arange(cols, dtype=xp.uint64)[None, :] * xp.uint64(col_step)

    def check_rows(self, what, out2d, expected_rows) -> None:
        """Every block of rows of out2d equals expected_rows(r0, r1) (compared as values)."""
        xp, R = self.xp, out2d.shape[0]
        step = max(1, self.chunk // max(1, out2d.shape[1]))
        for r0 in range(0, R, step):
            r1 = min(R, r0 + step)
            ok = out2d[r0:r1] == expected_rows(r0, r1)
            if not bool(ok.all()):
                bad = xp.argwhere(~ok)[0]
                raise AssertionError(f"{what}: first wrong element at [{r0 + int(bad[0])}, {int(bad[1])}]")

    def marked(self, R: int, C: int, rows, cols, vals):  # noqa: N803
        """An (R, C) f16 matrix of zeros but for x[rows[i], cols[i]] = vals[i], built a block of
        rows at a time."""
        xp = self.xp
        x = xp.empty((R, C), xp.float16)
        step = max(1, self.chunk // C)
        for r0 in range(0, R, step):
            r1 = min(R, r0 + step)
            block = xp.zeros((r1 - r0, C), xp.float16)
            sel = xp.flatnonzero((rows >= r0) & (rows < r1))
            block[rows[sel] - r0, cols[sel]] = vals[sel]
            x[r0:r1] = block
        return x

    def markers(self, rows: int, extent: int):
        """Per row r: a position in [0, extent) and a value 1..61 (exact in f16)."""
        xp = self.xp
        r = xp.arange(rows, dtype=xp.uint64)
        pos = ((r * xp.uint64(GOLDEN)) >> xp.uint64(33)) % xp.uint64(extent)
        return pos.astype(xp.int64), (r % xp.uint64(61) + xp.uint64(1)).astype(xp.float16)


def td(shape, strides=None, dtype=iop.float16):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def big_add_dense(s: Scale, n: int) -> int:
    """u8 add, contiguous: the dense 16-byte path and its scalar tail."""
    xp = s.xp
    a, b, c = (xp.empty(n, xp.uint8) for _ in range(3))
    s.fill(a, s.pattern)
    s.fill(b, lambda k: s.pattern(k + xp.uint64(12345)))
    s.run("add", [td((n,), dtype=iop.uint8)] * 3, [c, a, b])

    def want(r0, r1):
        k = xp.arange(r0, r1, dtype=xp.uint64)
        return (s.pattern(k) + s.pattern(k + xp.uint64(12345)))[:, None]

    s.check_rows("add", c.reshape(-1, 1), want)
    return n


def big_unary_transposed(s: Scale, R: int, C: int) -> int:  # noqa: N803
    """f16 relu of a transposed input: the strided path (64-bit indices past 2^31)."""
    xp = s.xp
    x = xp.empty(R * C, xp.float16)  # holds x^T: element [i, j] at j * R + i
    y = xp.empty((R, C), xp.float16)
    s.fill(x, s.half)
    s.run("relu", [td((R, C)), td((R, C), (1, R))], [y, x])
    s.check_rows("relu (transposed input)", y, lambda r0, r1: xp.maximum(s.half(s.grid(r0, r1, C, 1, R)), xp.float16(0)))
    return R * C


def big_sum_last_dim(s: Scale, R: int, L: int) -> int:  # noqa: N803
    """f16 sum over dim 1: each row is zero but for one marker value, so its sum is that value
    exactly (the last rows start past element 2^31 on the GPU)."""
    xp = s.xp
    pos, val = s.markers(R, L)
    x = s.marked(R, L, xp.arange(R, dtype=xp.int64), pos, val)
    y = xp.full(R, xp.nan, xp.float16)
    s.run("sum", [td((R,)), td((R, L))], [y, x], dims=[1])
    s.check_rows("sum over dim 1", y.reshape(-1, 1), lambda r0, r1: val[r0:r1, None])
    return R * L


def big_max_dim_0(s: Scale, R: int, M: int) -> int:  # noqa: N803
    """f16 reduce_max over dim 0 (a column plan): each column is zero but for one marker value,
    at any row."""
    xp = s.xp
    pos, val = s.markers(M, R)
    x = s.marked(R, M, pos, xp.arange(M, dtype=xp.int64), val)
    y = xp.full(M, xp.nan, xp.float16)
    s.run("reduce_max", [td((M,)), td((R, M))], [y, x], dim=0)
    s.check_rows("reduce_max over dim 0", y.reshape(-1, 1), lambda r0, r1: val[r0:r1, None])
    return R * M


def big_softmax_rows(s: Scale, R: int, N: int) -> int:  # noqa: N803
    """f16 softmax over rows of N. Row r is a base row rotated by a hashed amount, so its result
    is the base row's float64 softmax rotated the same way, and a row read from the wrong place
    shows."""
    xp = s.xp
    rng = np.random.default_rng(11)
    base = (rng.integers(-64, 64, N) / 16.0).astype(np.float16)
    e = np.exp(base.astype(np.float64) - base.astype(np.float64).max())
    ref = xp.asarray((e / e.sum()).astype(np.float32))
    base_d = xp.asarray(base)
    shift = ((xp.arange(R, dtype=xp.uint64) * xp.uint64(GOLDEN)) >> xp.uint64(40)).astype(xp.int64) % N
    step = max(1, s.chunk // N)

    def idx(r0, r1):
        return (xp.arange(N, dtype=xp.int64)[None, :] + shift[r0:r1, None]) % N

    x = xp.empty((R, N), xp.float16)
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        x[r0:r1] = base_d[idx(r0, r1)]
    y = xp.full((R, N), xp.nan, xp.float16)
    s.run("softmax", [td((R, N)), td((R, N))], [y, x], dim=1)
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        want = ref[idx(r0, r1)]
        err = xp.abs(y[r0:r1].astype(xp.float32) - want) - (1e-6 + 2e-3 * want)
        if not float(err.max()) <= 0:  # NaN fails too
            r, c = (int(v) for v in xp.unravel_index(xp.argmax(xp.where(xp.isnan(err), xp.inf, err)), err.shape))
            raise AssertionError(f"softmax: row {r0 + r}, col {c}: {float(y[r0 + r, c])} vs {float(want[r, c])}")
    return R * N


def big_copy_transposed(s: Scale, R: int, C: int) -> int:  # noqa: N803
    """u8 rearrange of a transposed view into a contiguous one (64-bit strided copy)."""
    xp = s.xp
    src = xp.empty(R * C, xp.uint8)  # src^T contiguous: element [i, j] at j * R + i
    dst = xp.empty((R, C), xp.uint8)
    s.fill(src, s.pattern)
    s.run("rearrange", [td((R, C), dtype=iop.uint8), td((R, C), (1, R), dtype=iop.uint8)], [dst, src])
    s.check_rows("rearrange (transpose)", dst, lambda r0, r1: s.pattern(s.grid(r0, r1, C, 1, R)))
    return R * C


def big_copy_stride_2(s: Scale, n: int) -> int:
    """u8 rearrange of every other byte: one collapsed dim of n elements (2^32 + 24 on the GPU:
    past what the 32-bit fast-division fields hold; the 64-bit path divides)."""
    xp = s.xp
    src = xp.empty(2 * n, xp.uint8)
    dst = xp.empty(n, xp.uint8)
    s.fill(src, s.pattern)
    s.run("rearrange", [td((n,), dtype=iop.uint8), td((n,), (2,), dtype=iop.uint8)], [dst, src])
    s.check_rows("rearrange (stride 2)", dst.reshape(-1, 1), lambda r0, r1: s.pattern(s.grid(r0, r1, 1, 2, 0)))
    return n


# check, GPU sizes, GiB of device memory it needs (buffers and step temporaries), CPU sizes
BIG = [
    (big_add_dense, {"n": 2**31 + 2**20 + 7}, 8, {"n": 4096 + 7}),
    (big_unary_transposed, {"R": 65537, "C": 32768}, 10, {"R": 67, "C": 33}),
    (big_sum_last_dim, {"R": 65537, "L": 32768}, 6, {"R": 67, "L": 40}),
    (big_max_dim_0, {"R": 65537, "M": 32768}, 6, {"R": 67, "M": 40}),
    (big_softmax_rows, {"R": 2**19 + 3, "N": 4096}, 12, {"R": 70, "N": 64}),
    (big_copy_transposed, {"R": 65537, "C": 32768}, 6, {"R": 67, "C": 33}),
    (big_copy_stride_2, {"n": 2**32 + 24}, 14, {"n": 4096 + 24}),
]
GPU_STEP = 1 << 26  # elements per generation / check step on the GPU (temporaries of ~0.5 GiB)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("check,sizes,gib", [(c, g, m) for c, g, m, _ in BIG], ids=[c.__name__ for c, *_ in BIG])
def test_more_than_2_31_elements(check, sizes, gib):
    cp = cupy_or_skip()
    pool = cp.get_default_memory_pool()
    gc.collect()
    pool.free_all_blocks()
    free, _ = cp.cuda.runtime.memGetInfo()
    if free < gib * GIB:
        pytest.skip(f"needs {gib} GiB of free device memory, {free / GIB:.1f} available")
    t0 = time.perf_counter()
    try:
        n = check(Scale(cp, "nvidia", GPU_STEP), **sizes)
        report(
            test="big", check=check.__name__, elements=n, seconds=round(time.perf_counter() - t0, 2), pool_peak=pool.total_bytes()
        )
        assert n > 2**31
    finally:
        gc.collect()
        pool.free_all_blocks()


@pytest.mark.parametrize("check,sizes", [(c, s) for c, _, _, s in BIG], ids=[c.__name__ for c, *_ in BIG])
def test_large_tensor_checks_at_small_sizes_on_cpu(check, sizes, monkeypatch):
    """The same checks on the CPU backend at small sizes (steps of 64 elements): they pass on a
    correct result and fail when the operator leaves its output unwritten."""
    check(Scale(np, "cpu", 64), **sizes)
    monkeypatch.setattr(Scale, "run", lambda self, *a, **k: None)
    with pytest.raises(AssertionError):
        check(Scale(np, "cpu", 64), **sizes)
