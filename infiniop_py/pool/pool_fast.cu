// Fast paths of the pooling kernels (ops.md §6.4-6.8) for the common 2-d windows: a square window of
// compile-time size K, stride S and padding P on both spatial dims (cuda.py's FAST_RULES pick them),
// every tensor storing W innermost (stride 1: the "rows" kernels, NCHW) or every tensor storing C
// innermost (the "cl" kernels, channels-last). All other strides are free: 16-byte vector loads and
// stores (V = 16 / sizeof(T) elements) are used where the address is aligned and the V elements are
// in bounds, scalar accesses elsewhere.
//
// One thread per block of the written tensor; it reads the x tile under the windows it needs
// straight from global memory (neighbouring tiles overlap by the window overlap only, which L1 and
// L2 serve) and keeps the window results in registers:
//   pool_fast_rows: PF_FH output rows x V adjacent outputs of one (n, c) plane;
//   pool_fast_cl: PF_FH x PF_FW output pixels x V channels;
//   pool_fast_rows_backward: S grad_input rows x V adjacent positions of one plane;
//   pool_fast_cl_backward: S x S grad_input pixels x V channels.
// MODE 0 max, 1 avg, 2 max backward in two launches: the forward kernels write each window's argmax
// (its row-major offset in the window, one byte) into the workspace, then the backward kernels
// gather, each grad_input element summing grad_output over the covering windows whose argmax it
// is, in ascending window order (avg, MODE 1: grad_output / divisor over all covering windows).
// Every result is bitwise that of the generic kernels (pool.cu): windows are scanned in row-major
// order with the same comparisons (a larger value or a NaN replaces the best: the first maximum,
// the last NaN; the first in-bounds element when all are -inf), sums add in the same order
// (padding adds +0, which changes no partial sum: one starting at +0 is never -0), and divisors
// and quotients are computed the same way.
//
// A work item is decomposed as e -> (q0, q1, q2, q3) with q0 fastest (FastDiv, items < 2^31):
// rows kernels (column chunk, row block, c, n); cl kernels (channel chunk, column block, row
// block, n).

struct PoolFastMeta {
  long long st[3][4];  // strides (elements) of tensor 0 (written), 1 and 2 (read) for N, C, H, W
  int H, W, OH, OW, C, items;
  FastDiv d[3];        // work item -> (q0, q1, q2, q3)
  int pad_;
};
static_assert(sizeof(PoolFastMeta) == 160, "PoolFastMeta layout (infiniop_py/pool/cuda.py)");

#define PF_BLOCK 256  // threads per block (cuda.py FAST_BLOCK)
#define PF_FH 1       // output rows per thread of the forward kernels (cuda.py FAST_FH)
#define PF_FW 1       // output columns per thread of pool_fast_cl (cuda.py FAST_FW)

__host__ __device__ constexpr int pf_fdiv(int a, int b) { return a >= 0 ? a / b : -((b - 1 - a) / b); }
__host__ __device__ constexpr int pf_cdiv(int a, int b) { return -pf_fdiv(-a, b); }

// The windows covering a block of B positions starting at a multiple of B (B a multiple of S)
// along one dim: windows start/S + OLO .. start/S + OLO + NWIN - 1; their x tile starts at
// start + XLO and holds NX positions.
template <int K, int S, int P, int B>
struct PfCover {
  static constexpr int OLO = pf_cdiv(P - K + 1, S);
  static constexpr int NWIN = pf_fdiv(B - 1 + P, S) - OLO + 1;
  static constexpr int XLO = S * OLO - P;
};

template <class A> __device__ __forceinline__ A pf_neg_inf();
template <> __device__ __forceinline__ float pf_neg_inf<float>() { return __int_as_float((int)0xff800000u); }
template <> __device__ __forceinline__ double pf_neg_inf<double>() { return __longlong_as_double((long long)0xfff0000000000000ULL); }

__device__ __forceinline__ unsigned pf_split(const PoolFastMeta& m, unsigned e, int& q0, int& q1, int& q2) {
  const unsigned a = m.d[0].div(e), b = m.d[1].div(a), c = m.d[2].div(b);
  q0 = (int)(e - a * m.d[0].d);
  q1 = (int)(a - b * m.d[1].d);
  q2 = (int)(b - c * m.d[2].d);
  return c;
}

__device__ __forceinline__ bool pf_aligned(const void* p) { return ((unsigned long long)p & 15) == 0; }

// avg_pool's divisor factor of window o along a dim of length L: min(start + K, L + P) - start.
template <int K, int S, int P>
__device__ __forceinline__ int pf_span(int o, int L) {
  const int st = o * S - P;
  return (st + K < L + P ? st + K : L + P) - st;
}

// Row-major offset of the first in-bounds element of window (oh, ow).
template <int K, int S, int P>
__device__ __forceinline__ int pf_first(int oh, int ow) {
  const int a = P - S * oh, b = P - S * ow;
  return (a > 0 ? a : 0) * K + (b > 0 ? b : 0);
}

// Backward gather quotient, as pool.cu's pool_div: f32 through the reciprocal, f64 exactly.
__device__ __forceinline__ float pf_div(float g, float d) { return __fdividef(g, d); }
__device__ __forceinline__ double pf_div(double g, double d) { return g / d; }

// Window combine: MODE 0 max (a larger value or a NaN replaces the best; ARG tracks its offset),
// MODE 1 sum.
template <int MODE, bool ARG, class A>
__device__ __forceinline__ void pf_combine(A& r, int& arg, A v, int off) {
  if (MODE == 0) {
    if (v > r || v != v) {
      r = v;
      if (ARG) arg = off;
    }
  } else {
    r += v;
  }
}

// x columns base + XOFF + j, j < NX, of one row of width W (fill outside [0, W)); base is a
// multiple of V. The V-aligned chunks inside the tile load as one vector where possible.
template <class T, int NX, int XOFF>
__device__ __forceinline__ void pf_load_row(typename Compute<T>::type (&xs)[NX], const T* __restrict__ row, int base, int W,
                                            typename Compute<T>::type fill) {
  constexpr int V = 16 / sizeof(T);
  constexpr int Q0 = pf_cdiv(XOFF, V), Q1 = pf_fdiv(XOFF + NX, V);
  const bool aligned = pf_aligned(row + base);
#pragma unroll
  for (int q = Q0; q < Q1; ++q) {
    const int c0 = base + q * V;
    if (aligned && c0 >= 0 && c0 + V <= W) {
      const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(row + c0);
#pragma unroll
      for (int t = 0; t < V; ++t) xs[q * V + t - XOFF] = iop_load(p.v[t]);
    } else {
#pragma unroll
      for (int t = 0; t < V; ++t) xs[q * V + t - XOFF] = c0 + t >= 0 && c0 + t < W ? iop_load(row[c0 + t]) : fill;
    }
  }
#pragma unroll
  for (int j = 0; j < NX; ++j) {
    if (XOFF + j >= Q0 * V && XOFF + j < Q1 * V) continue;  // loaded with its chunk
    const int c = base + XOFF + j;
    xs[j] = c >= 0 && c < W ? iop_load(row[c]) : fill;
  }
}

// V values at columns c0 .. c0 + V - 1 (c0 a multiple of V) of a row of width W.
template <class T>
__device__ __forceinline__ void pf_store_row(T* __restrict__ row, int c0, int W, const typename Compute<T>::type (&v)[16 / sizeof(T)]) {
  constexpr int V = 16 / sizeof(T);
  if (c0 + V <= W && pf_aligned(row + c0)) {
    Pack<T, V> p;
#pragma unroll
    for (int t = 0; t < V; ++t) p.v[t] = Conv<T>::from(v[t]);
    *reinterpret_cast<Pack<T, V>*>(row + c0) = p;
  } else {
#pragma unroll
    for (int t = 0; t < V; ++t)
      if (c0 + t < W) row[c0 + t] = Conv<T>::from(v[t]);
  }
}

// The V channels at p (cn of them exist; fill for the others): one vector load where aligned.
template <class T, int V>
__device__ __forceinline__ void pf_load_px(typename Compute<T>::type (&v)[V], const T* __restrict__ p, int cn,
                                           typename Compute<T>::type fill) {
  if (cn >= V && ((unsigned long long)p & (sizeof(T) * V - 1)) == 0) {
    const Pack<T, V> q = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int t = 0; t < V; ++t) v[t] = iop_load(q.v[t]);
  } else {
#pragma unroll
    for (int t = 0; t < V; ++t) v[t] = t < cn ? iop_load(p[t]) : fill;
  }
}

template <class T, int V>
__device__ __forceinline__ void pf_store_px(T* __restrict__ p, int cn, const typename Compute<T>::type (&v)[V]) {
  if (cn >= V && ((unsigned long long)p & (sizeof(T) * V - 1)) == 0) {
    Pack<T, V> q;
#pragma unroll
    for (int t = 0; t < V; ++t) q.v[t] = Conv<T>::from(v[t]);
    *reinterpret_cast<Pack<T, V>*>(p) = q;
  } else {
#pragma unroll
    for (int t = 0; t < V; ++t)
      if (t < cn) p[t] = Conv<T>::from(v[t]);
  }
}

// The V argmax offsets (bytes) at p (cn of them exist).
template <int V>
__device__ __forceinline__ void pf_store_idx(uint8_t* __restrict__ p, int cn, const int (&v)[V]) {
  if (cn >= V && ((unsigned long long)p & (V - 1)) == 0) {
    Pack<uint8_t, V> q;
#pragma unroll
    for (int t = 0; t < V; ++t) q.v[t] = (uint8_t)v[t];
    *reinterpret_cast<Pack<uint8_t, V>*>(p) = q;
  } else {
#pragma unroll
    for (int t = 0; t < V; ++t)
      if (t < cn) p[t] = (uint8_t)v[t];
  }
}

template <int V>
__device__ __forceinline__ void pf_load_idx(int (&v)[V], const uint8_t* __restrict__ p, int cn) {
  if (cn >= V && ((unsigned long long)p & (V - 1)) == 0) {
    const Pack<uint8_t, V> q = *reinterpret_cast<const Pack<uint8_t, V>*>(p);
#pragma unroll
    for (int t = 0; t < V; ++t) v[t] = q.v[t];
  } else {
#pragma unroll
    for (int t = 0; t < V; ++t) v[t] = t < cn ? p[t] : 0;
  }
}

// The NH x NW windows starting at output (oh0, ow0) of one plane (row stride sH): x tile rows
// S*oh0 - P + r, columns base + XOFF + j = S*ow0 - P + j. MODE 0: the maximum and (ARG) its
// row-major offset in the window; MODE 1: the sum.
template <class T, int MODE, bool ARG, int K, int S, int P, int NH, int NW, int XOFF>
__device__ __forceinline__ void pf_rows_tile(const T* __restrict__ plane, long long sH, int H, int W, int oh0, int ow0, int base,
                                             typename Compute<T>::type (&r)[NH][NW], int (&arg)[NH][NW]) {
  typedef typename Compute<T>::type A;
  constexpr int NXH = S * (NH - 1) + K, NXW = S * (NW - 1) + K;
  const A fill = MODE == 0 ? pf_neg_inf<A>() : A(0);
#pragma unroll
  for (int wh = 0; wh < NH; ++wh)
#pragma unroll
    for (int ww = 0; ww < NW; ++ww) {
      r[wh][ww] = fill;
      if (ARG) arg[wh][ww] = pf_first<K, S, P>(oh0 + wh, ow0 + ww);
    }
#pragma unroll
  for (int xr = 0; xr < NXH; ++xr) {
    const int i = S * oh0 - P + xr;
    if (i < 0 || i >= H) continue;
    A xs[NXW];
    pf_load_row<T, NXW, XOFF>(xs, plane + (long long)i * sH, base, W, fill);
#pragma unroll
    for (int wh = 0; wh < NH; ++wh) {
      const int rr = xr - S * wh;
      if (rr < 0 || rr >= K) continue;
#pragma unroll
      for (int ww = 0; ww < NW; ++ww)
#pragma unroll
        for (int cc = 0; cc < K; ++cc) pf_combine<MODE, ARG>(r[wh][ww], arg[wh][ww], xs[S * ww + cc], rr * K + cc);
    }
  }
}

// The NH x NW windows starting at output (oh0, ow0), V channels from channel c0 (cn exist) of
// image xi (channels-last: H stride sH, W stride sW, C stride 1).
template <class T, int MODE, bool ARG, int K, int S, int P, int NH, int NW>
__device__ __forceinline__ void pf_cl_tile(const T* __restrict__ xi, long long sH, long long sW, int H, int W, int oh0, int ow0,
                                           int cn, typename Compute<T>::type (&r)[NH][NW][16 / sizeof(T)],
                                           int (&arg)[NH][NW][16 / sizeof(T)]) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  constexpr int NXH = S * (NH - 1) + K, NXW = S * (NW - 1) + K;
  const A fill = MODE == 0 ? pf_neg_inf<A>() : A(0);
#pragma unroll
  for (int wh = 0; wh < NH; ++wh)
#pragma unroll
    for (int ww = 0; ww < NW; ++ww) {
      const int first = ARG ? pf_first<K, S, P>(oh0 + wh, ow0 + ww) : 0;
#pragma unroll
      for (int t = 0; t < V; ++t) {
        r[wh][ww][t] = fill;
        if (ARG) arg[wh][ww][t] = first;
      }
    }
#pragma unroll
  for (int xr = 0; xr < NXH; ++xr) {
    const int i = S * oh0 - P + xr;
    if (i < 0 || i >= H) continue;
#pragma unroll
    for (int xc = 0; xc < NXW; ++xc) {
      const int j = S * ow0 - P + xc;
      if (j < 0 || j >= W) continue;
      A px[V];
      pf_load_px<T, V>(px, xi + (long long)i * sH + (long long)j * sW, cn, fill);
#pragma unroll
      for (int wh = 0; wh < NH; ++wh) {
        const int rr = xr - S * wh;
        if (rr < 0 || rr >= K) continue;
#pragma unroll
        for (int ww = 0; ww < NW; ++ww) {
          const int cc = xc - S * ww;
          if (cc < 0 || cc >= K) continue;
#pragma unroll
          for (int t = 0; t < V; ++t) pf_combine<MODE, ARG>(r[wh][ww][t], arg[wh][ww][t], px[t], rr * K + cc);
        }
      }
    }
  }
}

// Forward, W innermost: PF_FH rows x V outputs per thread. MODE 2 writes each window's argmax
// offset (one byte) instead of its maximum, for the max backward gather.
template <class T, int MODE> struct PfOut { typedef T type; };
template <class T> struct PfOut<T, 2> { typedef uint8_t type; };

template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_rows(typename PfOut<T, MODE>::type* __restrict__ y, const T* __restrict__ x,
                                                          PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int q0, q1, c;
  const unsigned n = pf_split(m, e, q0, q1, c);
  const int ow0 = q0 * V, oh0 = q1 * PF_FH;
  A r[PF_FH][V];
  int arg[PF_FH][V];
  pf_rows_tile<T, MODE == 1 ? 1 : 0, MODE == 2, K, S, P, PF_FH, V, -P>(x + n * m.st[1][0] + c * m.st[1][1], m.st[1][2], m.H, m.W, oh0,
                                                                      ow0, S * ow0, r, arg);
  typename PfOut<T, MODE>::type* yp = y + n * m.st[0][0] + c * m.st[0][1];
#pragma unroll
  for (int wh = 0; wh < PF_FH; ++wh) {
    const int oh = oh0 + wh;
    if (oh >= m.OH) break;
    if (MODE == 1) {
      const int fh = pf_span<K, S, P>(oh, m.H);
#pragma unroll
      for (int v = 0; v < V; ++v) r[wh][v] = r[wh][v] / (A)(fh * pf_span<K, S, P>(ow0 + v, m.W));
    }
    if constexpr (MODE == 2) {
      pf_store_idx<V>(yp + (long long)oh * m.st[0][2] + ow0, m.OW - ow0, arg[wh]);
    } else {
      pf_store_row<T>(yp + (long long)oh * m.st[0][2], ow0, m.OW, r[wh]);
    }
  }
}

// Forward, C innermost: PF_FH x PF_FW pixels x V channels per thread (MODE 2 as pool_fast_rows).
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_cl(typename PfOut<T, MODE>::type* __restrict__ y, const T* __restrict__ x,
                                                        PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int cv, cb, rb;
  const unsigned n = pf_split(m, e, cv, cb, rb);
  const int c0 = cv * V, cn = m.C - c0, oh0 = rb * PF_FH, ow0 = cb * PF_FW;
  A r[PF_FH][PF_FW][V];
  int arg[PF_FH][PF_FW][V];
  pf_cl_tile<T, MODE == 1 ? 1 : 0, MODE == 2, K, S, P, PF_FH, PF_FW>(x + n * m.st[1][0] + c0, m.st[1][2], m.st[1][3], m.H, m.W, oh0,
                                                                    ow0, cn, r, arg);
#pragma unroll
  for (int wh = 0; wh < PF_FH; ++wh) {
    const int oh = oh0 + wh;
#pragma unroll
    for (int ww = 0; ww < PF_FW; ++ww) {
      const int ow = ow0 + ww;
      if (oh >= m.OH || ow >= m.OW) continue;
      const long long off = n * m.st[0][0] + (long long)oh * m.st[0][2] + (long long)ow * m.st[0][3] + c0;
      if constexpr (MODE == 2) {
        pf_store_idx<V>(y + off, cn, arg[wh][ww]);
      } else {
        if (MODE == 1) {
          const A f = (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W));
#pragma unroll
          for (int t = 0; t < V; ++t) r[wh][ww][t] = r[wh][ww][t] / f;
        }
        pf_store_px<T, V>(y + off, cn, r[wh][ww]);
      }
    }
  }
}

// Backward, W innermost: grad_input rows S*q1 .. S*q1 + S - 1, columns V*q0 .. V*q0 + V - 1 of one
// plane, each element gathering grad_output over its covering windows in ascending order: MODE 1
// avg (divided by the window's divisor), MODE 2 max (where the window's argmax offset in idx,
// written by pool_fast_rows<T, 2, ...>, is the element's). Pointers: gi (written), go, idx.
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_rows_backward(T* __restrict__ gi, const T* __restrict__ go,
                                                                   const uint8_t* __restrict__ idx, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  static_assert(V % S == 0, "a column chunk holds whole strides");
  typedef PfCover<K, S, P, S> CH;
  typedef PfCover<K, S, P, V> CW;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int q0, q1, c;
  const unsigned n = pf_split(m, e, q0, q1, c);
  const int w0 = q0 * V, i0 = q1 * S, oh0 = q1 + CH::OLO, ow0 = w0 / S + CW::OLO;
  const T* gp = go + n * m.st[1][0] + c * m.st[1][1];
  const uint8_t* ip = idx + n * m.st[2][0] + c * m.st[2][1];
  A acc[S][V];
#pragma unroll
  for (int ri = 0; ri < S; ++ri)
#pragma unroll
    for (int ci = 0; ci < V; ++ci) acc[ri][ci] = A(0);
#pragma unroll
  for (int wh = 0; wh < CH::NWIN; ++wh) {
    const int oh = oh0 + wh;
    if (oh < 0 || oh >= m.OH) continue;
#pragma unroll
    for (int ww = 0; ww < CW::NWIN; ++ww) {
      const int ow = ow0 + ww;
      if (ow < 0 || ow >= m.OW) continue;
      A g = iop_load(gp[(long long)oh * m.st[1][2] + ow]);
      const int am = MODE == 2 ? ip[(long long)oh * m.st[2][2] + ow] : 0;
      if (MODE == 1) g = pf_div(g, (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W)));
#pragma unroll
      for (int ri = 0; ri < S; ++ri) {
        const int rr = ri - CH::XLO - S * wh;
        if (rr < 0 || rr >= K) continue;
#pragma unroll
        for (int ci = 0; ci < V; ++ci) {
          const int cc = ci - CW::XLO - S * ww;
          if (cc < 0 || cc >= K) continue;
          if (MODE == 1 || am == rr * K + cc) acc[ri][ci] += g;
        }
      }
    }
  }
  T* gw = gi + n * m.st[0][0] + c * m.st[0][1];
#pragma unroll
  for (int ri = 0; ri < S; ++ri)
    if (i0 + ri < m.H) pf_store_row<T>(gw + (long long)(i0 + ri) * m.st[0][2], w0, m.W, acc[ri]);
}

// Backward, C innermost: grad_input pixels (S*rb .. S*rb + S - 1) x (S*cb .. S*cb + S - 1), V
// channels from V*cv; as pool_fast_rows_backward (idx written by pool_fast_cl<T, 2, ...>).
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_cl_backward(T* __restrict__ gi, const T* __restrict__ go,
                                                                 const uint8_t* __restrict__ idx, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  typedef PfCover<K, S, P, S> CB;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int cv, cb, rb;
  const unsigned n = pf_split(m, e, cv, cb, rb);
  const int c0 = cv * V, cn = m.C - c0, i0 = rb * S, j0 = cb * S, oh0 = rb + CB::OLO, ow0 = cb + CB::OLO;
  const T* gp = go + n * m.st[1][0] + c0;
  const uint8_t* ip = idx + n * m.st[2][0] + c0;
  A acc[S][S][V];
#pragma unroll
  for (int ri = 0; ri < S; ++ri)
#pragma unroll
    for (int ci = 0; ci < S; ++ci)
#pragma unroll
      for (int t = 0; t < V; ++t) acc[ri][ci][t] = A(0);
#pragma unroll
  for (int wh = 0; wh < CB::NWIN; ++wh) {
    const int oh = oh0 + wh;
    if (oh < 0 || oh >= m.OH) continue;
#pragma unroll
    for (int ww = 0; ww < CB::NWIN; ++ww) {
      const int ow = ow0 + ww;
      if (ow < 0 || ow >= m.OW) continue;
      A g[V];
      int am[V];
      pf_load_px<T, V>(g, gp + (long long)oh * m.st[1][2] + (long long)ow * m.st[1][3], cn, A(0));
      if (MODE == 2) pf_load_idx<V>(am, ip + (long long)oh * m.st[2][2] + (long long)ow * m.st[2][3], cn);
      if (MODE == 1) {
        const A f = (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W));
#pragma unroll
        for (int t = 0; t < V; ++t) g[t] = pf_div(g[t], f);
      }
#pragma unroll
      for (int ri = 0; ri < S; ++ri) {
        const int rr = ri - CB::XLO - S * wh;
        if (rr < 0 || rr >= K) continue;
#pragma unroll
        for (int ci = 0; ci < S; ++ci) {
          const int cc = ci - CB::XLO - S * ww;
          if (cc < 0 || cc >= K) continue;
#pragma unroll
          for (int t = 0; t < V; ++t)
            if (MODE == 1 || am[t] == rr * K + cc) acc[ri][ci][t] += g[t];
        }
      }
    }
  }
#pragma unroll
  for (int ri = 0; ri < S; ++ri)
#pragma unroll
    for (int ci = 0; ci < S; ++ci)
      if (i0 + ri < m.H && j0 + ci < m.W)
        pf_store_px<T, V>(gi + n * m.st[0][0] + (long long)(i0 + ri) * m.st[0][2] + (long long)(j0 + ci) * m.st[0][3] + c0, cn,
                          acc[ri][ci]);
}
