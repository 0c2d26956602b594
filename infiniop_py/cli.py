"""``infiniop-test``: run GGUF test-case files on the CPU (NumPy) or NVIDIA (CuPy) backend.

See gguf.md §4 (and ``infiniop-test --help``). Exit codes: 0 all selected tests passed, 1 a test
failed, 2 usage error / unavailable device / unreadable file, 130 interrupted.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field

USAGE = """\
usage: infiniop-test <file.gguf> [more files or directories] [--cpu | --nvidia[:id]]
                     [--warmup N] [--run N] [--atol X] [--rtol X]
                     [-k SUBSTRING] [--json PATH] [--fail-fast] [--quiet] [-h | --help]"""

HELP = (
    USAGE
    + """

Run the tests in GGUF test-case files and report PASS / WRONG ANSWER / OP CREATION FAILED /
EXECUTION FAILED / INVALID TEST / SKIPPED for each. A directory runs every *.gguf directly
inside it, sorted by name.

options:
  --cpu               NumPy backend (default); --cpu:0 is accepted
  --nvidia[:id]       CuPy backend on GPU id (default 0)
  --warmup N          untimed calls before timing (default 0)
  --run N             timed calls (default 0: no timing, "Time: N/A")
  --atol X, --rtol X  tolerance overrides for floating outputs (finite, >= 0)
  -k SUBSTRING        run only tests whose op name, case description or file description
                      contains SUBSTRING (case-insensitive); may be repeated
  --json PATH         also write machine-readable results to PATH
  --fail-fast         stop after the first failing test or file error
  --quiet             print only failing test blocks, file errors and summaries
  -h, --help          show this help and exit

exit status: 0 every selected test passed (skips allowed), 1 a test failed, 2 usage error,
unavailable device or unreadable file, 130 interrupted.
Set INFINIOP_TEST_TRACEBACK=1 to print Python tracebacks of errors to stderr."""
)

SEPARATOR = "=" * 37
UNSUPPORTED_DEVICES = ("cambricon", "ascend", "metax", "moore", "iluvatar", "kunlun", "hygon", "qy", "ali")
GREEN, YELLOW, RED, RESET = "\033[32m", "\033[33m", "\033[31m", "\033[0m"


class UsageError(Exception):
    pass


class _HelpRequested(Exception):  # noqa: N818 - a signal, not an error
    pass


@dataclass
class Args:
    paths: list[str] = field(default_factory=list)
    device: str = "cpu"
    warmup: int = 0
    run: int = 0
    atol: float | None = None
    rtol: float | None = None
    keywords: list[str] = field(default_factory=list)
    json: str | None = None
    fail_fast: bool = False
    quiet: bool = False


# -- arguments ---------------------------------------------------------------------------------
def _count(opt: str, text: str) -> int:
    try:
        n = int(text, 10)
    except ValueError:
        raise UsageError(f"{opt} expects a non-negative integer, got {text!r}") from None
    if n < 0:
        raise UsageError(f"{opt} expects a non-negative integer, got {text!r}")
    return n


def _tol(opt: str, text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise UsageError(f"{opt} expects a number, got {text!r}") from None
    if not math.isfinite(x) or x < 0:
        raise UsageError(f"{opt} expects a finite number >= 0, got {text!r}")
    return x


def _device(flag: str) -> str:
    name, colon, idx = flag[2:].partition(":")
    if colon and (not idx.isdigit()):
        raise UsageError(f"bad device id in {flag!r}")
    if name == "cpu":
        if colon and int(idx) != 0:
            raise UsageError(f"device 'cpu:{int(idx)}' does not exist (the CPU backend has id 0 only)")
        return "cpu"
    if name == "nvidia":
        return f"nvidia:{int(idx) if colon else 0}"
    if name in UNSUPPORTED_DEVICES:
        raise UsageError(f"device '{name}' is not supported by this build")
    raise UsageError(f"unknown option {flag!r}")


def parse_args(argv: list[str]) -> Args:
    """Parse the command line (options may come before or after paths; ``--name=value`` works)."""
    args = Args()
    device_flag = None
    valued = {"--warmup", "--run", "--atol", "--rtol", "--json", "-k"}
    i = 0
    only_paths = False
    while i < len(argv):
        tok = argv[i]
        i += 1
        if only_paths or tok == "-" or not tok.startswith("-"):
            args.paths.append(tok)
            continue
        if tok == "--":
            only_paths = True
            continue
        if tok in ("-h", "--help"):
            raise _HelpRequested
        if tok.startswith("-k"):  # -k SUB, -kSUB, -k=SUB
            name, eq, value = "-k", len(tok) > 2, tok[2:].removeprefix("=")
        else:
            name, eq, value = tok.partition("=")
        if name in valued:
            if not eq:
                if i >= len(argv):
                    raise UsageError(f"option {name} needs a value")
                value = argv[i]
                i += 1
            if name == "--warmup":
                args.warmup = _count(name, value)
            elif name == "--run":
                args.run = _count(name, value)
            elif name == "--atol":
                args.atol = _tol(name, value)
            elif name == "--rtol":
                args.rtol = _tol(name, value)
            elif name == "--json":
                if not value:
                    raise UsageError("--json expects a path")
                args.json = value
            else:
                if not value:
                    raise UsageError("-k expects a substring")
                args.keywords.append(value)
            continue
        if tok == "--fail-fast":
            args.fail_fast = True
            continue
        if tok == "--quiet":
            args.quiet = True
            continue
        dev = _device(tok)
        if device_flag is not None and dev != args.device:
            raise UsageError(f"conflicting device flags {device_flag} and {tok}")
        device_flag, args.device = tok, dev
    if not args.paths:
        raise UsageError("no test file or directory given")
    return args


def check_device(device: str) -> None:
    """UsageError unless ``device`` can be used (before any test runs)."""
    if device == "cpu":
        return
    from .cuda import runtime
    from .status import InfiniopError

    dev_id = int(device.partition(":")[2])
    try:
        runtime.cupy()
    except InfiniopError as exc:
        raise UsageError(f"device '{device}' not available: CuPy is not importable ({exc.message})") from None
    count = runtime.device_count()
    if dev_id >= count:
        raise UsageError(f"device '{device}' not available: {count} GPU{'' if count == 1 else 's'} visible")


# -- results -----------------------------------------------------------------------------------
def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _test_json(r) -> dict:
    return {
        "index": r.index,
        "op_name": r.op_name,
        "status": r.status,
        "time_us": _finite(r.time_us),
        "atol": _finite(r.atol),
        "rtol": _finite(r.rtol),
        "max_abs_err": _finite(r.max_abs_err),
        "mismatches": r.mismatches,
        "error": r.error,
    }


def write_json(path: str, payload: dict) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".infiniop-test-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Session:
    """One invocation: runs the files, prints blocks and summaries, collects JSON."""

    def __init__(self, args: Args, out=None, err=None):
        from .gguf.runner import Device, Options

        self.args = args
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.device = Device(args.device)
        self.opts = Options(atol=args.atol, rtol=args.rtol, warmup=args.warmup, run=args.run)
        self.colour = _isatty(self.out) and "NO_COLOR" not in os.environ
        self.files: list[dict] = []
        self.selected = self.passed = self.failed = self.skipped = self.file_errors = 0
        self.stopped = False
        self.interrupted = False
        self._bar = None

    # -- printing ------------------------------------------------------------------------------
    def _paint(self, text: str, colour: str) -> str:
        return f"{colour}{text}{RESET}" if self.colour else text

    def emit(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text.rstrip("\n"), file=self.out)
        else:
            self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    def _status(self, status: str) -> str:
        from .gguf.runner import PASS, SKIPPED

        return self._paint(status, GREEN if status == PASS else YELLOW if status == SKIPPED else RED)

    def block(self, r) -> str:
        lines = [SEPARATOR, f"Status: {self._status(r.status)}", f"Description: {r.title()}", *r.lines]
        lines.append(f"Time: {r.time_us:.3f} us" if r.time_us is not None else "Time: N/A")
        if r.error:
            lines.append(f"Error: {r.error}")
        return "\n".join(lines) + "\n\n"

    # -- running -------------------------------------------------------------------------------
    def targets(self) -> list[tuple[str, str | None]]:
        out = []
        for p in self.args.paths:
            if os.path.isdir(p):
                names = sorted(n for n in os.listdir(p) if n.endswith(".gguf") and os.path.isfile(os.path.join(p, n)))
                if not names:
                    out.append((p, "no *.gguf files in directory"))
                out += [(os.path.join(p, n), None) for n in names]
            elif os.path.exists(p):
                out.append((p, None))
            else:
                out.append((p, "no such file or directory"))
        return out

    def _file_error(self, path: str, message: str, entry: dict) -> None:
        self.file_errors += 1
        entry["error"] = message
        self.emit(f"{path}\n{self._paint('Error', RED)}: {path}: {message}")
        if self.args.fail_fast:
            self.stopped = True

    def _selected(self, f) -> list[int]:
        from .gguf.testcase import test_header

        keys = [k.lower() for k in self.args.keywords]
        if not keys:
            return list(range(f.test_count))
        fdesc = (f.description or "").lower()
        chosen = []
        for i in range(f.test_count):
            op, canonical, desc = test_header(f, i)
            hay = [(op or "").lower(), (canonical or "").lower(), desc.lower(), fdesc]
            if any(k in h for k in keys for h in hay):
                chosen.append(i)
        return chosen

    def run_file(self, path: str, problem: str | None) -> None:
        from .gguf.container import FileError, GGUFFile
        from .gguf.runner import SKIPPED, run_test

        entry = {"path": path, "error": None, "test_count": None, "tests": []}
        self.files.append(entry)
        if problem is not None:
            self._file_error(path, problem, entry)
            return
        try:
            f = GGUFFile(path)
        except FileError as exc:
            self._file_error(path, str(exc), entry)
            return
        with f:
            entry["test_count"] = f.test_count
            chosen = self._selected(f)
            head = [path]
            if not self.args.quiet:
                if f.description:
                    head.append(f.description)
                found = f"Found {f.test_count} tests"
                if self.args.keywords:
                    found += f" ({len(chosen)} selected)"
                head.append(found)
            self.emit("\n".join(head))
            failed, ran, printed, skipped = 0, 0, False, []
            self._bar = self._progress(len(chosen), path)
            try:
                for i in chosen:
                    r = run_test(f, i, self.device, self.opts)
                    ran += 1
                    self.selected += 1
                    entry["tests"].append(_test_json(r))
                    if r.failed:
                        failed += 1
                        self.failed += 1
                    elif r.status == SKIPPED:
                        skipped.append(r)
                        self.skipped += 1
                    else:
                        self.passed += 1
                    if not self.args.quiet or r.failed:
                        self.emit(self.block(r))
                        printed = True
                    if self._bar is not None:
                        self._bar.update(1)
                    if r.failed and self.args.fail_fast:
                        self.stopped = True
                        break
            except KeyboardInterrupt:
                self.interrupted = True
            finally:
                if self._bar is not None:
                    self._bar.close()
                    self._bar = None
            tail = [SEPARATOR] if printed else []
            if self.interrupted:
                tail.append("Interrupted")
            tail.append(
                self._paint("All tests passed", GREEN) if failed == 0 else self._paint(f"{failed} of {ran} tests failed", RED)
            )
            if skipped:
                tail.append(f"Skipped {len(skipped)} tests:")
                tail += [f"  test {r.index} {r.op_name}: {r.error}" for r in skipped]
            if self.stopped:
                tail.append("Stopped after the first failure (--fail-fast)")
            self.emit("\n".join(tail))
        if self.interrupted:
            raise KeyboardInterrupt

    def _progress(self, total: int, path: str):
        if self.args.quiet or total <= 20 or not _isatty(self.err):
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(total=total, file=self.err, desc=os.path.basename(path), leave=False, unit="test")

    def run(self) -> int:
        targets = self.targets()
        try:
            for path, problem in targets:
                if self.stopped:
                    break
                self.run_file(path, problem)
        finally:
            if len(targets) > 1:
                line = (
                    f"Total: {self.failed} of {self.selected} tests failed in {len(self.files)} files "
                    f"({self.skipped} skipped, {self.file_errors} file errors)"
                )
                self.emit(self._paint(line, GREEN if not (self.failed or self.file_errors) else RED))
        return self.exit_code()

    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.file_errors:
            return 2
        return 1 if self.failed else 0

    def payload(self, exit_code: int) -> dict:
        return {
            "schema": 1,
            "device": self.device.name,
            "warmup": self.args.warmup,
            "run": self.args.run,
            "atol": self.args.atol,
            "rtol": self.args.rtol,
            "files": self.files,
            "summary": {
                "selected": self.selected,
                "passed": self.passed,
                "failed": self.failed,
                "skipped": self.skipped,
                "file_errors": self.file_errors,
                "exit_code": exit_code,
            },
        }


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``infiniop-test`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
        check_device(args.device)
    except _HelpRequested:
        print(HELP)
        return 0
    except UsageError as exc:
        print(f"infiniop-test: {exc}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    session = Session(args)
    code = 2
    try:
        code = session.run()
    except KeyboardInterrupt:
        session.interrupted = True
        code = 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = session.exit_code()
    except Exception as exc:  # a bug in the runner: report it without a traceback
        from .gguf.runner import describe_error

        print(f"infiniop-test: internal error: {describe_error(exc)}", file=sys.stderr)
        code = 2
    if args.json:
        try:
            write_json(args.json, session.payload(code))
        except OSError as exc:
            print(f"infiniop-test: cannot write {args.json}: {exc}", file=sys.stderr)
            code = 2
    return code


if __name__ == "__main__":
    sys.exit(main())
