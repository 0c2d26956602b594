"""``python -m gguf_cases``: (re)build the GGUF test-case files (gguf.md §5.1).

Writes ``<DIR>/<suite>/<op>.gguf`` for every registered operator (or the ones named). With
``--check`` nothing in ``DIR`` is written: the files are generated twice into temporary
directories, and each fresh file is compared byte for byte with the other build and with the one
in ``DIR`` where that exists; any difference fails with exit code 1 (a file not built yet in
``DIR`` is only reported, so the check also works on a fresh checkout).

The expected values of every operator without a NumPy reference come from PyTorch: without torch
installed, asking for such an operator fails with one line that says what to install.

Exit status: 0; 1 if ``--check`` found a difference; 2 for a usage error, an unknown operator,
PyTorch missing for a reference, or an output directory that cannot be written (tried before
anything is generated).
"""

from __future__ import annotations

import argparse
import errno
import filecmp
import os
import sys
import tempfile
import time

from infiniop_py.registry import list_ops, resolve

from . import generator_for
from ._common import SUITES, deterministic_torch, torch_missing


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m gguf_cases", description=__doc__.split("\n\n")[0])
    p.add_argument("ops", nargs="*", metavar="OP", help="operators to build (default: every registered one)")
    p.add_argument("--suite", choices=("quick", "full", "all"), default="quick", help="which suite (default quick)")
    p.add_argument("--out", default=os.path.join("build", "gguf"), help="output directory (default build/gguf)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--check", action="store_true", help="regenerate into a temporary directory and compare bytes")
    return p.parse_args(argv)


def build(ops, suites, out: str, seed: int, quiet: bool = False) -> list[str]:
    """Write the files; returns their paths relative to ``out``."""
    if not torch_missing():
        deterministic_torch()
    written = []
    for suite in suites:
        for op in ops:
            rel = os.path.join(suite, f"{op}.gguf")
            t0 = time.perf_counter()
            n = generator_for(op).write(os.path.join(out, rel), suite, seed)
            if n:
                written.append(rel)
            if not quiet:
                msg = (
                    f"wrote {os.path.join(out, rel)} ({n} cases, {time.perf_counter() - t0:.1f} s)"
                    if n
                    else f"{op}: no {suite} cases"
                )
                print(msg, flush=True)
    return written


PROG = "python -m gguf_cases"
TORCH_HINT = "pip install torch (CPU-only build: add --index-url https://download.pytorch.org/whl/cpu)"


def writable_dir(path: str) -> None:
    """Raise OSError naming ``path`` unless files can be written in it (it is created if missing)."""
    try:
        if os.path.exists(path) and not os.path.isdir(path):
            raise NotADirectoryError(errno.ENOTDIR, "it is not a directory")
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise OSError(f"cannot write to --out {path}: {exc.strerror or exc}") from None


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    ops = []
    for name in args.ops or list_ops():
        canonical = resolve(name)
        if canonical is None:
            print(f"{PROG}: unknown operator {name!r}", file=sys.stderr)
            return 2
        ops.append(canonical)
    need = [op for op in ops if generator_for(op).needs_torch]
    if need and torch_missing():
        names = ", ".join(need[:3]) + (f" and {len(need) - 3} more" if len(need) > 3 else "")
        rest = [op for op in ops if op not in need]
        without = f"; without it: {PROG} {' '.join(rest)}" if rest else ""
        print(
            f"{PROG}: the reference data of {names} needs PyTorch, which is not installed: {TORCH_HINT}{without}", file=sys.stderr
        )
        return 2
    suites = SUITES if args.suite == "all" else (args.suite,)
    if not args.check:
        try:
            writable_dir(args.out)
            build(ops, suites, args.out, args.seed)
        except OSError as exc:  # unwritable, or the disk filled up on the way
            detail = str(exc) if exc.filename is None else f"cannot write {exc.filename}: {exc.strerror or exc}"
            print(f"{PROG}: error: {detail}", file=sys.stderr)
            return 2
        return 0
    with tempfile.TemporaryDirectory(prefix="gguf-check-") as tmp:
        one, two = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        fresh = build(ops, suites, one, args.seed, quiet=True)
        build(ops, suites, two, args.seed, quiet=True)
        bad, missing = [], 0
        for rel in fresh:
            if not filecmp.cmp(os.path.join(one, rel), os.path.join(two, rel), shallow=False):
                bad.append(f"{rel}: two builds differ (non-deterministic generator)")
            mine = os.path.join(args.out, rel)
            if not os.path.exists(mine):
                missing += 1
            elif not filecmp.cmp(mine, os.path.join(one, rel), shallow=False):
                bad.append(f"{mine}: differs from a fresh build")
    for line in bad:
        print(line)
    note = f", {missing} not built in {args.out} yet" if missing else ""
    print(f"checked {len(fresh)} files{note}: {'OK' if not bad else f'{len(bad)} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
