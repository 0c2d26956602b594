"""Shared driver of the per-operator profile scripts ``test/infiniop/<op>.py``.

Flags follow upstream InfiniOP's scripts::

    python test/infiniop/add.py [--cpu] [--nvidia[:ID]] [--profile] [--debug]
                                [--num_prerun N] [--num_iterations N] [--full] [--dtypes f16,f32]

Each case instance of the operator's case table (``ops/<op>/cases.py``; the quick suite unless
``--full``) runs on every chosen device through :func:`infiniop_py.testing.run.run_case` (fresh
inputs, poisoned outputs and gaps, descriptors dropped after create, checked against the
float64 torch reference) and prints one line: device, dtype, PASS/FAIL, description.

``--profile`` also times the case: ours (``calculate`` on the case's layout, after
``--num_prerun`` warm-up calls, averaged over ``--num_iterations`` calls with one
synchronisation at the end) and PyTorch's: the spec's ``reference`` applied to torch tensors of
the case's dtype and strides on the same device (the spec's ``torch`` expression when the
reference works on NumPy arrays). GPU times come from CUDA events, CPU times from
``perf_counter_ns``. ``--debug`` prints layouts and the comparison of every output.

The exit status is 1 if any case failed, 2 for a usage error (e.g. ``--num_iterations 0``, a
dtype the operator's cases do not have) or if the operator or a requested device is unavailable.
Scripts for new operators: ``python tools/new_op_scripts.py``.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from infiniop_py.argtypes import int_at_least  # noqa: E402
from infiniop_py.devices import Device  # noqa: E402

OTHER_DEVICES = [d.name.lower() for d in Device if d not in (Device.CPU, Device.NVIDIA)]


DEVICE_FLAGS = ("cpu", "nvidia", *OTHER_DEVICES)


def _device_flags(ap: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """(devices, other arguments): ``--cpu``, ``--nvidia`` (GPU 0) and ``--nvidia:ID`` taken out
    of ``argv`` as handle names ('cpu', 'nvidia:ID', ...), in the order given."""
    from infiniop_py.devices import Device, parse_device
    from infiniop_py.status import InfiniopError

    devices, rest = [], []
    for tok in argv:
        name, colon, _ = tok[2:].partition(":") if tok.startswith("--") else ("", "", "")
        if name not in DEVICE_FLAGS:
            rest.append(tok)
            continue
        try:
            dev, dev_id = parse_device(tok[2:])
        except InfiniopError:
            ap.error(f"bad device id in {tok!r} (expected --{name}:N with N a non-negative integer)")
        if dev is Device.CPU:
            if dev_id != 0:
                ap.error(f"{tok!r}: the CPU backend has id 0 only")
            handle = "cpu"
        else:
            handle = f"{name}:{dev_id}"
        if handle not in devices:
            devices.append(handle)
    return devices, rest


def parse_args(op: str, argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog=f"test/infiniop/{op}.py", description=f"Test and profile the '{op}' operator.", allow_abbrev=False
    )
    ap.add_argument("--cpu", action="store_true", help="run on the CPU backend (default when no device is given)")
    ap.add_argument("--nvidia", action="store_true", help="run on the NVIDIA backend, GPU 0 (--nvidia:ID: GPU ID)")
    for name in OTHER_DEVICES:
        ap.add_argument(f"--{name}", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help="time ours and PyTorch for every case")
    ap.add_argument("--debug", action="store_true", help="print layouts and comparison details for every case")
    ap.add_argument("--num_prerun", type=int_at_least(0), default=10, help="warm-up calls before timing, >= 0 (default 10)")
    ap.add_argument("--num_iterations", type=int_at_least(1), default=1000, help="timed calls per case, >= 1 (default 1000)")
    ap.add_argument("--full", action="store_true", help="the full suite (realistic sizes) instead of the quick one")
    ap.add_argument("--dtypes", default="", help="comma-separated dtype names to keep (e.g. f16,f32)")
    ap.add_argument("--seed", type=int, default=0)
    devices, rest = _device_flags(ap, list(sys.argv[1:] if argv is None else argv))
    args = ap.parse_args(rest)
    args.devices = devices
    args.keep = _dtypes(ap, op, args.dtypes)
    return args


def _dtypes(ap: argparse.ArgumentParser, op: str, text: str) -> set:
    """The dtypes named in ``--dtypes``; a usage error for a name that is no dtype, or one the
    operator's cases do not have (which would select nothing), listing the ones it has."""
    names = [d.strip() for d in text.split(",") if d.strip()]
    if not names:
        return set()
    from infiniop_py.dtypes import parse_dtype
    from infiniop_py.registry import get_cases
    from infiniop_py.status import InfiniopError

    try:
        have = {dt for case in get_cases(op) for dt in case.dtypes}
    except InfiniopError:  # an unknown operator: main reports it
        have = None
    valid = ", ".join(sorted(dt.name.lower() for dt in have)) if have else "?"
    keep = set()
    for name in names:
        try:
            dt = parse_dtype(name)
        except InfiniopError:
            ap.error(f"--dtypes: unknown dtype {name!r}; {op}'s cases have: {valid}")
        if have is not None and dt not in have:
            ap.error(f"--dtypes: {op} has no {name} cases; its cases have: {valid}")
        keep.add(dt)
    return keep


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------
def _time(fn, device: str, prerun: int, iterations: int, side: str) -> float:
    """Average ms per call of ``fn`` after ``prerun`` calls; one synchronisation at the end.

    GPU: CUDA events on the stream each side launches on by default (torch's current stream
    for torch, CuPy's current stream for ours; both the legacy default stream unless changed).
    """
    if device == "cpu":
        for _ in range(prerun):
            fn()
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        return (time.perf_counter_ns() - t0) / 1e6 / iterations
    dev_id = int(device.partition(":")[2] or 0)
    if side == "torch":
        import torch

        with torch.cuda.device(dev_id):
            for _ in range(prerun):
                fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / iterations
    from infiniop_py.cuda import runtime

    cp = runtime.cupy()
    with cp.cuda.Device(dev_id):
        for _ in range(prerun):
            fn()
        cp.cuda.get_current_stream().synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(iterations):
            fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / iterations


def _torch_device(device: str) -> str:
    """torch's name of handle device ``device`` ('cpu', 'nvidia:1' -> 'cuda:1')."""
    return "cpu" if device == "cpu" else f"cuda:{device.partition(':')[2] or 0}"


def _torch_tensor(flat: np.ndarray, shape, strides, device: str):
    """A torch tensor of the same dtype, values and strides as the host layout ``flat``."""
    import torch

    from infiniop_py.dtypes import parse_dtype, to_torch

    dt = to_torch(parse_dtype(flat.dtype)) if str(flat.dtype) != "bfloat16" else torch.bfloat16
    if str(flat.dtype) == "bfloat16":
        t = torch.from_numpy(np.ascontiguousarray(flat).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(flat))
    t = t.to(device=_torch_device(device), dtype=dt)
    if any(d == 0 for d in shape):
        return torch.empty(tuple(shape), dtype=dt, device=t.device)
    return torch.as_strided(t, tuple(shape), tuple(strides))


def _torch_callable(spec, case, layouts, tensors, device):
    """(zero-argument callable running PyTorch's version of the case, what it is)."""
    import torch

    values = {n: tensors[n] for n in tensors}
    if spec.reference is not None and spec.reference_inputs == "torch64":
        # Like run_case: every tensor whose prior value is read ("in" and "inout") goes in.
        kw = {r.name: values.get(r.name) for r in spec.tensors if r.role != "out" and (r.name in layouts or r.optional)}
        extra = {}
        params = inspect.signature(spec.reference).parameters
        if "out_dtypes" in params:
            extra["out_dtypes"] = {r.name: layouts[r.name][2] for r in spec.outputs if r.name in layouts}
        if "out_shapes" in params:
            extra["out_shapes"] = {r.name: layouts[r.name][0] for r in spec.outputs if r.name in layouts}
        ref = spec.reference

        def run():
            with torch.no_grad():
                return ref(**kw, **case.attrs, **case.runtime, **extra)

        return run, "reference"
    if spec.torch:
        code = compile(spec.torch, f"<{spec.name}.torch>", "eval")
        scope = {"torch": torch, "F": torch.nn.functional, **values, **case.attrs, **case.runtime}
        return (lambda: eval(code, scope)), spec.torch  # noqa: S307 - the spec's own expression
    return None, "no torch form"


def profile_case(spec, case, dtype, device: str, handle, args) -> tuple[float | None, float | None, str]:
    """(torch ms, ours ms, note) for one case instance."""
    from infiniop_py.descriptor import create_descriptor
    from infiniop_py.tensor import create_tensor_descriptor
    from infiniop_py.testing.cases import case_seed
    from infiniop_py.testing.data import layout, poisoned, span
    from infiniop_py.testing.device import backend_for
    from infiniop_py.testing.run import hash_case, make_inputs

    rng = np.random.Generator(np.random.PCG64(case_seed(args.seed, spec.name, hash_case(case))))
    layouts, data = make_inputs(spec, case, dtype, rng)
    backend = backend_for(device)
    flats = {}
    for role in spec.tensors:
        if role.name not in layouts or role.name in case.inplace:
            continue
        shape, strides, dt = layouts[role.name]
        flats[role.name] = (
            poisoned(span(shape, strides), dt) if role.role == "out" else layout(data[role.name], shape, strides, dt)
        )
    bufs = {n: backend.upload(f) for n, f in flats.items()}
    for o, i in case.inplace.items():
        bufs[o], flats[o] = bufs[i], flats[i]
    descs = {n: create_tensor_descriptor(*layouts[n][:2], layouts[n][2]) for n in layouts}
    descs.update({r.name: None for r in spec.tensors if r.name not in descs})
    note = ""
    with create_descriptor(spec.name, handle, **descs, **case.attrs) as d:
        ws = backend.empty_bytes(d.workspace_size) if d.workspace_size else None
        call_args = [bufs.get(r.name) for r in spec.tensors]
        t_ours = _time(lambda: d.calculate(ws, *call_args, **case.runtime), device, args.num_prerun, args.num_iterations, "ours")
    t_torch = None
    try:
        tensors = {n: _torch_tensor(flats[n], *layouts[n][:2], device) for n in flats}
        fn, what = _torch_callable(spec, case, layouts, tensors, device)
        if fn is None:
            note = what
        else:
            t_torch = _time(fn, device, args.num_prerun, args.num_iterations, "torch")
            if args.debug:
                note = f"torch: {what}"
    except Exception as exc:  # a dtype torch lacks on this device, a reference needing f64
        note = f"torch n/a: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return t_torch, t_ours, note


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def _devices(args) -> list[str]:
    """Handle names of the devices asked for, in order ('cpu' when none is)."""
    chosen = list(getattr(args, "devices", []))
    flags = [("cpu", "cpu"), ("nvidia", "nvidia:0"), *((name, f"{name}:0") for name in OTHER_DEVICES)]
    for flag, handle in flags:  # a Namespace built by hand
        if getattr(args, flag, False) and handle not in chosen:
            chosen.append(handle)
    return chosen or ["cpu"]


def main(op: str, argv=None) -> int:
    """Run the profile script of operator ``op``; returns the exit status."""
    args = parse_args(op, argv)
    import infiniop_py as iop
    from infiniop_py.registry import get_cases, get_spec
    from infiniop_py.testing.cases import instances
    from infiniop_py.testing.run import run_case

    try:
        spec = get_spec(op)
    except iop.InfiniopError as exc:
        print(f"{op}: {exc}")
        return 2
    keep = args.keep
    suite = "full" if args.full else "quick"
    todo = [(c, dt) for c, dt in instances(get_cases(op), suite) if not keep or dt in keep]
    if not todo:
        print(f"{op}: no cases in the {suite} suite")
    failed = passed = skipped = 0
    status = 0
    for device in _devices(args):
        try:
            handle = iop.create_handle(device)
        except iop.InfiniopError as exc:
            print(f"{op} on {device.removesuffix(':0')}: {exc}")
            status = 2
            continue
        kind = device.partition(":")[0]
        label = device.removesuffix(":0")  # 'nvidia' for GPU 0, 'nvidia:1' for another
        if (kind == "nvidia" and spec.nvidia is None) or (kind == "cpu" and spec.cpu is None):
            print(f"{op} on {label}: no backend")
            status = 2
            continue
        allowed = spec.nvidia_dtypes if kind == "nvidia" and spec.nvidia_dtypes is not None else spec.dtypes
        print(f"Testing {spec.stem} on {label.upper()} ({len(todo)} case instances, {suite} suite)")
        for case, dtype in todo:
            head = f"{op} {label:<6} {dtype.name:<5}"
            desc = case.description or "(no description)"
            if dtype not in allowed:
                print(f"{head} SKIP  {desc} (no {kind} kernel for {dtype.name})")
                skipped += 1
                continue
            try:
                result = run_case(op, case, dtype, device, seed=args.seed, handle=handle)
                ok, messages = result.ok, result.messages
            except Exception as exc:
                ok, messages, result = False, [f"{type(exc).__name__}: {exc}"], None
            line = f"{head} {'PASS' if ok else 'FAIL'}  {desc}"
            if args.profile and ok:
                try:
                    t_torch, t_ours, note = profile_case(spec, case, dtype, device, handle, args)
                    torch_s = f"{t_torch:9.4f} ms" if t_torch is not None else f"{'n/a':>12}"
                    line = f"{line:<72} | PyTorch {torch_s} | lib {t_ours:9.4f} ms" + (f"  ({note})" if note else "")
                except Exception as exc:
                    line += f"  [profile failed: {type(exc).__name__}: {exc}]"
            print(line)
            if args.debug:
                for name, (shape, strides, dt) in _layouts(spec, case, dtype).items():
                    print(f"    {name}: shape {list(shape)} strides {list(strides)} {dt.name}")
                if result is not None:
                    for name, c in result.comparisons.items():
                        print(f"    {name}: {c.total} values, {c.mismatches} mismatches, max abs err {c.max_abs_err:.3g}")
            if not ok:
                failed += 1
                for m in messages:
                    print(f"    {m}")
            else:
                passed += 1
    print(f"{op}: {passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return status


def _layouts(spec, case, dtype) -> dict:
    return {r.name: case.tensors[r.name].resolved(dtype) for r in spec.tensors if case.tensors.get(r.name) is not None}


if __name__ == "__main__":  # python test/infiniop/_common.py OP [flags]
    if len(sys.argv) < 2:
        print("usage: python test/infiniop/_common.py OP [flags]  (or python test/infiniop/OP.py [flags])")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
