"""``infiniop-test``: run GGUF test-case files on the CPU (NumPy) or NVIDIA (CuPy) backend.

See gguf.md §4 (and ``infiniop-test --help``). Exit codes: 0 all selected tests passed, 1 a test
failed or no test was selected, 2 usage error / unavailable device / unreadable file, 130
interrupted.
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
                     [-k SUBSTRING] [--json PATH] [--fail-fast] [--quiet | --verbose]
                     [--strict] [-h | --help]"""

HELP = (
    USAGE
    + """

Run the tests in GGUF test-case files and report PASS / WRONG ANSWER / OP CREATION FAILED /
EXECUTION FAILED / INVALID TEST / SKIPPED / ILL-DEFINED for each. A directory runs every *.gguf
directly inside it, sorted by name. By default each file gets one summary line, and the block of
every test that did not pass (failed, ill-defined or skipped) is printed in full.

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
  --verbose           print every test's block, passing ones included
  --strict            count ILL-DEFINED tests (no right answer exists) as failures
  -h, --help          show this help and exit

exit status: 0 every selected test passed (skipped and ill-defined tests allowed), 1 a test
failed or no test was selected, 2 usage error, unavailable device or unreadable file,
130 interrupted. File errors go to stderr.
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
    verbose: bool = False
    strict: bool = False


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
        if tok in ("--quiet", "--verbose", "--strict"):
            setattr(args, tok[2:], True)
            continue
        dev = _device(tok)
        if device_flag is not None and dev != args.device:
            raise UsageError(f"conflicting device flags {device_flag} and {tok}")
        device_flag, args.device = tok, dev
    if not args.paths:
        raise UsageError("no test file or directory given")
    if args.quiet and args.verbose:
        raise UsageError("--quiet and --verbose exclude each other")
    return args


def check_json_path(path: str) -> None:
    """UsageError unless results can be written to ``path`` (checked before any test runs, the
    same way :func:`write_json` writes: a temporary file in the folder, then a rename)."""
    if os.path.isdir(path):
        raise UsageError(f"cannot write --json file '{path}': it is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".infiniop-test-", suffix=".json", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write --json file '{path}': {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)


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
    """One invocation: runs the files, prints blocks and summaries, collects JSON.

    Output modes: ``--verbose`` prints every test's block (gguf.md §4.8); the default prints a
    file's header and the blocks of the tests that did not pass, then one summary line per file;
    ``--quiet`` prints the blocks of failures only.
    """

    def __init__(self, args: Args, out=None, err=None):
        from .gguf.runner import Device, Options

        self.args = args
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.device = Device(args.device)
        self.opts = Options(atol=args.atol, rtol=args.rtol, warmup=args.warmup, run=args.run)
        self.colour = _isatty(self.out) and "NO_COLOR" not in os.environ
        self.files: list[dict] = []
        self.selected = self.passed = self.failed = self.skipped = self.ill_defined = self.file_errors = 0
        self.stopped = False
        self.interrupted = False
        self._interrupt_reported = False
        self._bar = None

    # -- printing ------------------------------------------------------------------------------
    def _paint(self, text: str, colour: str) -> str:
        return f"{colour}{text}{RESET}" if self.colour else text

    def emit(self, text: str, stream=None) -> None:
        stream = stream or self.out
        if self._bar is not None:
            self._bar.write(text.rstrip("\n"), file=stream)
        else:
            stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()

    def _status(self, status: str) -> str:
        from .gguf.runner import PASS, SKIPPED

        return self._paint(status, GREEN if status == PASS else YELLOW if status == SKIPPED else RED)

    def block(self, r) -> str:
        lines = [SEPARATOR, f"Status: {self._status(r.status)}", f"Description: {r.title()}", *r.lines]
        lines.append(f"Time: {r.time_us:.3f} us" if r.time_us is not None else "Time: N/A")
        if r.error:
            lines.append(f"Error: {r.error}")
        return "\n".join(lines) + "\n\n"

    def is_failure(self, r) -> bool:
        from .gguf.runner import ILL_DEFINED

        return r.failed or (self.args.strict and r.status == ILL_DEFINED)

    def shows(self, r) -> bool:
        """Whether test result ``r`` gets its block printed in this output mode."""
        from .gguf.runner import PASS

        if self.args.verbose:
            return True
        if self.args.quiet:
            return self.is_failure(r)
        return r.status != PASS

    def closing(self, passed: int, failed: int, ill: int, ran: int, chosen: int, interrupted: bool) -> str:
        """A file's status line. ``All tests passed`` only when every selected test ran and none
        failed or was ill-defined; ``-k`` selecting nothing says so; Ctrl-C says so."""
        if interrupted:
            extra = f", {ill} ill-defined" if ill else ""
            return self._paint(f"Interrupted after {ran} of {chosen} tests ({passed} passed, {failed} failed{extra})", RED)
        if chosen == 0:
            return "No tests selected"
        if ill and not self.args.strict:
            return self._paint(f"{passed} passed, {failed} failed, {ill} ill-defined", RED if failed else YELLOW)
        if failed:
            return self._paint(f"{failed} of {ran} tests failed" + (f" ({ill} ill-defined)" if ill else ""), RED)
        return self._paint("All tests passed", GREEN)

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
        self.emit(f"{path}\n{self._paint('Error', RED)}: {path}: {message}", self.err)
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

    def _header(self, path: str, f, chosen: list[int]) -> str:
        head = [path]
        if not self.args.quiet:
            if f.description:
                head.append(f.description)
            found = f"Found {f.test_count} tests"
            if self.args.keywords:
                found += f" ({len(chosen)} selected)"
            head.append(found)
        return "\n".join(head)

    def run_file(self, path: str, problem: str | None) -> None:
        from .gguf.container import FileError, GGUFFile
        from .gguf.runner import ILL_DEFINED, SKIPPED, run_test

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
            header = self._header(path, f, chosen)
            if self.args.verbose:
                self.emit(header)
                header = None
            counts = {"passed": 0, "failed": 0, "ill": 0}
            ran, skipped, ill = 0, [], []
            self._bar = self._progress(len(chosen), path)
            try:
                for i in chosen:
                    r = run_test(f, i, self.device, self.opts)
                    ran += 1
                    self.selected += 1
                    entry["tests"].append(_test_json(r))
                    if r.status == ILL_DEFINED:
                        ill.append(r)
                        self.ill_defined += 1
                    if self.is_failure(r):
                        counts["failed"] += 1
                        self.failed += 1
                    elif r.status == SKIPPED:
                        skipped.append(r)
                        self.skipped += 1
                    elif r.status != ILL_DEFINED:
                        counts["passed"] += 1
                        self.passed += 1
                    if self.shows(r):
                        if header is not None:
                            self.emit(header)
                            header = None
                        self.emit(self.block(r))
                    if self._bar is not None:
                        self._bar.update(1)
                    if self.is_failure(r) and self.args.fail_fast:
                        self.stopped = True
                        break
            except KeyboardInterrupt:
                self.interrupted = True
            finally:
                if self._bar is not None:
                    self._bar.close()
                    self._bar = None
            status = self.closing(counts["passed"], counts["failed"], len(ill), ran, len(chosen), self.interrupted)
            tail = [] if header is not None else [SEPARATOR]
            if self.args.verbose:
                tail.append(status)
            else:  # one line: path, counts, status
                n = f"{len(chosen)} of {f.test_count} tests selected" if self.args.keywords else f"{f.test_count} tests"
                tail.append(f"{path}: {n}, {status}" + (f", {len(skipped)} skipped" if skipped else ""))
            if skipped:
                tail.append(f"Skipped {len(skipped)} tests:")
                tail += [f"  test {r.index} {r.op_name}: {r.error}" for r in skipped]
            if ill:
                tail.append(f"Ill-defined {len(ill)} tests:")
                tail += [f"  test {r.index} {r.op_name}: {r.error}" for r in ill]
            if self.stopped:
                tail.append("Stopped after the first failure (--fail-fast)")
            self.emit("\n".join(tail))
            self._interrupt_reported = self.interrupted
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
        except KeyboardInterrupt:
            self.interrupted = True
            if not self._interrupt_reported:
                self.emit(self._paint(f"Interrupted after {self.selected} tests", RED))
                self._interrupt_reported = True
        finally:
            if len(targets) > 1:
                line = (
                    f"Total: {self.failed} of {self.selected} tests failed in {len(self.files)} files "
                    f"({self.skipped} skipped, {self.ill_defined} ill-defined, {self.file_errors} file errors)"
                )
                bad = self.failed or self.file_errors or self.interrupted or not self.selected
                self.emit(self._paint(line, RED if bad else GREEN))
        if not self.selected and not self.file_errors and not self.interrupted:
            self.emit("infiniop-test: no tests selected", self.err)
        return self.exit_code()

    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.file_errors:
            return 2
        return 1 if self.failed or not self.selected else 0

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
                "ill_defined": self.ill_defined,
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
        if args.json:
            check_json_path(args.json)
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
    except KeyboardInterrupt:  # outside the loops that report it themselves
        session.interrupted = True
        if not session._interrupt_reported:
            print("Interrupted", flush=True)
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
        except OSError as exc:  # the folder was writable at start; name the user's path, not the temporary file
            print(f"infiniop-test: cannot write --json file '{args.json}': {exc.strerror or exc}", file=sys.stderr)
            code = 2
    return code


if __name__ == "__main__":
    sys.exit(main())
