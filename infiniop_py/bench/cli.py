"""``infiniop-bench`` (also ``python -m infiniop_py.bench``): run, report, compare.

    infiniop-bench run [--family F] [--op X] [--dtype D] [--peers torch,compile,jax,...|all]
                       [--quick] [--cpu] [--out DIR] [--reps N] [--match TEXT] [--list] ...
    infiniop-bench report RUN.json [--out DIR | --pages DOCS_PERF_DIR]
    infiniop-bench compare OLD.json NEW.json [--min-change 0.1] [--z 3]

``run`` is the default command (``infiniop-bench --quick --cpu`` runs). The method is
docs/perf/method.md. Exit status: 0; 1 if a case failed its check, raised, or gave times that
cannot be true (``run``), or a regression was flagged (``compare``); 2 for a usage error, a file
that cannot be read or written (outputs are tried before anything runs), or no GPU without
``--cpu``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import errno
import sys
import time
import traceback
from pathlib import Path

from infiniop_py.argtypes import int_at_least

PROG = "infiniop-bench"
COMMANDS = ("run", "report", "compare")
DEFAULT_OUT = "bench-results"
QUICK_DTYPE = "f32"  # --quick without --dtype: each operator's quick cases in this dtype (or its first)


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

    def isatty(self):
        return False


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


def _fail(message: str, command: str = "") -> int:
    print(f"{PROG}{' ' + command if command else ''}: error: {message}", file=sys.stderr)
    return 2


def _split(text: str) -> set[str]:
    return {t.strip() for t in (text or "").split(",") if t.strip()}


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="Benchmarks of infiniop-py against its peers (docs/perf/method.md).")
    sub = ap.add_subparsers(dest="command", metavar="{run,report,compare}")
    run = sub.add_parser("run", help="measure (the default command)", description="Check, then time, every selected case.")
    run.add_argument("--family", "--suite", default="all", help="suite(s), comma-separated, or 'all' (see --list)")
    run.add_argument("--op", "--ops", default="", help="operator names to keep, comma-separated")
    run.add_argument("--dtype", "--dtypes", default="", help="dtypes to keep, comma-separated (f32,f16,bf16)")
    run.add_argument("--match", default="", help="keep cases whose description contains this text")
    run.add_argument(
        "--peers",
        default="",
        help="peers to run besides ours: torch (always), compile (torch.compile), jax (jax.jit), a suite's own "
        "(im2col, causal_conv1d, ...), or 'all'; default: torch and the suites' own peers",
    )
    run.add_argument("--compile", action="store_true", help="same as adding 'compile' to --peers")
    run.add_argument(
        "--quick",
        action="store_true",
        help="the cases each suite marks representative, in one dtype per operator (f32 where it has one; "
        "--dtype picks others), 50 repetitions, 500 host-wall calls per round",
    )
    run.add_argument("--cpu", action="store_true", help="our NumPy backend against torch (and JAX) on the CPU")
    run.add_argument(
        "--out", "--out-dir", dest="out", default=None, help=f"directory for the run's files (default {DEFAULT_OUT}/)"
    )
    run.add_argument("--json", help="write the run's JSON here instead (no other files unless --out is given too)")
    run.add_argument("--csv", action="store_true", help="with --json: also a CSV next to it")
    run.add_argument(
        "--reps", type=int_at_least(1), default=None, help="timed calls per implementation (default 100; quick and CPU 50)"
    )
    run.add_argument(
        "--warmup", type=int_at_least(0), default=None, help="warm-up calls per implementation (default 10; quick 5)"
    )
    run.add_argument("--no-kernel", action="store_true", help="skip the kernel-only (CUDA-graph replay) timing")
    run.add_argument("--no-reference", action="store_true", help="skip the float64 check before timing")
    run.add_argument(
        "--host-calls",
        type=int_at_least(1),
        default=None,
        help="calls per round for the host wall time (default 2000; quick 500)",
    )
    run.add_argument("--device-id", type=int_at_least(0), default=0)
    run.add_argument("--no-progress", action="store_true", help="no progress bar (one line per case instead)")
    run.add_argument("--list", action="store_true", help="list the selected cases and exit")
    rep = sub.add_parser("report", help="Markdown tables and PNG plots of a run", description="Render a run's JSON.")
    rep.add_argument("run_json", metavar="RUN.json")
    rep.add_argument("--out", default=None, help="directory for the Markdown and PNG files (default: next to RUN.json)")
    rep.add_argument(
        "--pages",
        default=None,
        metavar="DIR",
        help="instead: update the per-family perf pages in DIR (docs/perf): their generated table and plots",
    )
    cmp_ = sub.add_parser("compare", help="flag regressions between two runs", description=_compare_doc())
    cmp_.add_argument("old", metavar="OLD.json")
    cmp_.add_argument("new", metavar="NEW.json")
    cmp_.add_argument("--min-change", type=float, default=0.10, help="smallest slow-down flagged (default 0.10 = 10%%)")
    cmp_.add_argument("--z", type=float, default=3.0, help="standard errors of the difference beyond noise (default 3)")
    return ap


def _compare_doc() -> str:
    from . import compare

    return compare.__doc__.split("\n\n")[1].replace("\n", " ").replace("%", "%%")


def parse(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["run", *argv]  # run is the default command
    return parser().parse_args(argv)


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------
def select(cases, args):
    ops, dts = _split(args.op), _split(args.dtype)
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
    if args.quick and not dts:  # one dtype per operator: f32 where it has one, else its first
        chosen = {}
        for c in out:
            key = (c.suite, c.op)
            if chosen.get(key) != QUICK_DTYPE:
                chosen[key] = QUICK_DTYPE if c.dtype == QUICK_DTYPE else chosen.get(key, c.dtype)
        out = [c for c in out if c.dtype == chosen[(c.suite, c.op)]]
    return out


def _error_row(suite: str, op: str, case: str, dtype: str, exc: BaseException, trace: str) -> dict:
    return {"suite": suite, "op": op, "case": case, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}", "traceback": trace}


def _paths(args, device: str, stamp: str) -> dict:
    paths = {}
    if args.out is not None or not args.json:
        out = Path(args.out if args.out is not None else DEFAULT_OUT)
        stem = f"bench-{device}-{stamp}"
        paths = {k: out / f"{stem}.{k}" for k in ("json", "csv", "txt", "log", "md")}
    if args.json:
        paths["json"] = Path(args.json)
        if args.csv:
            paths["csv"] = Path(args.json).with_suffix(".csv")
    return paths


class _Progress:
    """A tqdm bar on a terminal (lines printed above it), else one line per finished case."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.total = total
        self.t0 = time.perf_counter()
        self.i = 0
        if enabled and total > 1 and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True, leave=False)
            except Exception:  # no tqdm: lines only
                self.bar = None

    def start(self, case) -> None:
        if self.bar is not None:
            self.bar.set_description(f"{case.op} {case.dtype}"[:30])

    def done(self, line: str) -> None:
        self.i += 1
        text = f"[{self.i}/{self.total} {time.perf_counter() - self.t0:6.1f}s] {line}"
        if self.bar is not None:
            self.bar.write(text, file=sys.stdout)
            self.bar.update(1)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_run(args) -> int:
    from infiniop_py.bench import peers as peer_mod
    from infiniop_py.bench.suites import discover

    suites = discover()
    names = list(suites) if args.family == "all" else _split(args.family)
    unknown = sorted(n for n in names if n not in suites)
    if unknown:
        return _fail(f"unknown family {', '.join(unknown)}; known: {', '.join(suites)}", "run")
    names = [n for n in suites if n in names]  # discovery order
    device = "cpu" if args.cpu else "nvidia"
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    paths = {} if args.list else _paths(args, device, stamp)
    selected, everything = peer_mod.parse(args.peers)
    try:
        import torch  # noqa: F401
    except ImportError:
        return _fail("the benchmark needs torch (the peer every case is checked and timed against): pip install torch", "run")

    from infiniop_py.bench.env import make_env

    try:
        env = make_env(args.cpu, args.device_id)
    except Exception as exc:  # no CUDA torch, no CuPy, no device `--device-id`
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if args.cpu:
            return _fail(f"cannot start the CPU benchmark ({type(exc).__name__}: {first})", "run")
        return _fail(f"no usable GPU ({first}); `--cpu` runs the benchmark on the CPU backend against torch CPU", "run")
    try:  # every output is tried before anything is measured, so a bad path costs no measurement
        for kind, path in paths.items():
            writable(path, "--json" if args.json and path == Path(args.json) else f"{kind} output")
    except OSError as exc:
        return _fail(str(exc), "run")
    tee = None
    if "log" in paths:
        tee = sys.stdout = _Tee(sys.stdout, paths["log"])
    try:
        return _measure(args, env, suites, names, paths, selected, everything, device)
    finally:
        if tee is not None:
            sys.stdout = tee.stream
            tee.file.close()


def _measure(args, env, suites, names, paths, selected, everything, device) -> int:
    from infiniop_py.bench import peers as peer_mod
    from infiniop_py.bench import report
    from infiniop_py.bench.core import Options, Skip, run_case

    cases, rows = [], []
    for name in names:
        try:
            cases += select(suites[name].cases(env, args.quick), args)
        except Exception as exc:  # one broken suite is one error row, the others run
            trace = getattr(suites[name], "trace", None) or traceback.format_exc()
            rows.append(_error_row(name, "-", "suite failed to load", "-", exc, trace))
            print(f"{PROG} run: suite {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if args.list:
        for c in cases:
            print(f"{c.suite:<12} {c.op:<10} {c.dtype:<5} {c.case}{'  [host wall]' if c.host_wall else ''}")
        for r in rows:
            print(f"{r['suite']:<12} ERROR: {r['error']}")
        return 1 if rows else 0

    default_reps = 50 if args.quick or args.cpu else 100  # CPU calls are long; 50 is the method's floor
    opts = Options(
        reps=args.reps if args.reps is not None else default_reps,
        warmup=args.warmup if args.warmup is not None else (5 if args.quick else 10),
        compile=args.compile,
        host_calls=args.host_calls if args.host_calls is not None else (500 if args.quick else 2000),
        kernel=not args.no_kernel,
        peers=selected,
        all_peers=everything,
        reference=not args.no_reference,
    )
    if opts.reps < 50:
        print(f"note: {opts.reps} repetitions (the method asks for at least 50)")
    run_notes = {}
    if peer_mod.wanted("jax", selected, everything):
        jax, why = peer_mod.jax_for(env)
        if jax is None:
            run_notes["jax"] = why
    if selected:
        offered = set(peer_mod.GENERIC).union(*(getattr(suites[n], "PEERS", ()) for n in names))
        for p in sorted(selected - offered):
            print(f"note: no selected family declares peer '{p}' (PEERS); it runs only where a case offers it")
    copy_bw = env.copy_bandwidth()
    matrix = env.matrix_rate()
    opts.matrix_tflops = {k: v for k, v in matrix.items() if isinstance(v, float)}
    header = report.meta(env, args, copy_bw, opts, matrix, run_notes)
    m = header["machine"]
    v = header["versions"]
    print(f"# {m['name']} | torch {v['torch']} | cupy {v.get('cupy')} | jax {v.get('jax')} | commit {header['git']['commit']}")
    rate = ", ".join(f"{k} {t:.2f}" for k, t in opts.matrix_tflops.items())
    print(
        f"# copy bandwidth {copy_bw['GBps']:.0f} GB/s ({copy_bw['how']}); matrix rate {rate} TFLOP/s; "
        f"{len(cases)} cases, {opts.reps} reps"
    )
    for p, why in run_notes.items():
        print(f"note: peer {p} skipped: {why}")
    failures = len(rows)
    progress = _Progress(len(cases), not args.no_progress)
    for r in rows:
        progress.done(report.progress_line(r))
    try:
        for case in cases:
            progress.start(case)
            try:
                row = run_case(env, case, opts, copy_bw["GBps"])
            except Skip as exc:
                row = {"suite": case.suite, "op": case.op, "case": case.case, "dtype": case.dtype, "skipped": str(exc)}
            except Exception as exc:
                row = _error_row(case.suite, case.op, case.case, case.dtype, exc, traceback.format_exc())
                print(row["traceback"], file=sys.stderr)
            if row.get("error") or (row.get("check") and not row["check"]["ok"]) or row.get("invalid"):
                failures += 1
            rows.append(row)
            progress.done(report.progress_line(row))
            if "json" in paths:
                report.write_json(paths["json"], header, rows)
    finally:
        progress.close()
    text = report.table(rows, copy_bw, f"{m['name']}, {device}", opts.matrix_tflops)
    print()
    print(text)
    if "json" in paths:
        report.write_json(paths["json"], header, rows)
    if "txt" in paths:
        paths["txt"].write_text(text + "\n")
    if "csv" in paths:
        report.write_csv(paths["csv"], rows)
    elif args.csv:
        report.write_csv(Path("/dev/stdout"), rows)
    if "md" in paths:
        written = report.render(header, rows, paths["md"].parent, paths["md"].stem)
        print(f"\nwrote {', '.join(str(p) for p in [paths['json'], *written])}")
    elif "json" in paths:
        print(f"\nwrote {paths['json']}")
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------
# report, compare
# --------------------------------------------------------------------------------------------
def cmd_report(args) -> int:
    from infiniop_py.bench import report

    path = Path(args.run_json)
    try:
        meta, rows = report.load(path)
    except ValueError as exc:
        return _fail(str(exc), "report")
    out = Path(args.pages or args.out or path.parent)
    try:
        if args.pages:
            from infiniop_py.bench import pages

            written = pages.write(meta, rows, out)
        else:
            written = report.render(meta, rows, out, path.stem)
    except OSError as exc:
        return _fail(f"cannot write into {out}: {exc.strerror or exc}", "report")
    for p in written:
        print(p)
    return 0


def cmd_compare(args) -> int:
    from infiniop_py.bench import compare, report

    if args.min_change < 0 or args.z < 0:
        return _fail("--min-change and --z must be >= 0", "compare")
    try:
        old_meta, old_rows = report.load(Path(args.old))
        new_meta, new_rows = report.load(Path(args.new))
    except ValueError as exc:
        return _fail(str(exc), "compare")
    changes, only_old, only_new = compare.compare_rows(old_rows, new_rows, args.min_change, args.z)
    print(compare.format_report(changes, only_old, only_new, old_meta, new_meta, args.min_change, args.z))
    return 1 if any(c.verdict in ("regression", "broken") for c in changes) else 0


def main(argv=None) -> int:
    args = parse(argv)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "compare":
        return cmd_compare(args)
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
