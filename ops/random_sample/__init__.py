"""random_sample: one index drawn from 1-D logits by the upstream library rule (ops.md §8.1).

Greedy (random_val == 0, topp <= 0, topk <= 1 or temperature == 0): the smallest index among
the maxima. Otherwise rank the entries by value (descending, ties -> lower index), weight them
cum_i = sum_{j<=i} exp((v_j - v_0) / T) (unnormalised), take
limit = random_val * min(cum_{k'-1}, topp * cum_{n-1}) with k' = min(topk, n) and return the
original index of the first ranked entry with cum_i >= limit (the entry k'-1 if rounding leaves
none, e.g. random_val > 1). The terms are computed in f32 (f64 for f64); the CPU accumulates
them in f64 and the GPU in 64-bit fixed point (exact, order-independent sums; see kernel.cu),
so neither drifts over large vocabularies. On the GPU f32/f16/bf16 use a multi-block path with a
workspace (about 16 bytes per entry; multiblock.cu, sampled.cu), f64 one block and no workspace
(kernel.cu); the rule tables below choose the path, the select and the greedy kernel. The result
is 0-d of any signed/unsigned integer dtype (an index that does not fit wraps). Runtime scalars are checked at calculate: NaN random_val/topp/temperature or a negative
temperature -> BAD_PARAM.
"""

from __future__ import annotations

import ctypes
import math
import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import SI, UI, DType, F, H, to_numpy
from infiniop_py.lru import LRU
from infiniop_py.planner import Rule, always, first_match
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status, error

SOURCE_FILES = ("kernel.cu", "multiblock.cu", "sampled.cu")  # compiled as one unit, in this order
OUT_DTYPES = SI | UI
THREADS = 512


def _source() -> str:
    from infiniop_py.reduce import REDUCE_CUH

    here = Path(__file__).parent
    return REDUCE_CUH + "".join((here / name).read_text() for name in SOURCE_FILES)


def validate(check: Checker) -> Info:
    p, r = check["probs"], check["result"]
    check.dtype_in("probs", F)
    check.dtype_in("result", OUT_DTYPES)
    if p.ndim != 1:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'probs' must be 1-D, got shape {list(p.shape)}")
    n = p.shape[0]
    if n < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'probs' is empty: there is nothing to sample")
    if n >= 2**31:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'probs' has {n} entries, at most 2^31 - 1 are supported")
    if n > 1 and p.strides[0] != 1:
        check.fail(Status.BAD_TENSOR_STRIDES, f"tensor 'probs' must have stride 1, got strides {list(p.strides)}")
    if r.ndim != 0:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'result' must be 0-d, got shape {list(r.shape)}")
    return Info(check.op, check.tensors, check.attrs, n=n)


def check_runtime(op: str, random_val: float, topp: float, topk: int, temperature: float) -> bool:
    """BAD_PARAM for unusable scalars; returns whether the call is greedy."""
    for name, v in (("random_val", random_val), ("topp", topp), ("temperature", temperature)):
        if math.isnan(v):
            raise error(Status.BAD_PARAM, f"{op}: runtime scalar '{name}' is NaN")
    if temperature < 0:
        raise error(Status.BAD_PARAM, f"{op}: runtime scalar 'temperature'={temperature} must be >= 0")
    return random_val == 0 or topp <= 0 or topk <= 1 or temperature == 0


def sample_rule(x: np.ndarray, random_val, topp, topk, temperature, acc) -> int:
    """The library rule on a 1-D array in accumulator type ``acc`` (vectorised)."""
    a = np.asarray(x).astype(acc, copy=False) + acc(0)  # + 0 turns -0 into +0 (ties with +0)
    n = a.shape[0]
    if random_val == 0 or topp <= 0 or topk <= 1 or temperature == 0 or n == 1:
        return int(np.argmax(a))
    order = np.argsort(-a, kind="stable")
    s = a[order]
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        e = np.exp((s - s[0]) / acc(temperature))
        # terms in acc, running sums in f64: a sequential f32 cumsum drifts by ~n*eps (1% at
        # n = 151936), far more than upstream's parallel scan or the GPU's exact fixed point
        cum = np.cumsum(e, dtype=np.float64)
        kp = min(int(topk), n)
        limit = float(random_val) * min(cum[kp - 1], float(topp) * cum[n - 1])
    pos = int(np.searchsorted(cum, limit, side="left"))
    return int(order[min(pos, kp - 1)])


def _acc(dtype: DType):
    return np.float64 if dtype is DType.F64 else np.float32


def cpu(info: Info):
    pdt = info["probs"].dtype
    rdt = to_numpy(info["result"].dtype)
    acc = _acc(pdt)

    def run(views, ws, rt):
        random_val, topp, topk, temperature = rt
        check_runtime(info.op, random_val, topp, topk, temperature)
        idx = sample_rule(views["probs"], random_val, topp, topk, temperature, acc)
        views["result"][...] = np.array(idx, dtype=np.int64).astype(rdt)

    return run


def kernel_name(pdt: DType, rdt: DType) -> str:
    return f"random_sample<{ctype(pdt)}, {ctype(rdt)}>"


RM_EPB = 4096  # entries per block of the multi-block passes (kernel: RM_EPB)
GREEDY1_MAX = 1 << 16  # greedy calls up to this many entries: one block, one launch (rm_greedy1)
RM_CTRL = 2048 * 12 + 128  # >= sizeof(RmCtrl), rounded up below like rm_view does


def _up(b: int) -> int:
    return (b + 255) & ~255


def rm_workspace(n: int) -> int:
    """Bytes of the multi-block workspace (layout of rm_view in multiblock.cu)."""
    B = -(-n // RM_EPB)
    return _up(RM_CTRL) + 2 * _up(4 * B) + 2 * _up(8 * n)


class SampleProblem(NamedTuple):
    dtype: DType  # of the logits
    n: int  # entries


# Planner rules (docs/perf/reductions.md, "random_sample"). The path: one block for f64, else the
# multi-block passes. Their radix selects: windows over the bits that vary across the compacted
# list for 16-bit logits (few distinct values: ties, constant low key bits), fixed 8-bit windows
# for f32. Greedy calls: one block for small vocabularies, else one launch whose last block
# combines the per-block partials.
PATH_RULES = (Rule("sample.path.f64", lambda p: p.dtype is DType.F64, "one_block"), Rule("sample.path", always, "multi_block"))
SELECT_RULES = (Rule("sample.select.half", lambda p: p.dtype in H, "select2"), Rule("sample.select", always, "select"))
GREEDY_RULES = (
    Rule("sample.greedy.small", lambda p: p.n <= GREEDY1_MAX, "one_block"),
    Rule("sample.greedy", always, "last_block"),
)


def plan(rules, dtype: DType, n: int = 0) -> str:
    return first_match(rules, SampleProblem(dtype, n), "random_sample planner")[1]


def rm_names(pdt: DType, rdt: DType) -> dict:
    """The multi-block kernels of logits ``pdt`` and result ``rdt`` (the select the rules choose)."""
    t, r = ctype(pdt), ctype(rdt)
    sel2 = int(plan(SELECT_RULES, pdt) == "select2")
    return {
        "argmax": f"rm_argmax<{t}>",
        "hist": f"rm_hist<{t}>",
        "compact0": f"rm_compact<{t}, 0, {sel2}>",
        "compact1": f"rm_compact<{t}, 1, {sel2}>",
        "refine0": f"rm_refine0<{t}, {sel2}>",
        "greedy1": f"rm_greedy1<{t}, {r}>",
        "greedy_last": f"rm_greedy_last<{t}, {r}>",
        "final": f"rm_final<{t}, {r}, {sel2}>",
    }


class RandomSampleKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        self.op = info.op
        self.n = info.n
        self.sbits = 62 - int(self.n).bit_length()  # n weights of at most 2^sbits fit in 62 bits
        self.params = (ctypes.c_char * 64)()  # SampleParams, rewritten per call
        pdt, rdt = info["probs"].dtype, info["result"].dtype
        self.multi = plan(PATH_RULES, pdt) == "multi_block"
        if not self.multi:
            name = kernel_name(pdt, rdt)
            mod = get_module(_source(), [name], handle.device_id)
            self.main = Launch(mod.ptr[name], (1,), (THREADS,), [Slot(0), Slot(1), self.params])
            return
        self.B = -(-self.n // RM_EPB)
        self.workspace_size = rm_workspace(self.n)
        names = rm_names(pdt, rdt)
        mod = get_module(_source(), list(names.values()), handle.device_id)
        fn = {k: mod.ptr[v] for k, v in names.items()}
        ws, x, res, prm = Slot("ws"), Slot(1), Slot(0), self.params
        grid = (self.B,)
        self.l_argmax = Launch(fn["argmax"], grid, (512,), [x, ws, prm])
        self.l_greedy1 = Launch(fn["greedy1"], (1,), (1024,), [res, x, prm])
        self.fn_last = fn["greedy_last"]
        # stream -> (device memory, Launch of rm_greedy_last with its ticket), for the most
        # recent streams (an evicted stream's ticket is freed once its queued work is done)
        from infiniop_py.reduce import TICKET_STREAMS, release_tickets

        self._tickets = LRU(TICKET_STREAMS, release_tickets)
        self.greedy1 = plan(GREEDY_RULES, pdt, self.n) == "one_block"  # else rm_greedy_last
        self.l_hist = Launch(fn["hist"], grid, (512,), [x, ws, prm])
        self.l_c0 = Launch(fn["compact0"], grid, (512,), [x, ws, prm])
        self.l_r0 = Launch(fn["refine0"], (1,), (1024,), [ws, prm])
        self.l_c1 = Launch(fn["compact1"], grid, (512,), [x, ws, prm])
        self.l_final = Launch(fn["final"], (1,), (1024,), [res, ws, prm])

    def launch(self, ptrs, ws_ptr, rt, stream):
        random_val, topp, topk, temperature = rt
        greedy = check_runtime(self.op, random_val, topp, topk, temperature) or self.n == 1
        kp = max(1, min(int(topk), self.n))
        last = self.B if self.multi else 0  # SampleParams.pad_: the number of partials
        blob = struct.pack(
            "<4d4q", float(random_val), float(topp), float(temperature), float(2.0**self.sbits), kp, self.n, int(greedy), last
        )
        ctypes.memmove(self.params, blob, 64)
        if not self.multi:
            self.main(ptrs, ws_ptr, stream)
            return
        if greedy and self.greedy1:
            self.l_greedy1(ptrs, ws_ptr, stream)
            return
        if greedy:
            hit = self._tickets.get(stream)
            if hit is None:
                hit = self._ticket_launch(stream)
                self._tickets.put(stream, hit)
            hit[1](ptrs, ws_ptr, stream)
            return
        seq = [self.l_argmax, self.l_hist] + ([self.l_c0, self.l_r0] if kp < self.n else []) + [self.l_c1, self.l_final]
        for ln in seq:
            ln(ptrs, ws_ptr, stream)

    def _ticket_launch(self, stream):
        """rm_greedy_last bound to a fresh ticket for ``stream`` (zeroed on that stream)."""
        from infiniop_py.cuda import runtime

        cp = runtime.cupy()
        mem = cp.cuda.alloc(4)
        cp.cuda.runtime.memsetAsync(mem.ptr, 0, 4, stream)
        args = [Slot(0), Slot(1), Slot("ws"), ctypes.c_void_p(mem.ptr), self.params]
        return mem, Launch(self.fn_last, (self.B,), (512,), args)


def nvidia(info: Info, handle):
    return RandomSampleKernel(info, handle)


def _all_names() -> list[str]:
    """Every kernel the plans can launch (per dtype pair: the path, the select and both greedy
    kernels the rules choose from)."""
    names = []
    for p in sorted(F):
        for r in sorted(OUT_DTYPES):
            names += list(rm_names(p, r).values()) if plan(PATH_RULES, p) == "multi_block" else [kernel_name(p, r)]
    return list(dict.fromkeys(names))


nvidia.compile_units = lambda: [(_source(), _all_names())]


def reference(probs, random_val, topp, topk, temperature):
    """The library rule in float64 on the stored logits."""
    return np.array(sample_rule(probs.numpy(), random_val, topp, topk, temperature, np.float64), dtype=np.int64)


try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover
    GGUFDialect = object


class RandomSampleFiles(GGUFDialect):
    """Upstream's layout: the logits are `data`, the vocabulary size is `voc` (read, unused)."""

    attr_types = {"random_val": "f32", "topp": "f32", "temperature": "f32", "topk": "i32"}

    def write(self, record) -> None:
        record.rename("probs", "data")
        record.set("voc", int(record.tensors["data"][0].size), "i32")


SPEC = declare(
    globals(),
    name="random_sample",
    stem="RandomSample",
    tensors=(out("result", compare="index"), inp("probs", aliases=("data",))),
    runtime=(
        Attr("random_val", "float"),
        Attr("topp", "float"),
        Attr("topk", "int"),
        Attr("temperature", "float"),
    ),
    dtypes=F,
    torch="none (upstream library rule: greedy, or top-k/top-p over sorted unnormalised exp((v - v0)/T))",
    summary="sample one index from 1-D logits (top-k / top-p / temperature, upstream rule); 0-d integer result",
    kernel_sources=SOURCE_FILES,
    gguf=RandomSampleFiles(),
)
