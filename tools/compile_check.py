"""Compile every CUDA kernel of every registered operator for a GPU architecture, without a GPU.

    python tools/compile_check.py [--arch sm_90] [--jobs N] [--progress] [--verbose] [--json OUT.json] [OP ...]

For each operator whose NVIDIA factory (``spec.nvidia``) exposes ``compile_units()`` -- a list
of ``(source, [name expressions])`` -- every name expression is compiled exactly as the runtime
compiles it: ``full_source(source)`` (the common header prepended) with ``options_for(cc)``. A
unit is compiled to a CUBIN, so ptxas runs too and the per-kernel register, stack and spill
figures come for free (``-Xptxas=-v``).

``compile_units()`` lists every kernel a descriptor's plan can select: what the operator's
planner rules reach, nothing more.

The compiler is NVRTC loaded with ctypes (the ``nvidia-cuda-nvrtc`` wheel's first), else ``nvcc
-cubin`` (``tools/compile_job.py`` finds it and compiles one job).

Operators with an NVIDIA backend but no (or an empty) ``compile_units()`` fail the check, so
no kernel escapes it, unless they state why: ``compile_exempt = "reason"`` on the factory, or
``COMPILE_CHECK_EXEMPT = "reason"`` in ``ops/<name>/__init__.py`` (e.g. a backend that only
calls cuBLAS). The reason is printed.

``--ptx`` stops after NVVM (a virtual architecture, no ptxas): faster, but inline-PTX errors and register figures only come from the full check.

Units with the same source (ops sharing a kernel file, or one op's several units) are merged,
and a name expression that several of them list is compiled once; the result is reported for
each of them (with NVRTC, which names each kernel; nvcc jobs keep to one unit). The names of a
source are split evenly into jobs of at most ``--chunk`` name expressions, shared by ``--jobs``
worker processes, largest first. Nearly all the time is NVVM and ptxas work per kernel (the
common header and a program's set-up cost little), so the figure to watch is the number of
distinct kernels. A job that compiled before with the
same compiler, options, source and names is not compiled again (results cached under
``~/.cache/infiniop_py/compile_check``; ``--no-cache`` recompiles everything). ``--progress``
shows the compilation on stderr: a bar on a terminal, else a line per tenth of the kernels;
nothing when every job is cached.

Exit status: 0 when everything compiled, 1 on any compile error (the compiler log is printed)
or unchecked operator, 2 when neither NVRTC nor nvcc is available.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.compile_job import (  # noqa: E402
    UnitResult,
    compile_unit,
    compiler_version,
    find_backend,
    strip_ptxas_info,
)

CHUNK = 48  # name expressions per compile job


# --------------------------------------------------------------------------------------------
# Collecting the work from the registry
# --------------------------------------------------------------------------------------------
def parse_arch(arch: str) -> int:
    """'sm_90', 'sm90', '90', '9.0' -> 90."""
    text = arch.lower().replace("sm_", "").replace("sm", "").replace("compute_", "")
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major) * 10 + int(minor)
    return int(text)


def exempt_reason(spec) -> str | None:
    reason = getattr(spec.nvidia, "compile_exempt", None)
    if not reason and spec.module is not None:
        reason = getattr(spec.module, "COMPILE_CHECK_EXEMPT", None)
    return str(reason) if reason else None


def collect(ops: list[str] | None, cc: int) -> tuple[list[dict], dict[str, str]]:
    """(units, problems): one entry (op, unit, source with the common header, names, options)
    per ``compile_units()`` unit; problems maps op -> why it cannot be checked."""
    import infiniop_py as iop
    from infiniop_py.cuda.compiler import full_source, options_for
    from infiniop_py.registry import get_spec

    names = ops or iop.list_ops()
    units, problems = [], {}
    for name in names:
        try:
            spec = get_spec(name)
        except Exception as exc:
            problems[name] = f"not registered ({exc})"
            continue
        if spec.nvidia is None:
            problems[spec.name] = "skip: no NVIDIA backend"
            continue
        units_fn = getattr(spec.nvidia, "compile_units", None)
        if units_fn is None:
            reason = exempt_reason(spec)
            problems[spec.name] = f"exempt: {reason}" if reason else "ERROR: NVIDIA backend without compile_units()"
            continue
        try:
            found = list(units_fn())
        except Exception as exc:
            problems[spec.name] = f"ERROR: compile_units() raised {type(exc).__name__}: {exc}"
            continue
        if not found:
            reason = exempt_reason(spec)
            problems[spec.name] = f"exempt: {reason}" if reason else "ERROR: compile_units() is empty and states no reason"
            continue
        for i, (source, unit_names) in enumerate(found):
            units.append(
                {
                    "op": spec.name,
                    "unit": i,
                    "source": full_source(source),
                    "names": list(dict.fromkeys(unit_names)),
                    "options": list(options_for(cc)),
                }
            )
    return units, problems


def plan_jobs(units: list[dict], backend: tuple[str, str], chunk: int = CHUNK, ptx: bool = False) -> list[dict]:
    """Compile jobs covering every name of every unit, each distinct (source, options, name)
    once: units with the same source (several ops, or several units of one op, share one) are
    merged and their names deduplicated, then split evenly into jobs of at most ``chunk`` names.
    ``job["owners"]`` lists the (op, unit) whose names the job holds. With nvcc, whose kernels
    are known only by mangled name, units are not merged (a job's kernels belong to one unit)."""
    groups: dict = {}
    for u in units:
        key = (u["source"], tuple(u["options"])) + (() if backend[0] == "nvrtc" else (u["op"], u["unit"]))
        group = groups.setdefault(key, {"unit": u, "names": {}})
        for n in u["names"]:
            group["names"].setdefault(n, []).append((u["op"], u["unit"]))
    jobs = []
    for group in groups.values():
        u, names = group["unit"], list(group["names"])
        count = max(-(-len(names) // max(chunk, 1)), 1)
        size = -(-len(names) // count) if names else 0
        for c in range(count):
            part = names[c * size : (c + 1) * size]
            owners = list(dict.fromkeys(o for n in part for o in group["names"][n])) or [(u["op"], u["unit"])]
            jobs.append(
                {
                    "op": ",".join(dict.fromkeys(op for op, _ in owners)),
                    "unit": u["unit"],
                    "chunk": c,
                    "source": u["source"],
                    "names": part,
                    "options": u["options"],
                    "backend": backend[0],
                    "tool": backend[1],
                    "ptx": ptx,
                    "owners": owners,
                }
            )
    return jobs


def per_unit(units: list[dict], jobs: list[dict], results: list[UnitResult]) -> list[UnitResult]:
    """The jobs' results as one ``UnitResult`` per (op, unit, job) that the job covers: its
    kernels, its share of the job's wall and CPU time, the job's log and warnings. A failed job shared by
    several units is compiled again per unit (only then), so that a failure is charged to the
    units whose kernels fail."""
    wanted = {(u["op"], u["unit"]): set(u["names"]) for u in units}
    out = []
    for job, res in zip(jobs, results):
        owners = [tuple(o) for o in job["owners"]]
        for op, unit in owners:
            mine = [n for n in job["names"] if n in wanted[(op, unit)]]
            if len(owners) == 1:
                part = res
            elif res.ok and not res.error:
                part = UnitResult(op, unit, 0, True, 0.0, 0, res.log, res.warnings, cached=res.cached)
                part.kernels = [k for k in res.kernels if k["name"] in wanted[(op, unit)]]
            else:
                part = compile_unit({**job, "names": mine})
            part = UnitResult(**{**asdict(part), "op": op, "unit": unit, "chunk": job["chunk"], "names": len(mine)})
            share = len(mine) / max(len(job["names"]), 1)
            part.seconds, part.cpu = res.seconds * share, res.cpu * share
            out.append(part)
    return out


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "infiniop_py" / "compile_check"


def job_key(job: dict, version: str) -> str:
    """Everything that determines the compiler's output: compiler, version, options, source, names."""
    blob = json.dumps([job["backend"], job["tool"], version, job["options"], job.get("ptx", False), job["source"], job["names"]])
    return hashlib.sha256(blob.encode()).hexdigest()


def _cached(path: Path, job: dict) -> UnitResult | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    data.update(op=job["op"], unit=job["unit"], chunk=job.get("chunk", 0), cached=True, seconds=0.0, cpu=0.0)
    try:
        return UnitResult(**data)
    except TypeError:  # an entry from an older layout
        return None


def _store(cache: Path, key: str, result: UnitResult) -> None:
    """Remember a successful job (atomically: concurrent checks share the folder)."""
    if not result.ok or result.error:
        return
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(result)))
        tmp.replace(cache / f"{key}.json")
    except OSError:
        pass  # a read-only home: the check still ran


#: The environment of the worker processes. NVRTC spends much of its time in glibc's malloc:
#: transparent huge pages for its heap, a larger per-thread cache and no trimming between
#: programs take a good part of that off (the CUBINs are byte-identical). A GLIBC_TUNABLES of
#: the caller's own is kept as it is.
WORKER_ENV = {
    "GLIBC_TUNABLES": ":".join(
        (
            "glibc.malloc.hugetlb=1",
            "glibc.malloc.tcache_count=1024",
            "glibc.malloc.trim_threshold=268435456",
            "glibc.malloc.mmap_threshold=268435456",
            "glibc.malloc.top_pad=67108864",
        )
    )
}


@contextmanager
def _environment(values: dict[str, str]):
    """``values`` in ``os.environ`` (where not set already) while the block runs."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def run_jobs(
    jobs: list[dict], workers: int, version: str = "", cache: Path | None = None, progress: bool = False
) -> list[UnitResult]:
    """Compile all jobs, largest first, in ``workers`` processes (1: in this process).

    With ``cache`` (a folder), a job whose key (:func:`job_key`) compiled successfully before is
    not compiled again; each successful result is stored there as soon as it arrives.
    """
    results: list[UnitResult | None] = [None] * len(jobs)
    keys = [job_key(j, version) for j in jobs]
    todo = []
    for i, job in enumerate(jobs):
        hit = _cached(cache / f"{keys[i]}.json", job) if cache is not None else None
        if hit is not None:
            results[i] = hit
        else:
            todo.append(i)
    todo.sort(key=lambda i: -len(jobs[i]["names"]) * len(jobs[i]["source"]))
    show = Progress(sum(len(jobs[i]["names"]) for i in todo), len(jobs) - len(todo)) if progress and todo else None

    def done(i: int, result: UnitResult, count: int) -> None:
        results[i] = result
        if cache is not None:
            _store(cache, keys[i], result)
        if show is not None:
            show.update(result)

    if workers <= 1 or len(todo) <= 1:
        for n, i in enumerate(todo, 1):
            done(i, compile_unit(jobs[i]), n)
    else:
        import multiprocessing as mp

        # Fresh worker processes (spawn) that start with the allocator settings of WORKER_ENV;
        # they only need the ctypes library and the job.
        with _environment(WORKER_ENV), ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(compile_unit, jobs[i]): i for i in todo}
            for n, fut in enumerate(as_completed(futures), 1):
                done(futures[fut], fut.result(), n)
    if show is not None:
        show.close()
    return [r for r in results if r is not None]


class Progress:
    """Compiled kernels out of ``total`` on stderr: a tqdm bar on a terminal, else a line at each
    tenth (logs stay short)."""

    def __init__(self, total: int, cached_jobs: int):
        self.total, self.count, self.failed, self.t0 = total, 0, 0, time.perf_counter()
        self.next_tenth = 1
        self.bar = None
        cached = f" ({cached_jobs} jobs found in the cache)" if cached_jobs else ""
        head = f"compile_check: compiling {total} kernels{cached}; the results are cached for later runs"
        print(f"\n{head}", file=sys.stderr, flush=True)  # a line of its own after pytest's dots
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="kernel", file=sys.stderr, dynamic_ncols=True, leave=False)

    def update(self, result: UnitResult) -> None:
        self.count += result.names
        self.failed += int(not result.ok or bool(result.error))
        if self.bar is not None:
            self.bar.set_postfix_str(f"{result.op}{', FAILED: ' + str(self.failed) if self.failed else ''}", refresh=False)
            self.bar.update(result.names)
            return
        if self.total and self.count * 10 >= self.next_tenth * self.total:
            self.next_tenth = self.count * 10 // self.total + 1
            elapsed = time.perf_counter() - self.t0
            print(
                f"compile_check: {self.count}/{self.total} kernels ({100 * self.count // self.total}%), {elapsed:.0f} s"
                + (f", {self.failed} jobs FAILED" if self.failed else ""),
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            elapsed = time.perf_counter() - self.t0
            print(f"compile_check: compiled {self.count} kernels in {elapsed:.0f} s", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------
def _max(values):
    values = [v for v in values if v is not None]
    return max(values) if values else None


def report(results: list[UnitResult], problems: dict[str, str], verbose: bool, werror: bool) -> int:
    by_op: dict[str, list[UnitResult]] = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    failed = 0
    header = f"{'op':<28} {'units':>5} {'kernels':>7} {'max regs':>8} {'spill B':>7} {'stack B':>7} {'cpu s':>7}  status"
    print(header)
    print("-" * len(header))
    for op in sorted(set(by_op) | set(problems)):
        if op in problems:
            status = problems[op]
            if status.startswith("ERROR") or status.startswith("not registered"):
                failed += 1
            print(f"{op:<28} {'':>5} {'':>7} {'':>8} {'':>7} {'':>7} {'':>7}  {status}")
            continue
        chunks = sorted(by_op[op], key=lambda r: (r.unit, r.chunk))
        units = {r.unit for r in chunks}
        kernels = [k for r in chunks for k in r.kernels]
        bad = [r for r in chunks if not r.ok or r.error]
        warned = [r for r in chunks if r.warnings]
        cached = all(r.cached for r in chunks)
        regs = _max(k["registers"] for k in kernels)
        spill = _max((k["spill_stores"] or 0) + (k["spill_loads"] or 0) for k in kernels if k["spill_stores"] is not None)
        stack = _max(k["stack"] for k in kernels)
        secs = sum(r.cpu for r in chunks)  # CPU, not wall: the same on a busy machine
        status = "OK (cached)" if cached else "OK"
        if bad:
            status = f"FAILED ({len({r.unit for r in bad})} of {len(units)} units)"
        elif warned:
            status = f"OK with warnings ({sum(len(r.warnings) for r in warned)})"
        if bad or (warned and werror):
            failed += 1
        print(
            f"{op:<28} {len(units):>5} {len(kernels):>7} {regs if regs is not None else '-':>8} "
            f"{spill if spill is not None else '-':>7} {stack if stack is not None else '-':>7} {secs:>7.1f}  {status}"
        )
        if verbose:
            for k in kernels:
                print(
                    f"    {k['registers'] or '-':>4} regs  {k['spill_stores'] or 0:>4}/{k['spill_loads'] or 0:<4} spill  {k['name']}"
                )
        for r in bad:
            print(f"\n===== {op} unit {r.unit} chunk {r.chunk}: compile FAILED =====")
            if r.error:
                print(r.error)
            print(strip_ptxas_info(r.log))
        if warned and (verbose or werror):
            for r in warned:
                print(f"    warnings in unit {r.unit}, chunk {r.chunk}:")
                for w in r.warnings:
                    print(f"      {w}")
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ops", nargs="*", help="operators to check (default: every registered one)")
    ap.add_argument("--arch", default="sm_90", help="target architecture(s), comma separated (default sm_90)")
    ap.add_argument("--compiler", choices=("auto", "nvrtc", "nvcc"), default="auto")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--verbose", "-v", action="store_true", help="per-kernel registers and spills, warnings")
    ap.add_argument("--werror", action="store_true", help="treat compiler warnings as errors")
    ap.add_argument("--json", help="write the per-job and per-unit results to this file")
    ap.add_argument("--no-cache", action="store_true", help=f"compile everything again (cache: {cache_dir()})")
    ap.add_argument(
        "--ptx",
        action="store_true",
        help="PTX only (no ptxas): faster, misses inline-asm errors and register counts",
    )
    ap.add_argument("--progress", action="store_true", help="show progress on stderr (a bar on a terminal)")
    ap.add_argument("--chunk", type=int, default=CHUNK, help="name expressions per compile job (default %(default)s)")
    args = ap.parse_args(argv)

    backend = find_backend(args.compiler)
    if backend is None:
        print("compile_check: neither NVRTC (nvidia-cuda-nvrtc wheel, CUDA_HOME) nor nvcc found", file=sys.stderr)
        return 2
    version = compiler_version(backend)
    t0 = time.perf_counter()
    failed = 0
    everything, job_rows = [], []
    for arch in args.arch.split(","):
        cc = parse_arch(arch)
        units, problems = collect(args.ops or None, cc)
        jobs = plan_jobs(units, backend, max(args.chunk, 1), args.ptx)
        nkern = sum(len(u["names"]) for u in units)
        distinct = sum(len(j["names"]) for j in jobs)
        print(
            f"compile_check: {'compute' if args.ptx else 'sm'}_{cc} with {backend[0]} {version} ({backend[1]}): "
            f"{len({u['op'] for u in units})} ops, {len(units)} units, {nkern} kernels ({distinct} distinct), "
            f"{len(jobs)} jobs, {args.jobs} workers"
        )
        compiled = run_jobs(jobs, args.jobs, version, None if args.no_cache else cache_dir(), args.progress)
        job_rows += [
            {
                "arch": f"sm_{cc}",
                "ops": j["op"],
                "names": len(j["names"]),
                "cached": r.cached,
                "cpu_s": r.cpu,
                "wall_s": r.seconds,
            }
            for j, r in zip(jobs, compiled, strict=True)
        ]
        results = per_unit(units, jobs, compiled)
        failed += report(results, problems, args.verbose, args.werror)
        everything += [{"arch": f"sm_{cc}", **asdict(r)} for r in results]
        everything += [{"arch": f"sm_{cc}", "op": op, "status": s} for op, s in problems.items()]
    wall = time.perf_counter() - t0
    fresh = [r for r in job_rows if not r["cached"]]
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {"backend": backend, "version": version, "wall_s": wall, "jobs": job_rows, "results": everything}, indent=1
            )
        )
    print(
        f"\n{'FAILED' if failed else 'OK'}: {failed} operator(s) with problems; {wall:.1f} s wall; "
        f"{sum(r['names'] for r in fresh)} kernels compiled in {len(fresh)} jobs, {sum(r['cpu_s'] for r in fresh):.1f} CPU-s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
