// Pooling kernels (ops.md §6.4-6.8): avg/max, forward/backward, 1-3 spatial dims, any strides.
//
// Every problem is seen as (other, lane, S0, S1, S2): "lane" and "other" are N and C (lane is
// whichever the written tensor stores innermost, else C), S the spatial dims padded in front to
// three with L = O = k = s = 1, p = 0. The iteration space (outputs for the forward kernels,
// grad_input for the backward ones) is cut into tiles of TL lanes x T0 x T1 x T2 positions; a
// block takes one tile per step of a grid-stride loop. A tile is split into work items of
// (lane, g, t1, t0), lane fastest, then g: an item covers the V positions t2 = g, g + G, ...,
// g + (V-1)G of one row (G = ceil(T2 / V)), so consecutive threads touch consecutive lanes or
// consecutive S2 positions: reads and writes along the written tensor's innermost stored dim are
// coalesced (NCHW: W; channels-last: C), and the work that depends only on (t0, t1) is shared by
// V elements. Tile and item indices stay below 2^31 (32-bit FastDiv); memory offsets are 64-bit.
//
// Every item holds V = POOL_VB elements.
// MODE 0 max forward, 1 avg forward: each output scans its window in row-major order (max: a
//   larger value or a NaN replaces the best so far, so a NaN in the window gives NaN).
// MODE 2 avg backward: each grad_input element gathers grad_output[o] / divisor(o) over the
//   windows o covering it, in ascending window order.
// MODE 3 max backward, tiled: step 1 computes, for every window that can cover the tile (the
//   "halo" box of H0 x H1 x H2 windows x TL lanes), the row-major offset of its argmax into
//   shared memory; step 2 lets each grad_input element gather grad_output[o] over the covering
//   windows whose argmax is itself, in ascending window order.
// MODE 4 max backward without shared memory (halo box too large): the same gather, recomputing
//   each covering window's argmax per element.
// The backward passes are bitwise deterministic (no atomics, a fixed order), MODE 3 and MODE 4
// give identical bits, and every element of the written tensor is written exactly once.

struct PoolMeta {
  long long str[3][5];  // strides of tensor 0 (written), 1, 2 (read) for [lane, other, S0, S1, S2]
  int L[3], O[3], k[3], s[3], p[3];
  int T[3];             // tile extent per spatial dim
  int ext[3];           // iterated extent per spatial dim (O forward, L backward)
  int H[3];             // halo box of MODE 3 (windows per dim)
  int TL, lanes;        // lanes per tile, size of the lane dim
  int items, halo_items, ntiles;
  int V, G, pad_;       // elements per item along S2 and their spacing
  FastDiv dTL, dG, dT1;             // item -> (lane, g, t1, t0)
  FastDiv dn2, dn1, dn0, dnl;       // tile id -> (tile2, tile1, tile0, lane chunk, other)
  FastDiv dHL, dH2, dH1;            // halo item -> (lane, h2, h1, h0)
  FastDiv ds[3];                    // division by the window strides
};
static_assert(sizeof(PoolMeta) == 408, "PoolMeta layout (infiniop_py/pool/cuda.py)");

#define POOL_MAX_BLOCK 512  // block sizes are chosen by the host, multiples of 32 up to this;
                            // with two such blocks per SM: at most 64 registers, >= 50% occupancy
#define POOL_VB 4  // elements per work item (strided by G along S2)

template <class A> __device__ __forceinline__ A pool_neg_inf();
template <> __device__ __forceinline__ float pool_neg_inf<float>() { return __int_as_float((int)0xff800000u); }
template <> __device__ __forceinline__ double pool_neg_inf<double>() { return __longlong_as_double((long long)0xfff0000000000000ULL); }

__device__ __forceinline__ unsigned pool_divmod(const FastDiv& f, unsigned n, int& rem) {
  const unsigned q = f.div(n);
  rem = (int)(n - q * f.d);
  return q;
}

// The tile being processed: origin per spatial dim, first lane, and base offsets of each tensor
// (other index and first lane).
struct PoolTile {
  int a[3];
  int lane0;
  long long base[3];
};

__device__ __forceinline__ PoolTile pool_tile(const PoolMeta& m, unsigned tile) {
  PoolTile t;
  int r2, r1, r0, rl;
  tile = pool_divmod(m.dn2, tile, r2);
  tile = pool_divmod(m.dn1, tile, r1);
  tile = pool_divmod(m.dn0, tile, r0);
  const unsigned other = pool_divmod(m.dnl, tile, rl);
  t.a[0] = r0 * m.T[0];
  t.a[1] = r1 * m.T[1];
  t.a[2] = r2 * m.T[2];
  t.lane0 = rl * m.TL;
#pragma unroll
  for (int j = 0; j < 3; ++j) t.base[j] = (long long)other * m.str[j][1] + (long long)t.lane0 * m.str[j][0];
  return t;
}

// Work item e of a tile -> lane offset l, positions p0, p1 and the first S2 offset g within the
// tile; false when the row lies outside the problem.
__device__ __forceinline__ bool pool_item(const PoolMeta& m, const PoolTile& t, unsigned e, int& l, int& p0, int& p1, int& g) {
  int t1;
  e = pool_divmod(m.dTL, e, l);
  e = pool_divmod(m.dG, e, g);
  const int t0 = (int)pool_divmod(m.dT1, e, t1);
  p0 = t.a[0] + t0;
  p1 = t.a[1] + t1;
  return t.lane0 + l < m.lanes && p0 < m.ext[0] && p1 < m.ext[1];
}

// Element v of an item: its S2 position, or -1 when outside the tile or the problem.
__device__ __forceinline__ int pool_p2(const PoolMeta& m, const PoolTile& t, int g, int v) {
  const int t2 = g + v * m.G;
  return t2 < m.T[2] && t.a[2] + t2 < m.ext[2] ? t.a[2] + t2 : -1;
}

// Windows covering input position i along dim d: [lo, hi] (empty when lo > hi).
__device__ __forceinline__ void pool_cover(const PoolMeta& m, int d, int i, int& lo, int& hi) {
  const int num = i + m.p[d] - m.k[d] + 1;
  lo = num <= 0 ? 0 : (int)m.ds[d].div((unsigned)(num + m.s[d] - 1));
  hi = (int)m.ds[d].div((unsigned)(i + m.p[d]));
  if (hi > m.O[d] - 1) hi = m.O[d] - 1;
}

// g / divisor in the backward gather: f32 through the reciprocal (MUFU.RCP, within 2 ulp of the
// rounded quotient; divisors are small integers), f64 exactly.
__device__ __forceinline__ float pool_div(float g, float d) { return __fdividef(g, d); }
__device__ __forceinline__ double pool_div(double g, double d) { return g / d; }

// avg_pool's divisor factor of window o along dim d: min(start + k, L + p) - start.
__device__ __forceinline__ int pool_span(const PoolMeta& m, int d, int o) {
  const int st = o * m.s[d] - m.p[d];
  const int end = st + m.k[d] < m.L[d] + m.p[d] ? st + m.k[d] : m.L[d] + m.p[d];
  return end - st;
}

// Window (o0, o1, o2) of tensor slot X at base offset xb: the row-major offset of its maximum
// within the window: the first maximum, the last NaN when there is one, the first in-bounds
// element when all are -inf.
template <class T, int X>
__device__ __forceinline__ int pool_argmax(const PoolMeta& m, const T* __restrict__ x, long long xb, int o0, int o1, int o2) {
  typedef typename Compute<T>::type A;
  const int o[3] = {o0, o1, o2};
  int st[3], b[3], e[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    st[d] = o[d] * m.s[d] - m.p[d];
    b[d] = st[d] < 0 ? 0 : st[d];
    e[d] = st[d] + m.k[d] < m.L[d] ? st[d] + m.k[d] : m.L[d];
  }
  A best = pool_neg_inf<A>();
  int arg = ((b[0] - st[0]) * m.k[1] + (b[1] - st[1])) * m.k[2] + (b[2] - st[2]);
  const long long s2 = m.str[X][4];
  for (int i0 = b[0]; i0 < e[0]; ++i0) {
    for (int i1 = b[1]; i1 < e[1]; ++i1) {
      const T* q = x + xb + (long long)i0 * m.str[X][2] + (long long)i1 * m.str[X][3] + (long long)b[2] * s2;
      const int r01 = ((i0 - st[0]) * m.k[1] + (i1 - st[1])) * m.k[2] - st[2];
      for (int i2 = b[2]; i2 < e[2]; ++i2, q += s2) {
        const A v = iop_load(*q);
        if (v > best || v != v) {
          best = v;
          arg = r01 + i2;
        }
      }
    }
  }
  return arg;
}

// MODE 0/1: the POOL_VB outputs of one item (lane l, positions o0, o1 and the item's S2 offsets),
// sharing the S0/S1 window bounds; each window is scanned in row-major order.
template <class T, int MODE>
__device__ __forceinline__ void pool_forward_item(const PoolMeta& m, T* __restrict__ y, const T* __restrict__ x,
                                                  const PoolTile& t, int l, int o0, int o1, int g) {
  typedef typename Compute<T>::type A;
  const int st0 = o0 * m.s[0] - m.p[0], st1 = o1 * m.s[1] - m.p[1];
  const int b0 = st0 < 0 ? 0 : st0, e0 = st0 + m.k[0] < m.L[0] ? st0 + m.k[0] : m.L[0];
  const int b1 = st1 < 0 ? 0 : st1, e1 = st1 + m.k[1] < m.L[1] ? st1 + m.k[1] : m.L[1];
  const A f01 = (A)(pool_span(m, 0, o0) * pool_span(m, 1, o1));
  const long long xs2 = m.str[1][4];
  const T* xrow = x + t.base[1] + (long long)l * m.str[1][0];
  const long long yb = t.base[0] + (long long)l * m.str[0][0] + (long long)o0 * m.str[0][2] + (long long)o1 * m.str[0][3];
#pragma unroll
  for (int v = 0; v < POOL_VB; ++v) {
    const int o2 = pool_p2(m, t, g, v);
    if (o2 < 0) continue;
    const int st2 = o2 * m.s[2] - m.p[2];
    const int b2 = st2 < 0 ? 0 : st2, e2 = st2 + m.k[2] < m.L[2] ? st2 + m.k[2] : m.L[2];
    A r = MODE == 0 ? pool_neg_inf<A>() : A(0);
    for (int i0 = b0; i0 < e0; ++i0) {
      for (int i1 = b1; i1 < e1; ++i1) {
        const T* q = xrow + (long long)i0 * m.str[1][2] + (long long)i1 * m.str[1][3] + (long long)b2 * xs2;
        for (int i2 = b2; i2 < e2; ++i2, q += xs2) {
          const A val = iop_load(*q);
          if (MODE == 0) {
            if (val > r || val != val) r = val;  // NaN wins and stays
          } else {
            r += val;
          }
        }
      }
    }
    if (MODE == 1) r = r / (f01 * (A)pool_span(m, 2, o2));
    y[yb + (long long)o2 * m.str[0][4]] = Conv<T>::from(r);
  }
}

// MODE 2/3/4: the POOL_VB grad_input elements of one item, each gathering over its covering
// windows in ascending order. MODE 3 reads the argmax offsets of the halo box (origin LO) from
// shared memory.
template <class T, int MODE>
__device__ __forceinline__ void pool_backward_item(const PoolMeta& m, T* __restrict__ gi, const T* __restrict__ go,
                                                   const T* __restrict__ x, const PoolTile& t, int l, int i0, int i1, int g,
                                                   const int* __restrict__ arg, const int LO[3]) {
  typedef typename Compute<T>::type A;
  int lo0, hi0, lo1, hi1;
  pool_cover(m, 0, i0, lo0, hi0);
  pool_cover(m, 1, i1, lo1, hi1);
  const long long gb = t.base[1] + (long long)l * m.str[1][0];
  const long long xb = t.base[2] + (long long)l * m.str[2][0];
  A acc[POOL_VB];
#pragma unroll
  for (int v = 0; v < POOL_VB; ++v) acc[v] = A(0);
  const long long gs2 = m.str[1][4];
  for (int o0 = lo0; o0 <= hi0; ++o0) {
    const int st0 = o0 * m.s[0] - m.p[0];
    for (int o1 = lo1; o1 <= hi1; ++o1) {
      const int st1 = o1 * m.s[1] - m.p[1];
      const T* g01 = go + gb + (long long)o0 * m.str[1][2] + (long long)o1 * m.str[1][3];
      const int r01 = ((i0 - st0) * m.k[1] + (i1 - st1)) * m.k[2];  // window offset of (i0, i1)
      const A f01 = (A)(pool_span(m, 0, o0) * pool_span(m, 1, o1));
      const int h01 = MODE == 3 ? ((o0 - LO[0]) * m.H[1] + (o1 - LO[1])) * m.H[2] - LO[2] : 0;
#pragma unroll
      for (int v = 0; v < POOL_VB; ++v) {
        const int i2 = pool_p2(m, t, g, v);
        if (i2 < 0) continue;
        int lo2, hi2;
        pool_cover(m, 2, i2, lo2, hi2);  // recomputed per (o0, o1): fewer live registers
        const T* q = g01 + (long long)lo2 * gs2;
        int st2 = lo2 * m.s[2] - m.p[2];
        for (int o2 = lo2; o2 <= hi2; ++o2, q += gs2, st2 += m.s[2]) {
          if (MODE == 2) {
            const int end2 = st2 + m.k[2] < m.L[2] + m.p[2] ? st2 + m.k[2] : m.L[2] + m.p[2];
            acc[v] += pool_div(iop_load(*q), f01 * (A)(end2 - st2));
          } else {
            const int rel = r01 + i2 - st2;
            const int am = MODE == 3 ? arg[(h01 + o2) * m.TL + l] : pool_argmax<T, 2>(m, x, xb, o0, o1, o2);
            if (am == rel) acc[v] += iop_load(*q);
          }
        }
      }
    }
  }
  const long long wb = t.base[0] + (long long)l * m.str[0][0] + (long long)i0 * m.str[0][2] + (long long)i1 * m.str[0][3];
#pragma unroll
  for (int v = 0; v < POOL_VB; ++v) {
    const int i2 = pool_p2(m, t, g, v);
    if (i2 >= 0) gi[wb + (long long)i2 * m.str[0][4]] = Conv<T>::from(acc[v]);
  }
}

// MODE 0, 1, 2, 4. Pointers: out = the written tensor (output / grad_input), a = tensor 1
// (input / grad_output), b = tensor 2 (the input of the backward passes; unused otherwise).
template <class T, int MODE>
__global__ void __launch_bounds__(POOL_MAX_BLOCK, 2) pool_kernel(T* __restrict__ out, const T* __restrict__ a,
                                                          const T* __restrict__ b, PoolMeta m) {
  for (unsigned tile = blockIdx.x; tile < (unsigned)m.ntiles; tile += gridDim.x) {
    const PoolTile t = pool_tile(m, tile);
    for (unsigned e = threadIdx.x; e < (unsigned)m.items; e += blockDim.x) {
      int l, p0, p1, g;
      if (!pool_item(m, t, e, l, p0, p1, g)) continue;
      if (MODE <= 1) {
        pool_forward_item<T, MODE>(m, out, a, t, l, p0, p1, g);
      } else {
        pool_backward_item<T, MODE>(m, out, a, b, t, l, p0, p1, g, (const int*)0, (const int*)0);
      }
    }
  }
}

// MODE 3: tiled max backward; the halo box's argmax offsets live in dynamic shared memory
// (halo_items ints, index ((h0 * H1 + h1) * H2 + h2) * TL + lane).
template <class T>
__global__ void __launch_bounds__(POOL_MAX_BLOCK, 2) pool_max_backward_tiled(T* __restrict__ gi, const T* __restrict__ go,
                                                                      const T* __restrict__ x, PoolMeta m) {
  extern __shared__ int pool_arg[];
  for (unsigned tile = blockIdx.x; tile < (unsigned)m.ntiles; tile += gridDim.x) {
    const PoolTile t = pool_tile(m, tile);
    int LO[3], HI[3];
#pragma unroll
    for (int d = 0; d < 3; ++d) {
      int lo, hi, last = t.a[d] + m.T[d] - 1;
      if (last > m.L[d] - 1) last = m.L[d] - 1;
      pool_cover(m, d, t.a[d], lo, hi);
      LO[d] = lo;
      pool_cover(m, d, last, lo, hi);
      HI[d] = hi;
    }
    __syncthreads();  // the previous tile's step 2 is done with pool_arg
    for (unsigned h = threadIdx.x; h < (unsigned)m.halo_items; h += blockDim.x) {
      int l, h0, h1, h2;
      unsigned r = pool_divmod(m.dHL, h, l);
      r = pool_divmod(m.dH2, r, h2);
      h0 = (int)pool_divmod(m.dH1, r, h1);
      const int o0 = LO[0] + h0, o1 = LO[1] + h1, o2 = LO[2] + h2;
      if (t.lane0 + l >= m.lanes || o0 > HI[0] || o1 > HI[1] || o2 > HI[2]) continue;
      pool_arg[h] = pool_argmax<T, 2>(m, x, t.base[2] + (long long)l * m.str[2][0], o0, o1, o2);
    }
    __syncthreads();
    for (unsigned e = threadIdx.x; e < (unsigned)m.items; e += blockDim.x) {
      int l, p0, p1, g;
      if (!pool_item(m, t, e, l, p0, p1, g)) continue;
      pool_backward_item<T, 3>(m, gi, go, x, t, l, p0, p1, g, pool_arg, LO);
    }
  }
}
