"""Issue 4 probe: where does the time of 16-bit softmax over (4096, 4096) go? Kernel-only time
(CUDA-graph replay, ``core.graph_times``) of stripped copies of ``row_softmax_warp`` (one warp
per row, 16 raw packs per lane) that drop one piece of work each, next to the library's
softmax, torch's and a torch copy of the same bytes:

- ``full``: max pass, sum of exp, write of exp * inv (the library kernel's work);
- ``nosumexp`` / ``nowrexp``: the sum pass / the write pass without its exponentials;
- ``noexp``: both passes without exponentials (the warp reductions stay);
- ``copy``: loads and stores only (the structure: all loads of a row, then all its stores);
- ``once``: exp once, cached as packed 16-bit pairs, the write pass only scales;
each at launch bounds MINB (blocks of 128 threads per SM), one row per warp, or ``pers``: a
resident grid whose warps loop over rows.

    python3 -m tools.bench.probe_softmax4k [--n 4096] [--rows 4096] [--dtype f16]
"""

from __future__ import annotations

import argparse

SRC = r"""
__device__ __forceinline__ float lo16(unsigned int w, int bf) {
  float f;
  if (bf) { f = __uint_as_float(w << 16); } else { asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l;}" : "=f"(f) : "r"(w)); }
  return f;
}
__device__ __forceinline__ float hi16(unsigned int w, int bf) {
  float f;
  if (bf) { f = __uint_as_float(w & 0xFFFF0000u); } else { asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h;}" : "=f"(f) : "r"(w)); }
  return f;
}
__device__ __forceinline__ unsigned int max2(unsigned int a, unsigned int b, int bf) {
  unsigned int d;
  if (bf) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned int pack2(float lo, float hi, int bf) {
  unsigned int d;
  if (bf) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ float wmax(float v) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float wsum(float v) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// exp(a) for a <= 0 on the FMA pipe: 2^t with t = a * log2(e) split at the nearest integer k
// (magic-number rounding), 2^f (|f| <= 0.5) by a degree-5 polynomial, k added to the exponent.
__device__ __forceinline__ float pexp(float a) {
  const float t = fmaxf(a * 1.4426950408889634f, -125.f);
  const float r = t + 12582912.f;
  const float f = t - (r - 12582912.f);
  float p = 1.3333558146428443e-3f;
  p = fmaf(p, f, 9.6181291076284772e-3f);
  p = fmaf(p, f, 5.5504108664821580e-2f);
  p = fmaf(p, f, 2.4022650695910071e-1f);
  p = fmaf(p, f, 6.9314718055994531e-1f);
  p = fmaf(p, f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(r) << 23));
}

// One row's work on its raw packs w (lane's 16-byte packs lane + 32 e), written to yv; ABL as
// below. Shared by the plain and the TMA-fed probes.
template <int ABL, int P, int BF>
__device__ __forceinline__ void row_work(unsigned int (&w)[P][4], uint4* yv, int lane, unsigned int z) {
  if (ABL == 3) {
#pragma unroll
    for (int e = 0; e < P; ++e) yv[lane + 32 * e] = make_uint4(w[e][0], w[e][1], w[e][2], w[e][3]);
    return;
  }
  unsigned int mw[4] = {w[0][0], w[0][1], w[0][2], w[0][3]};
#pragma unroll
  for (int e = 1; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) mw[i] = max2(mw[i], w[e][i], BF);
  mw[0] = max2(max2(mw[0], mw[1], BF), max2(mw[2], mw[3], BF), BF);
  const float m = wmax(fmaxf(lo16(mw[0], BF), hi16(mw[0], BF)));
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = lo16(w[e][i], BF) - m, b = hi16(w[e][i], BF) - m;
      if (ABL == 1 || ABL == 4) { s0 += a; s1 += b; }
      else if (ABL == 5 || ABL == 6) {
        const float ea = __expf(a), eb = ABL == 6 ? pexp(b) : __expf(b);
        s0 += ea; s1 += eb; w[e][i] = pack2(ea, eb, BF);
      } else if (ABL == 7) { s0 += __expf(a); s1 += pexp(b); }
      else { s0 += __expf(a); s1 += __expf(b); }
    }
  const float inv = 1.f / wsum(s0 + s1);
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("xor.b32 %0, %0, %1;" : "+r"(w[e][i]) : "r"(z));
#pragma unroll
  for (int e = 0; e < P; ++e) {
    unsigned int o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = lo16(w[e][i], BF), b = hi16(w[e][i], BF);
      if (ABL == 5 || ABL == 6) o[i] = pack2(a * inv, b * inv, BF);
      else if (ABL == 2 || ABL == 4) o[i] = pack2((a - m) * inv, (b - m) * inv, BF);
      else if (ABL == 7) o[i] = pack2(__expf(a - m) * inv, pexp(b - m) * inv, BF);
      else o[i] = pack2(__expf(a - m) * inv, __expf(b - m) * inv, BF);
    }
    yv[lane + 32 * e] = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

// ABL: 0 full, 1 no exp in the sum pass, 2 no exp in the write pass, 3 copy, 4 no exp at all,
// 5 exp once (cached as packed pairs), 6 exp once with the odd elements' exp on the FMA pipe,
// 7 full with the odd elements' exp on the FMA pipe. PERS: the grid loops over rows.
template <int ABL, int MINB, int P, int PERS, int BF>
__global__ void __launch_bounds__(128, MINB) probe(unsigned short* y, const unsigned short* x, int R, int N, unsigned int z) {
  const int lane = threadIdx.x;
  for (long long r = (long long)blockIdx.x * 4 + threadIdx.y; r < R; r += (PERS ? (long long)gridDim.x * 4 : (long long)R)) {
    const uint4* xv = reinterpret_cast<const uint4*>(x + r * N);
    uint4* yv = reinterpret_cast<uint4*>(y + r * N);
    unsigned int w[P][4];
#pragma unroll
    for (int e = 0; e < P; ++e) {
      const uint4 q = xv[lane + 32 * e];
      w[e][0] = q.x; w[e][1] = q.y; w[e][2] = q.z; w[e][3] = q.w;
    }
    row_work<ABL, P, BF>(w, yv, lane, z);
  }
}

// The same row work fed by TMA: each warp of W owns a two-stage shared-memory ring of row
// buffers (RB bytes each) with one mbarrier per stage; lane 0 issues one cp.async.bulk per row
// (the whole 16-byte-aligned row), two rows ahead, so a warp's next rows load while it reduces
// and writes the current one. The grid is resident (warps loop over rows).
__device__ __forceinline__ unsigned int sa(const void* p) { return (unsigned int)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bulk_row(unsigned int dst, const void* src, unsigned int bytes, unsigned int bar) {
  unsigned long long st;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;" : "=l"(st) : "r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned int bar, unsigned int parity) {
  unsigned int done = 0;
  while (!done)
    asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p;}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
template <int ABL, int P, int W, int BF>
__global__ void __launch_bounds__(32 * W) tma_probe(unsigned short* y, const unsigned short* x, int R, int N, unsigned int z) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[W][2];
  const int lane = threadIdx.x, wid = threadIdx.y;
  const unsigned int rb = (unsigned int)N * 2u;
  unsigned char* buf = smem + (size_t)wid * 2 * rb;
  const unsigned int b0 = sa(&bars[wid][0]), b1 = sa(&bars[wid][1]);
  const long long stride = (long long)gridDim.x * W;
  long long r = (long long)blockIdx.x * W + wid;
  if (lane == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b0) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b1) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (r < R) bulk_row(sa(buf), x + r * N, rb, b0);
    if (r + stride < R) bulk_row(sa(buf + rb), x + (r + stride) * N, rb, b1);
  }
  __syncwarp();
  for (int it = 0; r < R; r += stride, ++it) {
    const int s = it & 1;
    bar_wait(s ? b1 : b0, (it >> 1) & 1);
    const uint4* xv = reinterpret_cast<const uint4*>(buf + s * rb);
    uint4* yv = reinterpret_cast<uint4*>(y + r * N);
    unsigned int w[P][4];
#pragma unroll
    for (int e = 0; e < P; ++e) {
      const uint4 q = xv[lane + 32 * e];
      w[e][0] = q.x; w[e][1] = q.y; w[e][2] = q.z; w[e][3] = q.w;
    }
    __syncwarp();
    if (lane == 0 && r + 2 * stride < R) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      bulk_row(sa(buf + s * rb), x + (r + 2 * stride) * N, rb, s ? b1 : b0);
    }
    row_work<ABL, P, BF>(w, yv, lane, z);
  }
}
"""

ABL = {"full": 0, "nosumexp": 1, "nowrexp": 2, "copy": 3, "noexp": 4, "once": 5, "oncep": 6, "poly": 7}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--minb", default="4,5,6,8")
    ap.add_argument("--abl", default="full,nosumexp,nowrexp,noexp,copy,once,oncep,poly")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--tma", default="1,2,4")
    args = ap.parse_args()
    import cupy as cp

    from . import core
    from .env import make_env
    from .suites import reductions as red

    env = make_env(False, 0)
    torch = env.torch
    R, N, bf = args.rows, args.n, int(args.dtype == "bf16")
    P = N // 256
    assert N % 256 == 0 and P in (4, 8, 16, 32)
    minbs = [int(v) for v in args.minb.split(",")]
    abls = args.abl.split(",")
    tmaw = [int(v) for v in args.tma.split(",") if v]
    names = {}
    for a in abls:
        for mb in minbs:
            names[f"{a}/m{mb}"] = f"probe<{ABL[a]}, {mb}, {P}, 0, {bf}>"
        names[f"{a}/pers"] = f"probe<{ABL[a]}, {minbs[0]}, {P}, 1, {bf}>"
        if a in ("full", "copy", "once"):
            for w in tmaw:
                names[f"{a}/tma{w}"] = f"tma_probe<{ABL[a]}, {P}, {w}, {bf}>"
    mod = cp.RawModule(code=SRC, options=("-std=c++17", "--use_fast_math"), name_expressions=list(names.values()))
    fns = {k: mod.get_function(v) for k, v in names.items()}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    smem_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    grids = {}
    for k, f in fns.items():
        if "/tma" in k:
            w = int(k.split("tma")[1])
            dyn = w * 2 * N * 2
            f.max_dynamic_shared_size_bytes = dyn
            per_sm = min(smem_sm // (dyn + 1024 + 128), 65536 // (max(f.num_regs, 1) * 32 * w), 32 // w)
            grids[k] = ((sms * per_sm,), (32, w), dyn)
        else:
            grids[k] = ((sms * minbs[0],) if k.endswith("/pers") else ((R + 3) // 4,), (32, 4), 0)
        print(f"{k:16s} regs {f.num_regs:3d} local {f.local_size_bytes} grid {grids[k][0][0]}x{grids[k][1]}", flush=True)

    case = red.softmax_case("softmax", args.dtype, (R, N))
    work = case.build(env)
    nsets = work.nsets
    xs = [work.buffers[s][1] for s in range(nsets)]
    ys = [work.buffers[s][0] for s in range(nsets)]
    side = torch.cuda.Stream()

    def launcher(key):
        f = fns[key]
        grid, block, dyn = grids[key]

        def call(s):
            st = cp.cuda.Stream.from_external(torch.cuda.current_stream())
            f(grid, block, (ys[s].data_ptr(), xs[s].data_ptr(), R, N, 0), stream=st, shared_mem=dyn)

        return call

    ref = torch.softmax(xs[0].double(), -1)
    for k in fns:
        if k.split("/")[0] in ("full", "once", "oncep", "poly", "copy"):
            ys[0].fill_(float("nan"))
            launcher(k)(0)
            torch.cuda.synchronize()
            d = (ys[0].double() - (xs[0].double() if k.startswith("copy") else ref)).abs()
            rel = (d / ref.abs().clamp_min(1e-30)).max().item()
            print(f"{k:16s} max abs err {d.max().item():.3g}, max rel {rel:.3g}, nan {int(ys[0].isnan().sum())}", flush=True)
    calls = {k: launcher(k) for k in fns}
    calls["lib"] = core.ours_call(env, work, stream=side.cuda_stream)
    calls["torch"] = work.torch_eager
    cp_call, cp_sets = core._same_bytes_copy(env, 2 * R * N * 2)
    calls["tcopy"] = lambda s: cp_call(s % cp_sets)
    t = core.graph_times(env, calls, nsets, reps=args.reps, side=side)
    gbps = 2 * R * N * 2 / 1e3
    copy_bw = env.copy_bandwidth()["GBps"]
    print(f"copy bw {copy_bw}", flush=True)
    for k, v in sorted(t.items(), key=lambda kv: kv[1] if isinstance(kv[1], float) else 1e9):
        if isinstance(v, float):
            pct = f"{100 * gbps / v / copy_bw:.1f}%" if copy_bw else ""
            print(f"{k:16s} {v:8.2f} us  {gbps / v:7.0f} GB/s {pct}", flush=True)
        else:
            print(k, v)


if __name__ == "__main__":
    main()
