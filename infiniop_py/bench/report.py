"""Run metadata, the fixed-width and Markdown tables, JSON and CSV output, and the run report
(``infiniop-bench report``: Markdown tables and PNG plots of one run's JSON)."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------
def git_commit() -> dict:
    """The library's commit and whether its tree has local changes: from git where the library
    is its own checkout, else from the ``COMMIT`` file that ``git archive`` fills in (an exported
    tree: ``dirty`` unknown); None for both where neither says."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        if top.returncode == 0 and Path(top.stdout.strip()).resolve() == ROOT:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
            dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=10)
            return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except Exception:
        pass
    try:
        text = (ROOT / "infiniop_py" / "COMMIT").read_text().strip()
    except OSError:
        text = ""
    return {"commit": text, "dirty": None} if re.fullmatch(r"[0-9a-f]{40}", text) else {"commit": None, "dirty": None}


def driver_version() -> str | None:
    """The NVIDIA driver's version as nvidia-smi reports it (None without one)."""
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    except Exception:
        return None


def versions(env) -> dict:
    import numpy

    from . import peers

    torch = env.torch
    out = {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__}
    out["torch_cuda"] = torch.version.cuda
    try:
        import ml_dtypes

        out["ml_dtypes"] = ml_dtypes.__version__
    except Exception:
        pass
    try:
        from importlib.metadata import version

        out["infiniop_py"] = version("infiniop-py")
    except Exception:
        out["infiniop_py"] = None
    try:
        import cupy

        out["cupy"] = cupy.__version__
        if env.gpu:
            rt = cupy.cuda.runtime
            out["cuda_runtime"] = rt.runtimeGetVersion()
            out["cuda_driver"] = rt.driverGetVersion()
            try:
                out["nvrtc"] = ".".join(str(v) for v in cupy.cuda.nvrtc.getVersion())
            except Exception:
                pass
    except Exception:
        out["cupy"] = None
    if env.gpu:
        out["driver"] = driver_version()
        try:
            out["cudnn"] = torch.backends.cudnn.version()
        except Exception:
            out["cudnn"] = None
    out.update(peers.versions())
    return out


def meta(env, args, copy_bw: dict, opts, matrix: dict | None = None, peer_notes: dict | None = None) -> dict:
    torch = env.torch
    settings = {
        "device": env.name,
        "reps": opts.reps,
        "warmup": opts.warmup,
        "peers": "all" if opts.all_peers else sorted(opts.peers) if opts.peers else "default (torch and the suites' own)",
        "compile_peer": bool(opts.compile or opts.all_peers or (opts.peers and "compile" in opts.peers)),
        "float64_check": opts.reference,
        "host_calls": opts.host_calls,
        "host_rounds": opts.host_rounds,
        "quick": bool(getattr(args, "quick", False)),
        "torch_threads": torch.get_num_threads(),
    }
    for key in ("family", "op", "dtype", "match"):
        value = getattr(args, key, None)
        if value:
            settings[key] = value
    if env.gpu:
        settings.update(
            tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
            tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            float32_matmul_precision=torch.get_float32_matmul_precision(),
            timing="CUDA events around each call on the launch stream",
            kernel_only=bool(opts.kernel),
        )
    else:
        timed, untimed = env.turn
        settings["timing"] = (
            f"time.perf_counter_ns around each call; turns of {timed} timed calls per implementation, each after {untimed} untimed ones"
        )
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "git": git_commit(),
        "machine": env.describe(),
        "versions": versions(env),
        "settings": settings,
        "copy_bandwidth": copy_bw,
        "matrix_rate": matrix or {},
        "peer_notes": peer_notes or {},
    }


def write_json(path: Path, header: dict, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"meta": header, "results": rows}, indent=1, default=str))
    tmp.replace(path)


def load(path: Path) -> tuple[dict, list]:
    """(meta, rows) of a run's JSON; ValueError naming the file when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError(f"{path} is not a benchmark run (no 'results' list)")
    return data.get("meta") or {}, data["results"]


# --------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------
def _us(row, name, key="median"):
    t = (row.get("times_us") or {}).get(name)
    if t is None:
        t = (row.get("wall_us") or {}).get(name) if name != "ours" else None
    return None if t is None else t.get(key)


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def _dev(row, name):
    t = (row.get("device_us") or {}).get(name)
    return None if t is None else t["median"]


def _kern(row, name):
    return (row.get("kernel_us") or {}).get(name)


def invalid_text(row) -> str:
    """``INVALID: <reasons>`` for a row whose times cannot be true (see core.invalid_reasons)."""
    return "INVALID: " + "; ".join(row["invalid"])


def message(row) -> str | None:
    """What a row that has no results says instead (skipped, error, invalid, failed check)."""
    if row.get("skipped"):
        return "skipped: " + row["skipped"]
    if row.get("error"):
        return "ERROR: " + row["error"].splitlines()[0][:120]
    if row.get("invalid"):
        return invalid_text(row)
    if row.get("check") and not row["check"]["ok"] and not row.get("times_us"):
        return "FAIL: " + row["check"]["detail"]
    return None


PEER_ORDER = ("torch", "compile", "jax")


def peer_names(rows) -> list[str]:
    """The peers (besides ours) that have times in ``rows``: torch, compile, jax, then the rest."""
    seen = set()
    for r in rows:
        seen |= set(r.get("times_us") or {}) | set(r.get("wall_us") or {})
    seen.discard("ours")
    return [p for p in PEER_ORDER if p in seen] + sorted(seen - set(PEER_ORDER))


def _short(peer: str) -> str:
    return {"compile": "comp"}.get(peer, peer)


def _rate(row) -> str:
    """Our GB/s, or TFLOP/s (suffix T) for rows that count FLOPs."""
    tf = (row.get("TFLOPs") or {}).get("ours")
    if tf is not None:
        return f"{tf:.0f}T" if tf >= 10 else f"{tf:.2g}T"
    g = (row.get("GBps") or {}).get("ours")
    return "-" if g is None else f"{g:.0f}" if g >= 10 else f"{g:.2g}"


def limit_of(row, name="ours") -> tuple[float | None, str]:
    """(% of the measured limit, which limit): the matrix rate for rows that count FLOPs, else
    the copy bandwidth."""
    if row.get("flops") and (row.get("pct_matrix") or {}).get(name) is not None:
        return row["pct_matrix"][name], "matrix"
    return (row.get("pct_copy") or {}).get(name), "copy"


def _limit(row, name="ours"):
    return limit_of(row, name)[0]


def columns(peers: list[str]) -> list[tuple[str, int, str]]:
    """Every column of the results table: (title, width, alignment)."""
    cols = [("op", 10, "<"), ("case", 34, "<"), ("dtype", 5, "<"), ("ours us", 9, ">"), ("p10-p90", 15, ">")]
    cols += [(f"{_short(p)} us", 9, ">") for p in peers]
    cols += [(f"x {_short(p)}", 7, ">") for p in peers]
    cols += [("GB/s", 7, ">"), ("%lim", 5, ">"), ("torch%", 6, ">"), ("dev us", 8, ">"), ("dev x", 5, ">")]
    cols += [("dev%", 4, ">"), ("cp=%", 4, ">"), ("kern us", 8, ">"), ("kern x", 6, ">"), ("kern%", 5, ">")]
    cols += [("kcp%", 4, ">"), ("check", 5, "<")]
    return cols


def _cells(row, peers: list[str] | None = None) -> list[str]:
    """The row's cells for :func:`columns` (``peers`` default: those of this row); a row without
    results gives op, case, dtype and its message."""
    msg = message(row)
    if msg is not None:
        return [row.get("op", "-"), row.get("case", "-"), row.get("dtype", "-"), msg]
    peers = peer_names([row]) if peers is None else peers
    ok = row.get("check", {}).get("ok")
    ours = _us(row, "ours") if ok else None
    p10, p90 = (_us(row, "ours", "p10"), _us(row, "ours", "p90")) if ok else (None, None)
    x = row.get("x") or {}
    if "torch" not in x and row.get("x_torch") is not None:
        x = {**x, "torch": row["x_torch"]}
    peer_checks = row.get("check_peers") or {}
    all_peers_ok = all(c.get("ok", True) for c in peer_checks.values())
    cells = [row["op"], row["case"], row["dtype"], _f(ours, ".1f"), f"{p10:.1f}-{p90:.1f}" if p10 is not None else "-"]
    cells += [_f(_us(row, p) if peer_checks.get(p, {}).get("ok", True) else None, ".1f") for p in peers]
    cells += [_f(x.get(p), ".2f") for p in peers]
    cells += [
        _rate(row),
        _f(_limit(row), ".0f"),
        _f(_limit(row, "torch"), ".0f"),
        _f(_dev(row, "ours"), ".1f"),
        _f(row.get("device_x_torch"), ".2f"),
        _f((row.get("device_pct_copy") or {}).get("ours"), ".0f"),
        _f(row.get("same_bytes_copy_pct"), ".0f"),
        _f(_kern(row, "ours"), ".1f"),
        _f(row.get("kernel_x_torch"), ".2f"),
        _f((row.get("kernel_pct_copy") or {}).get("ours"), ".0f"),
        _f(row.get("kernel_copy_pct"), ".0f"),
        ("PASS" if ok else "FAIL") + ("" if all_peers_ok else "*"),
    ]
    return cells


def _applicable(cols, table_cells) -> list[int]:
    """Indexes of the columns to show: op, case, dtype, check, and those some row fills."""
    keep = []
    full = [c for c in table_cells if len(c) == len(cols)]
    for i, (title, _, _) in enumerate(cols):
        if title in ("op", "case", "dtype", "check") or any(c[i] != "-" for c in full):
            keep.append(i)
    return keep


def format_row(cells, cols=None, keep=None) -> str:
    cols = cols or columns(peer_names([]))
    if len(cells) < len(cols):  # rows without results: the message fills the rest
        head = "  ".join(format(c, f"{a}{w}") for c, (_, w, a) in zip(cells[:3], cols[:3]))
        return f"{head}  {cells[3]}"
    idx = range(len(cols)) if keep is None else keep
    return "  ".join(format(cells[i], f"{cols[i][2]}{cols[i][1]}") for i in idx)


def progress_line(row) -> str:
    """One short line per finished case: ours, torch and the ratio, or what the row says instead."""
    msg = message(row)
    head = f"{row.get('op', '-'):<10}  {row.get('case', '-'):<34}  {row.get('dtype', '-'):<5}"
    if msg is not None:
        return f"{head}  {msg}"
    ok = row.get("check", {}).get("ok")
    parts = [f"ours {_f(_us(row, 'ours'), '.1f')} us"]
    for p in peer_names([row]):
        parts.append(f"{p} {_f(_us(row, p), '.1f')}")
    x = row.get("x") or {}
    ratios = " ".join(f"x{_short(p)} {x[p]:.2f}" for p in peer_names([row]) if x.get(p) is not None)
    return f"{head}  {'  '.join(parts)}  {ratios}  {'PASS' if ok else 'FAIL'}"


def _legend(rows, copy_bw: dict, device: str, matrix: dict | None) -> list[str]:
    bw = copy_bw.get("GBps") or 0.0
    out = [
        f"Time per call ({device}); copy bandwidth {bw:.0f} GB/s"
        + (
            "; matrix rate " + ", ".join(f"{k} {v:.1f} TFLOP/s" for k, v in matrix.items() if isinstance(v, float))
            if matrix
            else ""
        )
        + ". x <peer> = peer time / ours (> 1: ours faster); GB/s column: TFLOP/s where marked T; "
        "%lim: % of the measured limit (copy bandwidth, or matrix rate for rows that count FLOPs)"
    ]
    if any(r.get("device_us") for r in rows):
        out.append(
            "dev: device time per call (each batch of calls enqueued behind a blocking kernel, so host latency "
            "is not inside the events); cp=%: a torch copy of the same bytes, timed the same way, in % of copy bandwidth"
        )
    if any(r.get("kernel_us") for r in rows):
        out.append(
            "kern: kernel-only time per call (CUDA-graph replay of up to 24 calls over the rotating sets); kcp%: the "
            "same-bytes copy replayed the same way, in % of copy bandwidth"
        )
    if any(r.get("wall_us") for r in rows):
        out.append(
            "jax on the GPU runs on its own stream: its time is host wall per call with completion, and x jax "
            "compares it with ours timed the same way (each call followed by a synchronisation)"
        )
    return out


def _host_table(rows) -> tuple[list[tuple[str, int]], list[list[str]]]:
    cols = [("op", 10), ("case", 34), ("dtype", 5), ("ours", 7), ("ours ptr", 8), ("ours cupy", 9), ("torch", 7)]
    cols += [("ours/torch", 10), ("graph ours", 10), ("graph torch", 11)]
    cells = []
    for r in rows:
        w = r["host_wall_us"]
        g = r.get("graph_us") or {}
        ratio = w["ours"] / w["torch"] if w.get("torch") else None
        cells.append(
            [r["op"], r["case"], r["dtype"], _f(w.get("ours"), ".2f"), _f(w.get("ours_ptr"), ".2f")]
            + [_f(w.get("ours_cupy"), ".2f"), _f(w.get("torch"), ".2f"), _f(ratio, ".2f")]
            + [_f(g.get("ours"), ".2f"), _f(g.get("torch"), ".2f")]
        )
    keep = [i for i in range(len(cols)) if i < 3 or any(c[i] != "-" for c in cells)]
    return [cols[i] for i in keep], [[c[i] for i in keep] for c in cells]


def _compile_lines(rows) -> list[str]:
    """Compile time per case of the peers that compile (torch.compile, JAX), apart from run time."""
    comp = [r for r in rows if r.get("compile_s")]
    if not comp:
        return []
    names = sorted({p for r in comp for p in r["compile_s"]})
    lines = ["", "Compile time per case, s (not inside the run times above): " + ", ".join(names)]
    for r in comp:
        times = "  ".join(f"{p} {_f(r['compile_s'].get(p), '.2f')}" for p in names)
        lines.append(f"  {r['op']} {r['case']} {r['dtype']}: {times}")
    return lines


def _footer(rows) -> list[str]:
    lines = _compile_lines(rows)
    invalid = [r for r in rows if r.get("invalid")]
    if invalid:
        lines.append("")
        lines.append(f"{len(invalid)} row(s) INVALID (times that cannot be true; not results):")
        lines += [f"  {r['op']} {r['case']} {r['dtype']}: {'; '.join(r['invalid'])}" for r in invalid]
    failed = [r for r in rows if r.get("check") and not r["check"]["ok"]]
    if failed:
        lines.append("")
        lines.append(f"{len(failed)} case(s) FAILED the check (their times are not results):")
        lines += [f"  {r['op']} {r['case']} {r['dtype']}: {r['check']['detail']}" for r in failed]
    errors = [r for r in rows if r.get("error")]
    if errors:
        lines.append("")
        lines.append(f"{len(errors)} case(s) raised:")
        lines += [f"  {r.get('op')} {r.get('case')} {r.get('dtype')}: {r['error'].splitlines()[0]}" for r in errors]
    bad_peer = [(r, p, c) for r in rows for p, c in (r.get("check_peers") or {}).items() if not c.get("ok", True)]
    if bad_peer:
        lines.append("")
        lines.append("* a peer's output differed from torch eager (its time is not shown):")
        lines += [f"  {p}: {r['op']} {r['case']} {r['dtype']}: {c['detail']}" for r, p, c in bad_peer]
    notes = {}
    for r in rows:
        for p, why in (r.get("peer_notes") or {}).items():
            notes.setdefault((p, why), []).append(r)
    if notes:
        lines.append("")
        lines.append("Peers skipped:")
        lines += [f"  {p} ({len(rs)} case(s)): {why}" for (p, why), rs in notes.items()]
    return lines


def table(rows: list, copy_bw: dict, device: str, matrix: dict | None = None) -> str:
    """The fixed-width results table, with only the columns some row fills."""
    peers = peer_names(rows)
    cols = columns(peers)
    cells = [_cells(r, peers) for r in rows]
    keep = _applicable(cols, cells)
    lines = _legend(rows, copy_bw, device, matrix)
    header = format_row([c[0] for c in cols], cols, keep)
    lines += [header, "-" * len(header)]
    lines += [format_row(c, cols, keep) for c in cells]
    host = [r for r in rows if r.get("host_wall_us")]
    if host:
        hcols, hcells = _host_table(host)
        lines.append("")
        lines.append("Host wall per call (N calls back to back, one sync at the end; median of rounds), µs")
        h = "  ".join(format(t, f"{'<' if i < 3 else '>'}{w}") for i, (t, w) in enumerate(hcols))
        lines += [h, "-" * len(h)]
        lines += [
            "  ".join(format(c, f"{'<' if i < 3 else '>'}{w}") for i, (c, (_, w)) in enumerate(zip(cs, hcols))) for cs in hcells
        ]
    return "\n".join(lines + _footer(rows))


def markdown(rows: list, copy_bw: dict, device: str, matrix: dict | None = None) -> str:
    """The results as Markdown tables (the applicable columns), host wall below."""
    peers = peer_names(rows)
    cols = columns(peers)
    cells = [_cells(r, peers) for r in rows]
    keep = _applicable(cols, cells)
    lines = [line + "." if not line.endswith(".") else line for line in _legend(rows, copy_bw, device, matrix)]
    lines = [" ".join(lines), ""]
    lines.append("| " + " | ".join(cols[i][0] for i in keep) + " |")
    lines.append("|" + "---|" * len(keep))
    for c in cells:
        if len(c) < len(cols):
            lines.append(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} |" + " |" * (len(keep) - 4))
        else:
            lines.append("| " + " | ".join(c[i] for i in keep) + " |")
    host = [r for r in rows if r.get("host_wall_us")]
    if host:
        hcols, hcells = _host_table(host)
        lines += ["", "Host wall per call, µs (N back-to-back calls, one sync at the end):", ""]
        lines.append("| " + " | ".join(t for t, _ in hcols) + " |")
        lines.append("|" + "---|" * len(hcols))
        lines += ["| " + " | ".join(cs) + " |" for cs in hcells]
    foot = _footer(rows)
    if foot:
        lines += ["", "```", *[f for f in foot if f], "```"]
    return "\n".join(lines) + "\n"


def write_csv(path: Path, rows: list) -> None:
    fields = [
        "suite", "op", "case", "dtype", "shape", "bytes", "nsets", "l2",
        "ours_med_us", "ours_p10_us", "ours_p90_us", "torch_med_us", "torch_p10_us", "torch_p90_us",
        "compile_med_us", "x_torch", "x_compile", "ours_GBps", "torch_GBps", "ours_pct_copy", "torch_pct_copy",
        "flops", "ours_TFLOPs", "torch_TFLOPs",
        "check", "host_ours_us", "host_torch_us", "error",
        "device_ours_us", "device_torch_us", "device_x_torch", "device_ours_pct_copy", "same_bytes_copy_pct",
        "kernel_ours_us", "kernel_torch_us", "kernel_x_torch", "kernel_ours_pct_copy", "kernel_copy_pct",
    ]  # fmt: skip
    extra = [p for p in peer_names(rows) if p not in ("torch", "compile")]
    for p in extra:
        fields += [f"{p}_med_us", f"x_{p}"]
    fields += ["compile_s"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            host = r.get("host_wall_us") or {}
            more = {"compile_s": json.dumps(r["compile_s"]) if r.get("compile_s") else None}
            for p in extra:
                more[f"{p}_med_us"] = _us(r, p)
                more[f"x_{p}"] = (r.get("x") or {}).get(p)
            w.writerow(
                more
                | {
                    "suite": r.get("suite"),
                    "op": r.get("op"),
                    "case": r.get("case"),
                    "dtype": r.get("dtype"),
                    "shape": "x".join(str(d) for d in r.get("shape", [])),
                    "bytes": r.get("bytes"),
                    "nsets": r.get("nsets"),
                    "l2": r.get("l2"),
                    "ours_med_us": _us(r, "ours"),
                    "ours_p10_us": _us(r, "ours", "p10"),
                    "ours_p90_us": _us(r, "ours", "p90"),
                    "torch_med_us": _us(r, "torch"),
                    "torch_p10_us": _us(r, "torch", "p10"),
                    "torch_p90_us": _us(r, "torch", "p90"),
                    "compile_med_us": _us(r, "compile"),
                    "x_torch": r.get("x_torch"),
                    "x_compile": r.get("x_compile"),
                    "ours_GBps": (r.get("GBps") or {}).get("ours"),
                    "torch_GBps": (r.get("GBps") or {}).get("torch"),
                    "ours_pct_copy": (r.get("pct_copy") or {}).get("ours"),
                    "torch_pct_copy": (r.get("pct_copy") or {}).get("torch"),
                    "flops": r.get("flops"),
                    "ours_TFLOPs": (r.get("TFLOPs") or {}).get("ours"),
                    "torch_TFLOPs": (r.get("TFLOPs") or {}).get("torch"),
                    "check": "INVALID" if r.get("invalid") else (None if "check" not in r else r["check"]["ok"]),
                    "host_ours_us": host.get("ours"),
                    "host_torch_us": host.get("torch"),
                    "error": r.get("error") or r.get("skipped") or (invalid_text(r) if r.get("invalid") else None),
                    "device_ours_us": _dev(r, "ours"),
                    "device_torch_us": _dev(r, "torch"),
                    "device_x_torch": r.get("device_x_torch"),
                    "device_ours_pct_copy": (r.get("device_pct_copy") or {}).get("ours"),
                    "same_bytes_copy_pct": r.get("same_bytes_copy_pct"),
                    "kernel_ours_us": _kern(r, "ours"),
                    "kernel_torch_us": _kern(r, "torch"),
                    "kernel_x_torch": r.get("kernel_x_torch"),
                    "kernel_ours_pct_copy": (r.get("kernel_pct_copy") or {}).get("ours"),
                    "kernel_copy_pct": r.get("kernel_copy_pct"),
                }
            )


# --------------------------------------------------------------------------------------------
# The run report: Markdown and PNG plots of one run's JSON (infiniop-bench report)
# --------------------------------------------------------------------------------------------
def _device_words(meta: dict) -> str:
    m = meta.get("machine") or {}
    return f"{m.get('name', '?')} ({m.get('kind', '?')})"


def _header(meta: dict, stem: str) -> list[str]:
    m, v, s = meta.get("machine") or {}, meta.get("versions") or {}, meta.get("settings") or {}
    git = meta.get("git") or {}
    lines = [f"# Benchmark run {stem}", ""]
    lines.append(f"- When: {meta.get('timestamp', '?')}; machine: {_device_words(meta)}")
    facts = {k: m[k] for k in ("cc", "sm_count", "l2_bytes", "cores", "torch_threads") if k in m}
    if facts:
        lines.append("- Machine facts: " + ", ".join(f"{k} {val}" for k, val in facts.items()))
    lines.append("- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None))
    commit = git.get("commit")
    lines.append(f"- Commit: {commit or 'unknown'}" + (" (with local changes)" if git.get("dirty") else ""))
    lines.append("- Settings: " + ", ".join(f"{k} {val}" for k, val in s.items()))
    bw = meta.get("copy_bandwidth") or {}
    if bw:
        lines.append(f"- Copy bandwidth measured in this run: {bw.get('GBps', 0):.0f} GB/s ({bw.get('how', '')})")
    mr = meta.get("matrix_rate") or {}
    rates = ", ".join(f"{k} {val:.2f} TFLOP/s" for k, val in mr.items() if isinstance(val, (int, float)))
    if rates:
        lines.append(f"- Matrix rate measured in this run: {rates} ({mr.get('how', '')})")
    for peer, why in (meta.get("peer_notes") or {}).items():
        lines.append(f"- Peer {peer} skipped: {why}")
    return lines


def render(meta: dict, rows: list, out_dir: Path, stem: str) -> list[Path]:
    """Write ``<stem>.md`` (tables) and one ``<stem>-<suite>-<op>.png`` per operator into ``out_dir``;
    the paths written. Without matplotlib the Markdown says so and no PNG is written."""
    from . import plots

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    lines = _header(meta, stem)
    lines += ["", "## Results", ""]
    lines.append(markdown(rows, meta.get("copy_bandwidth") or {}, _device_words(meta), meta.get("matrix_rate") or None).rstrip())
    why = plots.available()
    grouped = plots.groups(rows)
    if grouped:
        lines += ["", "## Per operator", ""]
        if why:
            lines.append(why)
        for (suite, op), rs in grouped.items():
            lines += [f"### {suite} / {op}", ""]
            if why is None:
                name = plots.file_name(stem, suite, op)
                plots.plot_op(out_dir / name, suite, op, rs, _device_words(meta))
                written.append(out_dir / name)
                lines.append(f"![{suite} {op}]({name})")
            best = {}
            for r in rs:
                for peer, x in (r.get("x") or {}).items():
                    best.setdefault(peer, []).append(x)
            if best:
                lines.append("")
                lines.append(
                    "Speed-up of ours, min / median / max over the cases: "
                    + "; ".join(
                        f"vs {p} {min(xs):.2f} / {sorted(xs)[len(xs) // 2]:.2f} / {max(xs):.2f}" for p, xs in best.items()
                    )
                )
            lines.append("")
    md = out_dir / f"{stem}.md"
    md.write_text("\n".join(lines).rstrip() + "\n")
    return [md, *written]
