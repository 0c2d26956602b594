"""NVIDIA planning shared by the causal conv1d family: the packed launch arguments, the choice of
kernel path per layout, grid sizes and the per-call choice between aligned and unaligned launches.

Paths (each kernel is specialised on the width for 2 <= W <= 8):

- ``cf`` channel-first: every (B, D, L) tensor of the op has time stride 1. A warp walks
  ``rseg`` consecutive chunks of one (b, d) row, a chunk being runs of 32·E steps (E = 16
  bytes of x's dtype per lane): CF_FWD_RUNS runs in the forward, CF_BWD_RUNS in the backward
  (that many independent 16-byte loads per lane and tensor read).
- ``cl`` channel-last: every (B, D, L) tensor has channel stride 1. A thread holds E channels
  (CL_E = 4 in the forward, CLB_E = 2 in the backward) and walks tiles of ``rseg`` chunks of
  ``cl_chunk`` steps; x and out move in 16-byte packs of ``pack_of(T)`` channels (a pair of
  lanes shares one of 16-bit T), x, dout and dx in the backward in packs of 2·CLB_E channels
  shared by a pair of lanes.
- ``gen``: anything else (mixed or strided layouts, W > 8, L = 0): one thread per element.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, itemsize

from .common import FAST_W, XDT

HERE = Path(__file__).parent
COMMON = (HERE / "common.cuh").read_text()
DTYPES = tuple(sorted(XDT))
WIDTHS = tuple(range(2, FAST_W + 1))
WCODE = {DType.F32: 0, DType.F16: 1, DType.BF16: 2}

# CcArgs::flags (common.cuh)
BIAS, INIT, FINAL, SEQ, SEQ64, SILU, VEC = 1, 2, 4, 8, 16, 32, 64

CL_E, CL_CH = 4, 8  # channel-last: channels per thread (forward), steps per chunk (CC_CH)
CLB_E = 2  # channel-last backward: channels per thread (CCB_E); a pack is the channels of 2 lanes
CF_WARPS = 4  # channel-first: warps per block
CF_FWD_RUNS = 2  # channel-first forward: warp runs per chunk (CCF_U, causal_conv1d/kernel.cu)
CF_BWD_RUNS = 2  # channel-first backward: warp runs per chunk (CCB_U, causal_conv1d_backward/kernel.cu)
CL_BLOCK = (32, 8)  # channel-last: packs x time groups
GEN_BLOCK = 256
CF_TASKS_PER_SM = 48  # channel-first: warp tasks per SM kept when lengthening them (rseg)
CL_THREADS_PER_SM = 512  # channel-last: threads per SM kept when lengthening the tiles
MAX_GRID = (1 << 31) - 1
MAX_GRID_Y = 65535


def source(*parts: Path) -> str:
    """The family's common header followed by an operator's kernel file(s)."""
    return COMMON + "".join(f'\n#line 1 "{p.name}"\n' + p.read_text() for p in parts)


class CcArgs(ctypes.Structure):
    """Mirror of ``struct CcArgs`` (common.cuh), passed to every kernel by value."""

    _fields_ = [
        ("B", ctypes.c_longlong),
        ("D", ctypes.c_longlong),
        ("L", ctypes.c_longlong),
        ("x", ctypes.c_longlong * 3),
        ("o", ctypes.c_longlong * 3),
        ("g", ctypes.c_longlong * 3),
        ("is_", ctypes.c_longlong * 3),
        ("fs", ctypes.c_longlong * 3),
        ("sq", ctypes.c_longlong * 2),
        ("w", ctypes.c_longlong * 2),
        ("bs", ctypes.c_longlong),
        ("dw", ctypes.c_longlong * 2),
        ("dbs", ctypes.c_longlong),
        ("nseg", ctypes.c_longlong),
        ("ntask", ctypes.c_longlong),
        ("nparts", ctypes.c_longlong),
        ("W", ctypes.c_int),
        ("flags", ctypes.c_int),
        ("wcode", ctypes.c_int),
        ("rseg", ctypes.c_int),
    ]


def flags_of(info, final: str) -> int:
    """CcArgs::flags of a forward or backward call: bias, initial_states, the states tensor
    ``final`` (final_states or dinitial_states), seq_idx (and its width), SiLU."""
    ti = info.tensors
    f = 0
    f |= BIAS if ti.get("bias") is not None else 0
    f |= INIT if ti.get("initial_states") is not None else 0
    f |= FINAL if ti.get(final) is not None else 0
    if ti.get("seq_idx") is not None:
        f |= SEQ | (SEQ64 if ti["seq_idx"].dtype is DType.I64 else 0)
    f |= SILU if info.silu else 0
    return f


def strides_of(desc, n: int) -> tuple:
    return tuple(desc.strides) if desc is not None else (0,) * n


def make_args(B, D, L, W, flags, wdtype, **strides) -> CcArgs:  # noqa: N803
    """CcArgs with the given strides (names as in the struct; ``is_`` for initial_states)."""
    a = CcArgs()
    a.B, a.D, a.L, a.W, a.flags, a.wcode = B, D, L, W, flags, WCODE[wdtype]
    for k, v in strides.items():
        if isinstance(getattr(a, k), int):
            setattr(a, k, int(v))
        else:
            arr = getattr(a, k)
            for i, s in enumerate(v):
                arr[i] = int(s)
    return a


def row_args(info, final: str, out: str, **strides) -> CcArgs:
    """CcArgs of a forward or backward call: sizes, ``flags_of(info, final)``, weight's dtype,
    the strides of x, the (B, D, L) output ``out``, initial_states, the states tensor ``final``,
    seq_idx, weight and bias, and ``strides``."""
    ti = info.tensors
    return make_args(
        info.B,
        info.D,
        info.L,
        info.W,
        flags_of(info, final),
        ti["weight"].dtype,
        x=ti["x"].strides,
        o=ti[out].strides,
        is_=strides_of(ti["initial_states"], 3),
        fs=strides_of(ti[final], 3),
        sq=strides_of(ti["seq_idx"], 2),
        w=ti["weight"].strides,
        bs=ti["bias"].strides[0] if ti["bias"] is not None else 0,
        **strides,
    )


def with_(a: CcArgs, **fields) -> CcArgs:
    b = CcArgs.from_buffer_copy(bytes(a))
    for k, v in fields.items():
        setattr(b, k, v)
    return b


def path_for(W: int, L: int, rows: list) -> str:  # noqa: N803
    """'cf', 'cl' or 'gen' for the (B, D, L) tensors ``rows`` (their strides)."""
    if W > FAST_W or L == 0:
        return "gen"
    cf = all(L <= 1 or s[2] == 1 for s in rows)
    cl = all(s[1] == 1 for s in rows)
    if cf and (not cl or L >= 32):
        return "cf"
    return "cl" if cl else "gen"


def vec_ok(shape, rows: list, dims: tuple, e: int) -> bool:
    """The strides of ``dims`` (dims of size > 1) are multiples of ``e`` in every row tensor."""
    return all(shape[i] <= 1 or s[i] % e == 0 for s in rows for i in dims)


def pack_of(T: DType) -> int:  # noqa: N803
    """Channel-last: channels of T in one 16-byte pack."""
    return 16 // itemsize(T)


def cl_chunk(T: DType, W: int) -> int:  # noqa: N803
    """Channel-last: steps per chunk (CC_CL_CH, common.cuh)."""
    return 2 * CL_CH if itemsize(T) == 2 and W <= 4 else CL_CH


def cf_plan(B, D, L, T: DType, sms: int, runs: int = 1):  # noqa: N803
    """(E, nseg, rseg, ntask, blocks) of the channel-first kernels: rows of nseg chunks of
    ``runs`` warp runs of 32·E steps (E = 16 bytes of T), tasks of rseg chunks."""
    e = pack_of(T)
    nseg = -(-L // (32 * e * runs))
    rows = B * D
    rseg = 1
    # Longer tasks per warp (fewer index computations, weight and history loads, fewer partial
    # rows in the backward) while the grid still holds CF_TASKS_PER_SM warp tasks per SM (the
    # forward keeps 24 warps per SM resident, the backward 16).
    while rseg < 8 and rseg * 2 <= nseg and rows * -(-nseg // (rseg * 2)) >= sms * CF_TASKS_PER_SM:
        rseg *= 2
    ntask = rows * -(-nseg // rseg)
    blocks = max(1, min(-(-ntask // CF_WARPS), MAX_GRID))
    return e, nseg, rseg, ntask, blocks


def cl_plan(B, D, L, sms: int, e: int = CL_E, ch: int = CL_CH):  # noqa: N803
    """(rseg, ntile, ntask, grid) of the channel-last kernels: tiles of rseg chunks of ``ch``
    steps, as long as the grid keeps CL_THREADS_PER_SM threads per SM (fewer for long tiles
    means little parallelism)."""
    npack = -(-D // e)
    gx = -(-npack // CL_BLOCK[0])
    want = sms * CL_THREADS_PER_SM
    rseg = 8
    while rseg > 1 and B * -(-L // (rseg * ch)) * npack < want:
        rseg //= 2
    ntile = -(-L // (rseg * ch))
    ntask = B * ntile
    gy = max(1, min(-(-ntask // CL_BLOCK[1]), MAX_GRID_Y))
    return rseg, ntile, ntask, (gx, gy)


def gen_grid(n: int, sms: int) -> int:
    return max(1, min(-(-n // GEN_BLOCK), sms * 32))


class Pick:
    """Per call: the aligned launches when every listed pointer is aligned, else the others.

    aligned: [(pointer index, bytes)]; launches are lists run in order."""

    def __init__(self, vec: list | None, plain: list, aligned: list):
        self.vec, self.plain, self.aligned = vec, plain, aligned

    def __call__(self, ptrs, ws, stream):
        run = self.plain
        if self.vec is not None:
            for i, n in self.aligned:
                if ptrs[i] % n:
                    break
            else:
                run = self.vec
        for launch in run:
            launch(ptrs, ws, stream)


def launch(fn_ptr: int, grid, block, args: list, cc: CcArgs) -> Launch:
    return Launch(fn_ptr, grid, block, [*args, bytes(cc)])


def pick_vec(fn_ptr: int, grid, block, args: list, cc: CcArgs, ok: bool, align: list, tail=()) -> Pick:
    """The launch of ``fn_ptr`` with CC_VEC where the layout allows it (``ok``, at create) and the
    pointers of ``align`` are aligned (at each call), else without; ``tail`` follows either."""
    plain = [launch(fn_ptr, grid, block, args, cc), *tail]
    vec = [launch(fn_ptr, grid, block, args, with_(cc, flags=cc.flags | VEC)), *tail] if ok else None
    return Pick(vec, plain, align)


class CcKernel(CudaKernel):
    """The family's NVIDIA kernel object: ``pick`` (set at create) runs the launches of a call;
    ``fn(name)`` compiles one kernel of ``SOURCE``."""

    SOURCE = ""

    def __init__(self, handle):
        super().__init__(handle)
        self.pick = Pick(None, [], [])

    def fn(self, name: str) -> int:
        return get_module(self.SOURCE, [name], self.device_id).ptr[name]

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def names(kernel: str, T: DType, W: int | None = None, seq: bool | None = None) -> str:  # noqa: N803
    """A kernel's name expression: kernel<T>, kernel<T, W> or kernel<T, W, SEQ>."""
    args = [ctype(T)] + ([str(W)] if W is not None else []) + ([str(seq).lower()] if seq is not None else [])
    return f"{kernel}<{', '.join(args)}>"


def width_names(kernels, T: DType, seq: bool = True) -> list[str]:  # noqa: N803
    """The name expressions of ``kernels`` specialised on every width (and, with ``seq``, on
    seq_idx's presence): kernel<T, W, SEQ> or kernel<T, W>."""
    return [names(k, T, w, q) for k in kernels for w in WIDTHS for q in ((False, True) if seq else (None,))]


def nvidia_factory(kernel_cls, unit):
    """The SPEC's ``nvidia`` callable: ``kernel_cls(info, handle)``; its ``compile_units()`` is
    one unit of ``kernel_cls.SOURCE`` per x dtype, with the names ``unit(dtype)``."""

    def factory(info, handle):
        return kernel_cls(info, handle)

    factory.compile_units = lambda: [(kernel_cls.SOURCE, unit(t)) for t in DTYPES]
    return factory
