"""Reductions and the row-wise family against torch eager on the same buffers.

GPU shapes (perf.md): sum, reduce_max, reduce_mean on (4, 512, 896) over axis None,
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

from ..core import BenchCase, standard_workload

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


# The axis reductions: operator -> (torch function, whether it takes several axes ("dims")).
REDUCTIONS = {"sum": ("sum", True), "reduce_max": ("amax", False), "reduce_mean": ("mean", False)}


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

        fn, multi = REDUCTIONS[op]
        attrs = {"dims": list(dims)} if multi else {"dim": dims[0]}
        peer = getattr(torch, fn)
        eager = lambda out, x: peer(x, dim=dims if multi else dims[0], out=out)  # noqa: E731
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
            t = torch.randint(0, shape[-1], shape[:-1], device="cuda", dtype=torch.int64, generator=env.generator())
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
        for op, (_, multi) in REDUCTIONS.items():
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
