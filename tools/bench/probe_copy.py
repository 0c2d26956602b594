"""Issue 4 probe: what does a plain copy kernel reach on the sizes of the softmax rows (kernel-only,
CUDA-graph replay, ``core.graph_times``), next to torch's ``copy_`` (the "same-bytes copy"
column of the suite) and a torch elementwise kernel of the same bytes (``neg``)? The softmax
kernels' structure (a warp per row, all of a lane's packs loaded, then stored) is one of the
copy kernels here, so the table separates the cost of that structure from the rest.

- ``gs{U}x{B}``: grid-stride loop, U 16-byte packs per thread per step (all loaded, then
  stored), B blocks of 256 threads per SM;
- ``ex{U}``: exact grid, U packs per thread (blocks of 256);
- ``row{P}w{W}``: a warp per row of 32 * P packs (P per lane, lane + 32 e), W warps per block,
  exact grid: the softmax kernels' access pattern without the arithmetic.

    python3 -m tools.bench.probe_copy [--mb 67.1,33.6] [--reps 30]
"""

from __future__ import annotations

import argparse

SRC = r"""
template <int U>
__global__ void __launch_bounds__(256) gs_copy(uint4* y, const uint4* __restrict__ x, long long n) {
  const long long step = (long long)gridDim.x * blockDim.x * U;
  for (long long i = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; i < n; i += step) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * blockDim.x < n) v[u] = x[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * blockDim.x < n) y[i + u * blockDim.x] = v[u];
  }
}

template <int P>
__global__ void __launch_bounds__(128) row_copy(uint4* y, const uint4* __restrict__ x, long long rows) {
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= rows) return;
  const int lane = threadIdx.x;
  const uint4* xr = x + r * 32 * P;
  uint4* yr = y + r * 32 * P;
  uint4 v[P];
#pragma unroll
  for (int e = 0; e < P; ++e) v[e] = xr[lane + 32 * e];
#pragma unroll
  for (int e = 0; e < P; ++e) yr[lane + 32 * e] = v[e];
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", default="67.1,33.6", help="bytes moved (read + write), MB")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    import cupy as cp

    from .env import make_env

    env = make_env(False, 0)
    torch = env.torch
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    variants = {f"gs{u}x{b}": ("gs", u, b) for u, b in ((1, 8), (2, 8), (4, 4), (4, 8), (8, 2), (8, 4))}
    variants.update({f"ex{u}": ("ex", u, 0) for u in (1, 2, 4, 8, 16)})
    variants.update({f"row{p}w{w}": ("row", p, w) for p, w in ((16, 1), (16, 4), (8, 1), (8, 4), (4, 4))})
    names = sorted(
        {f"gs_copy<{v[1]}>" for v in variants.values() if v[0] != "row"}
        | {f"row_copy<{v[1]}>" for v in variants.values() if v[0] == "row"}
    )
    mod = cp.RawModule(code=SRC, options=("-std=c++17",), name_expressions=names)
    copy_bw = env.copy_bandwidth()["GBps"]
    print(f"copy bw {copy_bw:.0f} GB/s", flush=True)
    for mb in (float(v) for v in args.mb.split(",")):
        one_size(env, mod, sms, variants, copy_bw, mb, args.reps)


def one_size(env, mod, sms, variants, copy_bw, mb, reps):
    import cupy as cp

    from . import core

    torch = env.torch
    half = int(mb * 1e6 / 2) // 8192 * 8192  # whole rows of 8 KB (= 512 packs)
    npk = half // 16
    nsets = core.rotation(env, 2 * half)
    bufs = [(torch.randn(half // 4, device=env.device), torch.empty(half // 4, device=env.device)) for _ in range(nsets)]
    calls = {
        "torch_copy": lambda s: bufs[s][1].copy_(bufs[s][0]),
        "torch_neg": lambda s: torch.neg(bufs[s][0], out=bufs[s][1]),
    }

    def launcher(kind, a, b):
        if kind == "row":
            f = mod.get_function(f"row_copy<{a}>")
            rows = npk // (32 * a)
            grid, block, n = (-(-rows // b),), (32, b), rows
        else:
            f = mod.get_function(f"gs_copy<{a}>")
            grid = (sms * b,) if kind == "gs" else (-(-npk // (256 * a)),)
            block, n = (256,), npk

        def call(s):
            st = cp.cuda.Stream.from_external(torch.cuda.current_stream())
            f(grid, block, (bufs[s][1].data_ptr(), bufs[s][0].data_ptr(), n), stream=st)

        return call

    for k, v in variants.items():
        calls[k] = launcher(*v)
    for k, fn in calls.items():  # every variant copies exactly
        bufs[0][1].fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        assert torch.equal(bufs[0][1], bufs[0][0]) or k == "torch_neg", k
    t = core.graph_times(env, calls, nsets, reps=reps)
    nbytes = 2 * half
    print(f"# {nbytes / 1e6:.1f} MB moved, {nsets} sets", flush=True)
    for k, us in sorted(t.items(), key=lambda kv: kv[1] if isinstance(kv[1], float) else 1e9):
        if isinstance(us, float):
            print(f"{k:12s} {us:8.2f} us {nbytes / us / 1e3:7.0f} GB/s {100 * nbytes / us / 1e3 / copy_bw:5.1f}%", flush=True)
        else:
            print(k, us, flush=True)


if __name__ == "__main__":
    main()
