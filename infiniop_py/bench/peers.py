"""The implementations ours is measured against (docs/perf/method.md, "Peers").

``torch`` (eager, always: the checks and every ``x torch`` use it), ``compile`` (torch.compile of
the case's pure function), ``jax`` (``jax.jit`` of the case's JAX function) and the peers a suite
adds to its own cases (``Workload.peers``: e.g. ``im2col`` for the convolution grid, the Dao-AILab
``causal_conv1d`` package). torch.compile and JAX report their compile time apart from their run
time. A peer that is not installed is skipped with a note; nothing stands in for it.

JAX on the GPU runs on a stream of its own, which CUDA events recorded on torch's stream do not
see: there its calls are timed by host wall with completion (``block_until_ready``), next to ours
timed the same way (each call followed by a synchronisation), and ``x jax`` compares those two.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GENERIC = ("torch", "compile", "jax")  # peers the harness builds from a case's functions
DEFAULT = ("torch",)  # plus every peer a suite adds to its cases; compile and jax are asked for
INSTALL = {"jax": "pip install jax (on the GPU: jax[cuda12] or jax[cuda13])", "causal_conv1d": "pip install causal-conv1d"}


@dataclass
class Peer:
    """One extra implementation of a case: ``call(s)`` runs it on input set ``s`` and returns its
    output (a torch tensor, or what ``to_torch`` turns into one, for the check).

    ``wall``: the call completes on the host and runs on a stream of its own (GPU JAX): timed by
    host wall, next to ours timed the same way. ``compile_s``: its compile time, reported apart.
    """

    call: Callable[[int], Any]
    to_torch: Callable[[Any], Any] | None = None
    wall: bool = False
    compile_s: float | None = None
    note: str = ""


def parse(text: str | None) -> tuple[set[str] | None, bool]:
    """``--peers`` -> (names, everything). None: the default (torch and the suites' own peers)."""
    if not text:
        return None, False
    names = {p.strip() for p in text.split(",") if p.strip()}
    everything = "all" in names
    names.discard("all")
    names.add("torch")
    return names, everything


def wanted(name: str, selected: set[str] | None, everything: bool) -> bool:
    """Whether peer ``name`` runs: compile and jax only when asked for, a suite's peer by default."""
    if everything:
        return True
    if selected is None:
        return name not in ("compile", "jax")
    return name in selected


def optional(module: str):
    """(module, None) or (None, why it is skipped)."""
    if module == "jax":
        # JAX on the GPU grabs 75% of the device memory at start-up unless told otherwise
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        return importlib.import_module(module), None
    except Exception as exc:  # not installed, or broken: the peer is absent, said once
        how = INSTALL.get(module)
        why = "not installed" if isinstance(exc, ModuleNotFoundError) else f"{type(exc).__name__}: {exc}"
        return None, why + (f" ({how})" if how else "")


def jax_for(env):
    """(jax, None) where JAX can run on the benchmark's device, else (None, why)."""
    jax, why = optional("jax")
    if jax is None:
        return None, why
    try:
        platforms = {d.platform for d in jax.devices()}
    except Exception as exc:
        return None, f"JAX has no usable backend ({type(exc).__name__}: {exc})"
    if env.gpu and not platforms & {"gpu", "cuda"}:
        return None, f"JAX sees no GPU here (backends: {', '.join(sorted(platforms))}); install jax[cuda12] or jax[cuda13]"
    return jax, None


def versions() -> dict:
    """Versions of the optional peers (None where absent), for the run's metadata."""
    out = {}
    for name in ("jax", "jaxlib", "causal_conv1d", "triton"):
        try:
            from importlib.metadata import version

            out[name] = version(name.replace("_", "-"))
        except Exception:
            out[name] = None
    return out


# --------------------------------------------------------------------------------------------
# JAX: torch tensors in, torch tensors out
# --------------------------------------------------------------------------------------------
def to_jax(jax, env, t):
    """A JAX array with ``t``'s values on the benchmark's device (dense: JAX has no strides)."""
    torch = env.torch
    if env.gpu:
        return jax.dlpack.from_dlpack(t.contiguous())
    import numpy as np

    if t.dtype == torch.bfloat16:
        import ml_dtypes

        host = t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    else:
        host = t.contiguous().numpy()
    return jax.device_put(np.array(host), jax.devices("cpu")[0])


def from_jax(env, a):
    """A torch tensor of JAX array ``a`` (for the check; not timed)."""
    torch = env.torch
    if env.gpu:
        return torch.from_dlpack(a)
    import numpy as np

    host = np.asarray(a)
    if host.dtype.name == "bfloat16":
        return torch.from_numpy(host.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(host.copy())


def jax_peer(jax, env, make: Callable, inputs: list) -> Peer:
    """``jax.jit(make(jax))`` on every input set, compiled once (the compile time apart)."""
    fn = make(jax)
    sets = [[to_jax(jax, env, t) for t in ins] for ins in inputs]
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*sets[0]).compile()
    compile_s = time.perf_counter() - t0

    def call(s):
        return compiled(*sets[s]).block_until_ready()

    return Peer(call, to_torch=lambda a: from_jax(env, a), wall=env.gpu, compile_s=compile_s)


def compile_peer(env, fn: Callable, inputs: list) -> Peer:
    """torch.compile(fn, dynamic=False): compiled by its first call, whose time is the compile time."""
    torch = env.torch
    torch._dynamo.reset()  # one code object serves many cases: start each one fresh
    compiled = torch.compile(fn, dynamic=False)
    t0 = time.perf_counter()
    compiled(*inputs[0])
    env.sync()
    compile_s = time.perf_counter() - t0
    return Peer(lambda s: compiled(*inputs[s]), compile_s=compile_s)
