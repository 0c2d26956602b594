"""Where a benchmark runs: the GPU (torch CUDA tensors, CUDA events) or the CPU (NumPy vs torch CPU).

Both environments hand out torch tensors for every buffer, so the peer and our library work on
the *same* memory: on the GPU our ``calculate`` receives the torch tensors themselves (the
library accepts torch CUDA tensors, which also carries bfloat16, which CuPy lacks); on the CPU
it receives NumPy views of the tensors' storage.
"""

from __future__ import annotations

import time

import numpy as np

MIB = 1 << 20
GIB = 1 << 30
DEFAULT_L2 = 60 * MIB  # only where neither torch nor CuPy reports the device's L2 size (a large one: more rotation)


class Env:
    """Common interface; see GpuEnv and CpuEnv."""

    gpu = False
    name = "cpu"
    l2_bytes = DEFAULT_L2
    # Interleaving granularity (calls timed per turn, untimed calls opening each turn): one call
    # per turn on the GPU, where each side's calls only queue kernels.
    turn = (1, 0)

    def __init__(self):
        import torch

        import infiniop_py as iop

        self.torch = torch
        self.iop = iop
        self.handle = None

    def current_stream(self):
        """What our ``calculate(stream=...)`` gets: read at each call, never saved (CPU: None)."""
        return None

    @property
    def stream(self):
        return self.current_stream()

    # -- buffers ------------------------------------------------------------------------
    @property
    def device(self) -> str:
        return "cuda" if self.gpu else "cpu"

    def random(self, shape, dtype, low=-2.0, high=2.0):
        """A contiguous tensor of uniform values in [low, high), already in ``dtype``."""
        t = self.torch.empty(shape, dtype=self.torch.float32, device=self.device)
        t.uniform_(low, high, generator=self.generator())
        return t.to(dtype)

    def generator(self):
        """The run's own random generator: a peer's graph capture that fails part-way leaves the
        device's default generator marked as capturing ("Offset increment outside graph capture"),
        which would fail every later case; this one is never used inside a capture."""
        gen = self.__dict__.get("_gen")
        if gen is None:
            gen = self._gen = self.torch.Generator(device=self.device)
            gen.manual_seed(0)
        return gen

    def poisoned(self, shape, dtype):
        """A contiguous tensor of NaN (floats) or 0xA5 bytes, so an unwritten output fails the check."""
        t = self.torch.empty(shape, dtype=dtype, device=self.device)
        self.poison(t)
        return t

    def poison(self, t) -> None:
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.is_contiguous():
            t.view(self.torch.uint8).fill_(0xA5)
        else:
            t.fill_(0)

    def ours(self, t, kind: str = "tensor"):
        """The buffer object our ``calculate`` receives for tensor ``t``.

        kind: "tensor" (GPU: the torch tensor; CPU: a NumPy view), "cupy" (a CuPy view of the
        same memory, GPU only) or "ptr" (the raw address, ``int``).
        """
        if kind == "ptr":
            return t.data_ptr()
        if kind == "cupy":
            return to_cupy(t)
        return t if self.gpu else to_numpy_view(t)

    @staticmethod
    def descriptor_of(t):
        """Our tensor descriptor for torch tensor ``t`` (shape, element strides, dtype)."""
        from infiniop_py.dtypes import parse_dtype
        from infiniop_py.tensor import create_tensor_descriptor

        return create_tensor_descriptor(tuple(t.shape), tuple(t.stride()), parse_dtype(t.dtype))

    # -- timing -------------------------------------------------------------------------
    def sync(self) -> None:
        pass

    def settle(self) -> None:
        """Before a turn of calls (:attr:`turn`): nothing to wait for on the GPU."""

    def time_calls(self, calls):
        """Run ``calls`` (a list of (label, zero-argument callable)) in order; return µs per call."""
        out = []
        for _, fn in calls:
            t0 = time.perf_counter_ns()
            fn()
            out.append((time.perf_counter_ns() - t0) / 1e3)
        return out

    def time_calls_queued(self, calls):
        """Device time per call with the host kept ahead of the device; on the CPU: time_calls."""
        return self.time_calls(calls), 1.0

    def copy_bandwidth(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError

    def matrix_rate(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError

    def describe(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError


class CpuEnv(Env):
    """NumPy (our CPU backend) against torch on the CPU; wall time per call."""

    def __init__(self):
        super().__init__()
        self.handle = self.iop.create_handle("cpu")
        self.l2_bytes = 0  # no rotation on the CPU: the benchmark sizes are far past the LLC

    # Turns of 10 timed calls, each opened by 3 untimed ones, after the other threads of the
    # process went quiet (settle): a library's worker threads keep spinning after its call
    # returns (NumPy's OpenBLAS for about 100 ms, torch's OpenMP briefly), and the other
    # library's calls would share the cores with them (docs/perf/method.md, 5).
    turn = (10, 3)
    SETTLE_WINDOW_S = 0.01  # the other threads' CPU time is read over windows this long
    SETTLE_MAX_S = 1.0

    def settle(self) -> None:
        """Wait until the process's other threads used under a fifth of a core over one window
        (at most SETTLE_MAX_S)."""
        end = time.perf_counter() + self.SETTLE_MAX_S
        while time.perf_counter() < end:
            p0, w0 = time.process_time(), time.perf_counter()
            time.sleep(self.SETTLE_WINDOW_S)
            if time.process_time() - p0 < 0.2 * (time.perf_counter() - w0):
                return

    def copy_bandwidth(self, nbytes: int = 256 * MIB, reps: int = 10) -> dict:
        src = np.ones(nbytes // 4, np.float32)
        dst = np.empty_like(src)
        np.copyto(dst, src)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            np.copyto(dst, src)
            times.append((time.perf_counter_ns() - t0) / 1e9)
        t = float(np.median(times))
        return {"bytes": 2 * nbytes, "median_s": t, "GBps": 2 * nbytes / t / 1e9, "how": "np.copyto, 256 MiB f32, median of 10"}

    def matrix_rate(self, n: int = 1024, reps: int = 5) -> dict:
        """torch.matmul of n³ f32 on the CPU, TFLOP/s (the limit of cases that count FLOPs)."""
        torch = self.torch
        a = torch.rand(n, n)
        b = torch.rand(n, n)
        c = torch.empty(n, n)
        torch.matmul(a, b, out=c)
        t = float(np.median(self.time_calls([("mm", lambda: torch.matmul(a, b, out=c))] * reps))) / 1e6
        return {"f32": 2 * n**3 / t / 1e12, "how": f"torch.matmul {n}^3 f32, median of {reps}"}

    def describe(self) -> dict:
        import os
        import platform

        return {
            "kind": "cpu",
            "name": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch_threads": self.torch.get_num_threads(),
        }


class GpuEnv(Env):
    """Our NVIDIA backend against torch CUDA, CUDA events on torch's current stream (ours launch
    on that stream too: :meth:`current_stream` reads it at each call)."""

    gpu = True
    name = "nvidia"

    def __init__(self, device_id: int = 0):
        super().__init__()
        torch = self.torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.cuda.set_device(device_id)
        # Peers' settings are part of the result: fp32 means fp32 (no TF32), cuDNN autotunes.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("highest")
        self.device_id = device_id
        self.handle = self.iop.create_handle("nvidia", device_id)
        # Our launches go to the stream torch's ops and events go to, read at each call.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            self.current_stream = lambda: raw(device_id)
        else:  # pragma: no cover - older torch
            self.current_stream = lambda: torch.cuda.current_stream(device_id).cuda_stream
        props = torch.cuda.get_device_properties(device_id)
        self.props = props
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0) or _cupy_l2(device_id) or DEFAULT_L2

    @property
    def device(self) -> str:
        return f"cuda:{self.device_id}"

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def time_calls(self, calls):
        """CUDA events around each call on the current stream; one synchronisation at the end."""
        Event = self.torch.cuda.Event
        events = [(Event(enable_timing=True), Event(enable_timing=True)) for _ in calls]
        for (start, end), (_, fn) in zip(events, calls):
            start.record()
            fn()
            end.record()
        self.sync()
        return [start.elapsed_time(end) * 1e3 for start, end in events]

    QUEUE_BATCH = 32  # calls enqueued behind one blocking kernel
    _hold_cycles = 1 << 21  # its length; doubled until it outlasts the host's enqueueing

    def time_calls_queued(self, calls):
        """CUDA events around each call, enqueued while the stream is held by a spinning kernel.

        :meth:`time_calls` records the events as the host reaches them; a call whose kernels
        take less device time than the host needs to issue the next call then starts on an
        idle device, and its start event counts the host's launch latency. Here every batch of
        calls is enqueued behind ``torch.cuda._sleep`` (a kernel that spins for a set number of
        clock cycles, the blocking-kernel method of NVIDIA's nvbench), so the device runs the
        whole batch back to back and each event pair measures the call's device time,
        including the device-side gaps between its launches but not host latency. A batch the
        device drained before the host finished enqueueing it is discarded and re-run behind a
        longer hold. Returns (µs per call, fraction of calls timed in held batches): calls that
        synchronise with the host (``.item()``, a host-side sort) cannot be held, and after
        the hold reaches ~0.5 s the batch is kept as it ran.
        """
        torch = self.torch
        Event = torch.cuda.Event
        out, held_calls = [], 0
        cycles = self._hold_cycles
        i = 0
        while i < len(calls):
            batch = calls[i : i + self.QUEUE_BATCH]
            events = [(Event(enable_timing=True), Event(enable_timing=True)) for _ in batch]
            gate = Event()
            torch.cuda._sleep(cycles)
            gate.record()
            for (start, end), (_, fn) in zip(events, batch):
                start.record()
                fn()
                end.record()
            held = not gate.query()  # the hold was still spinning when the last call was issued
            self.sync()
            if not held and cycles < (1 << 30):
                cycles *= 2
                continue
            if held:
                held_calls += len(batch)
                self._hold_cycles = cycles  # the next cases start from a hold that worked
            out += [start.elapsed_time(end) * 1e3 for start, end in events]
            i += len(batch)
        return out, held_calls / max(1, len(calls))

    def copy_bandwidth(self, nbytes: int = GIB, reps: int = 20) -> dict:
        """Device-to-device copy of 1 GiB (read + write counted), torch and CuPy, median of ``reps``."""
        torch = self.torch
        src = torch.ones(nbytes // 4, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        result = {"bytes": 2 * nbytes, "how": f"1 GiB f32 copy, CUDA events, median of {reps}"}
        calls = [("copy", lambda: dst.copy_(src))] * reps
        dst.copy_(src)
        t = float(np.median(self.time_calls(calls))) / 1e6
        result["torch_GBps"] = 2 * nbytes / t / 1e9
        cs = cd = None
        try:
            cs, cd = to_cupy(src), to_cupy(dst)
            import cupy

            with cupy.cuda.ExternalStream(self.stream):
                cupy.copyto(cd, cs)
                t = float(np.median(self.time_calls([("copy", lambda: cupy.copyto(cd, cs))] * reps))) / 1e6
            result["cupy_GBps"] = 2 * nbytes / t / 1e9
        except Exception as exc:  # CuPy missing or too old: the torch figure stands alone
            result["cupy_error"] = f"{type(exc).__name__}: {exc}"
        result["GBps"] = max(result.get("torch_GBps", 0.0), result.get("cupy_GBps", 0.0))
        src = dst = cs = cd = None  # free the 2 GiB before the cases allocate theirs
        torch.cuda.empty_cache()
        return result

    def matrix_rate(self, n: int = 4096, reps: int = 10) -> dict:
        """torch.matmul of n³ per dtype (TF32 off), TFLOP/s: the limit of cases that count FLOPs."""
        torch = self.torch
        out = {"how": f"torch.matmul {n}^3, CUDA events, median of {reps}, TF32 off"}
        for name, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
            a = torch.rand(n, n, dtype=dt, device=self.device, generator=self.generator())
            b = torch.rand(n, n, dtype=dt, device=self.device, generator=self.generator())
            c = torch.empty(n, n, dtype=dt, device=self.device)
            for _ in range(3):
                torch.matmul(a, b, out=c)
            t = float(np.median(self.time_calls([("mm", lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))] * reps))) / 1e6
            out[name] = 2 * n**3 / t / 1e12
        a = b = c = None
        torch.cuda.empty_cache()
        return out

    def describe(self) -> dict:
        p = self.props
        return {
            "kind": "gpu",
            "name": p.name,
            "cc": f"{p.major}.{p.minor}",
            "sm_count": p.multi_processor_count,
            "memory_bytes": int(p.total_memory),
            "l2_bytes": self.l2_bytes,
        }


def _cupy_l2(device_id: int) -> int:
    try:
        import cupy

        return int(cupy.cuda.Device(device_id).attributes["L2CacheSize"])
    except Exception:
        return 0


def to_cupy(t):
    """A CuPy array viewing torch CUDA tensor ``t`` (bfloat16 as uint16: CuPy has no bfloat16)."""
    import cupy
    import torch

    if t.dtype == torch.bfloat16:
        return cupy.asarray(t.view(torch.int16)).view(cupy.uint16)
    return cupy.asarray(t)


def to_numpy_view(t):
    """A NumPy view of CPU tensor ``t`` with the same strides (bfloat16 via ml_dtypes)."""
    import torch

    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def make_env(cpu: bool, device_id: int = 0) -> Env:
    return CpuEnv() if cpu else GpuEnv(device_id)
