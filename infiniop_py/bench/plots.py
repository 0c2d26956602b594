"""PNG plots of one run (matplotlib, the ``bench`` extra): per operator, the rate (GB/s, or
TFLOP/s for cases that count FLOPs) of ours and every peer against size, ours' speed-up against
each peer, and ours' share of the limit measured in the same run."""

from __future__ import annotations

import re
from pathlib import Path

from .report import _limit, peer_names


def available() -> str | None:
    """None where matplotlib can draw, else why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception as exc:
        return f"PNG plots need matplotlib ({type(exc).__name__}: {exc}; pip install 'infiniop-py[bench]')"
    return None


def groups(rows) -> dict:
    """{(suite, op): rows with results}, in the order the run met them."""
    out: dict = {}
    for r in rows:
        if r.get("check", {}).get("ok") and r.get("times_us") and not r.get("invalid"):
            out.setdefault((r.get("suite", "-"), r["op"]), []).append(r)
    return out


def file_name(*parts: str) -> str:
    """``<part>-<part>-....png`` with anything but letters, digits, ``_.-`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts)) + ".png"


def _size(r) -> float:
    return float(r["flops"]) if r.get("flops") else float(r.get("bytes") or 0)


def _rate(r, name):
    st = (r.get("times_us") or {}).get(name) or (r.get("wall_us") or {}).get(name)
    if not st or st.get("unchecked") or not st.get("median"):
        return None
    size = _size(r)
    return size / (st["median"] * 1e-6) / (1e12 if r.get("flops") else 1e9)


def _series(ax, rows, value, label):
    """One line per (label, dtype) through the rows' sizes (markers only where a size repeats)."""
    by_dtype: dict = {}
    for r in rows:
        v = value(r)
        if v is not None:
            by_dtype.setdefault(r["dtype"], []).append((_size(r), v))
    for dt, pts in by_dtype.items():
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        style = "o-" if len(set(xs)) == len(xs) else "o"
        ax.plot(xs, ys, style, label=f"{label} {dt}", markersize=4)


def plot_op(path: Path, suite: str, op: str, rows: list, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    flops = any(r.get("flops") for r in rows)
    peers = peer_names(rows)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    ax = axes[0]
    for name in ["ours", *peers]:
        _series(ax, rows, lambda r, n=name: _rate(r, n), name)
    ax.set_title(f"{op}: {'TFLOP/s' if flops else 'GB/s'} per call")
    ax.set_ylabel("TFLOP/s" if flops else "GB/s (minimal bytes / median time)")
    ax = axes[1]
    for name in peers:
        _series(ax, rows, lambda r, n=name: (r.get("x") or {}).get(n), f"vs {name}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_title("speed-up of ours (peer time / ours; > 1: ours faster)")
    ax = axes[2]
    _series(ax, rows, lambda r: _limit(r), "ours")
    _series(ax, rows, lambda r: _limit(r, "torch"), "torch")
    ax.set_title("% of the limit measured in this run (" + ("matrix rate" if flops else "copy bandwidth") + ")")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("FLOPs per call" if flops else "bytes moved per call")
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle(f"{suite} / {op} -- {title}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
