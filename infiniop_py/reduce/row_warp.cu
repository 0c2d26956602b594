// row_softmax_warp: softmax / log_softmax of 16-bit rows of at most 32 * P 16-byte packs (plus
// an unaligned head and tail of < 8 elements), y at x's 16-byte alignment. One warp per row,
// 4 rows per 128-thread block, no block barriers (warp shuffles only). Every lane issues all
// of its P pack loads before any arithmetic and keeps the packs raw in registers (4 words
// each); the max pass runs on packed pairs (max.NaN.{f16,bf16}x2, no conversion), the sum and
// write passes convert; outputs are packed pairwise (cvt.rn.*x2.f32) and stored as 16 bytes.
// MINB (blocks per SM in __launch_bounds__) sets the register cap: 65536 / (128 * MINB).
// The raw words get opaque_xor before the write pass.

// A 16-byte store under a predicate, without a branch (the warp kernels' write passes). Written
// as `if (v < nv) { o = ...; *d = o; }`, the compiler gives each pack its own conditional block
// with the pack's conversions and exponentials sunk into it, so the write pass runs one pack at a
// time (docs/perf/reductions.md, rule softmax-warp). Here every slot's value is computed (slots past
// the row hold -inf pairs) and only the store is predicated. row_softmax_hyb stores through it
// too, with c = true.
__device__ __forceinline__ void st16_if(Pack<unsigned int, 4>* d, const Pack<unsigned int, 4>& o, bool c) {
  asm volatile("{.reg .pred q; setp.ne.b32 q, %5, 0; @q st.global.v4.u32 [%0], {%1, %2, %3, %4};}" ::"l"(d),
               "r"(o.v[0]), "r"(o.v[1]), "r"(o.v[2]), "r"(o.v[3]), "r"((int)c)
               : "memory");
}

// A lane's share of a 16-bit row held as raw words (P packs of 4 words, two values each) plus
// its unaligned head / tail scalars: the max (packed max.NaN pairs on 4 independent chains,
// converted once) and the sum of exp(v - m) (two f32 chains). Shared by the warp kernels.
template <class T, int P>
__device__ __forceinline__ float raw_lane_max(const unsigned int (&w)[P][4], float hv, float tv) {
  unsigned int mw[4] = {w[0][0], w[0][1], w[0][2], w[0][3]};
#pragma unroll
  for (int e = 1; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) mw[i] = RawWord<T>::max2(mw[i], w[e][i]);
  mw[0] = RawWord<T>::max2(RawWord<T>::max2(mw[0], mw[1]), RawWord<T>::max2(mw[2], mw[3]));
  return MaxOp::combine<float>(MaxOp::combine<float>(hv, tv),
                               MaxOp::combine<float>(RawWord<T>::get(mw[0], 0), RawWord<T>::get(mw[0], 1)));
}
// The sum of exp(v - m) over a lane's share, exp taken by E: SubExp (exp_(v - m)) or ShiftExp
// (one FFMA and one ex2; the sum is then scaled by 2^lo, see ShiftExp).
template <class T> struct SubExp {
  float m;
  __device__ __forceinline__ float operator()(float v) const { return RowMath<T>::exp_(v - m); }
};
template <class T, int P, class E>
__device__ __forceinline__ float raw_lane_expsum(const unsigned int (&w)[P][4], float hv, float tv, const E& ex) {
  float s0 = ex(hv) + ex(tv), s1 = 0.f;
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s0 += ex(RawWord<T>::get(w[e][i], 0));
      s1 += ex(RawWord<T>::get(w[e][i], 1));
    }
  return s0 + s1;
}

// 16 bytes by ld.global.nc.L1::no_allocate (row_softmax_warp with NC). Valid in place (y == x):
// every pack is read once, by the warp that later writes it, and L1 keeps no copy of it.
__device__ __forceinline__ Pack<unsigned int, 4> ld_nc(const Pack<unsigned int, 4>* a) {
  Pack<unsigned int, 4> q;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(q.v[0]), "=r"(q.v[1]), "=r"(q.v[2]), "=r"(q.v[3])
      : "l"(a));
  return q;
}

// AL: the packs start at a 128-byte boundary (a head of up to 63 elements, two per lane), so each
// warp-wide pack access covers whole 128-byte lines on unaligned rows. SH: exponentials as
// ShiftExp (one FFMA and one ex2 per element) instead of exp_ftz(v - m). NC: the packs are
// loaded by ld_nc (heads and tails by plain loads).
template <class T, int MODE, int P, int MINB, int AL = 0, int SH = 0, int NC = 0>
__global__ void __launch_bounds__(128, MINB) row_softmax_warp(T* y, const T* x, const int* __restrict__ tgt,
                                                              float* __restrict__ ws, RowMeta p) {
  const int lane = threadIdx.x;
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= p.R) return;  // the whole warp: nothing below synchronises beyond the warp
  long long off[3];
  dim_offsets<3>(p.rows, r, off);
  const T* px = x + off[0];
  T* py = y + off[1];
  const int N = (int)p.N;
  const int HA = AL ? 64 : 8;
  const int head = row_head<HA>(px, N);
  const int nv = (N - head) >> 3;
  const int tail0 = head + nv * 8;
  const int ntail = N - tail0;
  const float NINF = red_neg_inf(0.f);
  const unsigned int WNINF = RawWord<T>::ninf2;
  typedef Pack<unsigned int, 4> W4;
  const W4* xv = reinterpret_cast<const W4*>(px + head);
  unsigned int w[P][4];
  float hv = NINF, tv = NINF, hv2 = NINF;
  if (lane < head) hv = red_load(px[lane]);
  if (AL && lane + 32 < head) hv2 = red_load(px[lane + 32]);
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int v = lane + 32 * e;
    if (v < nv) {
      const W4 q = NC ? ld_nc(xv + v) : xv[v];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[e][i] = q.v[i];
    } else {
      w[e][0] = w[e][1] = w[e][2] = w[e][3] = WNINF;
    }
  }
  if (lane < ntail) tv = red_load(px[tail0 + lane]);
  const float m = warp_reduce<MaxOp, float>(raw_lane_max<T, P>(w, AL ? MaxOp::combine<float>(hv, hv2) : hv, tv));
  const ShiftExp ex(m);
  const auto row_sum = [&](const auto& f) {
    const float s = raw_lane_expsum<T, P>(w, hv, tv, f);
    return warp_reduce<SumOp, float>(AL ? s + f(hv2) : s);
  };
  const float s = SH ? row_sum(ex) : row_sum(SubExp<T>{m});
  const float inv = 1.f / s;
  const float lg = SH ? ex.log_sum(s) : RowMath<T>::log_(s);
  opaque_xor<P>(w, (unsigned int)(p.ne >> 40));
  // softmax with SH: e(v) / sum e (the 2^lo factors cancel); log_softmax: v - m - lg either way
#define RW_OUT(v) (SH && MODE == RW_SOFTMAX ? ex(v) * inv : rw_value<T, MODE>((v), m, inv, lg))
  if (lane < head) py[lane] = Conv<T>::from(RW_OUT(hv));
  if (AL && lane + 32 < head) py[lane + 32] = Conv<T>::from(RW_OUT(hv2));
  W4* yv = reinterpret_cast<W4*>(py + head);
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int v = lane + 32 * e;
    W4 o;
#pragma unroll
    for (int i = 0; i < 4; ++i) o.v[i] = RawWord<T>::pack2(RW_OUT(RawWord<T>::get(w[e][i], 0)), RW_OUT(RawWord<T>::get(w[e][i], 1)));
    st16_if(yv + v, o, v < nv);
  }
  if (lane < ntail) py[tail0 + lane] = Conv<T>::from(RW_OUT(tv));
#undef RW_OUT
}

// row_softmax_hyb: softmax / log_softmax of a contiguous row (y at x's 16-byte alignment) by one
// block of G threads (blockDim.x, a multiple of 32), the row read from global memory once and
// cached half in registers, half in shared memory: thread tid keeps packs tid + e * G (e < P)
// as 4 raw words in registers and packs tid + (P + j) * G (j < p.ne) in dynamic shared memory,
// copied there with cp.async (it reads back only its own slots, so no barrier is needed).
// Moving part of the cache out of the register file lets 2 (f32) / 4 (16-bit) rows of 32000 be
// resident per SM where the register-only cache of row_softmax holds 1 / 2, so one row's
// reductions and exponentials overlap other rows' loads and stores. The unaligned head and tail
// (< 16 bytes each) are one scalar element per thread.
template <class T, int MODE, int P>
__global__ void __launch_bounds__(1024) row_softmax_hyb(T* y, const T* x, const int* __restrict__ tgt,
                                                        float* __restrict__ ws, RowMeta p) {
  typedef RawWord<T> H;
  typedef Pack<unsigned int, 4> W4;
  extern __shared__ __align__(16) unsigned char hyb_raw[];
  __shared__ float sred[32];
  W4* sh = reinterpret_cast<W4*>(hyb_raw);
  const int EPP = 16 / (int)sizeof(T);  // elements per 16-byte pack
  const int G = blockDim.x, tid = threadIdx.x;
  const int S = (int)(p.ne & 0xffff);  // shared-memory packs per thread
  const long long r = blockIdx.x;
  long long off[3];
  dim_offsets<3>(p.rows, r, off);
  const T* px = x + off[0];
  T* py = y + off[1];
  const int N = (int)p.N;
  const int head = row_head<EPP>(px, N);
  const int nv = (N - head) / EPP;
  const int tail0 = head + nv * EPP;
  const int ntail = N - tail0;
  const float NINF = red_neg_inf(0.f);
  const W4* xv = reinterpret_cast<const W4*>(px + head);
  W4* yv = reinterpret_cast<W4*>(py + head);
  // shared-memory slots first (they are consumed after the register slots)
  for (int j = 0; j < S; ++j) {
    const int v = tid + (P + j) * G;
    W4* d = sh + j * G + tid;
    if (v < nv) {
      const unsigned int da = (unsigned int)__cvta_generic_to_shared(d);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(da), "l"(xv + v) : "memory");
    } else {
      W4 q;
      q.v[0] = q.v[1] = q.v[2] = q.v[3] = H::ninf2;
      *d = q;
    }
  }
  unsigned int w[P][4];
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int v = tid + e * G;
    if (v < nv) {
      const W4 q = xv[v];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[e][i] = q.v[i];
    } else {
      w[e][0] = w[e][1] = w[e][2] = w[e][3] = H::ninf2;
    }
  }
  float hv = NINF, tv = NINF;
  if (tid < head) hv = red_load(px[tid]);
  if (tid < ntail) tv = red_load(px[tail0 + tid]);
  asm volatile("cp.async.wait_all;" ::: "memory");
  // max: on raw words (packed pairs for 16-bit types), 4 independent chains
  unsigned int mw[4] = {w[0][0], w[0][1], w[0][2], w[0][3]};
#pragma unroll
  for (int e = 1; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) mw[i] = H::max2(mw[i], w[e][i]);
#pragma unroll 4
  for (int j = 0; j < S; ++j) {
    const W4 q = sh[j * G + tid];
#pragma unroll
    for (int i = 0; i < 4; ++i) mw[i] = H::max2(mw[i], q.v[i]);
  }
  mw[0] = H::max2(H::max2(mw[0], mw[1]), H::max2(mw[2], mw[3]));
  float m = MaxOp::combine<float>(hv, tv);
#pragma unroll
  for (int k = 0; k < H::EPW; ++k) m = MaxOp::combine<float>(m, H::get(mw[0], k));
  m = block_reduce<MaxOp, float>(m, sred, tid, G);
  // f32 softmax: each word becomes exp(v - m), kept for the write pass (which then only scales)
  constexpr bool KEEP = H::EPW == 1 && MODE == RW_SOFTMAX;
  float s0 = RowMath<T>::exp_(hv - m) + RowMath<T>::exp_(tv - m), s1 = 0.f;
  const auto exps = [&](unsigned int& u) {
    if (KEEP) {
      const float ex = RowMath<T>::exp_(H::get(u, 0) - m);
      s0 += ex;
      u = __float_as_uint(ex);
    } else {
      s0 += RowMath<T>::exp_(H::get(u, 0) - m);
      if (H::EPW == 2) s1 += RowMath<T>::exp_(H::get(u, 1) - m);
    }
  };
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int i = 0; i < 4; ++i) exps(w[e][i]);
#pragma unroll 4
  for (int j = 0; j < S; ++j) {
    W4 q = sh[j * G + tid];
#pragma unroll
    for (int i = 0; i < 4; ++i) exps(q.v[i]);
    if (KEEP) sh[j * G + tid] = q;
  }
  const float s = block_reduce<SumOp, float>(s0 + s1, sred, tid, G);
  const float inv = 1.f / s;
  const float lg = RowMath<T>::log_(s);
  if (H::EPW == 2) opaque_xor<P>(w, (unsigned int)(p.ne >> 40));
  const auto out = [&](unsigned int u) {
    if (KEEP) return __float_as_uint(__uint_as_float(u) * inv);
    return H::pack2(rw_value<T, MODE>(H::get(u, 0), m, inv, lg), H::EPW == 2 ? rw_value<T, MODE>(H::get(u, 1), m, inv, lg) : 0.f);
  };
  if (tid < head) py[tid] = Conv<T>::from(rw_value<T, MODE>(hv, m, inv, lg));
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int v = tid + e * G;
    if (v < nv) {
      W4 o;
#pragma unroll
      for (int i = 0; i < 4; ++i) o.v[i] = out(w[e][i]);
      st16_if(yv + v, o, true);
    }
  }
#pragma unroll 4
  for (int j = 0; j < S; ++j) {
    const int v = tid + (P + j) * G;
    if (v < nv) {
      const W4 q = sh[j * G + tid];
      W4 o;
#pragma unroll
      for (int i = 0; i < 4; ++i) o.v[i] = out(q.v[i]);
      st16_if(yv + v, o, true);
    }
  }
  if (tid < ntail) py[tail0 + tid] = Conv<T>::from(rw_value<T, MODE>(tv, m, inv, lg));
}

// row_softmax_short: softmax / log_softmax of short contiguous rows (f32 / f16 / bf16, y at x's
// 16-byte alignment): a group of L lanes (L = 4 ... 32, a power of two) owns one row, 32 / L
// rows per warp, each lane P 16-byte packs (pack g + L * e of the row's aligned part) plus the
// unaligned head and tail (< 8 elements each) as scalars (element g + L * j). Every size is a
// template constant, so no lane converts, compares or exponentiates an unused slot (the block
// kernel's runtime-sized cache spent 8x the exponentials on rows of 128 f32). The row values
// are held as f32 (P * 16 / sizeof(T) registers); the max and sum reduce within the group
// (log2 L xor shuffles, full-warp masks: lanes of rows past R take part and store nothing);
// softmax keeps exp(v - m) from the sum pass and multiplies it by 1 / s (one exponential per
// element), log_softmax writes (v - m) - log s. Max propagates NaN (max.NaN.f32); an all -inf row
// gives NaN, as torch. Deterministic: fixed per-lane order, fixed butterfly. H = 8 (with L = 32)
// starts the packs at a 128-byte boundary (a longer scalar head), so each warp-wide pack access
// covers whole 128-byte lines.
__device__ __forceinline__ float rs_max(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

template <class T, int MODE, int L, int P, int H>
__global__ void __launch_bounds__(128) row_softmax_short(T* y, const T* x, const int* __restrict__ tgt,
                                                         float* __restrict__ ws, RowMeta p) {
  typedef RawWord<T> HW;
  typedef Pack<unsigned int, 4> W4;
  const int EPP = 16 / (int)sizeof(T);  // elements per pack
  const int EPW = HW::EPW;              // elements per 32-bit word
  const int HA = (H & 8) && L == 32 ? 128 / (int)sizeof(T) : EPP;  // head: up to the next HA-element boundary
  const int HS = (HA - 1 + L - 1) / L;  // head / tail slots per lane
  const int lane = threadIdx.x, g = lane & (L - 1);
  const long long r = ((long long)blockIdx.x * blockDim.y + threadIdx.y) * (32 / L) + lane / L;
  const bool active = r < p.R;  // uniform per group
  const float NINF = red_neg_inf(0.f);
  float c[P][EPP], hv[HS], tv[HS];
#pragma unroll
  for (int j = 0; j < HS; ++j) hv[j] = tv[j] = NINF;
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int k = 0; k < EPP; ++k) c[e][k] = NINF;
  const T* px = x;
  T* py = y;
  int head = 0, nv = 0, tail0 = 0, ntail = 0;
  if (active) {
    long long o0 = 0, o1 = 0;
    if (p.rows.ndim == 1) {  // collapsed rows: no 64-bit division
      o0 = r * p.rows.stride[0][0];
      o1 = r * p.rows.stride[1][0];
    } else if (p.rows.ndim > 1) {
      long long off[3];
      dim_offsets<3>(p.rows, r, off);
      o0 = off[0];
      o1 = off[1];
    }
    px = x + o0;
    py = y + o1;
    const int N = (int)p.N;
    head = row_head<HA>(px, N);
    nv = (N - head) / EPP;
    tail0 = head + nv * EPP;
    ntail = N - tail0;
    const W4* xv = reinterpret_cast<const W4*>(px + head);
#pragma unroll
    for (int e = 0; e < P; ++e) {
      const int v = g + L * e;
      if (v < nv) {
        const W4 q = xv[v];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int k = 0; k < EPW; ++k) c[e][i * EPW + k] = HW::get(q.v[i], k);
      }
    }
#pragma unroll
    for (int j = 0; j < HS; ++j) {
      const int i = g + L * j;
      if (i < head) hv[j] = red_load(px[i]);
      if (i < ntail) tv[j] = red_load(px[tail0 + i]);
    }
  }
  float m = NINF;
#pragma unroll
  for (int j = 0; j < HS; ++j) m = rs_max(m, rs_max(hv[j], tv[j]));
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int k = 0; k < EPP; ++k) m = rs_max(m, c[e][k]);
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) m = rs_max(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < HS; ++j) {
    const float a = RowMath<T>::exp_(hv[j] - m), b = RowMath<T>::exp_(tv[j] - m);
    s += a + b;
    if (MODE == RW_SOFTMAX) {
      hv[j] = a;
      tv[j] = b;
    }
  }
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int k = 0; k < EPP; ++k) {
      const float a = RowMath<T>::exp_(c[e][k] - m);
      s += a;
      if (MODE == RW_SOFTMAX) c[e][k] = a;
    }
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (!active) return;
  const float inv = 1.f / s;
  const float lg = MODE == RW_SOFTMAX ? 0.f : RowMath<T>::log_(s);
#define RS_OUT(v) (MODE == RW_SOFTMAX ? (v) * inv : (v) - m - lg)
#pragma unroll
  for (int j = 0; j < HS; ++j) {
    const int i = g + L * j;
    if (i < head) py[i] = Conv<T>::from(RS_OUT(hv[j]));
    if (i < ntail) py[tail0 + i] = Conv<T>::from(RS_OUT(tv[j]));
  }
  W4* yv = reinterpret_cast<W4*>(py + head);
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int v = g + L * e;
    W4 o;  // every slot is defined (-inf past the row): compute all, predicate the store
#pragma unroll
    for (int i = 0; i < 4; ++i)
      o.v[i] = HW::pack2(RS_OUT(c[e][i * EPW]), EPW == 2 ? RS_OUT(c[e][i * EPW + EPW - 1]) : 0.f);
    st16_if(yv + v, o, v < nv);
  }
#undef RS_OUT
}

