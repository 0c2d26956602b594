"""Case-table helpers shared by the causal conv1d family: layouts of (B, D, L) tensors, the
seed report's ten configurations, and data for seq_idx and conv_state_indices."""

from __future__ import annotations

import numpy as np

from infiniop_py.dtypes import DType

F16, BF16, F32 = DType.F16, DType.BF16, DType.F32
X3 = (F16, BF16, F32)

# The seed report's test matrix (batch, dim, seqlen), width 4, each with and without SiLU.
SEED = {
    "Small": (2, 64, 128),
    "Medium": (4, 256, 512),
    "Large Mamba": (8, 2048, 1024),
    "Long": (4, 256, 4096),
    "Wide": (4, 4096, 512),
}
QUICK_SEED = ("Small", "Medium")


def seed_configs():
    """The seed report's ten configurations, channel-first and channel-last: ((B, D, L), layout,
    SiLU or not, description, suites); the larger ones in the full suite only."""
    for name, (b, d, n) in SEED.items():
        for lay in ("cf", "cl"):
            for silu in (False, True):
                desc = f"{name} {b}x{d}x{n} W4 {lay}" + (" + SiLU" if silu else "")
                yield (b, d, n), lay, silu, desc, ("quick",) if name in QUICK_SEED else ("full",)


def strides(B, D, L, layout: str):  # noqa: N803
    """Element strides of a (B, D, L) tensor.

    cf: channel-first (contiguous, stride(2) = 1); cl: channel-last (stride(1) = 1);
    cf_pad / cl_pad: the same with padded rows; gap: every other time step; bmajor: the
    batch innermost (neither time nor channel contiguous)."""
    if layout == "cf":
        return None
    if layout == "cl":
        return (L * D, 1, D)
    if layout == "cf_pad":
        return (D * (L + 5), L + 5, 1)
    if layout == "cl_pad":
        return (L * (D + 3), 1, D + 3)
    if layout == "gap":
        return (2 * D * L, 2 * L, 2)
    if layout == "bmajor":
        return (1, B * L, B)
    raise ValueError(layout)


def seq_values(rng: np.random.Generator, B: int, L: int) -> np.ndarray:  # noqa: N803
    """seq_idx rows: non-decreasing sequence ids with starts at block edges (32 .. 512) and at
    random places, a few padding tokens (-1) inside and at the end of rows."""
    out = np.empty((B, L), np.int64)
    for b in range(B):
        cuts = {e for e in (1, 3, 32, 64, 100, 128, 256, 257, 512, 1024) if e < L}
        cuts |= {int(c) for c in rng.integers(1, max(L, 2), size=3)}
        cuts = sorted(c for c in cuts if 0 < c < L)
        row = np.zeros(L, np.int64)
        sid = int(rng.integers(0, 3))
        for c in cuts:
            sid += 1
            row[c:] = sid
        pad = rng.random(L) < 0.04
        if L > 4:
            pad[-2:] = True  # trailing padding
        row[pad] = -1
        row[pad & (rng.random(L) < 0.3)] = -5  # any negative id is padding
        out[b] = row
    return out


def index_values(rng: np.random.Generator, B: int, S: int, pad=True, oob=False, dup=False) -> np.ndarray:  # noqa: N803
    """conv_state_indices: distinct state slots, with padding slots (-1); with ``oob``, slots >= S;
    with ``dup``, rows 3 and 4 naming one slot (both of these are padding slots too)."""
    idx = rng.permutation(max(S, B))[:B].astype(np.int64)
    idx[idx >= S] = -1
    if pad and B > 1:
        idx[rng.random(B) < 0.25] = -1
        idx[0] = -1
    if oob and B > 2:
        idx[1] = S
        idx[2] = S + 1000
    if dup and B > 4:
        idx[3] = idx[4] = S - 1
    return idx


def make_data(states: int = 0, oob: bool = False, dup: bool = False):
    """The ``data`` function of a case table: seq_idx rows, conv_state_indices over ``states``
    slots; the defaults otherwise."""

    def data(rng, name, dtype, shape):
        from infiniop_py.dtypes import to_numpy

        if name == "seq_idx":
            return seq_values(rng, *shape).astype(to_numpy(dtype))
        if name == "conv_state_indices":
            return index_values(rng, shape[0], states, oob=oob, dup=dup).astype(to_numpy(dtype))
        return None

    return data
