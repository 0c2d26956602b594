"""Normalization family against torch eager on the same buffers.

GPU: rms_norm and layer_norm forward and backward on (8192, N), N in 1024, 4096, 8192;
batch_norm forward and backward (training mode) on (64, 256, 4096); f32, f16, bf16.
CPU (``--cpu``): the same ops at (1024, 1024) and (8, 64, 1024).

Peers: ``F.rms_norm`` / ``F.layer_norm`` / ``F.batch_norm(training=True)``; backward peers are
``torch.autograd.grad`` of the same call (graph built once, ``retain_graph=True``, so only the
backward kernels are timed). torch's result tensors replace the peer outputs (their allocation
is what a torch user pays too). The check compares our first output with torch's.

Minimal bytes (the ``traffic`` helper over our buffers): forward reads x (and the [D] / [C]
vectors) and writes every output -- layer_norm also writes input_standardization (a second
full-size stream torch's F.layer_norm does not produce) and the per-row std; backward reads x
(or x̂), dy and writes dx (weight gradients are [D]/[C] vectors, counted too).
"""

from __future__ import annotations

from ..core import BenchCase, Skip, Workload, rotation, traffic

NAME = "norms"
DTYPES = ("f32", "f16", "bf16")
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
EPS = 1e-5
# the check compares against torch's own, differently rounded result (not a float64
# reference): a bar of a few ulps of the dtype
TOL = {"f32": (1e-3, 1e-3), "f16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2)}


def _workload(env, op, make_set, attrs=None):
    """make_set() -> (bufs in calculate order, torch callable returning the peer's first output)."""
    from infiniop_py.registry import resolve

    if resolve(op) is None:
        raise Skip(f"operator '{op}' is not registered")
    first = make_set()
    set_bytes, _ = traffic(reads=[t for t in first[0] if t is not None])
    sets = [first] + [make_set() for _ in range(rotation(env, set_bytes) - 1)]
    descs = [None if t is None else env.descriptor_of(t) for t in first[0]]
    d = _Workspaced(env, env.iop.create_descriptor(op, env.handle, *descs, **(attrs or {})))
    results = {}
    peers = [s[1] for s in sets]

    def run(s):
        results[s] = peers[s]()
        return results[s]

    return Workload(
        descriptor=d,
        buffers=[s[0] for s in sets],
        torch_eager=run,
        out_torch=results,
        inputs=[() for _ in sets],
        attrs=dict(attrs or {}),
    )


class _Workspaced:
    """Our descriptor with its workspace allocated once: the shared ``ours_call`` passes
    ``None`` as the workspace, which the backward passes and batch_norm (scratch partials)
    cannot take."""

    def __init__(self, env, d):
        self.d = d
        self.workspace_size = d.workspace_size
        n = max(d.workspace_size, 1)
        self.ws = env.torch.empty(n, dtype=env.torch.uint8, device=env.device) if d.workspace_size else None
        if self.ws is not None and not env.gpu:
            self.ws = self.ws.numpy()

    def calculate(self, ws, *args, **kw):
        return self.d.calculate(self.ws, *args, **kw)

    def destroy(self):
        self.d.destroy()


def _grad(torch, out, wrt, dy):
    """A callable re-running only the backward of ``out`` (built once) for upstream ``dy``."""

    def peer():
        return torch.autograd.grad(out, wrt, dy, retain_graph=True)[0]

    return peer


def _rms_norm(env, torch, tdt, shape, x, w, b):
    y = env.poisoned(shape, tdt)
    return [y, x, w], lambda: torch.nn.functional.rms_norm(x, shape[-1:], w, EPS)


def _layer_norm(env, torch, tdt, shape, x, w, b):
    bufs = [env.poisoned(shape, tdt), env.poisoned(shape, tdt), env.poisoned(shape[:-1], tdt), x, w, b]
    return bufs, lambda: torch.nn.functional.layer_norm(x, shape[-1:], w, b, EPS)


def _rms_norm_backward(env, torch, tdt, shape, x, w, b):
    n = shape[-1]
    dy = env.random(shape, tdt)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = torch.nn.functional.rms_norm(xr, (n,), wr, EPS)
    bufs = [env.poisoned(shape, tdt), env.poisoned((n,), tdt), dy, x, w]
    return bufs, _grad(torch, out, (xr, wr), dy)


def _layer_norm_backward(env, torch, tdt, shape, x, w, b):
    n = shape[-1]
    dy = env.random(shape, tdt)
    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    # x̂ and std as the forward produces them
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    std = ((xf - mean).pow(2).mean(-1, keepdim=True) + EPS).sqrt()
    xh = ((xf - mean) / std).to(tdt)
    out = torch.nn.functional.layer_norm(xr, (n,), wr, br, EPS)
    bufs = [env.poisoned(shape, tdt), env.poisoned((n,), tdt), env.poisoned((n,), tdt), dy, w, xh, std.squeeze(-1).to(tdt)]
    return bufs, _grad(torch, out, (xr, wr, br), dy)


# The row-wise norms: operator -> (its buffers and torch peer from x, w, b; its attributes).
ROW_OPS = {
    "rms_norm": (_rms_norm, {"epsilon": EPS}),
    "layer_norm": (_layer_norm, {"eps": EPS}),
    "rms_norm_backward": (_rms_norm_backward, {"epsilon": EPS}),
    "layer_norm_backward": (_layer_norm_backward, {}),
}


def row_case(op: str, dtype: str, shape: tuple, quick=False) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        n = shape[-1]
        make, attrs = ROW_OPS[op]

        def make_set():
            x = env.random(shape, tdt)
            w = env.random((n,), tdt, 0.5, 1.5)
            b = env.random((n,), tdt, -0.5, 0.5)
            return make(env, torch, tdt, shape, x, w, b)

        work = _workload(env, op, make_set, attrs)
        work.atol, work.rtol = TOL[dtype]
        return work

    name = "x".join(str(d) for d in shape)
    return BenchCase(NAME, op, name, dtype, shape, build, quick=quick, compile=False)


def bn_case(op: str, dtype: str, shape: tuple, quick=False) -> BenchCase:
    def build(env):
        torch = env.torch
        F = torch.nn.functional
        tdt = getattr(torch, TDT[dtype])
        c = shape[1]

        def make_set():
            x = env.random(shape, tdt, 1.0, 3.0)
            w = env.random((c,), tdt, 0.5, 1.5)
            b = env.random((c,), tdt, -0.5, 0.5)
            rm, rv = torch.zeros(c, dtype=tdt, device=x.device), torch.ones(c, dtype=tdt, device=x.device)
            if op == "batch_norm":
                rm2, rv2 = rm.clone(), rv.clone()
                bufs = [env.poisoned(shape, tdt), rm, rv, x, w, b]
                return bufs, lambda: F.batch_norm(x, rm2, rv2, w, b, training=True, momentum=0.1, eps=EPS)
            dy = env.random(shape, tdt)
            xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
            out = F.batch_norm(xr, rm.clone(), rv.clone(), wr, br, training=True, momentum=0.1, eps=EPS)
            bufs = [env.poisoned(shape, tdt), env.poisoned((c,), tdt), env.poisoned((c,), tdt), x, dy, w, rm, rv]
            return bufs, _grad(torch, out, (xr, wr, br), dy)

        work = _workload(env, op, make_set, {"eps": EPS})
        work.atol, work.rtol = TOL[dtype]
        return work

    name = "x".join(str(d) for d in shape)
    return BenchCase(NAME, op, name, dtype, shape, build, quick=quick, compile=False)


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    ns = (1024, 4096, 8192) if env.gpu else (1024,)
    rows = 8192 if env.gpu else 1024
    for op in ROW_OPS:
        for dt in DTYPES:
            for n in ns:
                out.append(row_case(op, dt, (rows, n), quick=n == 4096 or not env.gpu))
    bshape = (64, 256, 4096) if env.gpu else (8, 64, 1024)
    for op in ("batch_norm", "batch_norm_backward"):
        for dt in DTYPES:
            out.append(bn_case(op, dt, bshape, quick=True))
    return out
