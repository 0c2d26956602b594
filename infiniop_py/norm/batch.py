"""batch_norm / batch_norm_backward (training mode), what both passes share: the input and
statistics checks, and the NVIDIA implementation (chunked per-channel statistics, a per-channel
finalize (f64 combination in a fixed order), then an elementwise apply pass; the stages are in
batch_norm.cu)."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..cuda.launch import Pick, Seq, align_up, device_limits
from ..dtypes import DType, F, acc_size
from ..layout import fast_div_params
from ..spec import Checker, Info
from ..status import Status
from .rows import source

SOURCE = source(Path(__file__).parent / "batch_norm.cu")
VEC = {DType.F16: 8, DType.BF16: 8, DType.F32: 4, DType.F64: 2}
ROWS_MIN_D = 512  # below this D the apply pass uses one thread per element


def check_bn_input(check: Checker, ref: str, min_n: int) -> tuple:
    d = check[ref]
    if d.ndim not in (2, 3):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{ref}' must be (B, C) or (B, C, D), got shape {list(d.shape)}")
    n = d.shape[0] * (d.shape[2] if d.ndim == 3 else 1)
    if n < min_n:
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor '{ref}' shape {list(d.shape)} gives n = B*D = {n} values per channel; at least {min_n} needed",
        )
    return tuple(d.shape)


def check_stats_dtype(check: Checker, dt: DType, *names: str) -> None:
    for n in names:
        s = check[n].dtype
        if s != dt and s is not DType.F32:
            check.fail(Status.BAD_TENSOR_DTYPE, f"tensor '{n}' dtype {s.name} must be the input dtype {dt.name} or F32")


def as3(a):
    """A (B, C) array as (B, C, 1); (B, C, D) as is."""
    return a if a.ndim == 3 else a[:, :, None]


def strides3(desc) -> tuple[int, int, int]:
    s = desc.strides
    return (s[0], s[1], s[2]) if len(s) == 3 else (s[0], s[1], 0)


class BNPlan:
    """Shapes, chunking, vectorisation and the packed BNMeta of one descriptor."""

    def __init__(self, x, y, g, vecs, handle, dtype: DType):
        shape = x.shape
        self.B, self.C = shape[0], shape[1]
        self.D = shape[2] if len(shape) == 3 else 1
        self.n = self.B * self.D
        xs, ys = strides3(x), strides3(y)
        gs = strides3(g) if g is not None else (0, 0, 0)
        vec = VEC[dtype]
        lay = [xs, ys] + ([gs] if g is not None else [])
        ok = self.D % vec == 0 and self.D > 1 and all(s[2] == 1 and s[0] % vec == 0 and s[1] % vec == 0 for s in lay)
        self.vec = vec if ok else 1
        lim = device_limits(handle.device_id)
        self.sms, self.blocks_per_sm = lim.sms, lim.threads_per_sm // 256  # resident 256-thread blocks
        target = self.sms * self.blocks_per_sm * 4  # about four waves of them in the statistics pass
        per = 256 * vec * 4
        nchunk = max(1, min(-(-target // max(self.C, 1)), -(-self.n // per)))
        chunk = -(-self.n // nchunk)
        chunk = -(-chunk // vec) * vec
        self.nchunk = max(1, -(-self.n // chunk)) if self.n else 1
        self.chunk = max(chunk, 1)
        self.fast = int(self.n < (1 << 31) and self.D < (1 << 31))
        ps = list(vecs) + [0] * (5 - len(vecs))
        fd = fast_div_params(self.D) if self.fast else (1, 0, 0)
        self.meta = struct.pack(
            "<5q3q3q3q5q3Iii4x", self.B, self.C, self.D, self.n, self.chunk, *xs, *ys, *gs, *ps, *fd, self.nchunk, self.fast
        )
        self.acc = acc_size(dtype)

    def stats_grid(self) -> int:
        return self.C * self.nchunk

    def apply_grid(self, vec: int) -> tuple[tuple, str]:
        """(grid, kind): 'rows' (a block row per (b, c), grid.y over D) or 'flat'."""
        if self.D >= ROWS_MIN_D:
            rows = self.B * self.C
            gy = max(1, min(-(-self.D // (256 * vec * 4)), 65535))
            return (min(rows, 1 << 30), gy), "rows"
        total = self.B * self.C * self.D
        return (max(1, min(-(-total // 256), self.sms * self.blocks_per_sm * 8)),), "flat"


def stats_name(t: DType, vec: int, bwd: bool) -> str:
    return f"bn_stats<{ctype(t)}, {vec}, {'true' if bwd else 'false'}>"


def apply_name(t: DType, vec: int, bwd: bool, kind: str) -> str:
    b = "true" if bwd else "false"
    if kind == "flat":
        return f"bn_apply_flat<{ctype(t)}, {b}>"
    return f"bn_apply_rows<{ctype(t)}, {vec}, {b}>"


def fin_fwd_name(t: DType, ts: DType) -> str:
    return f"bn_finalize_fwd<{ctype(t)}, {ctype(ts)}>"


def fin_bwd_name(t: DType) -> str:
    return f"bn_finalize_bwd<{ctype(t)}>"


def build(info: Info, handle, bwd: bool):
    """(launch callable, workspace bytes) for either direction."""
    ti = info.tensors
    t = ti["input"].dtype
    if bwd:
        y, g = ti["grad_input"], ti["grad_output"]
        vecs = [ti[n].strides[0] for n in ("weight", "grad_weight", "grad_bias")]
        # slots: 0 grad_input, 1 grad_weight, 2 grad_bias, 3 input, 4 grad_output, 5 weight
        xs, ys, gsl, ws_slot = 3, 0, 4, 5
    else:
        y, g = ti["output"], None
        vecs = [ti[n].strides[0] for n in ("weight", "bias", "running_mean", "running_var")]
        # slots: 0 output, 1 running_mean, 2 running_var, 3 input, 4 weight, 5 bias
        xs, ys, gsl, ws_slot = 3, 0, 3, 4
    plan = BNPlan(ti["input"], y, g, vecs, handle, t)
    nv, nc = (4, 4) if bwd else (2, 3)
    part_bytes = align_up(plan.stats_grid() * nv * (8 if bwd and t is DType.F32 else plan.acc))  # f64 (BnPart)
    coef_bytes = align_up(plan.C * nc * plan.acc)
    variants = ([plan.vec] if plan.vec > 1 else []) + [1]
    fin = fin_bwd_name(t) if bwd else fin_fwd_name(t, ti["running_mean"].dtype)
    exprs = [fin]
    for v in variants:
        exprs += [stats_name(t, v, bwd), apply_name(t, v, bwd, plan.apply_grid(v)[1])]
    mod = get_module(SOURCE, sorted(set(exprs)), handle.device_id)
    eps = ctypes.c_double(info.attrs["eps"])
    fgrid = (-(-plan.C // 256),)
    if bwd:
        fargs = [Slot("ws", part_bytes), Slot("ws"), Slot(1), Slot(2), Slot(ws_slot), plan.meta, eps]
    else:
        mom = ctypes.c_double(info.attrs["momentum"])
        fargs = [Slot("ws", part_bytes), Slot("ws"), Slot(1), Slot(2), Slot(4), Slot(5), plan.meta, eps, mom]
    finalize = Launch(mod.ptr[fin], fgrid, (256,), fargs)
    seqs = []
    for v in variants:
        stats = Launch(mod.ptr[stats_name(t, v, bwd)], (plan.stats_grid(),), (256,), [Slot("ws"), Slot(xs), Slot(gsl), plan.meta])
        grid, kind = plan.apply_grid(v)
        apply = Launch(
            mod.ptr[apply_name(t, v, bwd, kind)], grid, (256,), [Slot(ys), Slot(xs), Slot(gsl), Slot("ws", part_bytes), plan.meta]
        )
        seqs.append(Seq(stats, finalize, apply))
    vs = plan.vec
    aligned = [(xs, vs * ti["input"].itemsize), (ys, vs * y.itemsize)] + ([(gsl, vs * g.itemsize)] if bwd else [])
    pick = Pick(seqs[0] if len(seqs) == 2 else None, seqs[-1], aligned)
    return pick, part_bytes + coef_bytes


class BatchNormKernel(CudaKernel):
    def __init__(self, info: Info, handle, bwd: bool = False):
        super().__init__(handle)
        self.pick, self.workspace_size = build(info, handle, bwd)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def factory(info: Info, handle):
    if info.tensors["input"].shape[1] == 0:  # no channels: nothing to do
        k = CudaKernel(handle)
        k.launch = lambda ptrs, ws, rt, stream: None
        return k
    return BatchNormKernel(info, handle)


def compile_units(bwd: bool = False):
    exprs = []
    for t in sorted(F):
        for v in sorted({VEC[t], 1}):
            exprs += [stats_name(t, v, bwd), apply_name(t, v, bwd, "rows")]
        exprs.append(apply_name(t, 1, bwd, "flat"))
        if bwd:
            exprs.append(fin_bwd_name(t))
        else:
            for ts in sorted({t, DType.F32}):
                exprs.append(fin_fwd_name(t, ts))
    return [(SOURCE, exprs)]


factory.compile_units = compile_units
