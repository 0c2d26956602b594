"""GPU probe for the cuDNN candidate of the dense convolutions (run on the GPU machine).

    python3 -m pip install -q --no-index --no-deps --target .site .whl/gguf-*.whl .whl/nvidia_cudnn_frontend-*.whl
    export PYTHONPATH=$PWD/.site:$PWD PYTHONUNBUFFERED=1
    python3 tools/cudnn_smoke.py [--reps 30] [--quick]

Prints what a first run on a new machine needs to know, each step guarded so that one failure
does not hide the rest: Python/torch/CUDA versions, where libcudnn is and its version, whether the
cuDNN frontend imports (if it does not, it retries from the wheel in ``.whl/`` unpacked to a
temporary folder), then for the seed convolution (N32 C512 7x7 -> 512, k3 p1) in f32 (TF32 off)
and bf16: fprop, dgrad and wgrad graphs through the frontend directly (every plan that builds,
checked against torch float64, timed with CUDA events) against torch with cudnn.benchmark on and
TF32 off, the per-call host time of both, and finally ``infiniop_py.cuda.cudnn.CudnnConv`` and
``infiniop_py.cuda.autotune`` on the same problems. With ``$OUT`` set, the whole log also goes
to ``$OUT/cudnn_smoke.log`` and the frontend's own log to ``$OUT/cudnn_fe.log``.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_LOG = None
SUMMARY: list[str] = []


def say(*args):
    text = " ".join(str(a) for a in args)
    print(text, flush=True)
    if _LOG is not None:
        _LOG.write(text + "\n")
        _LOG.flush()


def step(title, fn, *args, **kwargs):
    """Run one step; print the full traceback on failure and return None."""
    say(f"--- {title}")
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - a probe reports everything
        if isinstance(exc, KeyboardInterrupt):
            raise
        say(f"FAILED {title}: {type(exc).__name__}: {exc}")
        say(traceback.format_exc())
        SUMMARY.append(f"FAILED {title}: {type(exc).__name__}: {str(exc)[:300]}")
        return None


# ---------------------------------------------------------------------------------------------
# environment


def env_report():
    say("python", sys.version.replace("\n", " "), platform.machine())
    say("executable", sys.executable)
    say("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH"))
    say("PYTHONPATH", os.environ.get("PYTHONPATH"))
    import sysconfig

    say("sysconfig purelib", sysconfig.get_path("purelib"))
    spec = importlib.util.find_spec("nvidia")
    say("nvidia namespace", list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else spec)


def torch_report():
    import torch

    say("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
    say("device", torch.cuda.get_device_name(0), "cc", torch.cuda.get_device_capability(0))
    say("torch file", torch.__file__)
    return torch


def find_libcudnn():
    """Every libcudnn.so.9 candidate, in the order the module tries them."""
    found = []
    try:
        from infiniop_py.cuda import cudnn as icudnn

        found = list(icudnn.libcudnn_candidates())
        say("infiniop_py.cuda.cudnn.libcudnn_candidates():", found)
    except Exception as exc:  # noqa: BLE001
        say("module locator unavailable:", type(exc).__name__, exc)
    roots = set()
    spec = importlib.util.find_spec("nvidia")
    if spec and spec.submodule_search_locations:
        roots.update(os.path.dirname(p) for p in spec.submodule_search_locations)
    tspec = importlib.util.find_spec("torch")
    if tspec and tspec.submodule_search_locations:
        for p in tspec.submodule_search_locations:
            roots.add(os.path.dirname(p))
            found += glob.glob(os.path.join(p, "lib", "libcudnn.so*"))
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    for r in sorted(roots):
        found += glob.glob(os.path.join(r, "nvidia", "*", "lib", "libcudnn.so*"))
    out = []
    for f in found:
        if f not in out:
            out.append(f)
    say("libcudnn candidates:", out)
    return out


def load_libcudnn(paths):
    for p in paths:
        if not os.path.basename(p).startswith("libcudnn.so"):
            continue
        try:
            lib = ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            say("could not load", p, exc)
            continue
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        ver = lib.cudnnGetVersion()
        say("loaded", p, "cudnnGetVersion() =", ver)
        SUMMARY.append(f"libcudnn {ver} at {p}")
        return p
    say("no libcudnn loaded from the candidates; trying the loader path")
    lib = ctypes.CDLL("libcudnn.so.9", mode=ctypes.RTLD_GLOBAL)
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    say("loaded libcudnn.so.9 from the loader path, version", lib.cudnnGetVersion())
    return "libcudnn.so.9"


def import_frontend(lib_path):
    if lib_path and os.path.sep in lib_path:
        d = os.path.dirname(lib_path)
        parts = [x for x in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if x]
        if d not in parts:  # the frontend looks in LD_LIBRARY_PATH first (read from os.environ)
            os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([d, *parts])
    try:
        import cudnn
    except Exception:
        say("import cudnn failed:\n" + traceback.format_exc())
        wheels = sorted(
            glob.glob(os.path.join(ROOT, ".whl", f"nvidia_cudnn_frontend-*-cp{sys.version_info[0]}{sys.version_info[1]}-*.whl"))
        )
        if not wheels:
            raise
        dest = tempfile.mkdtemp(prefix="cudnn_fe_")
        with zipfile.ZipFile(wheels[-1]) as z:
            z.extractall(dest)
        say("unpacked", wheels[-1], "to", dest)
        sys.path.insert(0, dest)
        for name in [m for m in sys.modules if m == "cudnn" or m.startswith("cudnn.")]:
            del sys.modules[name]
        import cudnn
    say("cudnn frontend", getattr(cudnn, "__version__", "?"), "from", cudnn.__file__)
    say("backend_version", cudnn.backend_version(), cudnn.backend_version_string())
    SUMMARY.append(f"frontend {cudnn.__version__}, backend {cudnn.backend_version()}")
    return cudnn


# ---------------------------------------------------------------------------------------------
# the seed problem through the frontend directly

SEED = dict(n=32, c=512, k=512, hw=7, r=3, pad=1, stride=1, dil=1)


def cudnn_dtype(cudnn, torch, dt):
    return {torch.float32: cudnn.data_type.FLOAT, torch.float16: cudnn.data_type.HALF, torch.bfloat16: cudnn.data_type.BFLOAT16}[
        dt
    ]


def make_graph(cudnn, torch, handle, kind, x, w, y, *, deterministic=True, allow_tf32=False):
    """One conv graph (x, w, y torch tensors; kind fprop/dgrad/wgrad) with every plan built."""
    s = SEED
    io = cudnn_dtype(cudnn, torch, x.dtype)
    g = cudnn.pygraph(
        io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT, handle=handle
    )
    X = g.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=io) if kind != "dgrad" else None
    W = g.tensor(name="W", dim=list(w.shape), stride=list(w.stride()), data_type=io) if kind != "wgrad" else None
    Y = g.tensor(name="Y", dim=list(y.shape), stride=list(y.stride()), data_type=io) if kind != "fprop" else None
    attrs = dict(
        padding=[s["pad"]] * 2, stride=[s["stride"]] * 2, dilation=[s["dil"]] * 2, compute_data_type=cudnn.data_type.FLOAT
    )
    if kind == "fprop":
        out = g.conv_fprop(image=X, weight=W, **attrs)
        ref_t = y
    elif kind == "dgrad":
        out = g.conv_dgrad(loss=Y, filter=W, out_dims=list(x.shape), **attrs)
        ref_t = x
    else:
        out = g.conv_wgrad(image=X, loss=Y, out_dims=list(w.shape), **attrs)
        ref_t = w
    out.set_output(True).set_data_type(io).set_dim(list(ref_t.shape)).set_stride(list(ref_t.stride()))
    g.validate()
    g.build_operation_graph()
    if deterministic:
        g.deselect_numeric_notes([cudnn.numerical_note.NONDETERMINISTIC])
    if x.dtype == torch.float32 and not allow_tf32:
        g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    try:
        g.check_support()
    except Exception as exc:  # noqa: BLE001
        say("  check_support:", type(exc).__name__, exc)
    count = g.get_execution_plan_count()
    built = []
    for i in range(count):
        t0 = time.perf_counter()
        try:
            g.build_plan_at_index(i)
        except Exception as exc:  # noqa: BLE001
            say(f"  plan {i}: build refused ({type(exc).__name__}: {str(exc)[:160]})")
            continue
        ws = g.get_workspace_size_plan_at_index(i)
        name = g.get_plan_name_at_index(i)
        cfg = g._plans[i] if hasattr(g, "_plans") else None
        say(
            f"  plan {i}: {name} ws {ws} B cpp_index {getattr(cfg, 'cpp_index', '?')} built in {1e3 * (time.perf_counter() - t0):.1f} ms"
        )
        built.append((i, name, ws))
    say(f"  {kind}: {count} plans after filters, {len(built)} built")
    return g, out, built


def cuda_time(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def host_time(torch, fn, calls=300):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def rel_err(torch, out, ref):
    return float((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def seed_tensors(torch, dt, channels_last=False):
    s = SEED
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(s["n"], s["c"], s["hw"], s["hw"], device="cuda", generator=gen).to(dt)
    w = (torch.randn(s["k"], s["c"], s["r"], s["r"], device="cuda", generator=gen) / 48).to(dt)
    dy = torch.randn(s["n"], s["k"], s["hw"], s["hw"], device="cuda", generator=gen).to(dt)
    if channels_last:
        x, w, dy = (t.contiguous(memory_format=torch.channels_last) for t in (x, w, dy))
    return x, w, dy


def references(torch, x, w, dy):
    import torch.nn.functional as fn

    p = SEED["pad"]
    xd, wd, dyd = x.double(), w.double(), dy.double()
    return {
        "fprop": fn.conv2d(xd, wd, padding=p),
        "dgrad": torch.nn.grad.conv2d_input(x.shape, wd, dyd, padding=p),
        "wgrad": torch.nn.grad.conv2d_weight(xd, w.shape, dyd, padding=p),
    }


def torch_runner(torch, kind, x, w, dy):
    import torch.nn.functional as fn

    p = SEED["pad"]
    if kind == "fprop":
        return lambda: fn.conv2d(x, w, padding=p)
    mask = [kind == "dgrad", kind == "wgrad", False]
    return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [p, p], [1, 1], False, [0, 0], 1, mask)


def frontend_case(cudnn, torch, handle, dt, kind, reps, channels_last=False):
    flops = 2 * SEED["n"] * SEED["k"] * SEED["c"] * SEED["hw"] ** 2 * SEED["r"] ** 2
    x, w, dy = seed_tensors(torch, dt, channels_last)
    ref = references(torch, x, w, dy)[kind]
    tol = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dt]
    stream = torch.cuda.current_stream().cuda_stream
    cudnn.set_stream(handle, stream)
    out_t = torch.empty_like({"fprop": dy, "dgrad": x, "wgrad": w}[kind])
    xx = out_t if kind == "dgrad" else x
    ww = out_t if kind == "wgrad" else w
    yy = out_t if kind == "fprop" else dy
    g, out, built = make_graph(cudnn, torch, handle, kind, xx, ww, yy)
    names = {"X": xx, "W": ww, "Y": yy}
    pack = {t: names[t.name] for t in g.tensors.values() if t.name in names}
    pack[out] = out_t
    label = f"{kind} {str(dt).replace('torch.', '')}{' NHWC' if channels_last else ''}"
    best = None
    for i, name, ws_bytes in built:
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
        try:
            out_t.fill_(float("nan"))
            g.execute_plan_at_index(pack, ws, index=i, handle=handle)
            torch.cuda.synchronize()
            err = rel_err(torch, out_t, ref)
            us = cuda_time(torch, lambda i=i, ws=ws: g.execute_plan_at_index(pack, ws, index=i, handle=handle), reps)
        except Exception as exc:  # noqa: BLE001
            say(f"  plan {i} ({name}): execute failed {type(exc).__name__}: {exc}")
            continue
        ok = err <= tol
        say(
            f"  plan {i} {name}: rel err {err:.2e} {'ok' if ok else 'TOO LARGE'}; {us:.1f} us, {flops / us / 1e6:.1f} TF/s (ws {ws_bytes} B)"
        )
        if ok and (best is None or us < best[0]):
            best = (us, i, name, ws)
    if best is None:
        SUMMARY.append(f"{label}: no plan built and passed the accuracy check")
        return
    us, i, name, ws = best
    # raw fast path (what CudnnConv uses): sorted uids -> pointer array -> _execute_with_raw_ptrs
    raw_us = raw_host = None
    try:
        lowered = g._lowered_graph
        order = list(g._variant_pack_uids())
        by_uid = {t.uid: v for t, v in pack.items()}
        ptrs = (ctypes.c_void_p * len(order))(*[by_uid[u].data_ptr() for u in order])
        cpp = g._plans[i].cpp_index
        bh = handle.backend_handle

        def raw():
            lowered._execute_with_raw_ptrs(ctypes.addressof(ptrs), len(order), ws.data_ptr(), bh, cpp)

        out_t.fill_(float("nan"))
        raw()
        torch.cuda.synchronize()
        say(f"  raw path: uids {order}, rel err {rel_err(torch, out_t, ref):.2e}")
        raw_us = cuda_time(torch, raw, reps)
        raw_host = host_time(torch, raw)
    except Exception as exc:  # noqa: BLE001
        say(f"  raw path failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    pub_host = host_time(torch, lambda: g.execute_plan_at_index(pack, ws, index=i, handle=handle))
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    tr = torch_runner(torch, kind, x, w, dy)
    t_us = cuda_time(torch, tr, reps, warmup=5)
    t_host = host_time(torch, tr)
    terr = rel_err(torch, tr() if kind == "fprop" else tr()[0 if kind == "dgrad" else 1], ref)
    line = (
        f"{label}: frontend best plan {i} {name}: {us:.1f} us ({flops / us / 1e6:.1f} TF/s), host/call public {pub_host:.1f} us"
        f", raw {raw_us and f'{raw_us:.1f}'} us host/call {raw_host and f'{raw_host:.1f}'} us | torch {t_us:.1f} us"
        f" ({flops / t_us / 1e6:.1f} TF/s) host/call {t_host:.1f} us, torch rel err {terr:.1e}"
    )
    say(line)
    SUMMARY.append(line)


def bias_case(cudnn, torch, handle, dt, reps):
    import torch.nn.functional as fn

    x, w, _ = seed_tensors(torch, dt)
    b = torch.randn(SEED["k"], device="cuda").to(dt)
    io = cudnn_dtype(cudnn, torch, dt)
    g = cudnn.pygraph(
        io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT, handle=handle
    )
    X = g.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=io)
    W = g.tensor(name="W", dim=list(w.shape), stride=list(w.stride()), data_type=io)
    B = g.tensor(name="B", dim=[1, SEED["k"], 1, 1], stride=[SEED["k"], 1, 1, 1], data_type=io)
    c = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1], compute_data_type=cudnn.data_type.FLOAT)
    y = g.bias(input=c, bias=B, compute_data_type=cudnn.data_type.FLOAT)
    out = torch.empty(SEED["n"], SEED["k"], SEED["hw"], SEED["hw"], device="cuda", dtype=dt)
    y.set_output(True).set_data_type(io).set_dim(list(out.shape)).set_stride(list(out.stride()))
    g.validate()
    g.build_operation_graph()
    g.deselect_numeric_notes([cudnn.numerical_note.NONDETERMINISTIC])
    if dt == torch.float32:
        g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    n = g.get_execution_plan_count()
    ok = []
    for i in range(n):
        try:
            g.build_plan_at_index(i)
            ok.append(i)
        except Exception as exc:  # noqa: BLE001
            say(f"  bias plan {i} refused: {str(exc)[:160]}")
    say(f"  fprop+bias {dt}: {n} plans, {len(ok)} built")
    if not ok:
        SUMMARY.append(f"fprop+bias {dt}: no plan builds")
        return
    ws = torch.empty(max(g.get_workspace_size_plan_at_index(ok[0]), 1), dtype=torch.uint8, device="cuda")
    g.execute_plan_at_index({X: x, W: w, B: b, y: out}, ws, index=ok[0], handle=handle)
    ref = fn.conv2d(x.double(), w.double(), b.double(), padding=1)
    err = rel_err(torch, out, ref)
    us = cuda_time(torch, lambda: g.execute_plan_at_index({X: x, W: w, B: b, y: out}, ws, index=ok[0], handle=handle), reps)
    line = f"fprop+bias {str(dt).replace('torch.', '')}: {len(ok)}/{n} plans build; plan {ok[0]} {g.get_plan_name_at_index(ok[0])} rel err {err:.1e}, {us:.1f} us"
    say(line)
    SUMMARY.append(line)


# ---------------------------------------------------------------------------------------------
# the project's module


def module_cases(torch, reps):
    from infiniop_py.cuda import autotune
    from infiniop_py.cuda import cudnn as icudnn
    from infiniop_py.dtypes import DType
    from infiniop_py.tensor import TensorDescriptor

    say("available():", icudnn.available(), "info:", icudnn.info())
    dts = {torch.float32: DType.F32, torch.bfloat16: DType.BF16, torch.float16: DType.F16}
    flops = 2 * SEED["n"] * SEED["k"] * SEED["c"] * SEED["hw"] ** 2 * SEED["r"] ** 2
    for dt in (torch.float32, torch.bfloat16):
        for cl in (False, True):
            x, w, dy = seed_tensors(torch, dt, cl)
            refs = references(torch, x, w, dy)
            for kind in ("fprop", "dgrad", "wgrad"):
                label = f"CudnnConv {kind} {str(dt).replace('torch.', '')}{' NHWC' if cl else ''}"
                try:
                    outs = {"fprop": torch.empty_like(dy), "dgrad": torch.empty_like(x), "wgrad": torch.empty_like(w)}
                    xx = outs["dgrad"] if kind == "dgrad" else x
                    ww = outs["wgrad"] if kind == "wgrad" else w
                    yy = outs["fprop"] if kind == "fprop" else dy
                    desc = [TensorDescriptor(tuple(t.shape), tuple(t.stride()), dts[dt]) for t in (xx, ww, yy)]
                    t0 = time.perf_counter()
                    conv = icudnn.CudnnConv(kind, *desc, (1, 1), (1, 1), (1, 1), 1)
                    t_create = time.perf_counter() - t0
                    ws = torch.empty(max(conv.workspace_size, 1), dtype=torch.uint8, device="cuda")
                    s = torch.cuda.current_stream().cuda_stream
                    out = outs[kind]
                    out.fill_(float("nan"))

                    def run(conv=conv, xx=xx, ww=ww, yy=yy, ws=ws, s=s):
                        conv(xx.data_ptr(), ww.data_ptr(), yy.data_ptr(), ws.data_ptr(), s)

                    run()
                    torch.cuda.synchronize()
                    err = rel_err(torch, out, refs[kind])
                    first = out.clone()
                    run()
                    torch.cuda.synchronize()
                    same = bool(torch.equal(first, out))
                    us = cuda_time(torch, run, reps)
                    host = host_time(torch, run)
                    line = (
                        f"{label}: rel err {err:.1e}, repeat bitwise equal {same}, {us:.1f} us ({flops / us / 1e6:.1f} TF/s),"
                        f" host/call {host:.1f} us, create {t_create * 1e3:.0f} ms, ws {conv.workspace_size} B, plan {conv.plan_name}"
                    )
                    say("  plan times (us):", {k: round(v * 1e6, 1) for k, v in conv.plan_times.items()})
                except Exception as exc:  # noqa: BLE001
                    line = f"{label}: FAILED {type(exc).__name__}: {exc}"
                    say(traceback.format_exc())
                say(line)
                SUMMARY.append(line)
    # a tiny convolution (the seed-002 grid's smallest): per-call host time against torch
    try:
        import torch.nn.functional as fn

        x = torch.randn(2, 4, 32, 32, device="cuda")
        w = torch.randn(8, 4, 3, 3, device="cuda")
        y = torch.empty(2, 8, 32, 32, device="cuda")
        desc = [TensorDescriptor(tuple(t.shape), tuple(t.stride()), DType.F32) for t in (x, w, y)]
        conv = icudnn.CudnnConv("fprop", *desc, (1, 1), (1, 1), (1, 1), 1)
        ws = torch.empty(max(conv.workspace_size, 1), dtype=torch.uint8, device="cuda")
        s = torch.cuda.current_stream().cuda_stream

        def tiny():
            conv(x.data_ptr(), w.data_ptr(), y.data_ptr(), ws.data_ptr(), s)

        tiny()
        torch.cuda.synchronize()
        err = rel_err(torch, y, fn.conv2d(x.double(), w.double(), padding=1))
        line = (
            f"tiny conv2d N2 C4->8 32x32 k3 f32: CudnnConv rel err {err:.1e}, {cuda_time(torch, tiny, reps):.1f} us,"
            f" host/call {host_time(torch, tiny, 2000):.1f} us | torch {cuda_time(torch, lambda: fn.conv2d(x, w, padding=1), reps):.1f} us,"
            f" host/call {host_time(torch, lambda: fn.conv2d(x, w, padding=1), 2000):.1f} us (plan {conv.plan_name})"
        )
    except Exception as exc:  # noqa: BLE001
        line = f"tiny conv: FAILED {type(exc).__name__}: {exc}"
        say(traceback.format_exc())
    say(line)
    SUMMARY.append(line)
    # the create-time chooser on two real candidates
    x, w, dy = seed_tensors(torch, torch.bfloat16)
    y = torch.empty_like(dy)
    import torch.nn.functional as fn

    cands = [("torch", lambda s: fn.conv2d(x, w, padding=1)), ("copy", lambda s: y.copy_(dy))]
    t0 = time.perf_counter()
    name = autotune.choose(("smoke", 1), cands)
    say(f"autotune.choose -> {name} in {1e3 * (time.perf_counter() - t0):.1f} ms; times {autotune.last_times(('smoke', 1))}")
    SUMMARY.append(f"autotune.choose(torch conv vs copy) -> {name}")


def run_pytest():
    import subprocess

    files = [os.path.join(ROOT, "test", f) for f in ("test_cudnn.py", "test_cudnn_plans.py")]
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", *files]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDNN_FRONTEND_LOG")}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=480)
    say(r.stdout[-6000:] + r.stderr[-2000:])
    last = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
    SUMMARY.append(f"pytest test/test_cudnn*.py: exit {r.returncode}: {last}")


def main():
    global _LOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="f32 and bf16 fprop/dgrad/wgrad only, no NHWC/bias")
    args = ap.parse_args()
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        _LOG = open(os.path.join(out, "cudnn_smoke.log"), "w")  # noqa: SIM115
        os.environ.setdefault("CUDNN_FRONTEND_LOG_INFO", "1")
        os.environ.setdefault("CUDNN_FRONTEND_LOG_FILE", os.path.join(out, "cudnn_fe.log"))
    step("environment", env_report)
    torch = step("torch", torch_report)
    paths = step("find libcudnn", find_libcudnn) or []
    lib = step("load libcudnn", load_libcudnn, paths)
    cudnn = step("import cudnn frontend", import_frontend, lib)
    if torch is not None and cudnn is not None:
        handle = step("create handle", cudnn.create_handle)
        if handle is not None:
            for dt in (torch.float32, torch.bfloat16):
                for kind in ("fprop", "dgrad", "wgrad"):
                    step(f"frontend {kind} {dt}", frontend_case, cudnn, torch, handle, dt, kind, args.reps)
            if not args.quick:
                for dt in (torch.float32, torch.bfloat16):
                    step(f"frontend fprop NHWC {dt}", frontend_case, cudnn, torch, handle, dt, "fprop", args.reps, True)
                    step(f"frontend fprop+bias {dt}", bias_case, cudnn, torch, handle, dt, args.reps)
    if torch is not None:
        step("infiniop_py.cuda.cudnn / autotune", module_cases, torch, args.reps)
    if not args.quick:
        step("pytest test/test_cudnn*.py (GPU cases)", run_pytest)
    say("=" * 30 + " SUMMARY")
    for line in SUMMARY:
        say(line)


if __name__ == "__main__":
    main()
