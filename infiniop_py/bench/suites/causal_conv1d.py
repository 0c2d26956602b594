"""Causal conv1d family (ops.md §7) against torch eager and Dao-AILab causal-conv1d.

GPU: the seed report's ten configurations -- (batch, dim, seqlen) = (2, 64, 128), (4, 256, 512),
(8, 2048, 1024), (4, 256, 4096), (4, 4096, 512), width 4, each with and without SiLU -- in the
channel-first layout (x contiguous) and the channel-last one (x, out, dout and dx stored as
(B, L, D)), f32 and bf16: ``causal_conv1d`` forward and ``causal_conv1d_backward``
(deterministic: dx, dweight, dbias); ``causal_conv1d_update`` for B=64, D=4096, W=4, one token.
The two smallest configurations and the update also time the host wall per call.
CPU (``--cpu``): the Small and Medium configurations and an update with B=8, D=512.

Peers:
- torch eager: ``F.conv1d(x, w.unsqueeze(1), bias, padding=W-1, groups=D)[..., :L]`` (then
  ``F.silu``); the backward is ``torch.autograd.grad`` of that (graph built once,
  ``retain_graph=True``, so only the backward kernels are timed); the update concatenates state
  and token, applies ``F.conv1d`` and copies the new state back.
- ``dao``: Dao-AILab causal-conv1d where it imports (GPU): ``causal_conv1d_fn``; the backward
  through ``causal_conv1d.cpp_functions.causal_conv1d_bwd_function`` (its extension's
  ``causal_conv1d_bwd``, atomic f32 dweight/dbias zero-filled per call as a user's call does;
  autograd through ``causal_conv1d_fn`` where that module is absent); ``causal_conv1d_update``.
  Where the package is absent the peer is skipped with a note.

Checked output: out (forward, update) and dx (backward). Minimal bytes: the forward reads x (and
weight, bias) and writes out; the backward reads x and dout (and the [D, W] vectors) and writes
dx, dweight, dbias; the update reads x and writes out, and reads and writes conv_state.
"""

from __future__ import annotations

from infiniop_py.testing.causal_cases import SEED

from ..core import BenchCase, Skip, Workload, rotation, standard_workload, traffic
from ..peers import Peer, optional

NAME = "causal_conv1d"
PEERS = ("dao",)
DTYPES = ("f32", "bf16")
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
W = 4
HOST_WALL = ("Small", "Medium")
QUICK = ("Small", "Large Mamba")
CF, CL = "channel-first", "channel-last"
UPDATE_GPU, UPDATE_CPU = (64, 4096), (8, 512)
# the check compares with torch's own, differently ordered result: a few ulps of the dtype
TOL = {"f32": (1e-4, 1e-4), "f16": (2e-3, 2e-3), "bf16": (2e-2, 2e-2)}


def _dao(env):
    """(the causal_conv1d module, None) on the GPU, else (None, why the peer is absent)."""
    if not env.gpu:
        return None, "GPU only"
    return optional("causal_conv1d")


def _conv(torch, silu: bool):
    F = torch.nn.functional  # noqa: N806

    def conv(x, w, b):
        y = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., : x.shape[2]]
        return F.silu(y) if silu else y

    return conv


def _lay(env, shape, tdt, layout, poisoned=False):
    """A (B, D, L) tensor stored channel-first, or channel-last ((B, L, D) storage)."""
    b, d, n = shape
    make = env.poisoned if poisoned else env.random
    if layout == CL:
        return make((b, n, d), tdt).transpose(1, 2)
    return make(shape, tdt)


def _own_workload(env, op, sets, attrs, dtype, dao, why) -> Workload:
    """A workload over ``sets`` = [(buffers in calculate order, torch eager call, Dao call)]: our
    descriptor from the first set's layouts, torch's and Dao's calls returning the checked output."""
    descs = [None if t is None else env.descriptor_of(t) for t in sets[0][0]]
    desc = env.iop.create_descriptor(op, env.handle, *descs, **attrs)
    results = {}

    def run(s):
        results[s] = sets[s][1]()
        return results[s]

    work = Workload(
        descriptor=desc,
        buffers=[s[0] for s in sets],
        torch_eager=run,
        out_torch=results,
        inputs=[() for _ in sets],
        attrs=attrs,
    )
    work.atol, work.rtol = TOL[dtype]
    if dao is None:
        work.peer_notes["dao"] = why
    else:
        work.peers["dao"] = Peer(lambda s: sets[s][2]())
    return work


def _tag(name, shape, layout, silu):
    return f"{name} {'x'.join(map(str, shape))} W{W} {layout}" + (" SiLU" if silu else "")


def forward_case(name, shape, layout, silu, dtype, quick=False, host_wall=False) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        conv = _conv(torch, silu)
        d = shape[1]

        def make_set():
            x = _lay(env, shape, tdt, layout)
            w, b = env.random((d, W), tdt, -1.0, 1.0), env.random((d,), tdt, -1.0, 1.0)
            return [_lay(env, shape, tdt, layout, poisoned=True), None, x, w, b, None, None], (x, w, b)

        attrs = {"activation": "silu" if silu else "none"}
        work = standard_workload(env, "causal_conv1d", make_set, conv, conv, attrs=attrs, assign=True)
        work.atol, work.rtol = TOL[dtype]
        dao, why = _dao(env)
        if dao is None:
            work.peer_notes["dao"] = why
        else:
            ins = work.inputs
            act = "silu" if silu else None
            work.peers["dao"] = Peer(lambda s: dao.causal_conv1d_fn(*ins[s], activation=act))
        return work

    return BenchCase(
        NAME, "causal_conv1d", _tag(name, shape, layout, silu), dtype, shape, build, quick=quick, host_wall=host_wall
    )


def backward_case(name, shape, layout, silu, dtype, quick=False, host_wall=False) -> BenchCase:
    def build(env):
        from infiniop_py.registry import resolve

        if resolve("causal_conv1d_backward") is None:
            raise Skip("operator 'causal_conv1d_backward' is not registered")
        torch = env.torch
        tdt = getattr(torch, TDT[dtype])
        conv = _conv(torch, silu)
        d = shape[1]
        dao, why = _dao(env)
        dao_bwd = None
        if dao is not None:
            try:
                from causal_conv1d.cpp_functions import causal_conv1d_bwd_function as dao_bwd
            except Exception:  # older releases: autograd through causal_conv1d_fn
                dao_bwd = None

        def make_set():
            x, dout = _lay(env, shape, tdt, layout), _lay(env, shape, tdt, layout)
            w, b = env.random((d, W), tdt, -1.0, 1.0), env.random((d,), tdt, -1.0, 1.0)
            xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
            y = conv(xr, wr, br)
            bufs = [
                _lay(env, shape, tdt, layout, poisoned=True),
                env.poisoned((d, W), tdt),
                env.poisoned((d,), tdt),
                None,
                x,
                w,
                b,
                dout,
                None,
                None,
            ]

            def eager():
                return torch.autograd.grad(y, (xr, wr, br), dout, retain_graph=True)[0]

            dao_call = None
            if dao is not None and dao_bwd is not None:

                def dao_call():
                    return dao_bwd(x, w, b, dout, None, None, None, None, False, silu)[0]
            elif dao is not None:
                xd, wd, bd = (t.detach().clone().requires_grad_() for t in (x, w, b))
                yd = dao.causal_conv1d_fn(xd, wd, bd, activation="silu" if silu else None)

                def dao_call():
                    return torch.autograd.grad(yd, (xd, wd, bd), dout, retain_graph=True)[0]

            return bufs, eager, dao_call

        first = make_set()
        set_bytes, _ = traffic(reads=[t for t in first[0] if t is not None])
        sets = [first] + [make_set() for _ in range(rotation(env, set_bytes) - 1)]
        attrs = {"activation": "silu" if silu else "none", "deterministic": True}
        return _own_workload(env, "causal_conv1d_backward", sets, attrs, dtype, dao, why)

    return BenchCase(
        NAME, "causal_conv1d_backward", _tag(name, shape, layout, silu), dtype, shape, build, quick=quick, host_wall=host_wall,
        compile=False, notes="deterministic",
    )  # fmt: skip


def update_case(shape, silu, dtype, quick=False) -> BenchCase:
    bsz, d = shape

    def build(env):
        from infiniop_py.registry import resolve

        if resolve("causal_conv1d_update") is None:
            raise Skip("operator 'causal_conv1d_update' is not registered")
        torch = env.torch
        F = torch.nn.functional  # noqa: N806
        tdt = getattr(torch, TDT[dtype])
        dao, why = _dao(env)

        def make_set():
            x = env.random((bsz, d), tdt)
            w, b = env.random((d, W), tdt, -1.0, 1.0), env.random((d,), tdt, -1.0, 1.0)
            state = env.random((bsz, d, W - 1), tdt)
            # each implementation decodes into its own state: after W-1 calls on the same token
            # every state holds it, so the outputs agree however often each one ran
            tstate, dstate = state.clone(), state.clone()

            def eager():
                full = torch.cat([tstate, x.unsqueeze(-1)], dim=-1)
                y = F.conv1d(full, w.unsqueeze(1), b, groups=d)[..., -1]
                tstate.copy_(full[..., 1:])
                return F.silu(y) if silu else y

            def dao_call():
                return dao.causal_conv1d_update(x, dstate, w, b, activation="silu" if silu else None)

            return [env.poisoned((bsz, d), tdt), state, x, w, b, None], eager, dao_call

        sets = [make_set()]
        attrs = {"activation": "silu" if silu else "none"}
        work = _own_workload(env, "causal_conv1d_update", sets, attrs, dtype, dao, why)
        out, state, x = sets[0][0][:3]
        work.nbytes = traffic(reads=[x, state, *sets[0][0][3:5]], writes=[out, state])[0]
        return work

    return BenchCase(
        NAME, "causal_conv1d_update", f"B{bsz} D{d} W{W} T1" + (" SiLU" if silu else ""), dtype, (bsz, d, W), build,
        quick=quick, host_wall=True, compile=False,
    )  # fmt: skip


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    names = tuple(SEED) if env.gpu else HOST_WALL
    for dt in DTYPES:
        for name in names:
            shape = SEED[name]
            for layout in (CF, CL):
                for silu in (False, True):
                    q = name in QUICK and not silu and (dt == "bf16" or name == "Small")
                    hw = name in HOST_WALL and not silu
                    out.append(forward_case(name, shape, layout, silu, dt, quick=q, host_wall=hw))
                    out.append(backward_case(name, shape, layout, silu, dt, quick=q, host_wall=hw))
        for silu in (False, True):
            out.append(update_case(UPDATE_GPU if env.gpu else UPDATE_CPU, silu, dt, quick=not silu))
    return out
