"""Benchmark harness (method: docs/perf/method.md, shared/spec/perf.md).

    python -m infiniop_py.bench [--suite elementwise|rearrange|all] [--ops add,mul] [--dtypes f32,bf16]
                          [--match TEXT] [--quick] [--cpu] [--compile] [--reps N] [--no-kernel]
                          [--json OUT.json] [--csv] [--out-dir DIR] [--list]

GPU by default (torch CUDA + our NVIDIA backend through CuPy); ``--cpu`` compares our NumPy
backend with torch on the CPU. ``--out-dir DIR`` writes DIR/bench-<device>.{json,csv,txt,md,log};
the JSON is rewritten after every case, so an interrupted run keeps what it measured.
Exit status: 0; 1 if any case failed its check, raised, or gave times that cannot be true
(INVALID rows); 2 for a usage error, an output path that cannot be written (checked before
anything runs) or no GPU without ``--cpu``.
"""

from __future__ import annotations

import argparse
import errno
import sys
import time
import traceback
from pathlib import Path

from infiniop_py.argtypes import int_at_least
from infiniop_py.bench import report
from infiniop_py.bench.core import Options, Skip, run_case
from infiniop_py.bench.suites import discover


class _Tee:
    """Copies stdout to a log file."""

    def __init__(self, stream, path: Path):
        self.stream = stream
        self.file = open(path, "w", buffering=1)

    def write(self, text):
        self.stream.write(text)
        self.file.write(text)
        return len(text)

    def flush(self):
        self.stream.flush()
        self.file.flush()


def writable(path: Path, what: str) -> None:
    """Raise OSError naming ``path`` unless a file can be written there (tried now, before the run)."""
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "it is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(path.name + ".tmp")  # what report.write_json writes, then renames
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OSError(f"cannot write {what} {path}: {reason}") from None


def parse(argv):
    suites = discover()
    ap = argparse.ArgumentParser(prog="python -m infiniop_py.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="all", help=f"one of {', '.join(suites)} or 'all' (comma-separated list allowed)")
    ap.add_argument("--ops", default="", help="comma-separated operator names to keep")
    ap.add_argument("--dtypes", default="", help="comma-separated dtypes to keep (f32,f16,bf16)")
    ap.add_argument("--match", default="", help="keep cases whose description contains this text")
    ap.add_argument("--quick", action="store_true", help="representative cases only, 50 repetitions")
    ap.add_argument("--cpu", action="store_true", help="NumPy backend vs torch CPU instead of the GPU")
    ap.add_argument("--compile", action="store_true", help="add torch.compile as a peer (compiles per case)")
    ap.add_argument(
        "--reps", type=int_at_least(1), default=None, help="timed calls per implementation (default 100; quick and CPU 50)"
    )
    ap.add_argument("--warmup", type=int_at_least(0), default=None, help="warm-up calls per implementation (default 10; quick 5)")
    ap.add_argument("--no-kernel", action="store_true", help="skip the kernel-only (CUDA-graph replay) timing")
    ap.add_argument("--host-calls", type=int_at_least(1), default=2000, help="calls per round for the host wall time")
    ap.add_argument("--device-id", type=int_at_least(0), default=0)
    ap.add_argument("--json", help="write results here (JSON)")
    ap.add_argument("--csv", action="store_true", help="also write a CSV next to the JSON (or stdout without --json)")
    ap.add_argument("--out-dir", help="write bench-<device>.json/.csv/.txt/.log into this directory")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    args = ap.parse_args(argv)
    names = list(suites) if args.suite == "all" else [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [n for n in names if n not in suites]
    if unknown:
        ap.error(f"unknown suite(s) {unknown}; known: {list(suites)}")
    return args, [suites[n] for n in names]


def select(cases, args):
    ops = {o.strip() for o in args.ops.split(",") if o.strip()}
    dts = {d.strip() for d in args.dtypes.split(",") if d.strip()}
    out = []
    for c in cases:
        if ops and c.op not in ops:
            continue
        if dts and c.dtype not in dts:
            continue
        if args.match and args.match not in c.case:
            continue
        if args.quick and not c.quick:
            continue
        out.append(c)
    return out


def _fail(message: str) -> int:
    print(f"python -m infiniop_py.bench: error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    args, suites = parse(argv)
    device = "cpu" if args.cpu else "nvidia"
    paths = {}
    if args.out_dir:
        out = Path(args.out_dir)
        paths = {k: out / f"bench-{device}.{k}" for k in ("json", "csv", "txt", "log", "md")}
    if args.json:
        paths["json"] = Path(args.json)
        if args.csv:
            paths["csv"] = Path(args.json).with_suffix(".csv")
    if not args.list:
        try:  # every output is tried before the run, so a bad path costs no measurement
            for kind, path in paths.items():
                writable(path, "--json" if args.json and path == paths.get("json") else f"{kind} output")
        except OSError as exc:
            return _fail(str(exc))
        if "log" in paths:
            sys.stdout = _Tee(sys.stdout, paths["log"])

    from infiniop_py.bench.env import make_env

    try:
        env = make_env(args.cpu, args.device_id)
    except Exception as exc:  # no CUDA torch, no CuPy, no device `--device-id`
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if args.cpu:
            return _fail(f"cannot start the CPU benchmark ({type(exc).__name__}: {first})")
        return _fail(f"no usable GPU ({first}); `--cpu` runs the benchmark on the CPU backend against torch CPU")
    cases = []
    for module in suites:
        cases += select(module.cases(env, args.quick), args)
    if args.list:
        for c in cases:
            print(f"{c.suite:<12} {c.op:<10} {c.dtype:<5} {c.case}{'  [host wall]' if c.host_wall else ''}")
        return 0

    default_reps = 50 if args.quick or args.cpu else 100  # CPU calls are long; 50 is the method's floor
    opts = Options(
        reps=max(args.reps if args.reps is not None else default_reps, 1),
        warmup=args.warmup if args.warmup is not None else (5 if args.quick else 10),
        compile=args.compile,
        host_calls=args.host_calls,
        kernel=not args.no_kernel,
    )
    if opts.reps < 50:
        print(f"note: {opts.reps} repetitions (the method asks for at least 50)")
    copy_bw = env.copy_bandwidth()
    header = report.meta(env, args, copy_bw, opts)
    m = header["machine"]
    print(
        f"# {m['name']} | torch {header['versions']['torch']} | cupy {header['versions'].get('cupy')} | commit {header['git']['commit']}"
    )
    print(f"# copy bandwidth {copy_bw['GBps']:.0f} GB/s ({copy_bw['how']}); {len(cases)} cases, {opts.reps} reps")
    rows, failures = [], 0
    t0 = time.perf_counter()
    for i, case in enumerate(cases, 1):
        try:
            row = run_case(env, case, opts, copy_bw["GBps"])
        except Skip as exc:
            row = {"suite": case.suite, "op": case.op, "case": case.case, "dtype": case.dtype, "skipped": str(exc)}
        except Exception as exc:
            failures += 1
            row = {
                "suite": case.suite,
                "op": case.op,
                "case": case.case,
                "dtype": case.dtype,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            print(row["traceback"], file=sys.stderr)
        if (row.get("check") and not row["check"]["ok"]) or row.get("invalid"):
            failures += 1
        rows.append(row)
        print(f"[{i}/{len(cases)} {time.perf_counter() - t0:6.1f}s] {report.format_row(report._cells(row))}", flush=True)
        if "json" in paths:
            report.write_json(paths["json"], header, rows)
    text = report.table(rows, copy_bw, f"{m['name']}, {device}")
    print()
    print(text)
    if "txt" in paths:
        paths["txt"].write_text(text + "\n")
    if "md" in paths:
        paths["md"].write_text(report.markdown(rows, copy_bw, f"{m['name']} ({device})"))
    if args.csv or "csv" in paths:
        if "csv" in paths:
            report.write_csv(paths["csv"], rows)
        else:
            report.write_csv(Path("/dev/stdout"), rows)
    if "json" in paths:
        print(f"\nwrote {paths['json']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
