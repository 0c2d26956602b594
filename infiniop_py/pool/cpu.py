"""NumPy backend of the pooling operators: vectorised over every element, with Python loops only
over the k1*...*kn kernel offsets.

The input is copied once into a padded accumulator-dtype array (f32 for half types and f32, f64
for f64) whose spatial coordinates are shifted by p: window o then starts at o*s, and kernel
offset kappa of every window is the strided slice ``kappa : kappa + (O-1)*s + 1 : s``. Padding is
-inf for max (never selected) and 0 for avg. The backward passes add per-offset slices into a
zeroed padded accumulator in a fixed order (kernel offsets in row-major order), then round once
into grad_input, which is thereby fully overwritten. With the compiled kernels (the
``cpu-fast`` extra), max_pool_backward runs ``max_pool_back`` instead: per plane, window by
window, the same choice of maximum and the same fixed order of additions per element.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ..cpu import jit, pool
from ..dtypes import acc_numpy
from ..halfconv import copy_into, to_f32
from ..spatial import pad3

SPLIT_WORK = 1 << 18  # window elements visited from which max_pool_backward's planes go to the pool


def _padded_len(g, d: int) -> int:
    """Length of spatial dim d in shifted coordinates: the input ends at p + L, the last window
    at (O-1)*s + k."""
    return max(g.p[d] + g.L[d], (g.O[d] - 1) * g.s[d] + g.k[d])


def _inside(g) -> tuple:
    """The input's place in the padded array."""
    return (slice(None), slice(None), *(slice(g.p[d], g.p[d] + g.L[d]) for d in range(g.n)))


def _window_slices(g):
    """(row-major index, slice of the padded array) for every kernel offset, in scan order."""
    for lin, kappa in enumerate(itertools.product(*(range(k) for k in g.k))):
        yield (
            lin,
            (slice(None), slice(None), *(slice(kappa[d], kappa[d] + (g.O[d] - 1) * g.s[d] + 1, g.s[d]) for d in range(g.n))),
        )


def _per_window(g, values_by_dim, dtype, combine=np.multiply) -> np.ndarray:
    """Per-window vectors of each spatial dim combined over the dims (product by default), shaped
    (1, 1, *O)."""
    out = None
    for d, vals in enumerate(values_by_dim):
        shape = [1, 1] + [1] * g.n
        shape[2 + d] = g.O[d]
        v = np.asarray(vals, dtype=dtype).reshape(shape)
        out = v if out is None else combine(out, v)
    return out


def _load(view: np.ndarray, acc) -> np.ndarray:
    return to_f32(view) if acc == np.float32 else view


def _padded_input(g, x: np.ndarray, acc, fill: float) -> np.ndarray:
    xp = np.full((g.N, g.C, *(_padded_len(g, d) for d in range(g.n))), fill, dtype=acc)
    xp[_inside(g)] = _load(x, acc)
    return xp


def _argmax(g, xp: np.ndarray) -> np.ndarray:
    """Per window, the row-major offset of its maximum: the first maximum in scan order, the
    last NaN if there is one (torch's rule); the first in-bounds element when all are -inf."""
    first = _per_window(g, [[f * int(np.prod(g.k[d + 1 :])) for f in g.first_inside(d)] for d in range(g.n)], np.int64, np.add)
    shape = (g.N, g.C, *g.O)
    idx = np.array(np.broadcast_to(first, shape))
    best = np.full(shape, -np.inf, dtype=xp.dtype)
    for lin, sl in _window_slices(g):
        v = xp[sl]
        take = (v > best) | np.isnan(v)
        np.copyto(best, v, where=take)
        np.copyto(idx, lin, where=take)
    return idx


def _backend(read: str, written: str, compute):
    """The SPEC's ``cpu`` callable: ``compute(g, views, acc)`` per call (nothing when the written
    tensor is empty), accumulating in the dtype ``acc_numpy`` gives tensor ``read``'s."""

    def factory(info):
        g = info.geom
        acc = acc_numpy(info[read].dtype)
        empty = info[written].numel == 0

        def run(views, ws, rt):
            if empty:
                return
            compute(g, views, acc)

        return run

    return factory


def _forward(kind: str, g, views, acc) -> None:
    xp = _padded_input(g, views["input"], acc, -np.inf if kind == "max" else 0.0)
    out = None
    for _, sl in _window_slices(g):
        if out is None:
            out = xp[sl].copy()
        elif kind == "max":
            np.maximum(out, xp[sl], out=out)  # NaN propagates
        else:
            out += xp[sl]
    if kind == "avg":
        out /= _per_window(g, [g.divisors(d) for d in range(g.n)], acc)
    copy_into(views["output"], out)


def _max_backward_compiled(g, views) -> None:
    """max_pool_backward through the compiled ``max_pool_back`` (float32), planes over the pool."""
    k = jit.kernels()
    planes = g.N * g.C
    x = np.ascontiguousarray(to_f32(views["input"])).reshape(planes, *pad3(g.L, 1))
    go = np.ascontiguousarray(to_f32(views["grad_output"])).reshape(planes, *pad3(g.O, 1))
    gi = np.empty((planes, x[0].size), np.float32)
    ks, ss, ps = (np.array(pad3(v, f), np.int64) for v, f in ((g.k, 1), (g.s, 1), (g.p, 0)))
    pieces = pool.PARTS_PER_THREAD * pool.THREADS if go.size * int(np.prod(g.k)) >= SPLIT_WORK else 1
    pool.run_all(lambda q0, q1: k.max_pool_back(x, go, gi, ks, ss, ps, q0, q1), pool.bounds(planes, pieces))
    copy_into(views["grad_input"], gi.reshape(views["grad_input"].shape))


def _backward(kind: str, g, views, acc) -> None:
    if kind == "max" and acc == np.float32 and jit.kernels() is not None:
        _max_backward_compiled(g, views)
        return
    go = np.asarray(_load(views["grad_output"], acc), dtype=acc)
    total = np.zeros((g.N, g.C, *(_padded_len(g, d) for d in range(g.n))), dtype=acc)
    if kind == "avg":
        part = go / _per_window(g, [g.divisors(d) for d in range(g.n)], acc)
        for _, sl in _window_slices(g):
            total[sl] += part
    else:
        idx = _argmax(g, _padded_input(g, views["input"], acc, -np.inf))
        zero = np.zeros((), dtype=acc)
        for lin, sl in _window_slices(g):
            total[sl] += np.where(idx == lin, go, zero)
    copy_into(views["grad_input"], total[_inside(g)])


def forward(kind: str):
    """The CPU callable of avg_pool / max_pool (``kind``: "avg" or "max")."""
    return _backend("input", "output", functools.partial(_forward, kind))


def backward(kind: str):
    """The CPU callable of avg_pool_backward / max_pool_backward."""
    return _backend("grad_output", "grad_input", functools.partial(_backward, kind))
