"""GEMM, linear, linear_backward and the index & layout family against torch eager.

GPU: gemm / linear (no bias, vs torch.matmul; and with bias, vs torch.addmm) at 4096³ and
8192³ and bmm 32×1024³ in f32 (TF32 off on both sides), f16 and bf16; linear_backward
(8192, 4096)×(4096, 4096); gather / scatter (replace, one write per destination so torch's
result is well defined) / index_copy on 4096×4096 = 2^24 elements; tril / triu 8192²;
interpolate_nearest 2× upsampling of (32, 64, 256, 256). Small 64³ gemm for host wall.
Minimal bytes: each input read once, each output written once (GEMM: TFLOP/s = 2·M·N·K / t).
"""

from __future__ import annotations

from ..core import BenchCase, standard_workload

NAME = "gemm_index"
TDT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _dt(env, dtype):
    return getattr(env.torch, TDT[dtype])


def gemm_case(dtype, m, n, k, batch=None, *, host_wall=False, quick=False):
    shape = (batch, m, n, k) if batch else (m, n, k)

    def build(env):
        torch = env.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        tdt = _dt(env, dtype)

        def make_set():
            a = env.random((batch, m, k) if batch else (m, k), tdt, -1, 1)
            b = env.random((batch, k, n) if batch else (k, n), tdt, -1, 1)
            c = env.poisoned((batch, m, n) if batch else (m, n), tdt)
            return [c, a, b], (a, b)

        w = standard_workload(env, "gemm", make_set, lambda out, a, b: torch.matmul(a, b, out=out), lambda a, b: a @ b)
        w.runtime = (1.0, 0.0)
        w.atol, w.rtol = (2e-2, 1e-2) if dtype != "f32" else (1e-3, 1e-4)
        return w

    label = f"{'bmm ' + str(batch) + 'x' if batch else ''}{m}x{n}x{k}"
    return BenchCase(
        NAME,
        "gemm",
        label,
        dtype,
        shape,
        build,
        host_wall=host_wall,
        quick=quick,
        compile=False,
        notes=f"flops={2 * (batch or 1) * m * n * k}",
    )


def linear_case(dtype, m, n, k, bias):
    def build(env):
        torch = env.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((m, k), tdt, -1, 1)
            w = env.random((n, k), tdt, -1, 1)
            b = env.random((n,), tdt, -1, 1) if bias else None
            y = env.poisoned((m, n), tdt)
            return [y, x, w, b], (x, w, b)

        if bias:
            eager = lambda out, x, w, b: torch.addmm(b, x, w.t(), out=out)  # noqa: E731
        else:
            eager = lambda out, x, w, b: torch.matmul(x, w.t(), out=out)  # noqa: E731
        wl = standard_workload(env, "linear", make_set, eager, lambda x, w, b: torch.nn.functional.linear(x, w, b))
        wl.atol, wl.rtol = (2e-2, 1e-2) if dtype != "f32" else (1e-3, 1e-4)
        return wl

    return BenchCase(
        NAME,
        "linear",
        f"{m}x{n}x{k} {'bias (vs addmm)' if bias else 'no bias (vs matmul)'}",
        dtype,
        (m, n, k),
        build,
        compile=False,
        notes=f"flops={2 * m * n * k}",
    )


def linear_backward_case(dtype, m, n, k):
    def build(env):
        torch = env.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        tdt = _dt(env, dtype)
        extra = {}

        def make_set():
            gy = env.random((m, n), tdt, -1, 1)
            x = env.random((m, k), tdt, -1, 1)
            w = env.random((n, k), tdt, -1, 1)
            gx, gw, gb = env.poisoned((m, k), tdt), env.poisoned((n, k), tdt), env.poisoned((n,), tdt)
            extra[id(gy)] = (env.poisoned((n, k), tdt), env.poisoned((n,), tdt))
            return [gx, gw, gb, gy, x, w], (gy, x, w)

        def eager(out, gy, x, w):  # what autograd runs for F.linear's backward
            gw, gb = extra[id(gy)]
            torch.mm(gy, w, out=out)
            torch.mm(gy.t(), x, out=gw)
            torch.sum(gy, 0, out=gb)

        wl = standard_workload(env, "linear_backward", make_set, eager)
        wl.atol, wl.rtol = (5e-2, 1e-2) if dtype != "f32" else (1e-3, 1e-4)
        return wl

    return BenchCase(
        NAME,
        "linear_backward",
        f"({m},{k})x({k},{n}) grads",
        dtype,
        (m, n, k),
        build,
        compile=False,
        notes=f"flops={4 * m * n * k}",
    )


def gather_case(dtype, rows, cols):
    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((rows, cols), tdt)
            idx = torch.randint(0, cols, (rows, cols), device=env.device)
            out = env.poisoned((rows, cols), tdt)
            return [out, x, idx], (x, idx)

        return standard_workload(
            env,
            "gather",
            make_set,
            lambda out, x, idx: torch.gather(x, 1, idx, out=out),
            lambda x, idx: torch.gather(x, 1, idx),
            attrs={"dim": 1},
            exact=True,
        )

    return BenchCase(NAME, "gather", f"{rows}x{cols} dim 1 (i64)", dtype, (rows, cols), build, compile=False)


def scatter_case(dtype, rows, cols):
    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((rows, cols), tdt)
            idx = torch.rand((rows, cols), device=env.device).argsort(dim=1)  # one write per destination
            upd = env.random((rows, cols), tdt)
            out = env.poisoned((rows, cols), tdt)
            return [out, x, idx, upd], (x, idx, upd)

        def eager(out, x, idx, upd):
            out.copy_(x)
            out.scatter_(1, idx, upd)

        return standard_workload(env, "scatter", make_set, eager, attrs={"axis": 1}, exact=True)

    return BenchCase(
        NAME, "scatter", f"{rows}x{cols} axis 1 replace (permutation rows)", dtype, (rows, cols), build, compile=False
    )


def index_copy_case(dtype, rows, cols, inplace=False):
    op = "index_copy_inplace" if inplace else "index_copy"

    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((rows, cols), tdt)
            idx = torch.randperm(rows, device=env.device)
            src = env.random((rows, cols), tdt)
            if inplace:
                return [x, src, idx], (src, idx)
            out = env.poisoned((rows, cols), tdt)
            return [out, x, idx, src], (x, idx, src)

        if inplace:

            def eager(out, src, idx):
                out.index_copy_(0, idx, src)
        else:

            def eager(out, x, idx, src):
                out.copy_(x)
                out.index_copy_(0, idx, src)

        return standard_workload(env, op, make_set, eager, attrs={"dim": 0}, exact=True)

    return BenchCase(NAME, op, f"{rows}x{cols} dim 0 (permutation)", dtype, (rows, cols), build, compile=False)


def tri_case(op, dtype, n):
    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((n, n), tdt)
            return [env.poisoned((n, n), tdt), x], (x,)

        fn = getattr(torch, op)
        return standard_workload(env, op, make_set, lambda out, x: fn(x, 0, out=out), lambda x: fn(x, 0), exact=True)

    return BenchCase(NAME, op, f"{n}x{n}", dtype, (n, n), build, compile=False)


def interp_case(dtype, shape):
    n, c, h, w = shape

    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random(shape, tdt)
            return [env.poisoned((n, c, 2 * h, 2 * w), tdt), x], (x,)

        def eager(out, x):
            torch._C._nn.upsample_nearest2d(x, (2 * h, 2 * w), out=out)

        return standard_workload(env, "interpolate_nearest", make_set, eager, exact=True)

    return BenchCase(NAME, "interpolate_nearest", "x2 upsample {}x{}x{}x{}".format(*shape), dtype, shape, build, compile=False)


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    gpu = env.gpu
    sizes = (4096, 8192) if gpu else (512,)
    for dt in ("f16", "bf16", "f32"):
        for s in sizes:
            out.append(gemm_case(dt, s, s, s, quick=s == sizes[0]))
            out.append(linear_case(dt, s, s, s, False))
        out.append(gemm_case(dt, 1024, 1024, 1024, batch=32 if gpu else 2))
        out.append(linear_case(dt, sizes[0], sizes[0], sizes[0], True))
        out.append(linear_backward_case(dt, 8192 if gpu else 512, 4096 if gpu else 256, 4096 if gpu else 256))
    out.append(gemm_case("f32", 64, 64, 64, host_wall=True))
    n = 4096 if gpu else 1024
    for dt in ("f32", "f16"):
        out.append(gather_case(dt, n, n))
        out.append(scatter_case(dt, n, n))
        out.append(index_copy_case(dt, n, n))
        out.append(index_copy_case(dt, n, n, inplace=True))
    t = 8192 if gpu else 2048
    for dt in ("f32", "f16"):
        out.append(tri_case("tril", dt, t))
        out.append(tri_case("triu", dt, t))
    out.append(interp_case("f32", (32, 64, 256, 256) if gpu else (2, 8, 64, 64)))
    out.append(interp_case("f16", (32, 64, 256, 256) if gpu else (2, 8, 64, 64)))
    return out


# --------------------------------------------------------------------------------------------
# A/B of this round's switches, in one process: python -m tools.bench.suites.gemm_index [out.json]
# --------------------------------------------------------------------------------------------
def _desc(iop, h, op, tensors, env_name, env_val, **attrs):
    """Descriptor created with ``env_name=env_val`` (the switches are read at create)."""
    import os

    old = os.environ.get(env_name)
    os.environ[env_name] = env_val
    try:
        tds = [
            None if t is None else iop.create_tensor_descriptor(tuple(t.shape), tuple(t.stride()), _iop_dt(iop, t))
            for t in tensors
        ]
        return iop.create_descriptor(op, h, *tds, **attrs)
    finally:
        if old is None:
            del os.environ[env_name]
        else:
            os.environ[env_name] = old


def _iop_dt(iop, t):
    import torch

    return {
        torch.float32: iop.DType.F32,
        torch.float16: iop.DType.F16,
        torch.bfloat16: iop.DType.BF16,
        torch.int64: iop.DType.I64,
        torch.int32: iop.DType.I32,
    }[t.dtype]


def _device_ab(torch, impls, reps=50, warm=5):
    """Median µs per call of each impl (CUDA events on the current stream), interleaved."""
    import numpy as np

    for f in impls.values():
        for _ in range(warm):
            f()
    torch.cuda.synchronize()
    times = {k: [] for k in impls}
    names = list(impls)
    for r in range(reps):
        for k in names if r % 2 == 0 else names[::-1]:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            impls[k]()
            b.record()
            b.synchronize()
            times[k].append(a.elapsed_time(b) * 1e3)
    return {k: float(np.median(v)) for k, v in times.items()}


def _host_ab(torch, impls, calls=1000, rounds=7):
    """Median over rounds of wall µs per call of ``calls`` back-to-back calls (one sync at the end)."""
    import time

    import numpy as np

    for f in impls.values():
        for _ in range(50):
            f()
    torch.cuda.synchronize()
    per = {k: [] for k in impls}
    names = list(impls)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            f = impls[k]
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                f()
            torch.cuda.synchronize()
            per[k].append((time.perf_counter_ns() - t0) / 1e3 / calls)
    return {k: float(np.median(v)) for k, v in per.items()}


def _ab_copy(torch):
    src = torch.empty(256 * 2**20, device="cuda")
    dst = torch.empty_like(src)
    t = _device_ab(torch, {"copy": lambda: dst.copy_(src)}, reps=20)["copy"]
    return 2 * src.numel() * 4 / t / 1e3


def _ab_host_gemm(torch, iop, h, st, dt, res):
    dev = "cuda"
    a = torch.randn(64, 64, device=dev, dtype=dt)
    b = torch.randn(64, 64, device=dev, dtype=dt)
    c, c2 = torch.empty(64, 64, device=dev, dtype=dt), torch.empty(64, 64, device=dev, dtype=dt)
    dl = _desc(iop, h, "gemm", [c, a, b], "INFINIOP_GEMM_LT", "1")
    dg = _desc(iop, h, "gemm", [c, a, b], "INFINIOP_GEMM_LT", "0")
    kl, kg = dl._kernel, dg._kernel
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    impls = {
        "ours_lt": lambda: dl.calculate(None, c, a, b, 1.0, 0.0, stream=st),
        "ours_gemmex": lambda: dg.calculate(None, c, a, b, 1.0, 0.0, stream=st),
        "torch_mm_out": lambda: torch.mm(a, b, out=c2),
        "lt_plan_only": lambda: kl.lt(pa, pb, pc, 1.0, 0.0, st),
        "gemmex_only": lambda: kg.blas.gemm(kg.plan, pa, pb, pc, 1.0, 0.0, st),
        "lt_kernel_call": lambda: kl([pc, pa, pb], 0, (1.0, 0.0), st),
    }
    out = _host_ab(torch, impls)
    dl.calculate(None, c, a, b, 1.0, 0.0, stream=st)
    torch.cuda.synchronize()
    out["check"] = bool(torch.allclose(c.float(), a.float() @ b.float(), atol=1e-1 if dt != torch.float32 else 1e-3))
    out["lt_used"] = kl.lt is not None
    import time

    alpha_attr = dl.spec.runtime[0]
    t0 = time.perf_counter_ns()
    for _ in range(20000):
        alpha_attr.coerce(1.0, "gemm")
    out["coerce_us_per_scalar"] = (time.perf_counter_ns() - t0) / 1e3 / 20000
    if dt == torch.float32:  # cProfile of our calculate (where the host time goes)
        import cProfile
        import io
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        for _ in range(2000):
            dl.calculate(None, c, a, b, 1.0, 0.0, stream=st)
        pr.disable()
        torch.cuda.synchronize()
        sio = io.StringIO()
        pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(12)
        res["cprofile_calculate_f32_64"] = sio.getvalue()
        print(sio.getvalue()[:2500], flush=True)
    return out


def _ab_host_linear(torch, iop, h, st):
    dev, dt = "cuda", torch.float16
    x = torch.randn(64, 64, device=dev, dtype=dt)
    w = torch.randn(64, 64, device=dev, dtype=dt)
    bias = torch.randn(64, device=dev, dtype=dt)
    y, y2 = torch.empty(64, 64, device=dev, dtype=dt), torch.empty(64, 64, device=dev, dtype=dt)
    dl = _desc(iop, h, "linear", [y, x, w, bias], "INFINIOP_GEMM_LT", "1")
    dg = _desc(iop, h, "linear", [y, x, w, bias], "INFINIOP_GEMM_LT", "0")
    wl = torch.empty(max(dl.workspace_size, 1), dtype=torch.uint8, device=dev)
    wg = torch.empty(max(dg.workspace_size, 1), dtype=torch.uint8, device=dev)
    return _host_ab(
        torch,
        {
            "ours_lt_epilogue": lambda: dl.calculate(wl, y, x, w, bias, stream=st),
            "ours_old": lambda: dg.calculate(wg, y, x, w, bias, stream=st),
            "torch_addmm_out": lambda: torch.addmm(bias, x, w.t(), out=y2),
        },
    )


def _ab_gemm(torch, iop, h, st, dt, shape):
    dev = "cuda"
    bt = shape[0] if len(shape) == 4 else None
    m, n, k = shape[-3:]
    lead = (bt,) if bt else ()
    a = torch.rand(*lead, m, k, device=dev, dtype=dt) - 0.5
    b = torch.rand(*lead, k, n, device=dev, dtype=dt) - 0.5
    c, c2 = torch.empty(*lead, m, n, device=dev, dtype=dt), torch.empty(*lead, m, n, device=dev, dtype=dt)
    dl = _desc(iop, h, "gemm", [c, a, b], "INFINIOP_GEMM_LT", "1")
    dg = _desc(iop, h, "gemm", [c, a, b], "INFINIOP_GEMM_LT", "0")
    reps = 20 if (dt == torch.float32 and m == 8192) else 50
    tm = _device_ab(
        torch,
        {
            "lt": lambda: dl.calculate(None, c, a, b, 1.0, 0.0, stream=st),
            "gemmex": lambda: dg.calculate(None, c, a, b, 1.0, 0.0, stream=st),
            "torch": lambda: torch.matmul(a, b, out=c2),
        },
        reps=reps,
    )
    dl.calculate(None, c, a, b, 1.0, 0.0, stream=st)
    torch.cuda.synchronize()
    err = float((c.float() - c2.float()).abs().max())
    return {"op": "gemm", "shape": shape, "dtype": str(dt), **tm, "max_diff_vs_torch": err, "lt_used": dl._kernel.lt is not None}


def _ab_linear_bias(torch, iop, h, st, dt, m=4096, n=4096, k=4096):
    dev = "cuda"
    x = torch.rand(m, k, device=dev, dtype=dt) - 0.5
    w = torch.rand(n, k, device=dev, dtype=dt) - 0.5
    bias = torch.rand(n, device=dev, dtype=dt) - 0.5
    y, y2 = torch.empty(m, n, device=dev, dtype=dt), torch.empty(m, n, device=dev, dtype=dt)
    dl = _desc(iop, h, "linear", [y, x, w, bias], "INFINIOP_GEMM_LT", "1")
    dg = _desc(iop, h, "linear", [y, x, w, bias], "INFINIOP_GEMM_LT", "0")
    wl = torch.empty(max(dl.workspace_size, 1), dtype=torch.uint8, device=dev)
    wg = torch.empty(max(dg.workspace_size, 1), dtype=torch.uint8, device=dev)
    tm = _device_ab(
        torch,
        {
            "lt_epilogue": lambda: dl.calculate(wl, y, x, w, bias, stream=st),
            "old": lambda: dg.calculate(wg, y, x, w, bias, stream=st),
            "torch_addmm": lambda: torch.addmm(bias, x, w.t(), out=y2),
        },
    )
    dl.calculate(wl, y, x, w, bias, stream=st)
    torch.cuda.synchronize()
    return {
        "op": "linear+bias", "shape": (m, n, k), "dtype": str(dt), **tm,
        "max_diff_vs_torch": float((y.float() - y2.float()).abs().max()),
        "epilogue_used": dl._kernel.lt_bias is not None,
    }  # fmt: skip


def _ab_scatter(torch, iop, h, st, dt, n=4096):
    dev = "cuda"
    sets = []
    for _ in range(2):
        xx = torch.randn(n, n, device=dev, dtype=dt)
        idx = torch.rand(n, n, device=dev).argsort(dim=1)
        upd = torch.randn(n, n, device=dev, dtype=dt)
        sets.append((torch.empty(n, n, device=dev, dtype=dt), xx, idx, upd, torch.empty(n, n, device=dev, dtype=dt)))
    o, xx, idx, upd, _ = sets[0]
    dn = _desc(iop, h, "scatter", [o, xx, idx, upd], "INFINIOP_SCATTER_LINE", "1", axis=1)
    do = _desc(iop, h, "scatter", [o, xx, idx, upd], "INFINIOP_SCATTER_LINE", "0", axis=1)
    cnt = [0, 0, 0]

    def rot(i):
        cnt[i] += 1
        return sets[cnt[i] % 2]

    def line():
        o, xx, idx, upd, _ = rot(0)
        dn.calculate(None, o, xx, idx, upd, stream=st)

    def old():
        o, xx, idx, upd, _ = rot(1)
        do.calculate(None, o, xx, idx, upd, stream=st)

    def tor():
        _, xx, idx, upd, o2 = rot(2)
        o2.copy_(xx)
        o2.scatter_(1, idx, upd)

    tm = _device_ab(torch, {"line": line, "old_copy_table": old, "torch": tor})
    ok = True
    for o, xx, idx, upd, o2 in sets:
        o2.copy_(xx)
        o2.scatter_(1, idx, upd)
        for d in (dn, do):
            o.fill_(float("nan"))
            d.calculate(None, o, xx, idx, upd, stream=st)
            torch.cuda.synchronize()
            ok &= bool(torch.equal(o, o2))
    nbytes = n * n * (idx.element_size() + 3 * o.element_size())  # idx + updates + input + output
    return {
        "op": "scatter", "shape": (n, n), "dtype": str(dt), **tm, "bitwise_equal": ok,
        "line_used": dn._kernel.line is not None, "min_bytes": nbytes,
    }  # fmt: skip


def ab_main(argv=None):  # pragma: no cover - GPU only
    import json
    import sys

    import torch

    import infiniop_py as iop

    argv = sys.argv[1:] if argv is None else argv
    torch.backends.cuda.matmul.allow_tf32 = False
    h = iop.create_handle("nvidia")
    st = torch.cuda.current_stream().cuda_stream
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_GBps": _ab_copy(torch)}
    print(f"copy {res['copy_GBps']:.0f} GB/s", flush=True)
    what = set(argv[1].split(",")) if len(argv) > 1 else {"host", "gemm", "linear", "scatter"}
    rows = []

    def save():
        res["rows"] = rows
        if argv:
            with open(argv[0], "w") as f:
                json.dump(res, f, indent=1, default=str)

    if "host" in what:
        for dt in (torch.float32, torch.float16):
            r = {"op": "host gemm 64^3", "dtype": str(dt), **_ab_host_gemm(torch, iop, h, st, dt, res)}
            rows.append(r)
            print(r, flush=True)
        r = {"op": "host linear+bias 64^3", "dtype": "f16", **_ab_host_linear(torch, iop, h, st)}
        rows.append(r)
        print(r, flush=True)
        save()
    if "scatter" in what:
        for dt in (torch.float32, torch.float16):
            rows.append(_ab_scatter(torch, iop, h, st, dt))
            print(rows[-1], flush=True)
        save()
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        if "linear" in what:
            rows.append(_ab_linear_bias(torch, iop, h, st, dt))
            print(rows[-1], flush=True)
        if "gemm" in what:
            for shape in ((4096, 4096, 4096), (32, 1024, 1024, 1024), (8192, 8192, 8192)):
                rows.append(_ab_gemm(torch, iop, h, st, dt, shape))
                print(rows[-1], flush=True)
        save()
    save()


if __name__ == "__main__":  # pragma: no cover
    ab_main()
