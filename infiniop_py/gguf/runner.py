"""Running one GGUF test on a device and judging it (gguf.md §4.3-§4.7).

:func:`run_test` never raises for anything a test can do wrong: every outcome becomes a
:class:`TestResult` with a status, the block lines to print, and the error text.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..descriptor import create_descriptor
from ..dtypes import DType, is_float, to_numpy
from ..status import InfiniopError, Status
from ..tensor import create_tensor_descriptor, destroy_tensor_descriptor
from ..testing.compare import compare, compare_index, compare_mode, default_tolerance
from ..testing.data import gaps_intact, gather, layout, poisoned, span
from ..tuning import knob
from .container import GGUFFile, TestError
from .overlap import ill_defined
from .testcase import ParsedTest, load_test, test_header
from .values import format_value

PASS = "PASS"
WRONG_ANSWER = "WRONG ANSWER"
OP_CREATION_FAILED = "OP CREATION FAILED"
EXECUTION_FAILED = "EXECUTION FAILED"
INVALID_TEST = "INVALID TEST"
SKIPPED = "SKIPPED"
ILL_DEFINED = "ILL-DEFINED"
FAILURES = (WRONG_ANSWER, OP_CREATION_FAILED, EXECUTION_FAILED, INVALID_TEST)


@dataclass
class Options:
    """Run-wide settings: command-line tolerance overrides and timing counts."""

    atol: float | None = None
    rtol: float | None = None
    warmup: int = 0
    run: int = 0


@dataclass
class TestResult:
    __test__ = False

    index: int
    op_name: str | None  # as written in the file
    canonical: str | None
    case: str = ""  # test.{i}.description
    status: str = INVALID_TEST
    error: str | None = None
    time_us: float | None = None
    atol: float | None = None
    rtol: float | None = None
    max_abs_err: float | None = None
    mismatches: int | None = None
    lines: list[str] = field(default_factory=list)  # tensor, attribute and tolerance lines

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def title(self) -> str:
        """The ``Description:`` text: op name as written (and canonical), index, case label."""
        name = self.op_name if self.op_name is not None else "?"
        if self.canonical is not None and self.canonical != name:
            name += f" (as {self.canonical})"
        where = f"test {self.index}: {self.case}" if self.case else f"test {self.index}"
        return f"{name} ({where})"


def _traceback_wanted() -> bool:
    return knob("INFINIOP_TEST_TRACEBACK")


def describe_error(exc: BaseException) -> str:
    """``<ExceptionType>: <message>``; the traceback goes to stderr if INFINIOP_TEST_TRACEBACK=1."""
    if _traceback_wanted():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return f"{type(exc).__name__}: {exc}"


class Device:
    """The backend of one run: handle created on first use, buffers, timing, health."""

    def __init__(self, name: str = "cpu"):
        self.name = name
        self.gpu = name != "cpu"
        self.device_id = int(name.partition(":")[2] or 0) if self.gpu else 0
        self._handle = None
        self._backend = None
        self.broken: str | None = None  # set when a GPU error left the context unusable

    @property
    def handle(self):
        if self._handle is None:
            from ..devices import create_handle

            self._handle = create_handle(self.name)
        return self._handle

    @property
    def backend(self):
        if self._backend is None:
            from ..testing.device import backend_for

            self._backend = backend_for(self.name)
        return self._backend

    def context(self):
        if not self.gpu:
            return contextlib.nullcontext()
        return self.backend.cp.cuda.Device(self.device_id)

    def upload(self, flat: np.ndarray):
        return self.backend.upload(flat)

    def download(self, buf, dtype: DType) -> np.ndarray:
        return self.backend.download(buf, to_numpy(dtype))

    def workspace(self, nbytes: int):
        """A workspace of ``nbytes`` filled with 0xA5 (None for zero bytes)."""
        return self.backend.empty_bytes(nbytes, 0xA5) if nbytes else None

    def synchronize(self) -> None:
        self.backend.synchronize()

    def time_us(self, call, warmup: int, runs: int) -> float:
        """Average microseconds per call over ``runs`` calls after ``warmup`` untimed ones."""
        for _ in range(warmup):
            call()
        self.synchronize()
        if self.gpu:
            cp = self.backend.cp
            stream = cp.cuda.get_current_stream()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            for _ in range(runs):
                call()
            end.record(stream)
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) * 1e3 / runs
        t0 = time.perf_counter_ns()
        for _ in range(runs):
            call()
        self.synchronize()
        return (time.perf_counter_ns() - t0) / 1e3 / runs

    def check_health(self) -> None:
        """After a failure on the GPU: is the context still usable? Sets ``broken`` if not."""
        if not self.gpu or self.broken:
            return
        try:
            cp = self.backend.cp
            with cp.cuda.Device(self.device_id):
                cp.cuda.runtime.deviceSynchronize()
                probe = cp.zeros(1, dtype=cp.uint8)
                probe += 1
                cp.cuda.runtime.deviceSynchronize()
        except Exception as exc:
            self.broken = f"{type(exc).__name__}: {exc}"


# -- block lines -----------------------------------------------------------------------------
def _tolerance(test: ParsedTest, name: str, opts: Options) -> tuple[str, float | None, float | None]:
    """(mode, atol, rtol) for output ``name``; atol/rtol only for the tolerance mode (§4.6)."""
    t = test.tensors[name]
    mode = compare_mode(test.spec.role[name].compare, t.dtype)
    if mode != "tolerance":
        return mode, None, None
    d_atol, d_rtol = default_tolerance(t.dtype) if is_float(t.dtype) else default_tolerance(DType.F64)
    atol = opts.atol if opts.atol is not None else test.atol if test.atol is not None else d_atol
    rtol = opts.rtol if opts.rtol is not None else test.rtol if test.rtol is not None else d_rtol
    return mode, atol, rtol


def _tol_text(mode: str, atol, rtol) -> str:
    if mode == "tolerance":
        return f"rtol={rtol:.2e}, atol={atol:.2e}"
    return f"{mode} comparison"


def block_lines(test: ParsedTest, opts: Options) -> list[str]:
    lines = []
    for name, t in test.tensors.items():
        if t is None:
            continue
        extra = ""
        if t.inplace:
            extra += f" (in-place on {t.inplace})"
        if t.role != "in" and t.unchecked:
            extra += " (unchecked)"
        lines.append(f"- {name}: Shape: {list(t.shape)}, Strides: {list(t.strides)}, Type: {t.dtype.name}{extra}")
    for table in (test.attrs, test.runtime):
        for k, v in table.items():
            lines.append(f"- {k}={format_value(v, test.precision.get(k, 'f64'))}")
    tols = [(n, _tol_text(*_tolerance(test, n, opts))) for n in test.expected if test.tensors.get(n) is not None]
    if len({text for _, text in tols}) <= 1:
        lines += [f"- {text}" for text in {text: None for _, text in tols}]
    else:
        lines += [f"- {text} ({n})" for n, text in tols]
    return lines


# -- one test ------------------------------------------------------------------------------------
def run_test(file: GGUFFile, index: int, device: Device, opts: Options) -> TestResult:
    op, canonical, case = test_header(file, index)
    res = TestResult(index, op, canonical, case)
    if device.broken:
        res.status, res.error = EXECUTION_FAILED, f"device in error state ({device.broken})"
        return res
    # 1-2: parse and validate.
    try:
        test = load_test(file, index)
    except TestError as exc:
        res.error = str(exc)
        return res
    except Exception as exc:
        res.error = describe_error(exc)
        return res
    res.lines = block_lines(test, opts)
    for name in test.expected:
        mode, atol, rtol = _tolerance(test, name, opts)
        if mode == "tolerance" and res.atol is None:
            res.atol, res.rtol = atol, rtol
    try:
        reason = ill_defined(test)
    except Exception as exc:
        res.error = describe_error(exc)
        return res
    if reason is not None:
        res.status, res.error = ILL_DEFINED, reason
        return res
    with device.context():
        _execute(test, device, opts, res)
    return res


def _execute(test: ParsedTest, device: Device, opts: Options, res: TestResult) -> None:
    spec = test.spec
    bufs: dict[str, object] = {}
    desc = None
    ws = None
    try:
        # 3: device buffers; inputs scattered through their strides, outputs and gaps poisoned.
        try:
            for name, t in test.tensors.items():
                if t is None or t.inplace:
                    continue
                if t.role == "out":
                    flat = poisoned(span(t.shape, t.strides), t.dtype)
                elif t.data is not None:
                    flat = layout(t.data, t.shape, t.strides, t.dtype)
                else:
                    flat = layout(np.full(t.shape, t.fill, dtype=to_numpy(t.dtype)), t.shape, t.strides, t.dtype)
                bufs[name] = device.upload(flat)
            for name, t in test.tensors.items():
                if t is not None and t.inplace:
                    bufs[name] = bufs[t.inplace]
            descs = {
                name: (None if t is None else create_tensor_descriptor(t.shape, t.strides, t.dtype))
                for name, t in test.tensors.items()
            }
            handle = device.handle
        except Exception as exc:
            res.status, res.error = INVALID_TEST, describe_error(exc)
            return
        # 4: operator descriptor; tensor descriptors destroyed at once; poisoned workspace.
        try:
            desc = create_descriptor(spec.name, handle, **descs, **test.attrs)
        except InfiniopError as exc:
            if exc.status == Status.NOT_IMPLEMENTED:
                res.status, res.error = SKIPPED, describe_error(exc)
            else:
                res.status, res.error = OP_CREATION_FAILED, describe_error(exc)
            return
        except Exception as exc:
            res.status, res.error = OP_CREATION_FAILED, describe_error(exc)
            return
        finally:
            for d in descs.values():
                if d is not None:
                    destroy_tensor_descriptor(d)
            del descs
        try:
            ws = device.workspace(int(desc.workspace_size))
        except Exception as exc:
            res.status, res.error = OP_CREATION_FAILED, describe_error(exc)
            return
        args = [bufs.get(name) for name in test.tensors]
        rt = [test.runtime[a.name] for a in spec.runtime]

        def call():
            desc.calculate(ws, *args, *rt)

        # 5-7: run, check, time.
        try:
            call()
            device.synchronize()
            _judge(test, device, bufs, opts, res)
            if opts.run > 0:
                res.time_us = device.time_us(call, opts.warmup, opts.run)
        except Exception as exc:
            res.status, res.error = EXECUTION_FAILED, describe_error(exc)
            device.check_health()
            return
    finally:
        # 8: release everything.
        if desc is not None:
            with contextlib.suppress(Exception):
                desc.destroy()
        bufs.clear()
        ws = None


def _judge(test: ParsedTest, device: Device, bufs: dict, opts: Options, res: TestResult) -> None:
    messages = []
    max_err, mismatches, compared = 0.0, 0, False
    first_input = next((t for t in test.tensors.values() if t is not None and t.role == "in"), None)
    for name, t in test.tensors.items():
        if t is None or t.role == "in":
            continue
        flat = device.download(bufs[name], t.dtype)
        changed = gaps_intact(flat, t.shape, t.strides, t.dtype)
        if changed:
            messages.append(f"{name}: wrote {changed} elements outside the output view")
        if name not in test.expected:
            continue
        actual = gather(flat, t.shape, t.strides)
        mode, atol, rtol = _tolerance(test, name, opts)
        expected = test.expected[name]
        if mode == "index":
            values = first_input.data if first_input is not None else np.empty(0)
            c = compare_index(actual, expected, values, name)
        else:
            c = compare(actual, expected, mode, atol or 0.0, rtol or 0.0, name)
        compared = True
        if c.max_abs_err is not None and np.isfinite(c.max_abs_err):
            max_err = max(max_err, float(c.max_abs_err))
        mismatches += int(c.mismatches)
        if not c.ok:
            messages.append(c.message)
    if compared:
        res.max_abs_err, res.mismatches = max_err, mismatches
    res.status = WRONG_ANSWER if messages else PASS
    res.error = "; ".join(messages) if messages else None
