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
        flops=2 * (batch or 1) * m * n * k,
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
        flops=2 * m * n * k,
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
        flops=4 * m * n * k,
    )


def gather_case(dtype, rows, cols):
    def build(env):
        torch = env.torch
        tdt = _dt(env, dtype)

        def make_set():
            x = env.random((rows, cols), tdt)
            idx = torch.randint(0, cols, (rows, cols), device=env.device, generator=env.generator())
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
            idx = torch.rand((rows, cols), device=env.device, generator=env.generator()).argsort(
                dim=1
            )  # one write per destination
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
