"""random_sample: one index drawn from 1-D logits by the upstream library rule (ops.md §8.1).

Greedy (random_val == 0, topp <= 0, topk <= 1 or temperature == 0): the smallest index among
the maxima. Otherwise rank the entries by value (descending, ties -> lower index), weight them
cum_i = sum_{j<=i} exp((v_j - v_0) / T) (unnormalised), take
limit = random_val * min(cum_{k'-1}, topp * cum_{n-1}) with k' = min(topk, n) and return the
original index of the first ranked entry with cum_i >= limit (the entry k'-1 if rounding leaves
none, e.g. random_val > 1). The terms are computed in f32 (f64 for f64); the CPU accumulates
them in f64 and the GPU in 64-bit fixed point (exact, order-independent sums; see kernel.cu),
so neither drifts over large vocabularies. On the GPU f32/f16/bf16 use a multi-block path with a
workspace (about 16 bytes per entry; kernel.cu; plan variants IOP_SAMPLE_SEL, default f16/bf16
13: selects with windows over the varying bits; f32 12); f64 one block and no workspace. The result is 0-d of any signed/unsigned integer dtype (an index that does not fit
wraps). Runtime scalars are checked at calculate: NaN random_val/topp/temperature or a negative
temperature -> BAD_PARAM.
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
from pathlib import Path

import numpy as np

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import SI, UI, DType, F, to_numpy
from infiniop_py.lru import LRU
from infiniop_py.spec import Attr, Checker, Info, OpSpec, inp, out
from infiniop_py.status import Status, error

SOURCE_FILE = Path(__file__).with_name("kernel.cu")
OUT_DTYPES = SI | UI
THREADS = 512


def _source() -> str:
    from infiniop_py.reduce import REDUCE_CUH

    return REDUCE_CUH + SOURCE_FILE.read_text()


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


# multi-block path (kernel.cu: rm_*): f32/f16/bf16; f64 keeps the one-block kernel
RM_EPB = 4096  # entries per block of the streaming passes
# greedy calls up to this many entries: one block, one launch (rm_greedy1). H200: n = 32000
# 18.1-32.3 vs 22.8-43.6 us for the two launches; n = 151936 f32/f16 one block was slower
# (24.4 vs 22.4 us: one SM reads 608 KB). Larger vocabularies: one launch over n / RM_EPB
# blocks whose last block (integer ticket) combines the partials (rm_greedy_last); n = 151936
# on the H200 (round 4): 17.8-18.6 vs 22.1-23.4 us for the two launches (1.17-1.20x torch).
GREEDY1_MAX = 1 << 16
RM_CTRL = 2048 * 12 + 128  # >= sizeof(RmCtrl), rounded up below like rm_view does


def _up(b: int) -> int:
    return (b + 255) & ~255


def rm_workspace(n: int) -> int:
    """Bytes of the multi-block workspace (layout of rm_view in kernel.cu)."""
    B = -(-n // RM_EPB)
    return _up(RM_CTRL) + 2 * _up(4 * B) + 2 * _up(8 * n)


def rm_names(pdt: DType, rdt: DType, sel: int = 0) -> dict:
    t, r = ctype(pdt), ctype(rdt)
    return {
        "argmax": f"rm_argmax<{t}>",
        "hist": f"rm_hist<{t}, {sel}>",
        "compact0": f"rm_compact<{t}, 0, {sel}>",
        "compact1": f"rm_compact<{t}, 1, {sel}>",
        "refine0": f"rm_refine0<{t}, {sel}>",
        "greedy": f"rm_greedy<{t}, {r}>",
        "greedy1": f"rm_greedy1<{t}, {r}>",
        "greedy_last": f"rm_greedy_last<{t}, {r}>",
        "final": f"rm_final<{t}, {r}, {sel}>",
    }


# variant of the sampled path (kernel.cu), bit flags: 1 = rm_select2 (windows from the highest
# bit varying across the compacted list, whose lowest bit varies too), 2 = its survivors gathered
# to shared memory, 4 = the 2048-bin histogram pick by the whole block (rm_pick_hist), 8 = the
# histogram / compaction passes issue all their loads first. 0 = the fixed 8-bit windows and
# one-warp picks of before. 16-bit logits have few distinct values (many ties, constant low key
# bits): the fixed windows spent several passes on constant bits, and their digits fell on every
# 8th bin (bank conflicts). Tuning switch IOP_SAMPLE_SEL = 0..15 (read at create). Defaults from
# the H200 A/B of round 9E (docs/perf/reductions.md, kernel-only, x torch): f16 / bf16 13 (bf16
# 0.60-0.74x -> 1.39-2.10x, f16 0.88-1.37x -> 1.32-1.88x; the gather, 15, measured no better),
# f32 12 (its select already splits well: 1.12-1.57x -> 1.36-1.94x; 13 was 1.28-1.83x). Every
# variant returns the same index (the same unique composite, exact integer sums).
SEL_VARIANTS = (0, 1, 3, 12, 13, 15)  # compiled by the compile check with --all; any 0..15 works at run time
SEL_HALF, SEL_F32 = 13, 12


def sample_sel(pdt: DType) -> int:
    env = os.environ.get("IOP_SAMPLE_SEL", "")
    if env.isdigit() and int(env) < 16:
        return int(env)
    return SEL_HALF if pdt in (DType.F16, DType.BF16) else SEL_F32


def multi_block(pdt: DType) -> bool:
    return pdt is not DType.F64


class RandomSampleKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        self.op = info.op
        self.n = info.n
        self.sbits = 62 - int(self.n).bit_length()  # n weights of at most 2^sbits fit in 62 bits
        self.params = (ctypes.c_char * 64)()  # SampleParams, rewritten per call
        pdt, rdt = info["probs"].dtype, info["result"].dtype
        self.multi = multi_block(pdt)
        if not self.multi:
            name = kernel_name(pdt, rdt)
            mod = get_module(_source(), [name], handle.device_id)
            self.main = Launch(mod.ptr[name], (1,), (THREADS,), [Slot(0), Slot(1), self.params])
            return
        self.B = -(-self.n // RM_EPB)
        self.workspace_size = rm_workspace(self.n)
        self.sel = sample_sel(pdt)
        names = rm_names(pdt, rdt, self.sel)
        mod = get_module(_source(), list(names.values()), handle.device_id)
        fn = {k: mod.ptr[v] for k, v in names.items()}
        ws, x, res, prm = Slot("ws"), Slot(1), Slot(0), self.params
        grid = (self.B,)
        self.l_argmax = Launch(fn["argmax"], grid, (512,), [x, ws, prm])
        self.l_greedy = Launch(fn["greedy"], (1,), (512,), [res, ws, prm])
        self.l_greedy1 = Launch(fn["greedy1"], (1,), (1024,), [res, x, prm])
        self.fn_last = fn["greedy_last"]
        # stream -> (device memory, Launch of rm_greedy_last with its ticket), for the most
        # recent streams (an evicted stream's ticket is freed once its queued work is done)
        from infiniop_py.reduce import TICKET_STREAMS, release_tickets

        self._tickets = LRU(TICKET_STREAMS, release_tickets)
        mode = os.environ.get("IOP_SAMPLE_GREEDY", "")  # tuning switch: "2pass", "1block" or "last"
        self.greedy1 = mode == "1block" or (mode not in ("2pass", "last") and self.n <= GREEDY1_MAX)
        self.greedy_last = not self.greedy1 and mode != "2pass"
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
        if greedy and self.greedy_last:
            hit = self._tickets.get(stream)
            if hit is None:
                hit = self._ticket_launch(stream)
                self._tickets.put(stream, hit)
            hit[1](ptrs, ws_ptr, stream)
            return
        seq = [self.l_argmax, self.l_greedy] if greedy else [self.l_argmax, self.l_hist]
        if not greedy:
            seq += [self.l_c0, self.l_r0] if kp < self.n else []
            seq += [self.l_c1, self.l_final]
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


def _all_names(sels=None) -> list[str]:
    """Every kernel of the plans, for the selection variants ``sels`` (default: the one
    ``sample_sel`` picks per dtype, as a descriptor does)."""
    names = []
    for p in sorted(F):
        for r in sorted(OUT_DTYPES):
            if not multi_block(p):
                names.append(kernel_name(p, r))
                continue
            for sel in (sample_sel(p),) if sels is None else sels:
                names += list(rm_names(p, r, sel).values())
    return list(dict.fromkeys(names))


def _tuning_names() -> list[str]:
    """The other IOP_SAMPLE_SEL variants of SEL_VARIANTS (the compile check's ``--all``)."""
    chosen = set(_all_names())
    return [n for n in _all_names(SEL_VARIANTS) if n not in chosen]


nvidia.compile_units = lambda: [(_source(), _all_names())]
nvidia.tuning_units = lambda: [(_source(), _tuning_names())]


def reference(probs, random_val, topp, topk, temperature):
    """The library rule in float64 on the stored logits."""
    return np.array(sample_rule(probs.numpy(), random_val, topp, topk, temperature, np.float64), dtype=np.int64)


try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf import GGUFDialect
except ImportError:  # pragma: no cover
    GGUFDialect = None

if GGUFDialect is not None:

    class RandomSampleFiles(GGUFDialect):
        """Upstream's layout: the logits are `data`, the vocabulary size is `voc` (read, unused)."""

        attr_types = {"random_val": "f32", "topp": "f32", "temperature": "f32", "topk": "i32"}

        def write(self, record) -> None:
            record.rename("probs", "data")
            record.set("voc", int(record.tensors["data"][0].size), "i32")

    DIALECT = RandomSampleFiles()
else:  # pragma: no cover
    DIALECT = None


SPEC = OpSpec(
    name="random_sample",
    stem="RandomSample",
    tensors=(out("result", compare="index"), inp("probs", aliases=("data",))),
    runtime=(
        Attr("random_val", "float"),
        Attr("topp", "float"),
        Attr("topk", "int"),
        Attr("temperature", "float"),
    ),
    validate=validate,
    dtypes=F,
    cpu=cpu,
    nvidia=nvidia,
    reference=reference,
    torch="none (upstream library rule: greedy, or top-k/top-p over sorted unnormalised exp((v - v0)/T))",
    summary="sample one index from 1-D logits (top-k / top-p / temperature, upstream rule); 0-d integer result",
    kernel_sources=("kernel.cu",),
    gguf=DIALECT,
)
