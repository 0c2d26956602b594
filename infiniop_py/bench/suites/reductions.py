"""Reductions and the row-wise family against torch eager on the same buffers.

GPU shapes (issue 4 / perf.md): sum, reduce_max, reduce_mean on (4, 512, 896) over axis None,
-1 and (0, 1) (max/mean take one dim: -1 and 1) and on 8192x8192 over each axis (sum also over
None); softmax and log_softmax over the last dim of (4096, N), N in 128, 1000, 2048, 2049,
4096, 4097, 32000; causal_softmax (32, 512, 512) against the masked_fill + softmax +
masked_fill expression; cross_entropy (8192, 32000) against F.cross_entropy(reduction='none'); random_sample over
vocabularies of 32000 and 151936 against the same rule in torch (sort, cumsum, searchsorted) or
torch.argmax; topksoftmax (4096x256 top-8, 8192x64 top-6) against torch.topk(softmax) and
topkrouter (4096x256 top-8) against the grouped router in torch. f32, f16, bf16.

Minimal bytes: the input read once, the output written once (a reduction's output is small;
cross_entropy also reads the int64 labels). torch's softmax has no ``out=``: its result tensor
replaces the peer output (the allocation is what a torch user pays too).
"""

from __future__ import annotations

from ..core import BenchCase, standard_workload, switches
from ..core import graph_times as core_graph_times

NAME = "reductions"
DTYPES = ("f32", "f16", "bf16")
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def router_rows_bad(torch, x, b, vals, idx, scale, eps=1e-6):
    """Rows of (vals, idx) that are not a grouped top-k routing of x in float64 up to ``eps``:
    every chosen expert's group is among the 4 best by group score (within eps), no expert left
    out of a surely kept group beats the weakest chosen one by more than eps, and the values are
    s at the chosen experts, normalised and scaled (f32 tolerance)."""
    s = torch.sigmoid(x.double())
    if x.element_size() < 4:  # f16 / bf16: the sigmoid rounded to x's dtype (ops.md §8.3)
        s = torch.sigmoid(x.float()).to(x.dtype).double()
    c = s + b.double()
    n = c.shape[0]
    idx = idx.long()
    gs = c.view(n, 8, 32).topk(2, dim=-1).values.sum(-1)
    fourth = gs.topk(4, dim=-1).values[:, -1:]
    chosen_g = torch.gather(gs, 1, idx // 32)
    bad = (chosen_g < fourth - eps).any(-1)
    sure = (gs > fourth + eps).repeat_interleave(32, dim=1)
    left = torch.where(sure, c, torch.full_like(c, -1e9)).scatter(1, idx, -1e9)
    bad |= left.max(-1).values > torch.gather(c, 1, idx).min(-1).values + eps
    sv = torch.gather(s, 1, idx)
    want = sv / (sv.sum(-1, keepdim=True) + 1e-20) * scale
    bad |= ((vals.double() - want).abs() > 1e-5 + 1e-5 * want.abs()).any(-1)
    return int(bad.sum())


def sample_draw_bad(torch, x, idx, random_val, topp, topk, temp, rtol=1e-4) -> str:
    """'' when ``idx`` is a draw of the random_sample rule on x in float64, allowing the
    cumulative mass at the crossing to be off by ``rtol`` of the total (f32 sums in another
    order cross ``random_val`` of the mass a neighbour earlier or later when the boundary term is
    smaller than their rounding); else the reason. Ties in x may be ordered either way."""
    xs = x.double().flatten()
    n = xs.numel()
    kp = min(topk, n)
    j = int(idx)
    if not 0 <= j < n:
        return f"index {j} outside [0, {n})"
    s, _ = torch.sort(xs, descending=True, stable=True)
    cum = torch.cumsum(torch.exp((s - s[0]) / temp), 0)
    limit = float(random_val * torch.minimum(cum[kp - 1], topp * cum[-1]))
    tol = rtol * float(cum[-1])
    eq = (s == xs[j]).nonzero().flatten()
    for p in range(int(eq[0]), min(int(eq[-1]) + 1, kp)):
        if float(cum[p]) >= limit - tol and (p == 0 or float(cum[p - 1]) <= limit + tol):
            return ""
    return f"index {j} (sorted position {int(eq[0])}) is not where the mass crosses {random_val} of the total"


def _workload(env, op, make_set, eager, attrs=None, assign=False, descs=None):
    """``standard_workload`` for this family (most peers return their result: ``assign``)."""
    return standard_workload(env, op, make_set, eager, attrs=attrs, assign=assign, descs=descs)


def reduce_case(op, dtype, shape, axes, quick=False):
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        nd = len(shape)
        dims = tuple(range(nd)) if axes is None else tuple(a % nd for a in axes)
        oshape = tuple(d for i, d in enumerate(shape) if i not in dims)

        def make_set():
            x = env.random(shape, tdt)
            y = env.poisoned(oshape, tdt)
            return [y, x], (x,)

        if op == "sum":
            attrs = {"dims": list(dims)}
            eager = lambda out, x: torch.sum(x, dim=dims, out=out)  # noqa: E731
        elif op == "reduce_max":
            attrs = {"dim": dims[0]}
            eager = lambda out, x: torch.amax(x, dim=dims[0], out=out)  # noqa: E731
        else:
            attrs = {"dim": dims[0]}
            eager = lambda out, x: torch.mean(x, dim=dims[0], out=out)  # noqa: E731
        work = _workload(env, op, make_set, eager, attrs)
        if op != "reduce_max":  # f32-vs-f32 sums differ by rounding that grows like sqrt(L)
            import math

            L = math.prod(shape[i] for i in dims)
            work.atol = {"f32": 1e-5, "f16": 1.5e-3, "bf16": 1e-2}[dtype] * math.sqrt(L)
            work.rtol = {"f32": 1e-5, "f16": 1e-3, "bf16": 1e-2}[dtype]
        return work

    name = "x".join(map(str, shape)) + f" axis={'None' if axes is None else axes}"
    return BenchCase(NAME, op, name, dtype, shape, build, quick=quick, compile=False)


def softmax_case(op, dtype, shape, quick=False):
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        fn = torch.softmax if op == "softmax" else torch.log_softmax

        def make_set():
            x = env.random(shape, tdt, -8.0, 8.0)
            return [env.poisoned(shape, tdt), x], (x,)

        return _workload(env, op, make_set, lambda x: fn(x, -1), {"dim": -1}, assign=True)

    return BenchCase(NAME, op, "x".join(map(str, shape)) + " dim=-1", dtype, shape, build, quick=quick, compile=False)


def causal_case(dtype, shape, quick=False):
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        seq, total = shape[-2], shape[-1]
        i = torch.arange(seq, device="cuda")[:, None]
        j = torch.arange(total, device="cuda")[None, :]
        masked = j > i + (total - seq)

        def make_set():
            x = env.random(shape, tdt, -8.0, 8.0)
            return [env.poisoned(shape, tdt), x], (x,)

        def eager(x):
            return torch.softmax(x.masked_fill(masked, float("-inf")), -1).masked_fill_(masked, 0.0)

        return _workload(env, "causal_softmax", make_set, eager, assign=True)

    return BenchCase(NAME, "causal_softmax", "x".join(map(str, shape)), dtype, shape, build, quick=quick, compile=False)


def ce_case(dtype, shape, quick=False):
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        F = torch.nn.functional

        def make_set():
            x = env.random(shape, tdt, -8.0, 8.0)
            t = torch.randint(0, shape[-1], shape[:-1], device="cuda", dtype=torch.int64)
            return [env.poisoned(shape[:-1], tdt), x, t], (x, t)

        return _workload(env, "cross_entropy", make_set, lambda x, t: F.cross_entropy(x, t, reduction="none"), assign=True)

    return BenchCase(NAME, "cross_entropy", "x".join(map(str, shape)) + " none", dtype, shape, build, quick=quick, compile=False)


def sample_case(dtype, n, rt, quick=False):
    """random_sample against the same library rule written in torch (stable sort, cumsum,
    searchsorted); greedy calls against torch.argmax."""
    random_val, topp, topk, temp = rt
    greedy = random_val == 0 or topp <= 0 or topk <= 1 or temp == 0

    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        kp = min(topk, n)

        def make_set():  # the 0-d result lives in a 1-element buffer (the harness poisons 1-D tensors)
            x = env.random((n,), tdt, -8.0, 8.0)
            return [env.poisoned((1,), torch.int64), x], (x,)

        def eager(x):
            if greedy:
                return torch.argmax(x).reshape(1)
            s, order = torch.sort(x.float(), descending=True, stable=True)
            cum = torch.cumsum(torch.exp((s - s[0]) / temp), 0)
            limit = random_val * torch.minimum(cum[kp - 1], topp * cum[-1])
            pos = torch.searchsorted(cum, limit.reshape(1)).clamp_(max=kp - 1)
            return order[pos]

        from infiniop_py.tensor import create_tensor_descriptor

        descs = [create_tensor_descriptor((), None, "i64"), create_tensor_descriptor((n,), None, dtype)]
        work = _workload(env, "random_sample", make_set, eager, assign=True, descs=descs)
        work.runtime = (random_val, topp, topk, temp)
        work.exact = True

        def recheck(s, ok, detail):
            if ok or greedy:
                return ok, detail
            out, x = work.buffers[s]
            bad = sample_draw_bad(torch, x, out.flatten()[0], random_val, topp, topk, temp)
            if bad:
                return False, f"{detail}; {bad} (float64 check)"
            return True, f"{detail}; a valid draw in float64 (the mass crosses the limit within 1e-4 of the total)"

        work.recheck = recheck
        return work

    name = f"n={n} " + ("greedy" if greedy else f"r={random_val} topp={topp} topk={topk} T={temp}")
    return BenchCase(NAME, "random_sample", name, dtype, (n,), build, quick=quick, compile=False)


def topk_softmax_case(dtype, shape, k, quick=False):
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])

        def make_set():
            x = env.random(shape, tdt)
            v = env.poisoned((shape[0], k), torch.float32)
            i = env.poisoned((shape[0], k), torch.int32)
            return [v, i, x], (x,)

        def eager(x):
            vals = torch.topk(torch.softmax(x.float(), -1), k).values
            return vals / vals.sum(-1, keepdim=True)

        work = _workload(env, "topksoftmax", make_set, eager, assign=True)
        work.runtime = (k, True)
        return work

    return BenchCase(
        NAME, "topksoftmax", "x".join(map(str, shape)) + f" top-{k} norm", dtype, shape, build, quick=quick, compile=False
    )


def topk_router_case(dtype, ntoken, k, quick=False):
    shape = (ntoken, 256)

    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])

        def make_set():
            x = env.random(shape, tdt)
            b = env.random((256,), torch.float32, -0.1, 0.1)
            v = env.poisoned((ntoken, k), torch.float32)
            i = env.poisoned((ntoken, k), torch.int32)
            return [v, i, x, b], (x, b)

        def eager(x, b):
            s = torch.sigmoid(x.float()).to(x.dtype).float()  # rounded to x's dtype (ops.md §8.3)
            c = (s + b).view(ntoken, 8, 32)
            score = c.topk(2, dim=-1).values.sum(-1)
            keep = torch.zeros(ntoken, 8, dtype=torch.bool, device=x.device).scatter_(1, score.topk(4, dim=-1).indices, True)
            c = torch.where(keep[:, :, None], c, torch.zeros_like(c)).view(ntoken, 256)
            vals = torch.gather(s, 1, c.topk(k, dim=-1).indices)
            return vals / (vals.sum(-1, keepdim=True) + 1e-20) * 2.5

        work = _workload(env, "topkrouter", make_set, eager, assign=True)
        work.runtime = (2.5, k)

        def recheck(s, ok, detail):
            if ok:
                return ok, detail
            v, i, x, b = work.buffers[s]
            bad = router_rows_bad(torch, x, b, v, i, 2.5)
            if bad:
                return False, f"{detail}; {bad} rows are not a top-{k} routing (float64 check)"
            return True, f"{detail}; every row is a valid routing in float64 (near-ties ordered differently)"

        work.recheck = recheck
        return work

    return BenchCase(NAME, "topkrouter", f"{ntoken}x256 top-{k}", dtype, shape, build, quick=quick, compile=False)


def sampling_cases(env) -> list[BenchCase]:
    out = []
    for dt in DTYPES:
        for n in (32000, 151936):
            out.append(sample_case(dt, n, (0.8, 0.9, 50, 0.8), quick=n == 151936))
            out.append(sample_case(dt, n, (0.0, 0.9, 50, 0.8)))
        out.append(sample_case(dt, 151936, (0.95, 1.0, 151936, 1.0)))
        out.append(topk_softmax_case(dt, (4096, 256), 8, quick=True))
        out.append(topk_softmax_case(dt, (8192, 64), 6))
        out.append(topk_router_case(dt, 4096, 8, quick=True))
    return out


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    if not env.gpu:
        for dt in DTYPES:
            out.append(reduce_case("sum", dt, (4, 512, 896), (-1,), quick=True))
            out.append(softmax_case("softmax", dt, (1024, 1000), quick=True))
        out.append(sample_case("f32", 32000, (0.8, 0.9, 50, 0.8), quick=True))
        out.append(topk_softmax_case("f32", (256, 64), 6, quick=True))
        out.append(topk_router_case("f32", 256, 8, quick=True))
        return out
    for dt in DTYPES:
        for op in ("sum", "reduce_max", "reduce_mean"):
            multi = op == "sum"
            for axes in (None, (-1,), (0, 1)) if multi else ((-1,), (1,)):
                out.append(reduce_case(op, dt, (4, 512, 896), axes, quick=axes == (-1,)))
            for axes in (None, (0,), (1,)) if multi else ((0,), (1,)):
                out.append(reduce_case(op, dt, (8192, 8192), axes, quick=True))
        for op in ("softmax", "log_softmax"):
            for n in (128, 1000, 2048, 2049, 4096, 4097, 32000):
                out.append(softmax_case(op, dt, (4096, n), quick=n in (2049, 32000)))
        out.append(causal_case(dt, (32, 512, 512), quick=True))
        out.append(ce_case(dt, (8192, 32000), quick=True))
    return out + sampling_cases(env)


# --------------------------------------------------------------------------------------------
# A/B: plan variants of our kernels (tuning env switches read at create) against each other
# and torch, interleaved in one process:  python3 -m infiniop_py.bench.suites.reductions --reps 50
# --------------------------------------------------------------------------------------------
AB_RED = {"new": {}, "v1": {"IOP_REDUCE_PLAN": "v1"}, "ppt16": {"IOP_REDUCE_PPT": "16"}}
AB_FULL = {"new": {}, "v1": {"IOP_REDUCE_PLAN": "v1"}, "tps2048": {"IOP_REDUCE_TPS": "2048"}}
AB_ROW = {"raw": {}, "f32cache": {"IOP_ROWWISE_RAW": "0"}}


def ab_cases():
    """Round 7, run 2: rows cached in registers + shared memory (``row_softmax_hyb``, default
    256 threads per f32 row, 192 per 16-bit row) against the register-only block kernel
    (``old``: ``IOP_ROWWISE_HYB=0``), with fewer threads per row (``g``). Run 1 (G = 512 / 256,
    streaming stores) is ``ab_cases_round7a``."""
    out = []
    for dt in ("f32", "f16", "bf16"):
        g = "192" if dt == "f32" else "128"
        ab = {"old": {"IOP_ROWWISE_HYB": "0"}, "hyb": {}, "g" + g: {"IOP_ROWWISE_HYB_G": g}}
        for op in ("softmax", "log_softmax"):
            out.append((softmax_case(op, dt, (4096, 32000)), ab, False))
    for n in (20000, 24576, 65536):
        for dt in ("f32", "f16"):
            for op in ("softmax", "log_softmax"):
                out.append((softmax_case(op, dt, (4096, n)), {"old": {"IOP_ROWWISE_HYB": "0"}, "hyb": {}}, False))
    return out


def ab_cases_round7a():
    """Round 7, run 1: rows of 32000 cached in registers + shared memory (``row_softmax_hyb``)
    against the register-only block kernel (``old``: ``IOP_ROWWISE_HYB=0``), with variants:
    streaming stores (``cs``), fewer threads per row (``g``: f32 256, 2 rows per SM; 16-bit 192, 5)."""
    out = []
    for dt in ("f32", "f16", "bf16"):
        g = "256" if dt == "f32" else "192"
        ab = {
            "old": {"IOP_ROWWISE_HYB": "0"},
            "hyb": {"IOP_ROWWISE_HYB_G": "512" if dt == "f32" else "256"},
            "cs": {"IOP_ROWWISE_HYB_G": "512" if dt == "f32" else "256", "IOP_ROWWISE_HYB_CS": "1"},
            "g" + g: {"IOP_ROWWISE_HYB_G": g},
        }
        for op in ("softmax", "log_softmax"):
            out.append((softmax_case(op, dt, (4096, 32000)), ab, False))
    for n in (20000, 65536):
        for dt in ("f32", "f16"):
            ab = {"old": {"IOP_ROWWISE_HYB": "0"}, "hyb": {"IOP_ROWWISE_HYB_G": "512" if dt == "f32" else "256"}}
            out.append((softmax_case("softmax", dt, (4096, n)), ab, False))
    return out


def ab_cases_round6b():
    """Round 6, second run: the warp kernel with 32 packs per lane (``all``) on rows of 8192
    against the block kernel, the rule at N = 1000 (softmax keeps the block kernel), and a
    repeat of 2048 / 4097. The first run's list is ``ab_cases_round6a``."""
    out = []
    for dt in ("f16", "bf16"):
        for op in ("softmax", "log_softmax"):
            out.append((softmax_case(op, dt, (4096, 8192)), {"new": {}, "warp32": {"IOP_ROWWISE_WARP": "all"}}, True))
    for op in ("softmax", "log_softmax"):
        ab = {"new": {}, "old": {"IOP_ROWWISE_WARP": "0"}, "all": {"IOP_ROWWISE_WARP": "all"}}
        out.append((softmax_case(op, "f16", (4096, 1000)), ab, True))
        for n in (2048, 4097):
            out.append((softmax_case(op, "f16", (4096, n)), {"new": {}, "old": {"IOP_ROWWISE_WARP": "0"}}, True))
    return out


def ab_cases_round6a():
    """Round 6: one warp per row (``row_softmax_warp``, raw packs in registers, no block
    barriers) against the block kernel (``old``: ``IOP_ROWWISE_WARP=0``) on half softmax /
    log_softmax rows; 8192 (outside the warp rule) for the record. Graph replay for all."""
    out = []
    ab = {"new": {}, "old": {"IOP_ROWWISE_WARP": "0"}}
    for dt, ns in (("f16", (1000, 2048, 2049, 4096, 4097, 8192)), ("bf16", (2048, 2049, 4096, 4097))):
        for op in ("softmax", "log_softmax"):
            for n in ns:
                out.append((softmax_case(op, dt, (4096, n)), ab if n < 8192 else {"new": {}}, True))
    return out


def ab_cases_round4b():
    """Round 4 (second run): the raw 16-bit cache with 8 packs per thread on mid softmax /
    log_softmax rows (``raw8``; measured then as the default against the f32 cache, and not
    kept), raw cache for log_softmax 32000 (spill removed) against the f32 cache (``old``),
    one-launch multi-block greedy sampling; 8192^2 half reductions for the record. The third
    element of a tuple asks for CUDA-graph replay timing too."""
    out = []
    mid = {"new": {}, "raw8": {"IOP_ROWWISE_RAW": "all8"}}
    for dt, ns in (("f16", (1000, 2048, 2049, 4096, 4097)), ("bf16", (2048, 4096, 4097))):
        for op in ("softmax", "log_softmax"):
            for n in ns:
                out.append((softmax_case(op, dt, (4096, n)), mid, True))
    for dt in ("f16", "bf16"):
        out.append((softmax_case("log_softmax", dt, (4096, 32000)), {"new": {}, "old": {"IOP_ROWWISE_RAW": "nolog"}}, False))
    out.append((softmax_case("softmax", "f16", (4096, 32000)), {"new": {}}, False))
    for dt in ("f16", "bf16"):
        out.append((reduce_case("sum", dt, (8192, 8192), (1,)), {"new": {}}, False))
        out.append((reduce_case("sum", dt, (8192, 8192), None), {"new": {}}, False))
    for dt in DTYPES:
        g = {"new": {}, "2pass": {"IOP_SAMPLE_GREEDY": "2pass"}}
        out.append((sample_case(dt, 151936, (0.0, 0.9, 50, 0.8)), g, True))
    out.append((sample_case("f32", 32000, (0.0, 0.9, 50, 0.8)), {"new": {}, "last": {"IOP_SAMPLE_GREEDY": "last"}}, True))
    return out


def ab_cases_round4a():
    """Round 4, first run (subset still runnable): raw cache with 4 packs for mid rows, packs
    per thread of the 8192^2 row plan, greedy modes. ILP accumulators in reduce_rows and
    row_softmax were measured in that run too and removed (neutral or slower)."""
    out = []
    row = {"new": {}, "raw4": {"IOP_ROWWISE_RAW": "all"}}
    for dt, ns in (("f16", (2048, 2049, 4096, 4097)), ("bf16", (2048, 4097))):
        for op in ("softmax", "log_softmax"):
            for n in ns:
                out.append((softmax_case(op, dt, (4096, n)), row, True))
    for dt in DTYPES:
        out.append((reduce_case("sum", dt, (8192, 8192), (1,)), {"new": {}, "ppt8": {"IOP_REDUCE_PPT": "8"}}, False))
    g = {"new": {}, "2pass": {"IOP_SAMPLE_GREEDY": "2pass"}, "1block": {"IOP_SAMPLE_GREEDY": "1block"}}
    for dt in DTYPES:
        out.append((sample_case(dt, 151936, (0.0, 0.9, 50, 0.8)), g, True))
    return out


def graph_times(env, calls, nsets, k=24, reps=30):
    """:func:`infiniop_py.bench.core.graph_times` for calls of the form ``calls[name](s, stream)``."""
    side = env.torch.cuda.Stream()
    wrapped = {n: (lambda s, f=f: f(s, side.cuda_stream)) for n, f in calls.items()}
    return core_graph_times(env, wrapped, nsets, k, reps, side=side)


def ab_cases_round3():
    """Round 3: one-launch column tiles (vs the split + finish pair), last-block finish for small
    full reductions, one-block greedy random_sample."""
    out = []
    split = {"new": {}, "split": {"IOP_REDUCE_COLS": "split"}}
    for dt in DTYPES:
        out.append((reduce_case("sum", dt, (4, 512, 896), None), {"new": {}, "2pass": {"IOP_REDUCE_FINISH": "2pass"}}))
        out.append((reduce_case("sum", dt, (4, 512, 896), (0, 1)), split))
        for op in ("reduce_mean", "reduce_max"):
            out.append((reduce_case(op, dt, (4, 512, 896), (1,)), split))
        big = {**split, "tx8": {"IOP_REDUCE_TILE_TX": "8"}, "tpb1024": {"IOP_REDUCE_TILE_TPB": "1024"}}
        for op in ("sum", "reduce_max"):
            out.append((reduce_case(op, dt, (8192, 8192), (0,)), big))
        out.append((reduce_case("sum", dt, (8192, 8192), None), {"new": {}, "last": {"IOP_REDUCE_FINISH": "last"}}))
        for n in (32000, 151936):
            out.append((sample_case(dt, n, (0.0, 0.9, 50, 0.8)), {"new": {}, "2pass": {"IOP_SAMPLE_GREEDY": "2pass"}}))
    return out


def ab_cases_round2():
    out = []
    for dt in DTYPES:
        for op in ("sum", "reduce_max", "reduce_mean"):
            out.append((reduce_case(op, dt, (8192, 8192), (1,)), AB_RED))
        out.append((reduce_case("sum", dt, (8192, 8192), None), AB_FULL))
        small = {"new": {}, "v1": {"IOP_REDUCE_PLAN": "v1"}}  # (round 2 also timed a torch-tensor workspace)
        out.append((reduce_case("sum", dt, (4, 512, 896), None), small))
        out.append((reduce_case("reduce_mean", dt, (4, 512, 896), (-1,)), {"new": {}, "v1": {"IOP_REDUCE_PLAN": "v1"}}))
    for dt in ("f16", "bf16"):
        for n in (1000, 2048, 2049, 4096, 4097, 32000):
            out.append((softmax_case("softmax", dt, (4096, n)), AB_ROW))
        out.append((causal_case(dt, (32, 512, 512)), AB_ROW))
        out.append((ce_case(dt, (8192, 32000)), AB_ROW))
    return out


def ab_main(argv=None) -> int:
    import argparse
    import json

    import numpy as np

    from ..core import _tolerance, check, ours_call, stats
    from ..env import make_env

    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--match", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--no-graph", action="store_true")
    args = ap.parse_args(argv)
    env = make_env(False)
    copy = env.copy_bandwidth()
    bw = copy["GBps"]
    print(f"# A/B, copy bandwidth {bw:.0f} GB/s, {args.reps} reps interleaved", flush=True)
    rows = []
    for item in ab_cases():
        case, variants = item[0], item[1]
        want_graph = len(item) > 2 and item[2] and not args.no_graph
        label = f"{case.op} {case.case} {case.dtype}"
        if args.match and not any(m in label for m in args.match.split("|")):
            continue
        works, calls = {}, {}
        for name, envs in variants.items():
            with switches(envs):
                works[name] = case.build(env)
            w = works[name]
            if w.atol == 0.0 and w.rtol == 0.0 and not w.exact:
                w.atol, w.rtol = _tolerance(case.dtype)
            calls[name] = ours_call(env, w)
        w0 = next(iter(works.values()))
        sets0 = w0.nsets
        calls["torch"] = w0.torch_eager
        names = list(calls)
        nsets = {n: (works[n].nsets if n in works else w0.nsets) for n in names}
        for n in names:  # warm-up
            for i in range(max(5, nsets[n])):
                calls[n](i % nsets[n])
        env.sync()
        cnt = dict.fromkeys(names, 0)
        seq, labels = [], []
        for r in range(args.reps):
            for n in names if r % 2 == 0 else names[::-1]:
                s = cnt[n] % nsets[n]
                cnt[n] += 1
                seq.append((n, lambda f=calls[n], s=s: f(s)))
                labels.append(n)
        times = env.time_calls(seq)
        per = {n: [] for n in names}
        for n, t in zip(labels, times):
            per[n].append(t)
        med = {n: float(np.median(v)) for n, v in per.items()}
        nbytes = None
        res = {}
        for n, w in works.items():
            s = (cnt[n] - 1) % w.nsets
            w.torch_eager(s)
            env.sync()
            ok, detail = check(env, w, w.buffers[s][w.out_index], w.out_torch[s])
            if nbytes is None:
                from ..core import traffic

                reads = [t for i, t in enumerate(w.buffers[0]) if t is not None and i != w.out_index]
                nbytes = traffic(reads=reads, writes=[w.buffers[0][w.out_index]])[0]
            res[n] = {"ok": ok, "detail": detail, **stats(per[n])}
        res["torch"] = stats(per["torch"])
        parts = []
        for n in names:
            pct = 100.0 * nbytes / (med[n] * 1e-6) / 1e9 / bw
            flag = "" if n == "torch" or res[n]["ok"] else " CHECK-FAILED"
            parts.append(f"{n} {med[n]:.1f}us {pct:.0f}% x{med['torch'] / med[n]:.2f}{flag}")
        print(f"{label:<48} " + " | ".join(parts), flush=True)
        row = {"case": label, "bytes": nbytes, "results": res}
        if want_graph:
            gcalls = {n: ours_call_stream(env, works[n]) for n in works}
            gcalls["torch"] = lambda s, st, f=w0.torch_eager: f(s)
            try:
                gt = graph_times(env, gcalls, sets0)
            except Exception as exc:
                gt = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            row["graph_us"] = gt
            gp = []
            for n in names:
                if n in gt:
                    pct = 100.0 * nbytes / (gt[n] * 1e-6) / 1e9 / bw
                    gp.append(f"{n} {gt[n]:.2f}us {pct:.0f}% x{gt.get('torch', float('nan')) / gt[n]:.2f}")
            errs = [f"{k}={v}" for k, v in gt.items() if k.endswith("error")]
            print(f"{'  graph':<48} " + " | ".join(gp + errs), flush=True)
        rows.append(row)
        for w in works.values():
            w.release()
        del works, calls
        env.torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"copy": copy, "rows": rows}, f, indent=1)
    return 0


def ours_call_stream(env, work):
    """``f(s, stream)``: our calculate on set ``s`` launched on ``stream`` (graph capture)."""
    calc = work.descriptor.calculate
    bufs = [[None if t is None else env.ours(t) for t in tensors] for tensors in work.buffers]
    rt = tuple(work.runtime)
    size = int(getattr(work.descriptor, "workspace_size", 0) or 0)
    ws = None
    if size:
        if work.workspace is None:
            work.workspace = env.torch.empty(size, dtype=env.torch.uint8, device=env.device)
        ws = env.ours(work.workspace)

    def run(s, stream):
        calc(ws, *bufs[s], *rt, stream=stream)

    return run


if __name__ == "__main__":
    raise SystemExit(ab_main())
