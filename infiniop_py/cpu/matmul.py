"""bfloat16 matrix products on the CPU's bfloat16 dot products (compiled kernels, optional).

NumPy has no bfloat16 BLAS: the fallback widens both operands to float32 and calls the f32
BLAS, at the f32 rate. Where the CPU has AVX512-BF16 (``vdpbf16ps``: per float32 lane, two
bfloat16 products added to the accumulator, at twice the f32 multiply-add rate), the compiled
kernels of :mod:`.bf16_kernels` (``bf16_pack_b``, ``bf16_gemm``) multiply the bfloat16 operands as
they are: a read as pairs along k (a copy only where its rows are not such pairs), b packed
once into panels, the product accumulated in float32 registers over the whole of k in a fixed
order per element, so results repeat bit for bit whatever the threads. Products of two
bfloat16 are exact in float32; each addition rounds to nearest even; subnormal inputs and
results are flushed to zero (as the BLAS-less half products of other libraries do).

:func:`bf16_matmul` returns None (the caller takes the f32 BLAS) without numba, under
:func:`~infiniop_py.cpu.jit.pure_numpy`, on CPUs without the instruction, for products too
small to pay for the packing, or when the kernels failed their self-check at first use.

Where the CPU also has AMX-BF16 and the operating system grants the process the tile state
(Linux: ``arch_prctl(ARCH_REQ_XCOMP_PERM)``), the tile kernel ``bf16_gemm_amx`` runs instead, on
the same packed panels (a and b zero-padded to whole tiles); it passes the same self-check
first, and where it does not, the ``vdpbf16ps`` kernels run.
"""

from __future__ import annotations

import threading

import numpy as np

from . import jit, pool

MIN_WORK = 1 << 21  # m * n * k below which the f32 BLAS path wins (less glue around it)
# m * n * k below which an AMX product runs on the calling thread: a 512^3 product takes a few
# hundred microseconds there, and the pool's hand-offs (a helper's wake-up, the GIL) cost more
# than a second thread gains on so little work
AMX_SERIAL_WORK = 1 << 30

U16 = np.dtype(np.uint16)
U32 = np.dtype(np.uint32)
F32 = np.dtype(np.float32)

_state: dict = {"ok": None, "amx": False}
_lock = threading.Lock()

# The AMX tile configuration (ldtilecfg's 64 bytes): palette 1; tiles 0-7 of 16 rows of 64 bytes
AMX_CONFIG = np.zeros(64, np.uint8)
AMX_CONFIG[0] = 1
AMX_CONFIG[16:32].view(np.uint16)[:] = 64
AMX_CONFIG[48:56] = 16


def _host_features() -> set:
    """The CPU features numba compiles for, where that is the host's own target through an
    LLVM that types the bf16 dot product's intrinsic with ``bfloat`` vectors (LLVM 17 on);
    else none. A portable numba target (another CPU name or feature list) may lack the
    instructions, so only the host's own target counts."""
    try:
        import llvmlite.binding as llvm
        import numba

        if numba.config.CPU_NAME not in (None, "host") or numba.config.CPU_FEATURES or llvm.llvm_version_info[0] < 17:
            return set()
        return set(llvm.get_host_cpu_features().flatten().split(","))
    except Exception:
        return set()


def _amx_permitted() -> bool:
    """Whether the operating system lets this process use the AMX tile data (Linux x86-64:
    ``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``); a tile instruction without that
    permission kills the process, so nothing else asks for it."""
    try:
        import ctypes
        import platform
        import sys

        if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
            return False
        sys_arch_prctl, req_xcomp_perm, xtiledata = 158, 0x1023, 18
        return ctypes.CDLL(None, use_errno=True).syscall(sys_arch_prctl, req_xcomp_perm, xtiledata) == 0
    except Exception:
        return False


def _self_check(k, amx: bool) -> bool:
    """Compiles the kernels and checks one odd-shaped product (edge tiles, odd k) against
    float64: each element within the float32 summation bound (k + 1) 2^-24 sum |a| |b|."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    a = rng.standard_normal((11, 37)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((37, 45)).astype(ml_dtypes.bfloat16)
    got = _product(k, a[None], b[None], amx)[0]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = np.abs(a64) @ np.abs(b64) * (a.shape[1] + 1) * 2.0**-24
    return bool(np.all(np.abs(got - a64 @ b64) <= bound))


def _check(k, amx: bool) -> bool:
    try:
        return _self_check(k, amx)
    except Exception:  # a compile failure: the other path
        return False


def available() -> bool:
    """Whether :func:`bf16_matmul` runs the bfloat16 kernels here (the first call compiles
    and checks them)."""
    k = jit.kernels()
    if k is None:
        return False
    if _state["ok"] is None:
        with _lock:
            if _state["ok"] is None:
                feats = _host_features()
                _state["amx"] = {"+amx-tile", "+amx-bf16"} <= feats and _amx_permitted() and _check(k, True)
                _state["ok"] = _state["amx"] or ("+avx512bf16" in feats and _check(k, False))
    return _state["ok"]


def uses_amx() -> bool:
    """Whether :func:`bf16_matmul` runs on the AMX tiles here."""
    return available() and _state["amx"]


def bf16_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` in float32 for bfloat16 ``a`` (batch, m, k) and ``b`` (batch, k, n), either
    batch 1 (broadcast), any strides; a view of the calling thread's scratch (valid until its
    next call), shaped (batch, m, n). None where the kernels do not run (module docstring)."""
    m, kdim, n = a.shape[1], a.shape[2], b.shape[2]
    if m * n * kdim < MIN_WORK or not available():
        return None
    return _product(jit.kernels(), a, b)


def _pairs(a: np.ndarray, rows: int, kp: int) -> np.ndarray:
    """``a`` (batch, m, k) bfloat16 as the kernel reads it: (batch, rows, kp) uint32 pairs along
    k, rows a multiple of the tile. ``a`` itself where it is such pairs already (unit stride
    along an even k, rows 4-byte aligned, no rows to pad), else a zero-padded scratch copy."""
    batch, m, kdim = a.shape
    bits = a.view(U16)
    if m == rows and kdim == 2 * kp and bits.strides[2] == 2 and bits.strides[1] % 4 == 0 and bits.strides[0] % 4 == 0:
        if bits.__array_interface__["data"][0] % 4 == 0:
            return bits.view(U32)
    buf = pool.scratch("mm.a", (batch, rows, 2 * kp), U16)
    buf[:, :m, :kdim] = bits
    buf[:, :m, kdim:] = 0
    buf[:, m:] = 0
    return buf.view(U32)


def _product(k, a: np.ndarray, b: np.ndarray, amx: bool | None = None) -> np.ndarray:
    """a @ b (module docstring) on the AMX tiles (``amx``; by default where they run here) or
    through ``vdpbf16ps``."""
    if amx is None:
        amx = _state["amx"]
    batch = max(a.shape[0], b.shape[0])
    m, kdim, n = a.shape[1], a.shape[2], b.shape[2]
    mr, nr = (k.AMX_M if amx else k.BF16_MR), k.BF16_NR
    kp = (kdim + 1) // 2
    if amx:
        kp = -(-kp // k.AMX_KQ) * k.AMX_KQ
    rows = -(-m // mr) * mr
    panels = -(-n // nr)
    ap = _pairs(a, rows, kp)
    bp = pool.scratch("mm.b", (b.shape[0], panels, kp, nr), U32)
    c = pool.scratch("mm.c", (batch, rows, panels * nr), F32)
    bits = b.view(U16)
    if kp == 0:
        c[...] = 0
        return c[:, :m, :n]
    per = max(1, -(-pool.PARTS_PER_THREAD * pool.THREADS // batch))  # parts per batch entry
    if amx and m * n * kdim < AMX_SERIAL_WORK:
        per = 1
    ai = (lambda i: 0) if ap.shape[0] == 1 else (lambda i: i)
    parts = [(i, j0, j1) for i in range(batch) for j0, j1 in pool.bounds(panels, per)]
    if amx:

        def gemm(a2, b2, c2, j0, j1):
            k.bf16_gemm_amx(a2, b2, c2, AMX_CONFIG, j0, j1)

    else:
        gemm = k.bf16_gemm
    if bp.shape[0] == batch:  # each part packs the panels of b it multiplies

        def part(i, j0, j1):
            k.bf16_pack_b(bits[i], bp[i], j0, j1)
            gemm(ap[ai(i)], bp[i], c[i], j0, j1)

        pool.run_all(part, parts)
        return c[:, :m, :n]
    # one b for every batch entry: packed once, first
    pool.run_all(lambda j0, j1: k.bf16_pack_b(bits[0], bp[0], j0, j1), pool.bounds(panels, per))
    pool.run_all(lambda i, j0, j1: gemm(ap[ai(i)], bp[0], c[i], j0, j1), parts)
    return c[:, :m, :n]
