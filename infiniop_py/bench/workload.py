"""A benchmark case and what it runs (docs/perf/method.md): :class:`BenchCase` (one row),
:class:`Workload` (our descriptor, the rotating buffer sets and the torch peer on the same
buffers), :func:`standard_workload` (the common kind), our call (:func:`ours_call`) and the
work counted per call (:func:`traffic`, :func:`rotation`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .env import GIB, MIB, Env

ROTATE_MIN_BYTES = 8 * MIB  # below this a case runs L2-resident, as it would in a real chain of small ops
ROTATE_FACTOR = 4  # rotated sets cover at least this many times the L2
MAX_SETS = 64
MAX_ROTATION_BYTES = 8 * GIB


# --------------------------------------------------------------------------------------------
# Counting work
# --------------------------------------------------------------------------------------------
def unique_elements(shape, strides) -> int:
    """Distinct memory elements a view addresses (zero-stride dims count once; no self-overlap)."""
    return math.prod(d for d, s in zip(shape, strides) if s != 0) if all(d > 0 for d in shape) else 0


def traffic(reads=(), writes=(), flops: int = 0) -> tuple[int, int]:
    """Minimal (bytes, flops) of one call: each input read once, each output written once.

    ``reads`` and ``writes`` are torch tensors (views); a broadcast input counts its distinct
    elements only, a transposed one all of them.
    """
    total = 0
    for t in (*reads, *writes):
        total += unique_elements(t.shape, t.stride()) * t.element_size()
    return total, int(flops)


def stats(times_us) -> dict:
    a = np.asarray(times_us, dtype=np.float64)
    return {
        "median": float(np.median(a)),
        "p10": float(np.percentile(a, 10)),
        "p90": float(np.percentile(a, 90)),
        "min": float(a.min()),
        "n": int(a.size),
    }


def rotation(env: Env, set_bytes: int) -> int:
    """How many input sets to rotate through so that no call finds its inputs in L2: at least two,
    since the tail of a single set, however large, is still in L2 when the next call (the other
    implementation's, interleaved) starts on it."""
    if not env.gpu or set_bytes < ROTATE_MIN_BYTES:
        return 1
    need = max(2, math.ceil(ROTATE_FACTOR * env.l2_bytes / set_bytes))
    return int(max(1, min(need, MAX_SETS, MAX_ROTATION_BYTES // max(set_bytes, 1))))


# --------------------------------------------------------------------------------------------
# Cases and workloads
# --------------------------------------------------------------------------------------------
class Skip(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a case's ``build`` when it cannot run here (operator not registered, no dtype)."""


@dataclass
class Workload:
    """Everything one case runs, on ``nsets`` rotating buffer sets.

    descriptor: ours, created once; ``buffers[s]`` are the torch tensors of set ``s`` in
    calculate's order (outputs, then inputs); ``torch_eager(s)`` writes ``out_torch[s]``;
    ``torch_fn(*inputs[s])`` is the pure function handed to torch.compile.
    ``out_index`` is which of ``buffers[s]`` is checked against ``out_torch[s]``.
    """

    descriptor: Any
    buffers: list
    torch_eager: Callable[[int], Any]
    out_torch: list
    inputs: list
    torch_fn: Callable | None = None
    out_index: int = 0
    exact: bool = False
    atol: float = 0.0
    rtol: float = 0.0
    runtime: tuple = ()
    keep: list = field(default_factory=list)  # anything that must outlive the case (base tensors)
    workspace: Any = None  # allocated by ours_call when the descriptor asks for one
    nbytes: int | None = None  # minimal bytes when more than the inputs + the checked output move
    # check(s, ok, detail) -> (ok, detail): a second look at set s after the comparison with torch
    # (e.g. selections where near-ties may legitimately order differently from torch's)
    recheck: Callable[[int, bool, str], tuple[bool, str]] | None = None
    attrs: dict | None = None  # the attributes our descriptor was created with (for the float64 reference)
    # make(jax) -> f(*jax_inputs): the case in JAX, jitted as the ``jax`` peer (inputs[s] converted)
    jax_fn: Callable | None = None
    peers: dict = field(default_factory=dict)  # a suite's own peers: name -> peers.Peer
    peer_notes: dict = field(default_factory=dict)  # name -> why a peer of this case is absent

    @property
    def nsets(self) -> int:
        return len(self.buffers)

    def release(self) -> None:
        if self.descriptor is not None:
            self.descriptor.destroy()
            self.descriptor = None
        self.buffers = self.out_torch = self.inputs = self.keep = []
        self.workspace = None
        self.peers = {}


@dataclass
class BenchCase:
    """One benchmark row: ``build(env)`` returns the Workload (allocating its buffers)."""

    suite: str
    op: str
    case: str
    dtype: str
    shape: tuple
    build: Callable[[Env], Workload]
    host_wall: bool = False
    quick: bool = False
    compile: bool = True  # whether torch.compile is a meaningful peer here
    notes: str = ""
    flops: int = 0  # floating-point operations of one call (matrix ops): adds TFLOP/s to the row


def ours_call(env: Env, work: Workload, kind: str = "tensor", stream=None) -> Callable[[int], None]:
    """``f(s)``: our calculate on set ``s``, buffers converted once up front (``Env.ours``).

    On the GPU each call launches on torch's current stream *as it is at the call*
    (:meth:`Env.current_stream`), the stream torch's ops and the timing events go to; ``stream``
    pins one instead.
    """
    calc = work.descriptor.calculate
    bufs = [[None if t is None else env.ours(t, kind) for t in tensors] for tensors in work.buffers]
    rt = tuple(work.runtime)
    size = int(getattr(work.descriptor, "workspace_size", 0) or 0)
    ws = None
    if size:
        if work.workspace is None:  # one workspace serves every set (calls are ordered on one stream)
            work.workspace = env.torch.empty(size, dtype=env.torch.uint8, device=env.device)
        ws = env.ours(work.workspace, kind)
    if env.gpu and stream is not None:

        def run(s):
            calc(ws, *bufs[s], *rt, stream=stream)
    elif env.gpu:
        current = env.current_stream

        def run(s):
            calc(ws, *bufs[s], *rt, stream=current())
    else:

        def run(s):
            calc(ws, *bufs[s], *rt)

    return run


# --------------------------------------------------------------------------------------------
# Building the common kind of workload
# --------------------------------------------------------------------------------------------
def standard_workload(
    env: Env,
    op: str,
    make_set: Callable[[], tuple[list, tuple]],
    eager: Callable[..., Any],
    torch_fn: Callable | None = None,
    attrs: dict | None = None,
    exact: bool = False,
    assign: bool = False,
    descs: list | None = None,
) -> Workload:
    """A workload with one output: ``make_set() -> (outputs_and_inputs, torch_inputs)``.

    ``outputs_and_inputs`` are torch tensors in calculate's order (the output first);
    ``eager(out, *torch_inputs)`` is torch's call writing ``out`` (a second output buffer of the
    same layout, so ours and torch never share a result); with ``assign``, ``eager(*torch_inputs)``
    returns torch's result instead (peers without an ``out=`` form). ``torch_fn(*torch_inputs)``
    is the pure function for torch.compile. ``descs`` overrides the tensor descriptors derived
    from the first set. Sets are added until they cover the rotation; a workspace, if the
    descriptor needs one, is allocated once by ``ours_call``.
    """
    from infiniop_py.registry import resolve

    if resolve(op) is None:
        raise Skip(f"operator '{op}' is not registered")

    def one():
        bufs, inputs = make_set()
        out = bufs[0]
        peer = env.torch.empty_strided(tuple(out.shape), tuple(out.stride()), dtype=out.dtype, device=out.device)
        env.poison(peer)
        return bufs, inputs, peer

    first = one()
    set_bytes, _ = traffic(reads=[t for t in first[0] if t is not None], writes=[first[2]])
    sets = [first] + [one() for _ in range(rotation(env, set_bytes) - 1)]
    descs = descs or [None if t is None else env.descriptor_of(t) for t in first[0]]
    d = env.iop.create_descriptor(op, env.handle, *descs, **(attrs or {}))
    outs = [s[2] for s in sets]
    ins = [s[1] for s in sets]
    if assign:

        def run(s):
            outs[s] = eager(*ins[s])
    else:

        def run(s):
            eager(outs[s], *ins[s])

    return Workload(
        descriptor=d,
        buffers=[s[0] for s in sets],
        torch_eager=run,
        out_torch=outs,
        inputs=ins,
        torch_fn=torch_fn,
        exact=exact,
        attrs=dict(attrs or {}),
    )


def elementwise_ops(tensors: tuple[str, ...]) -> list:
    """The registered operators of the elementwise framework whose tensors are ``tensors``
    (outputs first) and which take f32 / f16 / bf16 for every one of them (their OpSpecs, by
    name): what a pointwise suite benchmarks, without a list to keep."""
    from infiniop_py import create_handle, create_tensor_descriptor
    from infiniop_py.descriptor import create_descriptor
    from infiniop_py.dtypes import DType
    from infiniop_py.registry import all_specs
    from infiniop_py.status import InfiniopError

    handle = create_handle("cpu")
    out = []
    for spec in all_specs():
        if spec.kernel_sources[:1] != ("<elementwise>",) or tuple(t.name for t in spec.tensors) != tuple(tensors):
            continue
        try:
            for dt in (DType.F32, DType.F16, DType.BF16):
                create_descriptor(spec.name, handle, *[create_tensor_descriptor((2, 2), None, dt) for _ in tensors]).destroy()
        except InfiniopError:
            continue
        out.append(spec)
    return out
