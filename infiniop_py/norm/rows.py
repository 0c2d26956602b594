"""Row-wise normalization operators on NVIDIA, from a declaration (``RowOp``).

An operator (rms_norm, layer_norm and their backward passes) declares its tensors' roles, the
dtypes its kernels are instantiated for and its trailing scalar arguments; its kernel.cu defines
the kernels as row math (lambdas) over the walks of norm.cuh, which is prepended (the register,
ring and block kernels' row loops, loads, cp.async ring, reductions and partial rows). This module owns the rest: the layout (``RowLayout``), the
plan (the ordered rule tables ``FORWARD_RULES`` / ``BACKWARD_RULES``, evaluated by
``infiniop_py.planner``), compilation, the dynamic shared-memory opt-in of the ring kernels,
the grids, the workspace of the weight gradients and the launches; ``compile_units`` lists
exactly the kernels the rules can reach.

Every leading index is a row of length D (the last dim). A group of TPR threads keeps a row in
registers (NP packs of VEC elements per thread: 4 forward, 2 backward); rows longer than that
go to a block-per-row kernel that re-reads the row from global memory. The 16-byte path (VEC =
16 bytes of the row dtype) is planned when the layout allows it and chosen per call when every
pointer is aligned, else the scalar path runs. Backward passes reduce their weight gradients in
two deterministic stages: per-block f32 (f64 for f64) partial rows in the workspace, then
``norm_col_sum2``. The rule ids name the measurements behind each rule in docs/perf/norms.md.

Kernel names (``{stem}`` from the declaration; ``{T...}`` the declared dtypes):
forward ``{stem}_fwd<T..., VEC, TPR, R>``, ``{stem}_fwd_cp<T..., VEC, TPR, S>``,
``{stem}_fwd_big<T...>``; backward ``{stem}_bwd<T..., VEC, TPR>``,
``{stem}_bwd_cp<T..., VEC, TPR, S, OPT>``, ``{stem}_bwd_big<T...>``, each with the argument
list: the declared tensors in order (a weight gradient replaced by its partial rows in the
workspace), the ``NormRows`` metadata, then the declared scalars.
"""

from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..cuda.launch import Limits, Pick, Seq, align_up, device_limits, opt_in, resident_blocks
from ..dtypes import DType, acc_size, itemsize
from ..layout import collapse
from ..planner import Rule, always, first_match, matching
from ..spec import Info

NORM_CUH = (Path(__file__).parent / "norm.cuh").read_text()
NP_FWD, NP_BWD = 4, 2  # NORM_NP, NORM_NP_BWD: packs per thread
MAXL, MAXT = 8, 7  # NORM_MAXL, NORM_MAXT
TPRS = (32, 64, 128, 256, 512, 1024)  # threads per row instantiated


def source(kernel_cu: Path) -> str:
    """An operator's CUDA source: norm.cuh followed by its kernel.cu."""
    return NORM_CUH + '\n#line 1 "kernel.cu"\n' + kernel_cu.read_text()


# -- the declaration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RowOp:
    """What a row-wise operator states about its NVIDIA backend.

    stem: kernel name prefix; source: its kernel.cu; order: every tensor in the kernels'
    argument order; rows: the [..., D] tensors (the first gives the shape and the pack size);
    params: [D] vectors (weights, their gradients); row_extra: tensors indexed per row only;
    grads: backward only, the weight gradients reduced in two stages; types: tensors whose
    dtypes are the kernels' leading template arguments (the first is the row dtype, the last the
    weight gradients'); dtypes: the tuples of those dtypes the operator accepts; scalars: trailing arguments, in order (an
    attribute passes as a double, an optional tensor's name as an int, 1 when present); ring:
    rows in flight of the forward ring kernel (its depth S).
    """

    stem: str
    source: Path
    order: tuple[str, ...]
    rows: tuple[str, ...]
    types: tuple[str, ...]
    dtypes: tuple[tuple[DType, ...], ...]
    params: tuple[str, ...] = ()
    row_extra: tuple[str, ...] = ()
    grads: tuple[str, ...] = ()
    scalars: tuple[str, ...] = ()
    ring: int = 0

    @property
    def backward(self) -> bool:
        return bool(self.grads)


# -- planning ----------------------------------------------------------------------------------
class RowProblem(NamedTuple):
    """What the rule tables look at: one path (vector or scalar) of one descriptor."""

    vec: int  # elements per pack: 16 bytes on the vector path, 1 on the scalar path
    tpr: int | None  # threads per row; None: longer than the register capacity
    grads: int = 0  # weight gradients accumulated (backward)


class Config(NamedTuple):
    kind: str  # "regs": row in registers; "ring": rows in flight through cp.async; "block": block per row
    rows: int = 1  # forward register kernels: rows per group and step (R)
    stages: int = 0  # ring depth S
    opt: int = 0  # backward ring bits: 4 16-byte partial stores, 8 two 256-thread groups per block


def short(p: RowProblem) -> bool:
    """Forward rows of at most 64 threads per group (f16 D <= 2048, f32 D <= 1024 on the vector path)."""
    return p.tpr is not None and p.tpr <= 64


FORWARD_RULES = (
    Rule("fwd-long", lambda p: p.tpr is None, "block"),
    Rule("fwd-short-ring", lambda p: p.vec > 1 and short(p), "ring"),
    Rule("fwd-short", short, "regs2"),
    Rule("fwd", always, "regs"),
)
BACKWARD_RULES = (
    Rule("bwd-long", lambda p: p.tpr is None, "block"),
    Rule("bwd-256-ring", lambda p: p.vec > 1 and p.tpr == 256, "ring3-pairs"),
    Rule("bwd-512-ring", lambda p: p.vec > 1 and p.tpr == 512, "ring3-v16"),
    Rule("bwd-1024-ring-v16", lambda p: p.vec > 1 and p.tpr == 1024 and p.grads == 1, "ring2-v16"),
    Rule("bwd-1024-ring", lambda p: p.vec > 1 and p.tpr == 1024, "ring2"),
    Rule("bwd", always, "prefetch"),
)
BACKWARD_CONFIGS = {
    "block": Config("block"),
    "ring3-pairs": Config("ring", stages=3, opt=8),
    "ring3-v16": Config("ring", stages=3, opt=4),
    "ring2-v16": Config("ring", stages=2, opt=4),
    "ring2": Config("ring", stages=2),
    "prefetch": Config("regs"),
}


def rules(op: RowOp):
    return BACKWARD_RULES if op.backward else FORWARD_RULES


def configs(op: RowOp) -> dict[str, Config]:
    if op.backward:
        return BACKWARD_CONFIGS
    return {
        "block": Config("block"),
        "ring": Config("ring", stages=op.ring),
        "regs2": Config("regs", rows=2),
        "regs": Config("regs"),
    }


def reachable(op: RowOp, problem: RowProblem) -> list[str]:
    """Config names a descriptor may build for ``problem``: the first matching one and, when
    that is a ring (it declines where its shared memory does not fit the device), the first
    matching config after it that is not a ring."""
    names = matching(rules(op), problem)
    if configs(op)[names[0]].kind != "ring":
        return names[:1]
    return [names[0], next(n for n in names[1:] if configs(op)[n].kind != "ring")]


def block_threads(cfg: Config, tpr: int | None) -> int:
    """Threads per block: 1024 per row, else row groups of tpr threads in blocks of at least 256
    (two 256-thread groups with OPT bit 8)."""
    if tpr is None:
        return 1024
    return 2 * tpr if cfg.opt & 8 else max(tpr, 256)


def ring_bytes(op: RowOp, cfg: Config, block: int) -> int:
    """Dynamic shared memory of a ring kernel: S stages of the rows read (x forward; two
    tensors backward), NP 16-byte packs per thread each."""
    if cfg.kind != "ring":
        return 0
    return cfg.stages * (2 if op.backward else 1) * (NP_BWD if op.backward else NP_FWD) * block * 16


def kernel_name(op: RowOp, types: str, cfg: Config, vec: int, tpr: int | None) -> str:
    d = "bwd" if op.backward else "fwd"
    if cfg.kind == "block":
        return f"{op.stem}_{d}_big<{types}>"
    if cfg.kind == "ring":
        return f"{op.stem}_{d}_cp<{types}, {vec}, {tpr}, {cfg.stages}" + (f", {cfg.opt}>" if op.backward else ">")
    return f"{op.stem}_{d}<{types}, {vec}, {tpr}" + (">" if op.backward else f", {cfg.rows}>")


def col_sum_name(grad: DType, dtype: DType) -> str:
    return f"norm_col_sum2<{ctype(grad)}, {'double' if dtype is DType.F64 else 'float'}>"


def compile_units(op: RowOp, src: str) -> list:
    """One unit per declared dtype tuple: every kernel the rule tables can reach."""
    units = []
    for dts in op.dtypes:
        types = ", ".join(ctype(d) for d in dts)
        names = []
        for vec in (16 // itemsize(dts[0]), 1):
            for tpr in TPRS if vec > 1 else (*TPRS, None):
                for name in reachable(op, RowProblem(vec, tpr, len(op.grads))):
                    names.append(kernel_name(op, types, configs(op)[name], vec, tpr))
        if op.backward:
            names.append(col_sum_name(dts[-1], dts[0]))
        units.append((src, list(dict.fromkeys(names))))
    return units


# -- layout ------------------------------------------------------------------------------------
def rows_meta(shape, row_tensors: dict, dstrides: dict, order: list) -> tuple[bytes, int]:
    """Bytes of NormRows and the row count.

    shape: the row tensors' shape [..., D]; row_tensors: {name: leading strides (len ndim-1)};
    dstrides: {name: stride along D} for every tensor; order: tensor names in spec order (the
    index of a name is its slot in lstride/dstride).
    """
    lead = tuple(shape[:-1])
    rows = math.prod(lead)
    names = [n for n in order if n in row_tensors]
    nl, lshape, lstr = 0, [], {}
    if rows > 0 and names:
        cs, css = collapse(lead, [tuple(row_tensors[n]) for n in names])
        nl = len(cs)
        lshape = list(cs)
        lstr = dict(zip(names, css))
    if nl > MAXL:
        raise ValueError("too many non-mergeable leading dims")
    blob = struct.pack("<qq", rows, shape[-1])
    blob += struct.pack(f"<{MAXL}q", *(lshape + [1] * (MAXL - nl)))
    for i in range(MAXT):
        st = list(lstr.get(order[i], ())) if i < len(order) else []
        blob += struct.pack(f"<{MAXL}q", *(st + [0] * (MAXL - len(st))))
    ds = [dstrides.get(order[i], 0) if i < len(order) else 0 for i in range(MAXT)]
    blob += struct.pack(f"<{MAXT}qii", *ds, nl, 0)
    return blob, rows


def pick_tpr(D: int, vec: int, np_: int) -> int | None:  # noqa: N803
    """Threads per row so that a row fits in registers (TPR * np_ * vec >= D), or None (too long)."""
    for t in TPRS:
        if t * np_ * vec >= D:
            return t
    return None


class RowLayout:
    """One descriptor's rows: the NormRows bytes (``meta``), ``rows``, ``D``, the paths
    (``paths``: (vec, tpr) of the vector path when the layout allows it, then of the scalar
    path) and the pointers whose alignment the vector path needs (``aligned``: (slot, bytes))."""

    def __init__(self, op: RowOp, info: Info):
        t = info.tensors
        order = list(op.order)
        ref = t[op.rows[0]]
        shape = tuple(ref.shape)
        self.D = D = shape[-1]
        nd = len(shape)
        present = [n for n in op.rows if t.get(n) is not None]
        lead = {n: t[n].strides[: nd - 1] for n in present}
        for n in op.row_extra:
            if t.get(n) is not None:
                lead[n] = t[n].strides[: nd - 1]
        dstr = {n: t[n].strides[-1] for n in present}
        for n in op.params:
            if t.get(n) is not None:
                dstr[n] = t[n].strides[0]
        self.meta, self.rows = rows_meta(shape, lead, dstr, order)
        np_ = NP_BWD if op.backward else NP_FWD
        vec = 16 // ref.itemsize
        units = [dstr[n] for n in present] if D > 1 else []
        ok = D % vec == 0 and all(s == 1 for s in units) and all(s % vec == 0 for n in present for s in lead[n])
        vec_tpr = pick_tpr(D, vec, np_) if ok else None
        self.paths = ([(vec, vec_tpr)] if vec_tpr is not None else []) + [(1, pick_tpr(D, 1, np_))]
        self.aligned = [(order.index(n), vec * t[n].itemsize) for n in present]
        self.aligned += [
            (order.index(n), vec * t[n].itemsize) for n in op.params if t.get(n) is not None and t[n].strides[0] == 1
        ]


# -- the device side of a plan -----------------------------------------------------------------
def grid(op: RowOp, cfg: Config, tpr: int | None, rows: int, block: int, per_sm, lim: Limits) -> int:
    """Blocks of a stage-1 launch. Block per row: forward up to 64 waves of one block per SM,
    backward one (a partial row per block). Forward register kernels: one block per ROWS * R
    rows. Ring and backward kernels are persistent: one wave of resident blocks (``per_sm()``),
    so the partial rows stay few."""
    if tpr is None:
        return max(1, min(rows, lim.sms * (1 if op.backward else 64)))
    groups = -(-rows // (block // tpr))
    if cfg.kind == "regs" and not op.backward:
        return max(1, min(-(-groups // cfg.rows), 1 << 30))
    return max(1, min(groups, lim.sms * per_sm()))


def _nothing(ptrs, ws, stream):
    return None


def col_sum(fn_ptr, outs: list, D: int, nparts: int) -> Launch:  # noqa: N803
    """One launch of norm_col_sum2 for one or two (out slot, ws offset, out stride) triples."""
    o0 = outs[0]
    o1 = outs[1] if len(outs) > 1 else outs[0]
    args = [Slot(o0[0]), Slot(o1[0]), Slot("ws", o0[1]), Slot("ws", o1[1]), ctypes.c_longlong(D), ctypes.c_int(nparts)]
    return Launch(fn_ptr, (-(-D // 32), len(outs)), (1024,), [*args, ctypes.c_longlong(o0[2]), ctypes.c_longlong(o1[2])])


class Planned(NamedTuple):
    """One path of a descriptor as built: its rule id, config, kernel and launch shape."""

    rule: str
    config: Config
    kernel: str
    fn: object  # the compiled kernel (its figures and attributes)
    block: int
    shmem: int


def build(op: RowOp, src: str, types: str, problems: list, extra: list, device_id: int, lim: Limits):
    """(module, [Planned]): compiles the first reachable config of each path, with the ``extra``
    kernels; a ring whose shared memory the device cannot opt in to declines to its fallback
    (compiled then, as the runtime cannot know a kernel's static shared memory before)."""
    choices = [reachable(op, p) for p in problems]
    picked = [0] * len(problems)
    while True:
        planned = []
        for p, names, i in zip(problems, choices, picked):
            cfg = configs(op)[names[i]]
            block = block_threads(cfg, p.tpr)
            rule = first_match(rules(op), p)[0] + (" (ring declined)" if i else "")
            planned.append(Planned(rule, cfg, kernel_name(op, types, cfg, p.vec, p.tpr), None, block, ring_bytes(op, cfg, block)))
        mod = get_module(src, [q.kernel for q in planned] + extra, device_id)
        planned = [q._replace(fn=getattr(mod, "kernels", {}).get(q.kernel)) for q in planned]
        declined = [i for i, q in enumerate(planned) if q.config.kind == "ring" and not opt_in(q.fn, q.shmem, lim)]
        if not declined:
            return mod, planned
        for i in declined:
            picked[i] += 1


class RowKernel(CudaKernel):
    """The launches of one descriptor of a declared row-wise operator: the vector path (when
    planned) and the scalar path, each a stage-1 launch (and the column sum backward);
    ``plan_name`` lists their rule ids."""

    def __init__(self, op: RowOp, src: str, info: Info, handle):
        super().__init__(handle)
        t = info.tensors
        lay = RowLayout(op, info)
        lim = device_limits(handle.device_id)
        types = ", ".join(ctype(t[n].dtype) for n in op.types)
        tail = [ctypes.c_double(info.attrs[s]) if s in info.attrs else ctypes.c_int(t.get(s) is not None) for s in op.scalars]
        # weight gradients present: (slot, index among the declared ones, stride)
        grads = [(op.order.index(g), k, t[g].strides[0]) for k, g in enumerate(op.grads) if t.get(g) is not None]
        col = [col_sum_name(t[op.grads[0]].dtype, t[op.rows[0]].dtype)] if op.backward else []
        self.workspace_size = 0
        if lay.rows == 0:  # backward: the column sums write zeros
            self.plan_name = "empty"
            mod = get_module(src, col, handle.device_id) if col else None
            self.pick = col_sum(mod.ptr[col[0]], [(s, 0, st) for s, _k, st in grads], lay.D, 0) if col else _nothing
            return
        problems = [RowProblem(v, p, len(op.grads)) for v, p in lay.paths]
        mod, planned = build(op, src, types, problems, col, handle.device_id, lim)
        self.plan_name = ", ".join(q.rule for q in planned)
        grids = [
            grid(op, q.config, p.tpr, lay.rows, q.block, lambda q=q: resident_blocks(q.fn, q.block, q.shmem, lim), lim)
            for q, p in zip(planned, problems)
        ]
        part = align_up(max(grids) * lay.D * acc_size(t[op.rows[0]].dtype)) if op.backward else 0  # partial rows of one gradient
        self.workspace_size = part * (1 + max((k for _s, k, _st in grads), default=-1))
        args = [Slot("ws", op.grads.index(n) * part) if n in op.grads else Slot(i) for i, n in enumerate(op.order)]
        seqs = []
        for q, g in zip(planned, grids):
            stage1 = Launch(mod.ptr[q.kernel], (g,), (q.block,), [*args, lay.meta, *tail], shmem=q.shmem)
            if col:
                stage1 = Seq(stage1, col_sum(mod.ptr[col[0]], [(s, k * part, st) for s, k, st in grads], lay.D, g))
            seqs.append(stage1)
        self.pick = Pick(seqs[0] if len(seqs) == 2 else None, seqs[-1], lay.aligned)

    def launch(self, ptrs, ws, rt, stream):
        self.pick(ptrs, ws, stream)


def row_factory(op: RowOp):
    """The NVIDIA factory of a declared row-wise operator, with its ``compile_units``."""
    src = source(op.source)

    def factory(info: Info, handle):
        return RowKernel(op, src, info, handle)

    factory.compile_units = lambda: compile_units(op, src)
    factory.row_op = op
    return factory
