"""In-process A/B of norm kernel variants (issue 5), on the GPU.

    python -m tools.bench.ab_norms OUTDIR [--ops rms_norm,...] [--ns 4096,8192] [--dtypes f16,bf16]
        [--fwd-variants cur,cp2] [--bwd-variants cur,s4]

The variants are the tuning switches of ``infiniop_py/norm`` (environment variables read when a
descriptor is created: INFINIOP_NORM_FWD_S, INFINIOP_NORM_BWD_S, INFINIOP_NORM_COLSUM,
INFINIOP_NORM_R, INFINIOP_NORM_BWD_OPT as ``o0`` ... ``o15``), so every variant is a separate
descriptor on the same buffers. ``<variant>_s1`` / ``<variant>_s2`` time only the row kernel / the
column sum of that variant (a split of its time; results not checked). Per case:

- "ev": CUDA events around each call, variants and peers interleaved (order reversed every
  other repetition), rotating among input sets that together exceed 4x the L2, as tools/bench.
- "graph": the kernel time per call inside a replayed CUDA graph of calls over the rotating
  sets (no host gaps). torch's autograd is not captured (its graph capture disturbs torch's
  RNG state for later cases), so backward peers have event times only.
- forward cases also time ``y.copy_(x)`` on the same rotating buffers ("copy"): the same row
  bytes as rms_norm, i.e. what the event method gives a pure copy of that size.

Each variant is checked against torch on set 0 (and, for backward, for a bitwise identical
weight gradient on a second call) before timing. Results: OUTDIR/ab.json and one line per case.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from .core import captured

# Known variants (environment of the descriptor); --fwd-variants / --bwd-variants pick them.
KNOWN = {
    "fwd": {
        "cur": {},
        "old": {"INFINIOP_NORM_FWD_S": "0"},
        "cp2": {"INFINIOP_NORM_FWD_S": "2"},
        "cp3": {"INFINIOP_NORM_FWD_S": "3"},
        "r1": {"INFINIOP_NORM_R": "1"},
        "r2": {"INFINIOP_NORM_R": "2"},
    },
    "bwd": {
        "cur": {},
        "reg": {"INFINIOP_NORM_BWD_S": "0"},
        "s2": {"INFINIOP_NORM_BWD_S": "2"},
        "s3": {"INFINIOP_NORM_BWD_S": "3"},
        "s4": {"INFINIOP_NORM_BWD_S": "4"},
        "cs1": {"INFINIOP_NORM_COLSUM": "1"},
        # OPT bits of the backward *_cp kernels (infiniop_py/norm BWD_OPT): 1 std table
        # (layer_norm), 2 one barrier per row, 4 16-byte partial stores, 8 two row groups per block
        **{f"o{k}": {"INFINIOP_NORM_BWD_OPT": str(k)} for k in range(16)},
        **{f"o{k}s{d}": {"INFINIOP_NORM_BWD_OPT": str(k), "INFINIOP_NORM_BWD_S": str(d)} for k in range(16) for d in (2, 3, 4)},
    },
}
# A variant name with the suffix "_s1" / "_s2" times only the first (row kernel) / the last
# (column sum) launch of that variant's vector path: a diagnostic split of the time, whose
# results are incomplete (not checked).
VARIANTS = {"fwd": {"cur": {}}, "bwd": {"cur": {}}}
ENV_KEYS = ("INFINIOP_NORM_FWD_S", "INFINIOP_NORM_BWD_S", "INFINIOP_NORM_COLSUM", "INFINIOP_NORM_R", "INFINIOP_NORM_BWD_OPT")
EPS = 1e-5
TOL = {"f32": (1e-3, 1e-3), "f16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2)}
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def kind(op):
    return "bwd" if op.endswith("backward") else "fwd"


def set_env(env):
    for k in ENV_KEYS:
        os.environ.pop(k, None)
    os.environ.update(env)


def shapes_of(op, n, rows=8192):
    s, v = (rows, n), (n,)
    if op == "rms_norm":
        return [s, s, v]
    if op == "layer_norm":
        return [s, s, (rows,), s, v, v]
    if op == "rms_norm_backward":
        return [s, v, s, s, v]
    return [s, v, v, s, v, s, (rows,)]


def make_desc(iop, h, op, dt, n):
    from infiniop_py.dtypes import parse_dtype
    from infiniop_py.tensor import create_tensor_descriptor

    d = parse_dtype(dt)
    descs = [create_tensor_descriptor(sh, None, d) for sh in shapes_of(op, n)]
    attrs = {"epsilon": EPS} if op.startswith("rms") else ({"eps": EPS} if op == "layer_norm" else {})
    return iop.create_descriptor(op, h, *descs, **attrs)


def _precompile(jobs):
    import infiniop_py as iop

    h = iop.create_handle("nvidia", 0)
    for op, dt, n, env in jobs:
        set_env(env)
        make_desc(iop, h, op, dt, n).destroy()
    return len(jobs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ops", default="rms_norm,layer_norm,rms_norm_backward,layer_norm_backward")
    ap.add_argument("--ns", default="1024,4096,8192")
    ap.add_argument("--fwd-ns", default="1024,4096,8192")
    ap.add_argument("--dtypes", default="f32,f16,bf16")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--fwd-variants", default="cur")
    ap.add_argument("--bwd-variants", default="cur")
    a = ap.parse_args()
    for k, arg in (("fwd", a.fwd_variants), ("bwd", a.bwd_variants)):
        VARIANTS[k] = {v: KNOWN[k][v.rsplit("_s", 1)[0] if v.endswith(("_s1", "_s2")) else v] for v in arg.split(",")}
    ops = a.ops.split(",")
    dts = a.dtypes.split(",")
    ns_of = {"fwd": [int(x) for x in a.fwd_ns.split(",")], "bwd": [int(x) for x in a.ns.split(",")]}
    cases = [(op, dt, n) for op in ops for dt in dts for n in ns_of[kind(op)]]
    jobs = [(op, dt, n, env) for op, dt, n in cases for env in VARIANTS[kind(op)].values()]
    t0 = time.time()
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    w = max(1, min(a.workers, len(jobs)))
    with ProcessPoolExecutor(w, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_precompile, [jobs[i::w] for i in range(w)]))
    print(f"precompile {len(jobs)} descriptors: {time.time() - t0:.1f}s", flush=True)

    import torch

    import infiniop_py as iop

    h = iop.create_handle("nvidia", 0)
    copy = copy_bw(torch)
    print(f"copy BW {copy:.0f} GB/s", flush=True)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows_out = []
    for op, dt, n in cases:
        rows_out.append(run_case(torch, iop, h, op, dt, n, copy, l2, a.reps))
        torch.cuda.empty_cache()
        with open(os.path.join(a.out, "ab.json"), "w") as f:
            json.dump({"copy_GBps": copy, "rows": rows_out}, f, indent=1)


def copy_bw(torch):
    src = torch.ones(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        ts.append((a, b))
    torch.cuda.synchronize()
    bw = 2 * src.numel() * 4 / (np.median([a.elapsed_time(b) for a, b in ts]) * 1e-3) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    return bw


def split_stage(d, which):
    """Keep only the first ("1") or the last ("2") launch of descriptor d's vector path."""
    from infiniop_py.norm import Seq

    pick = d._kernel.pick
    launches = pick.vec.launches if pick.vec is not None and hasattr(pick.vec, "launches") else None
    if launches:
        pick.vec = Seq(launches[0] if which == "1" else launches[-1])


def run_case(torch, iop, h, op, dt, n, copy, l2, reps):
    F = torch.nn.functional
    tdt = getattr(torch, TDT[dt])
    rows = 8192
    shape = (rows, n)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234 + n)

    def rnd(sh, lo=-2.0, hi=2.0):
        return torch.empty(sh, dtype=tdt, device="cuda").uniform_(lo, hi, generator=gen)

    def make_set():
        x = rnd(shape)
        w = rnd((n,), 0.5, 1.5)
        b = rnd((n,), -0.5, 0.5)
        if op == "rms_norm":
            y = torch.empty(shape, dtype=tdt, device="cuda")
            return [y, x, w], (lambda: F.rms_norm(x, (n,), w, EPS)), [0], (lambda: y.copy_(x))
        if op == "layer_norm":
            bufs = [torch.empty(shape, dtype=tdt, device="cuda"), torch.empty(shape, dtype=tdt, device="cuda"),
                    torch.empty((rows,), dtype=tdt, device="cuda"), x, w, b]  # fmt: skip
            return bufs, (lambda: F.layer_norm(x, (n,), w, b, EPS)), [0], (lambda: bufs[0].copy_(x))
        dy = rnd(shape)
        xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        if op == "rms_norm_backward":
            o = F.rms_norm(xr, (n,), wr, EPS)
            bufs = [torch.empty(shape, dtype=tdt, device="cuda"), torch.empty((n,), dtype=tdt, device="cuda"), dy, x, w]
            return bufs, (lambda: torch.autograd.grad(o, (xr, wr), dy, retain_graph=True)), [0, 1], None
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        std = ((xf - mean).pow(2).mean(-1, keepdim=True) + EPS).sqrt()
        xh = ((xf - mean) / std).to(tdt)
        o = F.layer_norm(xr, (n,), wr, br, EPS)
        bufs = [torch.empty(shape, dtype=tdt, device="cuda"), torch.empty((n,), dtype=tdt, device="cuda"),
                torch.empty((n,), dtype=tdt, device="cuda"), dy, w, xh, std.squeeze(-1).to(tdt)]  # fmt: skip
        return bufs, (lambda: torch.autograd.grad(o, (xr, wr, br), dy, retain_graph=True)), [0, 1, 2], None

    first = make_set()
    set_bytes = sum(t.numel() * t.element_size() for t in first[0])
    nsets = int(max(1, min(16, math.ceil(4 * l2 / set_bytes))))
    sets = [first] + [make_set() for _ in range(nsets - 1)]  # every input exists before any timing
    es = first[0][0].element_size()
    if op == "rms_norm":
        nbytes = 2 * rows * n * es + n * es
    elif op == "layer_norm":
        nbytes = 3 * rows * n * es + rows * es + 2 * n * es
    else:
        nbytes = 3 * rows * n * es
    stream = torch.cuda.current_stream().cuda_stream
    impls, descs = {}, {}
    for var, env in VARIANTS[kind(op)].items():
        set_env(env)
        d = make_desc(iop, h, op, dt, n)
        if var.endswith(("_s1", "_s2")):
            split_stage(d, var[-1])
        ws = torch.empty(max(d.workspace_size, 1), dtype=torch.uint8, device="cuda")
        descs[var] = (d, ws)

        def call(s, d=d, ws=ws, st=None):
            d.calculate(ws, *sets[s][0], stream=stream if st is None else st)

        impls[var] = call
    set_env({})
    ours = list(impls)
    impls["torch"] = lambda s, st=None: sets[s][1]()
    if kind(op) == "fwd":
        impls["copy"] = lambda s, st=None: sets[s][3]()
    names = list(impls)
    ref = sets[0][1]()
    ref = [ref] if not isinstance(ref, (tuple, list)) else list(ref)
    checks = {}
    for var in ours:
        if var.endswith(("_s1", "_s2")):
            checks[var] = {"ok": True, "max_err": None, "det": True, "split": True}
            continue
        for i in sets[0][2]:
            sets[0][0][i].fill_(float("nan"))
        impls[var](0)
        torch.cuda.synchronize()
        ok, worst = True, 0.0
        for j, i in enumerate(sets[0][2]):
            a, e = sets[0][0][i].float(), ref[j].float()
            diff = (a - e).abs()
            at, rt = TOL[dt]
            if i > 0:  # weight grads: sums over 8192 rows, scale the bar
                at, rt = at * 64, rt * 8
            good = (diff <= at) | (diff <= rt * torch.maximum(a.abs(), e.abs()))
            ok = ok and bool(good.all())
            worst = max(worst, float(diff.nan_to_num(1e9).max()))
        det = True
        if kind(op) == "bwd":
            g1 = sets[0][0][1].clone()
            impls[var](0)
            torch.cuda.synchronize()
            iv = torch.int16 if g1.element_size() == 2 else torch.int32
            det = bool(torch.equal(g1.view(iv), sets[0][0][1].view(iv)))
        checks[var] = {"ok": ok, "max_err": worst, "det": det}
    for _ in range(3):
        for nm in names:
            for s in range(nsets):
                impls[nm](s)
    torch.cuda.synchronize()
    ev = {nm: [] for nm in names}
    c, rec = 0, []
    for r in range(reps):
        for nm in names if r % 2 == 0 else names[::-1]:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            impls[nm](c % nsets)
            b.record()
            rec.append((nm, a, b))
            c += 1
    torch.cuda.synchronize()
    for nm, a, b in rec:
        ev[nm].append(a.elapsed_time(b) * 1e3)
    graph = {}
    K = nsets * max(1, 16 // nsets)
    for nm in names:
        if nm == "torch" and kind(op) == "bwd":
            graph[nm] = None
            continue
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for s in range(nsets):
                    impls[nm](s, st=side.cuda_stream)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with captured(torch, g):  # restores the current stream if the capture fails
                cap = torch.cuda.current_stream().cuda_stream
                for k in range(K):
                    impls[nm](k % nsets, st=cap)
            g.replay()
            torch.cuda.synchronize()
            tt = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                g.replay()
                b.record()
                torch.cuda.synchronize()
                tt.append(a.elapsed_time(b) * 1e3 / K)
            graph[nm] = float(np.median(tt))
            del g
        except Exception as exc:  # noqa: BLE001
            graph[nm] = None
            graph[nm + "_err"] = f"{type(exc).__name__}: {str(exc)[:100]}"
    res = {"op": op, "dtype": dt, "n": n, "nsets": nsets, "bytes": nbytes, "checks": checks}
    res["ev_med"] = {nm: float(np.median(v)) for nm, v in ev.items()}
    res["ev_p10"] = {nm: float(np.percentile(v, 10)) for nm, v in ev.items()}
    res["ev_p90"] = {nm: float(np.percentile(v, 90)) for nm, v in ev.items()}
    res["graph"] = graph
    line = f"{op:20s} {dt:4s} {n:5d} |"
    for nm in names:
        e = res["ev_med"][nm]
        gk = graph.get(nm)
        pct = 100 * nbytes / (e * 1e-6) / 1e9 / copy
        gp = 100 * nbytes / (gk * 1e-6) / 1e9 / copy if gk else 0
        line += f" {nm} {e:6.1f} ({pct:3.0f}%) g{'-' if gk is None else round(gk, 1)} ({gp:3.0f}%) |"
    line += " x_torch(ev): " + " ".join(f"{nm}={res['ev_med']['torch'] / res['ev_med'][nm]:.2f}" for nm in ours)
    bad = [k for k, v in checks.items() if not (v["ok"] and v["det"])]
    if bad:
        line += f" CHECK FAIL {bad} {checks}"
    print(line, flush=True)
    for d, _ws in descs.values():
        d.destroy()
    return res


if __name__ == "__main__":
    main()
