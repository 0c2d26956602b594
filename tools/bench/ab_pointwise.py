"""A/B timing for the pointwise family: kernel variants (selected by env switches read at create)
interleaved with torch eager in one process, CUDA events, medians, every output checked.

    python3 -m tools.bench.ab_pointwise [dense|tanh|rope|confirm|all] ...   (OUT=dir for ab.jsonl)

Switches: IOP_EW_DENSE (elementwise dense kernel shape), IOP_PW_OLD (an op's previous
expression), IOP_ROPE (rope kernel). AB_REPS repetitions (default 60); AB_CPU=1 for a smoke run.
"""

import json
import os
import statistics
import sys
import time

import torch

from tools.bench.core import graph_times as core_graph_times
from tools.bench.core import switches
from tools.bench.env import make_env

REPS = int(os.environ.get("AB_REPS", "60"))
OUT = os.environ.get("OUT", ".")
SMOKE = os.environ.get("AB_CPU") == "1"
env = make_env(cpu=SMOKE)
iop = env.iop
copy = env.copy_bandwidth()
copy_gbps = copy.get("GBps") or copy.get("gbps") or list(copy.values())[0]
print("copy", copy, flush=True)
log = open(os.path.join(OUT, "ab.jsonl"), "a")
TDT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
A = torch.ops.aten
SWITCHES = ("IOP_EW_DENSE", "IOP_PW_OLD", "IOP_ROPE")


def create(op, tensors, attrs, cfg):
    with switches(cfg, clear=SWITCHES):
        return iop.create_descriptor(op, env.handle, *[env.descriptor_of(t) for t in tensors], **attrs)


def graph_times(fns, ns, k=32, rounds=25):
    """Kernel-only µs per call (:func:`tools.bench.core.graph_times`) for name -> fn(s, stream)."""
    side = torch.cuda.Stream()
    wrapped = {n: (lambda s, f=f: f(s, side.cuda_stream)) for n, f in fns.items()}
    return core_graph_times(env, wrapped, ns, k, rounds, side=side)


def bench(label, op, sets, torch_fn, configs, attrs=None, nbytes=None, tol=None, extra=None, graph=False):
    """sets: list of [out, *ins] torch tensors; torch_fn(out, *ins) writes out. extra: name ->
    fn(s) timed alongside, not checked (e.g. a copy of the same bytes); graph: also CUDA-graph
    replay times (ours, torch and extra)."""
    t0 = time.time()
    impls, outs, paths, on_stream = {}, {}, {}, {}
    for name, cfg in configs:
        try:
            d = create(op, sets[0], attrs or {}, cfg)
        except Exception as exc:  # noqa: BLE001
            print(label, name, "create failed", exc, flush=True)
            continue
        k = getattr(d, "kernel", None) or getattr(d, "_kernel", None)
        paths[name] = getattr(k, "path", None) or getattr(k, "shape", None)
        bufs = [[t if i else torch.empty_like(t) for i, t in enumerate(s)] for s in sets]
        outs[name] = bufs
        conv = [[env.ours(t) for t in b] for b in bufs]
        impls[name] = lambda s, d=d, conv=conv: d.calculate(None, *conv[s], stream=env.stream)
        on_stream[name] = lambda s, st, d=d, conv=conv: d.calculate(None, *conv[s], stream=st)
    tout = [torch.empty_like(s[0]) for s in sets]
    impls["torch"] = lambda s: torch_fn(tout[s], *sets[s][1:])
    on_stream["torch"] = lambda s, st: torch_fn(tout[s], *sets[s][1:])
    for name, fn in (extra or {}).items():
        impls[name] = fn
        on_stream[name] = lambda s, st, fn=fn: fn(s)
    ns = len(sets)
    for f in impls.values():
        for i in range(3):
            f(i % ns)
    env.sync()
    names = list(impls)
    calls, labels = [], []
    c = 0
    for r in range(REPS):
        for n in names if r % 2 == 0 else names[::-1]:
            calls.append((n, lambda n=n, s=c % ns: impls[n](s)))
            labels.append(n)
            c += 1
    times = env.time_calls(calls)
    per = {n: [] for n in names}
    for n, t in zip(labels, times):
        per[n].append(t)
    med = {n: statistics.median(v) for n, v in per.items()}
    if nbytes is None:
        nbytes = sum(t.numel() * t.element_size() for t in sets[0])
    row = {"case": label, "bytes": nbytes, "med_us": med, "copy_GBps": copy_gbps, "paths": paths}
    checks = {}
    for n in outs:
        a, b = outs[n][0][0].double(), tout[0].double()
        err = (a - b).abs()
        checks[n] = (err.max().item(), torch.allclose(a, b, atol=tol or 1e-3, rtol=tol or 1e-3, equal_nan=True))
    row["check"] = checks
    row["p10_us"] = {n: sorted(v)[len(v) // 10] for n, v in per.items()}
    row["p90_us"] = {n: sorted(v)[(9 * len(v)) // 10] for n, v in per.items()}
    gr = {}
    if graph and not SMOKE:
        gr = graph_times({n: on_stream[n] for n in names}, ns)
        row["graph_us"] = gr
    log.write(json.dumps(row) + "\n")
    log.flush()
    line = f"{label:22s}"
    for n in names:
        pct = 100 * nbytes / (med[n] * 1e-6) / 1e9 / copy_gbps
        x = med["torch"] / med[n]
        ok = "" if n == "torch" or n not in checks or checks[n][1] else " FAIL"
        line += f" | {n} {med[n]:.1f} {pct:.0f}% {x:.2f}x{ok}"
    print(line + f"  ({time.time() - t0:.1f}s)", flush=True)
    if gr:
        line = f"{'  graph':22s}"
        for n in names:
            if n in gr:
                line += f" | {n} {gr[n]:.1f} {100 * nbytes / (gr[n] * 1e-6) / 1e9 / copy_gbps:.0f}%"
        print(line + "".join(f" | {k} {v}" for k, v in gr.items() if k.endswith("_error")), flush=True)


NEW_SHAPES = ["vec1m8", "ex1", "ex2", "ex4", "ex2w"]
UN = {
    "gelu": lambda o, x: A.gelu.out(x, out=o),
    "sigmoid": lambda o, x: torch.sigmoid(x, out=o),
    "silu": lambda o, x: A.silu.out(x, out=o),
    "tanh": lambda o, x: torch.tanh(x, out=o),
    "exp": lambda o, x: torch.exp(x, out=o),
    "relu": lambda o, x: torch.clamp_min(x, 0, out=o),
}
BIG = (64, 64) if SMOKE else (8192, 8192)


def tol_of(dt):
    return 1e-2 if dt == "bf16" else 2e-3 if dt == "f16" else 1e-5


def shape_cfgs(extra=None):
    return [("cur", dict(extra or {}))] + [(s, {"IOP_EW_DENSE": s, **(extra or {})}) for s in NEW_SHAPES]


def unary(op, dt):
    x = env.random(BIG, TDT[dt])
    cfgs = shape_cfgs()
    if op == "tanh" and dt == "f16":
        cfgs = [("old-cur", {"IOP_PW_OLD": "tanh16"}), ("old-ex4", {"IOP_PW_OLD": "tanh16", "IOP_EW_DENSE": "ex4"})] + cfgs
    bench(f"{op} {dt}", op, [[torch.empty_like(x), x]], UN[op], cfgs, tol=tol_of(dt))


def binary(op, dt):
    x, g = env.random(BIG, TDT[dt]), env.random(BIG, TDT[dt])
    fn = {
        "gelu_backward": lambda o, x, g: A.gelu_backward.grad_input(g, x, grad_input=o),
        "add": lambda o, a, b: torch.add(a, b, out=o),
    }[op]
    bench(f"{op} {dt}", op, [[torch.empty_like(x), x, g]], fn, shape_cfgs(), tol=tol_of(dt))


def rope(dt, algo):
    seq, nh, dh = (64, 4, 16) if SMOKE else (4096, 32, 128)
    half = dh // 2
    sets = []
    for _ in range(4):
        x = env.random((seq, nh, dh), TDT[dt])
        pos = torch.randperm(seq, device=env.device).to(torch.int32)
        ang = torch.rand(seq, half, device=env.device) * 6.28
        sets.append([torch.empty_like(x), x, pos, ang.sin().to(TDT[dt]), ang.cos().to(TDT[dt])])

    def eager(o, x, pos, sin, cos):
        p = pos.long()
        c = cos[p].unsqueeze(1)
        s = sin[p].unsqueeze(1)
        if algo == 1:
            c2, s2 = torch.cat((c, c), -1), torch.cat((-s, s), -1)
            rot = torch.cat((x[..., half:], x[..., :half]), -1)
            torch.addcmul(x * c2, rot, s2, out=o)
        else:
            x0, x1 = x[..., 0::2], x[..., 1::2]
            torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1, out=o.view(seq, nh, half, 2))

    isz = torch.tensor([], dtype=TDT[dt]).element_size()
    nbytes = 2 * seq * nh * dh * isz + seq * (4 + 2 * half * isz)
    from ops.rope.cuda import PREVIOUS_BY

    prev = PREVIOUS_BY.get((algo, min(isz, 4)), "pers2")
    cfgs = [(s, {} if s == "merged" else {"IOP_ROPE": prev if s == "prev" else s}) for s in ROPE_SHAPES]
    # the same x -> y bytes as a plain copy: what a transfer of this size reaches (no table)
    ys = [torch.empty_like(s[1]) for s in sets]
    extra = {"copy": lambda s: ys[s].copy_(sets[s][1])}
    bench(f"rope {dt} {'NEOX' if algo else 'J'}", "rope", sets, eager, cfgs, attrs={"algo": algo}, nbytes=nbytes,
          tol=1e-2, extra=extra, graph=True)  # fmt: skip


# round 3: pers2 (the previous default) against rope_heads (exact grid, U heads per thread);
# round 4: rope_grid (32-bit offsets, grid (head chunks, rows)) g1/g2/g1b/g2b/g1c against the
# round-3 defaults; "merged" = no IOP_ROPE (the per-dtype default), "prev" = the round-3 default
ROPE_SHAPES = tuple(os.environ.get("AB_ROPE_SHAPES", "prev,merged,g2,g2b,g4,g2s,g2r").split(","))
# dense shapes before this round's DENSE_BY_OP entries (the "confirm" A/B: previous vs merged)
PREVIOUS = {"gelu": "pipe", "gelu_backward": "pipe", "sigmoid": "vec2", "silu": "vec2"}


def confirm():
    for dt in ("f32", "f16", "bf16"):
        for op in ("exp", "relu", "sigmoid", "silu", "gelu", "tanh", "gelu_backward"):
            prev = {"IOP_EW_DENSE": PREVIOUS.get(op, "vec1m8")}
            cfgs = [("prev", prev), ("merged", {})]
            if op == "tanh" and dt == "f16":
                cfgs = [("prev-oldexpr", {**prev, "IOP_PW_OLD": "tanh16"}), ("prev", prev),
                        ("merged-oldexpr", {"IOP_PW_OLD": "tanh16"}), ("merged", {})]  # fmt: skip
            if op == "gelu_backward":
                x, g = env.random(BIG, TDT[dt]), env.random(BIG, TDT[dt])
                fn = lambda o, x, g: A.gelu_backward.grad_input(g, x, grad_input=o)  # noqa: E731
                bench(f"{op} {dt}", op, [[torch.empty_like(x), x, g]], fn, cfgs, tol=tol_of(dt))
            else:
                x = env.random(BIG, TDT[dt])
                bench(f"{op} {dt}", op, [[torch.empty_like(x), x]], UN[op], cfgs, tol=tol_of(dt))


which = sys.argv[1:] or ["all"]
if "confirm" in which:
    confirm()
if "tanh" in which or "all" in which:
    unary("tanh", "f16")
if "rope" in which or "all" in which:
    for dt in ("f16", "bf16", "f32"):
        rope(dt, 1)
        rope(dt, 0)
if "dense" in which or "all" in which:
    for dt in ("f32", "f16"):
        for op in ("exp", "relu", "sigmoid", "silu", "gelu", "tanh"):
            if not (op == "tanh" and dt == "f16"):
                unary(op, dt)
        binary("gelu_backward", dt)
        binary("add", dt)
    for op in ("exp", "sigmoid", "gelu"):
        unary(op, "bf16")
