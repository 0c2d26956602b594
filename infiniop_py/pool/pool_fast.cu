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
//   pool_fast_rows: FH output rows x V adjacent outputs of one (n, c) plane;
//   pool_fast_cl: FH x FW output pixels x V channels (FH, FW: PfFwd, by the element size);
//   pool_fast_rows_backward: S grad_input rows (max: S * PF_BMH, streamed) x V adjacent positions of a plane;
//   pool_fast_cl_backward: S x S grad_input pixels x V channels (max: S*PF_BCH x S*PF_BCW, streamed,
//   at most PF_BMC channels).
// MODE 0 max, 1 avg, 2 max backward. The backward kernels gather: each grad_input element sums
// grad_output over its covering windows in ascending window order (avg, MODE 1: grad_output /
// divisor over all of them; max, MODE 2: over those whose argmax it is, the argmax of every
// covering window recomputed from x by the thread, so x, grad_output and grad_input each pass
// once through DRAM in one launch, with no workspace).
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
#define PF_FH 1       // output rows per thread of the forward kernels, 4- and 8-byte types (cuda.py FAST_FH)
#define PF_FW 1       // output columns per thread of pool_fast_cl, 4- and 8-byte types (cuda.py FAST_FW)
#define PF_FH16 2     // the same for 2-byte types (cuda.py FAST_FH16)
#define PF_FW16 2     // (cuda.py FAST_FW16)
#define PF_BMH 4      // max backward, W innermost: grad_input rows per thread in strides S (cuda.py FAST_BMH)
#define PF_BMC 2      // max backward, C innermost: channels per thread at most, 8-byte types 1 (cuda.py FAST_BMC)
#define PF_BCH 4      // max backward, C innermost: grad_input rows per thread in strides S (cuda.py FAST_BCH)
#define PF_BCW 2      // max backward, C innermost: grad_input columns per thread in strides S (cuda.py FAST_BCW)
#define PF_BCT 4      // max backward, C innermost: a block's threads tile PF_BCT x PF_BCT pixel blocks (cuda.py FAST_BCT)
#define PF_BMINB 3    // backward kernels: resident blocks per SM their registers must allow (__launch_bounds__: <= 85)

// Forward tile of a thread by element size: FH output rows (FW output columns in pool_fast_cl).
template <class T> struct PfFwd {
  static constexpr int FH = sizeof(T) == 2 ? PF_FH16 : PF_FH, FW = sizeof(T) == 2 ? PF_FW16 : PF_FW;
};

__host__ __device__ constexpr int pf_fdiv(int a, int b) { return a >= 0 ? a / b : -((b - 1 - a) / b); }
__host__ __device__ constexpr int pf_cdiv(int a, int b) { return -pf_fdiv(-a, b); }

// The windows covering a block of B positions starting at a multiple of B (B a multiple of S)
// along one dim: windows start/S + OLO .. start/S + OLO + NWIN - 1; their x tile starts at
// start + XLO and holds NX positions. Window w (of the NWIN) is complete at tile position
// S * w + K - 1 (done); the last window covering block position b is last(b).
template <int K, int S, int P, int B>
struct PfCover {
  static constexpr int OLO = pf_cdiv(P - K + 1, S);
  static constexpr int NWIN = pf_fdiv(B - 1 + P, S) - OLO + 1;
  static constexpr int XLO = S * OLO - P;
  static constexpr int NX = S * (NWIN - 1) + K;
  __host__ __device__ static constexpr int done(int x) { return x >= K - 1 && (x - (K - 1)) % S == 0 ? (x - (K - 1)) / S : -1; }
  __host__ __device__ static constexpr int last(int b) { return pf_fdiv(b - XLO, S) < NWIN - 1 ? pf_fdiv(b - XLO, S) : NWIN - 1; }
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

// Row xr of the x tile under NH x NW windows (the row at ``row``, tile columns base + XOFF + j)
// combined into the windows it belongs to: MODE 0 max (ARG: with its row-major offset), 1 sum.
template <class T, int MODE, bool ARG, int K, int S, int NH, int NW, int XOFF>
__device__ __forceinline__ void pf_scan_row(typename Compute<T>::type (&r)[NH][NW], int (&arg)[NH][NW], int xr, const T* __restrict__ row,
                                            int base, int W, typename Compute<T>::type fill) {
  typedef typename Compute<T>::type A;
  constexpr int NXW = S * (NW - 1) + K;
  A xs[NXW];
  pf_load_row<T, NXW, XOFF>(xs, row, base, W, fill);
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

// The NH x NW windows starting at output (oh0, ow0) of one plane (row stride sH): x tile rows
// S*oh0 - P + r, columns base + XOFF + j = S*ow0 - P + j. MODE 0: the maximum and (ARG) its
// row-major offset in the window; MODE 1: the sum.
template <class T, int MODE, bool ARG, int K, int S, int P, int NH, int NW, int XOFF>
__device__ __forceinline__ void pf_rows_tile(const T* __restrict__ plane, long long sH, int H, int W, int oh0, int ow0, int base,
                                             typename Compute<T>::type (&r)[NH][NW], int (&arg)[NH][NW]) {
  typedef typename Compute<T>::type A;
  constexpr int NXH = S * (NH - 1) + K;
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
    if (i >= 0 && i < H) pf_scan_row<T, MODE, ARG, K, S, NH, NW, XOFF>(r, arg, xr, plane + (long long)i * sH, base, W, fill);
  }
}

// Pixel (xr, xc) of the x tile under NH x NW windows, V channels at p (cn exist), combined into
// the windows it belongs to (as pf_scan_row).
template <class T, int MODE, bool ARG, int K, int S, int NH, int NW, int V>
__device__ __forceinline__ void pf_scan_px(typename Compute<T>::type (&r)[NH][NW][V], int (&arg)[NH][NW][V], int xr, int xc,
                                           const T* __restrict__ p, int cn, typename Compute<T>::type fill) {
  typedef typename Compute<T>::type A;
  A px[V];
  pf_load_px<T, V>(px, p, cn, fill);
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

// The NH x NW windows starting at output (oh0, ow0), V channels from channel c0 (cn exist) of
// image xi (channels-last: H stride sH, W stride sW, C stride 1).
template <class T, int MODE, bool ARG, int K, int S, int P, int NH, int NW, int V>
__device__ __forceinline__ void pf_cl_tile(const T* __restrict__ xi, long long sH, long long sW, int H, int W, int oh0, int ow0,
                                           int cn, typename Compute<T>::type (&r)[NH][NW][V], int (&arg)[NH][NW][V]) {
  typedef typename Compute<T>::type A;
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
      if (j >= 0 && j < W) pf_scan_px<T, MODE, ARG, K, S, NH, NW, V>(r, arg, xr, xc, xi + (long long)i * sH + (long long)j * sW, cn, fill);
    }
  }
}

// Forward, W innermost: FH rows x V outputs per thread (MODE 0 max, 1 avg).
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_rows(T* __restrict__ y, const T* __restrict__ x, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T), FH = PfFwd<T>::FH;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int q0, q1, c;
  const unsigned n = pf_split(m, e, q0, q1, c);
  const int ow0 = q0 * V, oh0 = q1 * FH;
  A r[FH][V];
  int arg[FH][V];
  pf_rows_tile<T, MODE, false, K, S, P, FH, V, -P>(x + n * m.st[1][0] + c * m.st[1][1], m.st[1][2], m.H, m.W, oh0, ow0, S * ow0, r,
                                                  arg);
  T* yp = y + n * m.st[0][0] + c * m.st[0][1];
#pragma unroll
  for (int wh = 0; wh < FH; ++wh) {
    const int oh = oh0 + wh;
    if (oh >= m.OH) break;
    if (MODE == 1) {
      const int fh = pf_span<K, S, P>(oh, m.H);
#pragma unroll
      for (int v = 0; v < V; ++v) r[wh][v] = r[wh][v] / (A)(fh * pf_span<K, S, P>(ow0 + v, m.W));
    }
    pf_store_row<T>(yp + (long long)oh * m.st[0][2], ow0, m.OW, r[wh]);
  }
}

// Forward, C innermost: FH x FW pixels x V channels per thread.
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK) pool_fast_cl(T* __restrict__ y, const T* __restrict__ x, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T), FH = PfFwd<T>::FH, FW = PfFwd<T>::FW;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int cv, cb, rb;
  const unsigned n = pf_split(m, e, cv, cb, rb);
  const int c0 = cv * V, cn = m.C - c0, oh0 = rb * FH, ow0 = cb * FW;
  A r[FH][FW][V];
  int arg[FH][FW][V];
  pf_cl_tile<T, MODE, false, K, S, P, FH, FW, V>(x + n * m.st[1][0] + c0, m.st[1][2], m.st[1][3], m.H, m.W, oh0, ow0, cn, r, arg);
#pragma unroll
  for (int wh = 0; wh < FH; ++wh) {
    const int oh = oh0 + wh;
#pragma unroll
    for (int ww = 0; ww < FW; ++ww) {
      const int ow = ow0 + ww;
      if (oh >= m.OH || ow >= m.OW) continue;
      if (MODE == 1) {
        const A f = (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W));
#pragma unroll
        for (int t = 0; t < V; ++t) r[wh][ww][t] = r[wh][ww][t] / f;
      }
      pf_store_px<T, V>(y + n * m.st[0][0] + (long long)oh * m.st[0][2] + (long long)ow * m.st[0][3] + c0, cn, r[wh][ww]);
    }
  }
}

// Max backward, W innermost, one thread's block: grad_input rows i0 .. i0 + BH - 1, columns
// w0 .. w0 + V - 1 of one plane (gi, go, x: the plane's first elements). The x tile is streamed
// row by row into the argmax of the covering windows; a window row, once complete, adds its
// grad_output to the elements that are its argmax (window rows in ascending order, so every
// element sums in ascending window order), and a grad_input row is stored after its last
// covering window row. Live registers: two window rows and K grad_input rows, whatever BH is.
template <class T, int K, int S, int P, int BH>
__device__ __forceinline__ void pf_rows_max_backward(T* __restrict__ gw, const T* __restrict__ gp, const T* __restrict__ xp,
                                                     const PoolFastMeta& m, int i0, int w0) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T);
  typedef PfCover<K, S, P, BH> CH;
  typedef PfCover<K, S, P, V> CW;
  constexpr int NH = CH::NWIN, NW = CW::NWIN, NXH = CH::NX;
  const int oh0 = i0 / S + CH::OLO, ow0 = w0 / S + CW::OLO;
  const A fill = pf_neg_inf<A>();
  A r[NH][NW], g[NH][NW], acc[BH][V];
  int am[NH][NW];
#pragma unroll
  for (int ri = 0; ri < BH; ++ri)
#pragma unroll
    for (int ci = 0; ci < V; ++ci) acc[ri][ci] = A(0);
#pragma unroll
  for (int xr = 0; xr < NXH; ++xr) {
    if (xr % S == 0 && xr / S < NH) {  // window row xr / S starts here: its grad_output, its init
      const int wh = xr / S, oh = oh0 + wh;
#pragma unroll
      for (int ww = 0; ww < NW; ++ww) {
        const int ow = ow0 + ww;
        g[wh][ww] = oh >= 0 && oh < m.OH && ow >= 0 && ow < m.OW ? iop_load(gp[(long long)oh * m.st[1][2] + ow]) : A(0);
        r[wh][ww] = fill;
        am[wh][ww] = pf_first<K, S, P>(oh, ow);
      }
    }
    const int i = i0 + CH::XLO + xr;
    if (i >= 0 && i < m.H) pf_scan_row<T, 0, true, K, S, NH, NW, CW::XLO>(r, am, xr, xp + (long long)i * m.st[2][2], w0, m.W, fill);
    const int wh = CH::done(xr), oh = oh0 + wh;  // window row wh is complete
    if (wh < 0) continue;
    if (oh >= 0 && oh < m.OH) {
#pragma unroll
      for (int ri = 0; ri < BH; ++ri) {
        const int rr = ri - CH::XLO - S * wh;
        if (rr < 0 || rr >= K) continue;
#pragma unroll
        for (int ww = 0; ww < NW; ++ww) {
#pragma unroll
          for (int ci = 0; ci < V; ++ci) {
            const int cc = ci - CW::XLO - S * ww;
            if (cc < 0 || cc >= K) continue;
            if (am[wh][ww] == rr * K + cc) acc[ri][ci] += g[wh][ww];
          }
        }
      }
    }
#pragma unroll
    for (int ri = 0; ri < BH; ++ri) {  // rows whose last covering window row is wh
      if (CH::last(ri) == wh && i0 + ri < m.H) pf_store_row<T>(gw + (long long)(i0 + ri) * m.st[0][2], w0, m.W, acc[ri]);
    }
  }
}

// Backward, W innermost: grad_input rows BH * q1 .. BH * q1 + BH - 1 (BH = S; max: S * PF_BMH),
// columns V*q0 .. V*q0 + V - 1 of one plane, each element gathering grad_output over its covering
// windows in ascending order: MODE 1 avg (divided by the window's divisor); MODE 2 max
// (pf_rows_max_backward). Pointers: gi (written), go, x (MODE 2 only).
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK, PF_BMINB) pool_fast_rows_backward(T* __restrict__ gi, const T* __restrict__ go,
                                                                   const T* __restrict__ x, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T), BH = MODE == 2 ? S * PF_BMH : S;
  static_assert(V % S == 0, "a column chunk holds whole strides");
  typedef PfCover<K, S, P, BH> CH;
  typedef PfCover<K, S, P, V> CW;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int q0, q1, c;
  const unsigned n = pf_split(m, e, q0, q1, c);
  const int w0 = q0 * V, i0 = q1 * BH, oh0 = i0 / S + CH::OLO, ow0 = w0 / S + CW::OLO;
  const T* gp = go + n * m.st[1][0] + c * m.st[1][1];
  T* gw = gi + n * m.st[0][0] + c * m.st[0][1];
  if constexpr (MODE == 2) {
    pf_rows_max_backward<T, K, S, P, BH>(gw, gp, x + n * m.st[2][0] + c * m.st[2][1], m, i0, w0);
  } else {
    A g[CH::NWIN][CW::NWIN];
#pragma unroll
    for (int wh = 0; wh < CH::NWIN; ++wh)
#pragma unroll
      for (int ww = 0; ww < CW::NWIN; ++ww) {
        const int oh = oh0 + wh, ow = ow0 + ww;
        g[wh][ww] = oh >= 0 && oh < m.OH && ow >= 0 && ow < m.OW ? iop_load(gp[(long long)oh * m.st[1][2] + ow]) : A(0);
        g[wh][ww] = pf_div(g[wh][ww], (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W)));
      }
#pragma unroll
    for (int ri = 0; ri < BH; ++ri) {
      if (i0 + ri >= m.H) break;
      A acc[V];
#pragma unroll
      for (int ci = 0; ci < V; ++ci) acc[ci] = A(0);
#pragma unroll
      for (int wh = 0; wh < CH::NWIN; ++wh) {
        const int rr = ri - CH::XLO - S * wh, oh = oh0 + wh;
        if (rr < 0 || rr >= K || oh < 0 || oh >= m.OH) continue;
#pragma unroll
        for (int ww = 0; ww < CW::NWIN; ++ww) {
          const int ow = ow0 + ww;
          if (ow < 0 || ow >= m.OW) continue;
#pragma unroll
          for (int ci = 0; ci < V; ++ci) {
            const int cc = ci - CW::XLO - S * ww;
            if (cc >= 0 && cc < K) acc[ci] += g[wh][ww];
          }
        }
      }
      pf_store_row<T>(gw + (long long)(i0 + ri) * m.st[0][2], w0, m.W, acc);
    }
  }
}

// Max backward, C innermost, one thread's block: grad_input pixels (i0 .. i0 + BH - 1) x
// (j0 .. j0 + BW - 1), VC channels (cn exist; gw, gp, xp: the image's first element plus the first
// channel), streamed as pf_rows_max_backward: x tile row by row (pixel by pixel), a window row's
// grad_output added once it is complete, a grad_input row stored after its last window row.
template <class T, int K, int S, int P, int BH, int BW, int VC>
__device__ __forceinline__ void pf_cl_max_backward(T* __restrict__ gw, const T* __restrict__ gp, const T* __restrict__ xp,
                                                   const PoolFastMeta& m, int i0, int j0, int cn) {
  typedef typename Compute<T>::type A;
  typedef PfCover<K, S, P, BH> CH;
  typedef PfCover<K, S, P, BW> CW;
  constexpr int NH = CH::NWIN, NW = CW::NWIN, NXH = CH::NX, NXW = CW::NX;
  const int oh0 = i0 / S + CH::OLO, ow0 = j0 / S + CW::OLO;
  const A fill = pf_neg_inf<A>();
  A r[NH][NW][VC], g[NH][NW][VC], acc[BH][BW][VC];
  int am[NH][NW][VC];
#pragma unroll
  for (int ri = 0; ri < BH; ++ri)
#pragma unroll
    for (int ci = 0; ci < BW; ++ci)
#pragma unroll
      for (int t = 0; t < VC; ++t) acc[ri][ci][t] = A(0);
#pragma unroll
  for (int xr = 0; xr < NXH; ++xr) {
    if (xr % S == 0 && xr / S < NH) {  // window row xr / S starts here: its grad_output, its init
      const int wh = xr / S, oh = oh0 + wh;
#pragma unroll
      for (int ww = 0; ww < NW; ++ww) {
        const int ow = ow0 + ww, first = pf_first<K, S, P>(oh, ow);
        if (oh >= 0 && oh < m.OH && ow >= 0 && ow < m.OW) {
          pf_load_px<T, VC>(g[wh][ww], gp + (long long)oh * m.st[1][2] + (long long)ow * m.st[1][3], cn, A(0));
        } else {
#pragma unroll
          for (int t = 0; t < VC; ++t) g[wh][ww][t] = A(0);
        }
#pragma unroll
        for (int t = 0; t < VC; ++t) {
          r[wh][ww][t] = fill;
          am[wh][ww][t] = first;
        }
      }
    }
    const int i = i0 + CH::XLO + xr;
    if (i >= 0 && i < m.H) {
#pragma unroll
      for (int xc = 0; xc < NXW; ++xc) {
        const int j = j0 + CW::XLO + xc;
        if (j >= 0 && j < m.W)
          pf_scan_px<T, 0, true, K, S, NH, NW, VC>(r, am, xr, xc, xp + (long long)i * m.st[2][2] + (long long)j * m.st[2][3], cn, fill);
      }
    }
    const int wh = CH::done(xr), oh = oh0 + wh;  // window row wh is complete
    if (wh < 0) continue;
    if (oh >= 0 && oh < m.OH) {
#pragma unroll
      for (int ri = 0; ri < BH; ++ri) {
        const int rr = ri - CH::XLO - S * wh;
        if (rr < 0 || rr >= K) continue;
#pragma unroll
        for (int ww = 0; ww < NW; ++ww) {
          const int ow = ow0 + ww;
          if (ow < 0 || ow >= m.OW) continue;
#pragma unroll
          for (int ci = 0; ci < BW; ++ci) {
            const int cc = ci - CW::XLO - S * ww;
            if (cc < 0 || cc >= K) continue;
#pragma unroll
            for (int t = 0; t < VC; ++t)
              if (am[wh][ww][t] == rr * K + cc) acc[ri][ci][t] += g[wh][ww][t];
          }
        }
      }
    }
#pragma unroll
    for (int ri = 0; ri < BH; ++ri) {  // rows whose last covering window row is wh
      if (CH::last(ri) != wh || i0 + ri >= m.H) continue;
#pragma unroll
      for (int ci = 0; ci < BW; ++ci)
        if (j0 + ci < m.W) pf_store_px<T, VC>(gw + (long long)(i0 + ri) * m.st[0][2] + (long long)(j0 + ci) * m.st[0][3], cn, acc[ri][ci]);
    }
  }
}

// Backward, C innermost: grad_input pixels (BH*rb .. BH*rb + BH - 1) x (BW*cb .. BW*cb + BW - 1),
// VC channels from VC*cv: avg S x S pixels of V channels; max (pf_cl_max_backward) S * PF_BCH x
// S * PF_BCW pixels of at most PF_BMC channels, the work item's q1 holding a column of tiles of
// BT x BT pixel blocks (BT = PF_BCT) and the index in the tile, q2 the row of tiles, so the
// threads of a block share the x rows between their blocks through L1 (past the grid: no work).
template <class T, int MODE, int K, int S, int P>
__global__ void __launch_bounds__(PF_BLOCK, PF_BMINB) pool_fast_cl_backward(T* __restrict__ gi, const T* __restrict__ go,
                                                                 const T* __restrict__ x, PoolFastMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int V = 16 / sizeof(T), VM = sizeof(T) == 8 ? 1 : PF_BMC, VC = MODE == 2 && V > VM ? VM : V;
  constexpr int BT = MODE == 2 ? PF_BCT : 1, BH = MODE == 2 ? S * PF_BCH : S, BW = MODE == 2 ? S * PF_BCW : S;
  typedef PfCover<K, S, P, S> CB;
  const unsigned e = blockIdx.x * PF_BLOCK + threadIdx.x;
  if (e >= (unsigned)m.items) return;
  int cv, q1, q2;
  const unsigned n = pf_split(m, e, cv, q1, q2);
  const int lo = q1 % (BT * BT), cb = q1 / (BT * BT) * BT + lo % BT, rb = q2 * BT + lo / BT;
  const int c0 = cv * VC, cn = m.C - c0, i0 = rb * BH, j0 = cb * BW, oh0 = rb + CB::OLO, ow0 = cb + CB::OLO;
  if (i0 >= m.H || j0 >= m.W) return;
  const T* gp = go + n * m.st[1][0] + c0;
  if constexpr (MODE == 2) {
    pf_cl_max_backward<T, K, S, P, BH, BW, VC>(gi + n * m.st[0][0] + c0, gp, x + n * m.st[2][0] + c0, m, i0, j0, cn);
  } else {
    A g[CB::NWIN][CB::NWIN][VC];
#pragma unroll
    for (int wh = 0; wh < CB::NWIN; ++wh)
#pragma unroll
      for (int ww = 0; ww < CB::NWIN; ++ww) {
        const int oh = oh0 + wh, ow = ow0 + ww;
        if (oh >= 0 && oh < m.OH && ow >= 0 && ow < m.OW) {
          pf_load_px<T, VC>(g[wh][ww], gp + (long long)oh * m.st[1][2] + (long long)ow * m.st[1][3], cn, A(0));
        } else {
#pragma unroll
          for (int t = 0; t < VC; ++t) g[wh][ww][t] = A(0);
        }
        const A f = (A)(pf_span<K, S, P>(oh, m.H) * pf_span<K, S, P>(ow, m.W));
#pragma unroll
        for (int t = 0; t < VC; ++t) g[wh][ww][t] = pf_div(g[wh][ww][t], f);
      }
#pragma unroll
    for (int ri = 0; ri < S; ++ri)
#pragma unroll
      for (int ci = 0; ci < S; ++ci) {
        if (i0 + ri >= m.H || j0 + ci >= m.W) continue;
        A acc[VC];
#pragma unroll
        for (int t = 0; t < VC; ++t) acc[t] = A(0);
#pragma unroll
        for (int wh = 0; wh < CB::NWIN; ++wh) {
          const int rr = ri - CB::XLO - S * wh, oh = oh0 + wh;
          if (rr < 0 || rr >= K || oh < 0 || oh >= m.OH) continue;
#pragma unroll
          for (int ww = 0; ww < CB::NWIN; ++ww) {
            const int cc = ci - CB::XLO - S * ww, ow = ow0 + ww;
            if (cc < 0 || cc >= K || ow < 0 || ow >= m.OW) continue;
#pragma unroll
            for (int t = 0; t < VC; ++t) acc[t] += g[wh][ww][t];
          }
        }
        pf_store_px<T, VC>(gi + n * m.st[0][0] + (long long)(i0 + ri) * m.st[0][2] + (long long)(j0 + ci) * m.st[0][3] + c0, cn, acc);
      }
  }
}
