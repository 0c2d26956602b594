// ------------------------------------------------------------------------------------------
struct WgMeta {
  long long xs[5], gs[5];  // input and grad_output strides
  long long ws[5];         // grad_weight strides
  int L[3], O[3], st[3], pd[3], dl[3], ks[3];
  int nb, cg, ng, groups, K, ntiles, ktiles, splits;
  long long M, mchunk;     // rows (nb * prod(O)), rows per split (a multiple of WG_RM)
  int direct;              // 1: store grad_weight; 0: store f32/f64 partials
};

#define WG_RM 16

template <class T, int BN, int BK>
__global__ void __launch_bounds__(256) conv_wgrad(T* __restrict__ gw, typename ConvAcc<T>::type* __restrict__ part,
                                                    const T* __restrict__ go, const T* __restrict__ x, WgMeta m) {
  typedef typename Compute<T>::type V;
  typedef typename ConvAcc<T>::type A;
  constexpr int TN = BN / 16, TK = BK / 16;
  __shared__ alignas(16) A Gs[WG_RM][BN];  // staged as accumulator values: converted once
  __shared__ alignas(16) A Xs[WG_RM][BK];
  __shared__ long long kx[BK], kwo[BK];
  __shared__ int kc[3][BK];
  __shared__ long long rx[WG_RM], rg[WG_RM];
  __shared__ int rc[3][WG_RM];
  const int t = threadIdx.x;
  long long bid = blockIdx.x;
  const int kt = (int)(bid % m.ktiles); bid /= m.ktiles;
  const int nt = (int)(bid % m.ntiles); bid /= m.ntiles;
  const int g = (int)(bid % m.groups); bid /= m.groups;
  const int split = (int)bid;
  const int k0 = kt * BK, n0 = nt * BN;
  if (t < BK) {
    const int k = k0 + t;
    if (k < m.K) {
      int r = k;
      const int kz2 = r % m.ks[2]; r /= m.ks[2];
      const int kz1 = r % m.ks[1]; r /= m.ks[1];
      const int kz0 = r % m.ks[0]; r /= m.ks[0];
      const int ci = r;
      const int kap[3] = {kz0, kz1, kz2};
      long long xo = (long long)ci * m.xs[1], wo = (long long)ci * m.ws[1];
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        kc[d][t] = kap[d] * m.dl[d];
        xo += (long long)kap[d] * m.dl[d] * m.xs[2 + d];
        wo += (long long)kap[d] * m.ws[2 + d];
      }
      kx[t] = xo;
      kwo[t] = wo;
    } else {
      kc[0][t] = IG_BAD; kc[1][t] = IG_BAD; kc[2][t] = IG_BAD;
      kx[t] = 0;
      kwo[t] = 0;
    }
  }
  A acc[TN][TK];
#pragma unroll
  for (int i = 0; i < TN; ++i)
#pragma unroll
    for (int j = 0; j < TK; ++j) acc[i][j] = A(0);
  const long long mlo = (long long)split * m.mchunk;
  const long long mhi = mlo + m.mchunk < m.M ? mlo + m.mchunk : m.M;
  const int tx = t % 16, ty = t / 16;
  for (long long r0 = mlo; r0 < mhi; r0 += WG_RM) {
    if (t < WG_RM) {
      const long long mm = r0 + t;
      if (mm < mhi) {
        long long r = mm;
        const int o2 = (int)(r % m.O[2]); r /= m.O[2];
        const int o1 = (int)(r % m.O[1]); r /= m.O[1];
        const int o0 = (int)(r % m.O[0]); r /= m.O[0];
        const long long n = r;
        const int o[3] = {o0, o1, o2};
        long long xo = n * m.xs[0] + (long long)g * m.cg * m.xs[1], gofs = n * m.gs[0];
#pragma unroll
        for (int d = 0; d < 3; ++d) {
          const int ib = o[d] * m.st[d] - m.pd[d];
          rc[d][t] = ib;
          xo += (long long)ib * m.xs[2 + d];
          gofs += (long long)o[d] * m.gs[2 + d];
        }
        rx[t] = xo;
        rg[t] = gofs;
      } else {
        rc[0][t] = IG_BAD; rc[1][t] = IG_BAD; rc[2][t] = IG_BAD;
        rx[t] = 0;
        rg[t] = -1;
      }
    }
    __syncthreads();
#pragma unroll
    for (int e0 = 0; e0 < WG_RM * BN; e0 += 256) {
      const int e = e0 + t;
      const int r = e % WG_RM, nn = e / WG_RM;
      const int n = n0 + nn;
      V v = V(0);
      if (n < m.ng && rg[r] >= 0) v = iop_load(go[rg[r] + ((long long)g * m.ng + n) * m.gs[1]]);
      Gs[r][nn] = A(v);
    }
#pragma unroll
    for (int e0 = 0; e0 < WG_RM * BK; e0 += 256) {
      const int e = e0 + t;
      const int r = e % WG_RM, kk = e / WG_RM;
      const int i0 = rc[0][r] + kc[0][kk], i1 = rc[1][r] + kc[1][kk], i2 = rc[2][r] + kc[2][kk];
      V v = V(0);
      if ((unsigned)i0 < (unsigned)m.L[0] && (unsigned)i1 < (unsigned)m.L[1] && (unsigned)i2 < (unsigned)m.L[2])
        v = iop_load(x[rx[r] + kx[kk]]);
      Xs[r][kk] = A(v);
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < WG_RM; ++r) {
      A gv[TN], xv[TK];
#pragma unroll
      for (int i = 0; i < TN; ++i) gv[i] = A(Gs[r][ty * TN + i]);
#pragma unroll
      for (int j = 0; j < TK; ++j) xv[j] = A(Xs[r][tx * TK + j]);
#pragma unroll
      for (int i = 0; i < TN; ++i)
#pragma unroll
        for (int j = 0; j < TK; ++j) acc[i][j] += gv[i] * xv[j];
    }
    __syncthreads();
  }
  __syncthreads();  // the tap table, when this split has no rows
#pragma unroll
  for (int i = 0; i < TN; ++i) {
    const int n = n0 + ty * TN + i;
    if (n >= m.ng) continue;
    const long long co = (long long)g * m.ng + n;
#pragma unroll
    for (int j = 0; j < TK; ++j) {
      const int kk = tx * TK + j;
      const int k = k0 + kk;
      if (k >= m.K) continue;
      if (m.direct) gw[co * m.ws[0] + kwo[kk]] = Conv<T>::from(acc[i][j]);
      else part[((long long)split * m.groups * m.ng + co) * m.K + k] = acc[i][j];
    }
  }
}

struct BgMeta {
  long long gs[5];
  int O[3];
  int C, splits;
  long long rows, chunk;  // rows = nb * prod(O) per channel; elements per split
  long long gbs;          // grad_bias stride
  int direct;
};

template <class T>
__global__ void __launch_bounds__(256) conv_bias_grad(T* __restrict__ gb, typename ConvAcc<T>::type* __restrict__ part,
                                                        const T* __restrict__ go, BgMeta m) {
  typedef typename ConvAcc<T>::type A;
  __shared__ A red[256];
  const int co = (int)(blockIdx.x % m.C);
  const int split = (int)(blockIdx.x / m.C);
  const long long lo = split * m.chunk;
  const long long hi = lo + m.chunk < m.rows ? lo + m.chunk : m.rows;
  const long long P = (long long)m.O[0] * m.O[1] * m.O[2];
  A s = A(0);
  for (long long e = lo + threadIdx.x; e < hi; e += 256) {
    const long long n = e / P;
    long long r = e - n * P;
    const int o2 = (int)(r % m.O[2]); r /= m.O[2];
    const int o1 = (int)(r % m.O[1]); r /= m.O[1];
    const int o0 = (int)r;
    s += A(iop_load(go[n * m.gs[0] + (long long)co * m.gs[1] + o0 * m.gs[2] + o1 * m.gs[3] + o2 * m.gs[4]]));
  }
  red[threadIdx.x] = s;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (m.direct) gb[co * m.gbs] = Conv<T>::from(red[0]);
    else part[(long long)split * m.C + co] = red[0];
  }
}

struct RedMeta {
  long long ws[5];  // grad_weight strides
  int ks[3];
  int cg, K, splits;        // grad_weight partials: splits x (Cout x K)
  long long total;          // Cout * K
  int C, bsplits;           // grad_bias partials: bsplits x C (bsplits 0: none here)
  long long gbs;
};

template <class T>
__global__ void __launch_bounds__(256) conv_grad_reduce(T* __restrict__ gw, T* __restrict__ gb,
                                                          const typename ConvAcc<T>::type* __restrict__ wpart,
                                                          const typename ConvAcc<T>::type* __restrict__ bpart, RedMeta m) {
  typedef typename ConvAcc<T>::type A;
  const long long e = (long long)blockIdx.x * 256 + threadIdx.x;
  if (e < m.total) {
    A s = A(0);
    for (int i = 0; i < m.splits; ++i) s += wpart[i * m.total + e];
    const long long co = e / m.K;
    int r = (int)(e - co * m.K);
    const int k2 = r % m.ks[2]; r /= m.ks[2];
    const int k1 = r % m.ks[1]; r /= m.ks[1];
    const int k0 = r % m.ks[0]; r /= m.ks[0];
    gw[co * m.ws[0] + r * m.ws[1] + k0 * m.ws[2] + k1 * m.ws[3] + k2 * m.ws[4]] = Conv<T>::from(s);
  } else if (e - m.total < (long long)m.C * (m.bsplits > 0)) {
    const int co = (int)(e - m.total);
    A s = A(0);
    for (int i = 0; i < m.bsplits; ++i) s += bpart[(long long)i * m.C + co];
    gb[co * m.gbs] = Conv<T>::from(s);
  }
}

static_assert(sizeof(IgMeta) == 304, "IgMeta layout (engine.IG_META)");
static_assert(sizeof(DirMeta) == 240, "DirMeta layout (engine.DIR_META)");
static_assert(sizeof(DwMeta) == 184, "DwMeta layout (engine.DW_META)");
static_assert(sizeof(WgMeta) == 248, "WgMeta layout (engine.WG_META)");
static_assert(sizeof(BgMeta) == 96, "BgMeta layout (engine.BG_META)");
static_assert(sizeof(RedMeta) == 88, "RedMeta layout (engine.RED_META)");
