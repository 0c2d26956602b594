"""Run the per-operator profile scripts ``test/infiniop/<op>.py`` and collect their logs.

    python tools/run_profiles.py --out-dir DIR [--nvidia] [--cpu] [--no-profile] [--full]
                                 [--num_iterations N] [--timeout S] [OP ...]

Each script runs in its own process (so one crash cannot take the others down) with
``--profile`` unless ``--no-profile``; its output goes to ``DIR/<op>.log``; ``DIR/summary.json``
and the printed table hold each operator's exit status, pass/fail counts and wall time.
Default operators: every registered one that has a script. Exit status 1 if any script failed,
2 for a usage error or an output directory that cannot be written (tried before any script runs).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "test" / "infiniop"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infiniop_py.argtypes import int_at_least  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/run_profiles.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("ops", nargs="*", help="operators (default: every registered one with a script)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--nvidia", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--num_prerun", type=int_at_least(0), default=10)
    ap.add_argument("--num_iterations", type=int_at_least(1), default=100)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    args = ap.parse_args(argv)
    if not args.timeout > 0:
        ap.error(f"argument --timeout: expected a number > 0, got {args.timeout!r}")
    out = Path(args.out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / "summary.json.tmp"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        print(f"tools/run_profiles.py: error: cannot write to --out-dir {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2

    import infiniop_py as iop

    ops = args.ops or [op for op in iop.list_ops() if (SCRIPTS / f"{op}.py").is_file()]
    flags = [f for f, on in (("--nvidia", args.nvidia), ("--cpu", args.cpu), ("--full", args.full)) if on]
    if not args.no_profile:
        flags.append("--profile")
    flags += ["--num_prerun", str(args.num_prerun), "--num_iterations", str(args.num_iterations)]
    rows = []
    for op in ops:
        script = SCRIPTS / f"{op}.py"
        t0 = time.perf_counter()
        if not script.is_file():
            rows.append({"op": op, "rc": None, "note": "no script (python tools/new_op_scripts.py)"})
            continue
        try:
            proc = subprocess.run(
                [sys.executable, str(script), *flags], cwd=ROOT, capture_output=True, text=True, timeout=args.timeout
            )
            text, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            text += f"\n[timed out after {args.timeout:.0f} s]\n"
            rc = "timeout"
        (out / f"{op}.log").write_text(text)
        m = re.search(r"(\d+) passed, (\d+) failed, (\d+) skipped", text)
        row = {"op": op, "rc": rc, "wall_s": round(time.perf_counter() - t0, 1)}
        if m:
            row.update(passed=int(m.group(1)), failed=int(m.group(2)), skipped=int(m.group(3)))
        rows.append(row)
        print(
            f"{op:<28} rc={rc!s:<7} passed={row.get('passed', '-')!s:<5} failed={row.get('failed', '-')!s:<4} "
            f"skipped={row.get('skipped', '-')!s:<4} {row['wall_s']:6.1f}s",
            flush=True,
        )
    (out / "summary.json").write_text(json.dumps({"flags": flags, "results": rows}, indent=1))
    bad = [r for r in rows if r.get("rc") != 0]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} scripts passed; logs in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
