"""Run metadata, the fixed-width tables, JSON and CSV output."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def git_commit() -> dict:
    """HEAD and whether the tree has local changes (None where there is no git checkout)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except Exception:
        return {"commit": None, "dirty": None}


def versions(env) -> dict:
    import numpy

    out = {"python": platform.python_version(), "numpy": numpy.__version__, "torch": env.torch.__version__}
    out["torch_cuda"] = env.torch.version.cuda
    try:
        import ml_dtypes

        out["ml_dtypes"] = ml_dtypes.__version__
    except Exception:
        pass
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
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:
        pass
    return out


def meta(env, args, copy_bw: dict, opts) -> dict:
    torch = env.torch
    settings = {
        "device": env.name,
        "reps": opts.reps,
        "warmup": opts.warmup,
        "compile_peer": opts.compile,
        "host_calls": opts.host_calls,
        "host_rounds": opts.host_rounds,
        "quick": bool(args.quick),
        "torch_threads": torch.get_num_threads(),
    }
    if env.gpu:
        settings.update(
            tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
            tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            float32_matmul_precision=torch.get_float32_matmul_precision(),
            timing="CUDA events around each call on the launch stream",
        )
    else:
        settings["timing"] = "time.perf_counter_ns around each call"
    return {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "git": git_commit(),
        "machine": env.describe(),
        "versions": versions(env),
        "settings": settings,
        "copy_bandwidth": copy_bw,
    }


def write_json(path: Path, header: dict, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"meta": header, "results": rows}, indent=1, default=str))
    tmp.replace(path)


def _us(row, name, key="median"):
    t = row.get("times_us", {}).get(name)
    return None if t is None else t[key]


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


COLUMNS = [
    ("op", 10, "<"),
    ("case", 34, "<"),
    ("dtype", 5, "<"),
    ("ours us", 9, ">"),
    ("p10-p90", 15, ">"),
    ("torch us", 9, ">"),
    ("compile", 8, ">"),
    ("x torch", 7, ">"),
    ("x comp", 6, ">"),
    ("GB/s", 7, ">"),
    ("%copy", 5, ">"),
    ("torch%", 6, ">"),
    ("dev us", 8, ">"),
    ("dev x", 5, ">"),
    ("dev%", 4, ">"),
    ("cp=%", 4, ">"),
    ("kern us", 8, ">"),
    ("kern x", 6, ">"),
    ("kern%", 5, ">"),
    ("kcp%", 4, ">"),
    ("check", 5, "<"),
]


def _rate(row) -> str:
    """Our GB/s, or TFLOP/s (suffix T) for rows that count FLOPs."""
    tf = row.get("TFLOPs", {}).get("ours")
    if tf is not None:
        return f"{tf:.0f}T" if tf >= 10 else f"{tf:.1f}T"
    return _f(row.get("GBps", {}).get("ours"), ".0f")


def _cells(row) -> list[str]:
    if row.get("skipped"):
        return [row["op"], row["case"], row["dtype"], "skipped: " + row["skipped"]]
    if row.get("error"):
        return [row["op"], row["case"], row["dtype"], "ERROR: " + row["error"].splitlines()[0][:90]]
    if row.get("invalid"):
        return [row["op"], row["case"], row["dtype"], invalid_text(row)]
    ok = row.get("check", {}).get("ok")
    ours = _us(row, "ours") if ok else None
    p10, p90 = (_us(row, "ours", "p10"), _us(row, "ours", "p90")) if ok else (None, None)
    ccheck = row.get("check_compile", {}).get("ok", True)
    return [
        row["op"],
        row["case"],
        row["dtype"],
        _f(ours, ".1f"),
        f"{p10:.1f}-{p90:.1f}" if p10 is not None else "-",
        _f(_us(row, "torch"), ".1f"),
        _f(_us(row, "compile") if row.get("check_compile", {}).get("ok", True) else None, ".1f"),
        _f(row.get("x_torch"), ".2f"),
        _f(row.get("x_compile"), ".2f"),
        _rate(row),
        _f(row.get("pct_copy", {}).get("ours"), ".0f"),
        _f(row.get("pct_copy", {}).get("torch"), ".0f"),
        _f(_dev(row, "ours"), ".1f"),
        _f(row.get("device_x_torch"), ".2f"),
        _f(row.get("device_pct_copy", {}).get("ours"), ".0f"),
        _f(row.get("same_bytes_copy_pct"), ".0f"),
        _f(_kern(row, "ours"), ".1f"),
        _f(row.get("kernel_x_torch"), ".2f"),
        _f(row.get("kernel_pct_copy", {}).get("ours"), ".0f"),
        _f(row.get("kernel_copy_pct"), ".0f"),
        ("PASS" if ok else "FAIL") + ("" if ccheck else "*"),
    ]


def invalid_text(row) -> str:
    """``INVALID: <reasons>`` for a row whose times cannot be true (see core.invalid_reasons)."""
    return "INVALID: " + "; ".join(row["invalid"])


def _dev(row, name):
    t = row.get("device_us", {}).get(name)
    return None if t is None else t["median"]


def _kern(row, name):
    return row.get("kernel_us", {}).get(name)


def format_row(cells) -> str:
    if len(cells) < len(COLUMNS):  # skipped / error rows: the message fills the rest
        head = "  ".join(format(c, f"{a}{w}") for c, (_, w, a) in zip(cells[:3], COLUMNS[:3]))
        return f"{head}  {cells[3]}"
    return "  ".join(format(c, f"{a}{w}") for c, (_, w, a) in zip(cells, COLUMNS))


def table(rows: list, copy_bw: dict, device: str) -> str:
    lines = []
    header = format_row([name for name, _, _ in COLUMNS])
    bw = copy_bw.get("GBps")
    lines.append(
        f"Device time per call ({device}); copy bandwidth {bw:.0f} GB/s; x torch = torch time / ours (> 1: ours faster); "
        "GB/s column: TFLOP/s where marked T"
    )
    lines.append(
        "dev: device time per call (each batch of calls enqueued behind a blocking kernel, so host latency "
        "is not inside the events); cp=%: a torch copy of the same bytes, timed the same way, in % of copy bandwidth"
    )
    lines.append(
        "kern: kernel-only time per call (CUDA-graph replay of 24 calls over the rotating sets); kcp%: the "
        "same-bytes copy replayed the same way, in % of copy bandwidth"
    )
    lines += [header, "-" * len(header)]
    lines += [format_row(_cells(r)) for r in rows]
    host = [r for r in rows if r.get("host_wall_us")]
    if host:
        lines.append("")
        lines.append("Host wall per call (N calls back to back, one sync at the end; median of rounds), µs")
        h = f"{'op':<10}  {'case':<34}  {'dtype':<5}  {'ours':>7}  {'ours ptr':>8}  {'ours cupy':>9}  {'torch':>7}  {'ours/torch':>10}  {'graph ours':>10}  {'graph torch':>11}"
        lines += [h, "-" * len(h)]
        for r in host:
            w = r["host_wall_us"]
            g = r.get("graph_us", {})
            ratio = w["ours"] / w["torch"] if w.get("torch") else None
            lines.append(
                f"{r['op']:<10}  {r['case']:<34}  {r['dtype']:<5}  {w['ours']:>7.2f}  {_f(w.get('ours_ptr'), '.2f'):>8}  "
                f"{_f(w.get('ours_cupy'), '.2f'):>9}  {w['torch']:>7.2f}  {_f(ratio, '.2f'):>10}  "
                f"{_f(g.get('ours'), '.2f'):>10}  {_f(g.get('torch'), '.2f'):>11}"
            )
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
    bad_compile = [r for r in rows if r.get("check_compile") and not r["check_compile"]["ok"]]
    if bad_compile:
        lines.append(
            "* torch.compile output differed from torch eager in: "
            + ", ".join(f"{r['op']} {r['case']} {r['dtype']}" for r in bad_compile)
        )
    return "\n".join(lines)


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
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            host = r.get("host_wall_us") or {}
            w.writerow(
                {
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
                    "ours_GBps": r.get("GBps", {}).get("ours"),
                    "torch_GBps": r.get("GBps", {}).get("torch"),
                    "ours_pct_copy": r.get("pct_copy", {}).get("ours"),
                    "torch_pct_copy": r.get("pct_copy", {}).get("torch"),
                    "flops": r.get("flops"),
                    "ours_TFLOPs": r.get("TFLOPs", {}).get("ours"),
                    "torch_TFLOPs": r.get("TFLOPs", {}).get("torch"),
                    "check": "INVALID" if r.get("invalid") else (None if "check" not in r else r["check"]["ok"]),
                    "host_ours_us": host.get("ours"),
                    "host_torch_us": host.get("torch"),
                    "error": r.get("error") or r.get("skipped") or (invalid_text(r) if r.get("invalid") else None),
                    "device_ours_us": _dev(r, "ours"),
                    "device_torch_us": _dev(r, "torch"),
                    "device_x_torch": r.get("device_x_torch"),
                    "device_ours_pct_copy": r.get("device_pct_copy", {}).get("ours"),
                    "same_bytes_copy_pct": r.get("same_bytes_copy_pct"),
                    "kernel_ours_us": _kern(r, "ours"),
                    "kernel_torch_us": _kern(r, "torch"),
                    "kernel_x_torch": r.get("kernel_x_torch"),
                    "kernel_ours_pct_copy": r.get("kernel_pct_copy", {}).get("ours"),
                    "kernel_copy_pct": r.get("kernel_copy_pct"),
                }
            )


def markdown(rows: list, copy_bw: dict, device: str) -> str:
    """The device-time and host-wall results as Markdown tables (for docs/perf/*.md)."""
    lines = [
        f"Device time per call on {device}; copy bandwidth {copy_bw.get('GBps', 0):.0f} GB/s. "
        "x torch = torch median / ours (> 1: ours faster).",
        "",
        "Device columns: the same calls enqueued behind a blocking kernel (no host latency inside the "
        "events); same-bytes copy: a torch copy of the case's byte count timed that way, % of copy bandwidth. "
        "Kernel columns: CUDA-graph replay (24 calls over the rotating sets), ours / torch / the same-bytes copy.",
        "",
        "| op | case | dtype | ours µs (p10–p90) | torch µs | x torch | GB/s | % copy | device ours / torch µs | device x torch | device % copy | same-bytes copy % | kernel ours / torch µs | kernel x torch | kernel % copy | kernel copy % | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("skipped") or r.get("error") or r.get("invalid"):
            what = r.get("skipped") or r.get("error") or invalid_text(r)
            lines.append(f"| {r['op']} | {r['case']} | {r['dtype']} | {what} |" + " |" * 13)
            continue
        ok = r.get("check", {}).get("ok")
        t = r["times_us"]
        ours = f"{t['ours']['median']:.1f} ({t['ours']['p10']:.1f}–{t['ours']['p90']:.1f})" if ok else "—"
        lines.append(
            f"| {r['op']} | {r['case']} | {r['dtype']} | {ours} | {t['torch']['median']:.1f} | "
            f"{_f(r.get('x_torch'), '.2f')} | {_rate(r)} | {_f(r.get('pct_copy', {}).get('ours'), '.0f')} | "
            f"{_f(_dev(r, 'ours'), '.1f')} / {_f(_dev(r, 'torch'), '.1f')} | {_f(r.get('device_x_torch'), '.2f')} | "
            f"{_f(r.get('device_pct_copy', {}).get('ours'), '.0f')} | {_f(r.get('same_bytes_copy_pct'), '.0f')} | "
            f"{_f(_kern(r, 'ours'), '.1f')} / {_f(_kern(r, 'torch'), '.1f')} | {_f(r.get('kernel_x_torch'), '.2f')} | "
            f"{_f(r.get('kernel_pct_copy', {}).get('ours'), '.0f')} | {_f(r.get('kernel_copy_pct'), '.0f')} | "
            f"{'PASS' if ok else 'FAIL'} |"
        )
    host = [r for r in rows if r.get("host_wall_us")]
    if host:
        lines += [
            "",
            "Host wall per call, µs (N back-to-back calls, one sync at the end):",
            "",
            "| op | case | dtype | ours | ours (int pointers) | torch | ours / torch |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in host:
            w = r["host_wall_us"]
            lines.append(
                f"| {r['op']} | {r['case']} | {r['dtype']} | {w['ours']:.2f} | {_f(w.get('ours_ptr'), '.2f')} | "
                f"{w['torch']:.2f} | {w['ours'] / w['torch']:.2f} |"
            )
    return "\n".join(lines) + "\n"
