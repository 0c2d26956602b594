// Convolution kernels for conv, conv_transpose and conv_backward (ops.md §6.1-§6.3).
//
// Spatial dims are always three (D, H, W): 1-d and 2-d problems arrive with leading dims of
// size 1 (kernel 1, stride 1, padding 0, dilation 1, stride 0). Strides are in elements and
// arbitrary (channels-last, padded, permuted). Values load as V = Compute<T>::type (f32 for
// half types and f32, f64 for f64) and accumulate in A = ConvAcc<T>::type: f32 for half types
// (a product of two halves is exact in f32), f64 for f32 and f64 (a product of two f32 values
// is exact in f64, so an f32 result is its exact sum rounded about once: ~3e-8 norm-relative
// error on K = 4608 where a plain f32 chain gives ~1e-6). Results are rounded once on store.
// No atomics anywhere: every output element is summed by one thread in a fixed order, so
// every kernel is run-to-run deterministic.
//
// conv_igemm    implicit GEMM, per group: C[m, n] = sum_k A[m, k] B[k, n], m over output
//               positions, n over output channels of the group, k over (input channel, tap).
//               A is gathered from x on the fly (no im2col buffer). The same kernel runs the
//               transposed convolution (conv_transpose, conv_backward's grad_input) by
//               stride-phase decomposition: the outputs o = rho + s*q of one phase rho take
//               only the taps kappa with kappa*d = rho + p (mod s), and read x at
//               i = q + (rho + p - kappa*d)/s, an ordinary stride-1 gather. No zero insertion,
//               no scatter.
// conv_direct   one output position per thread, COB output channels per thread, the weights
//               of the block's channels in shared memory: tiny problems (one launch) and few
//               input channels per group.
// conv_dw2d     depthwise (one input channel per group) 1-d/2-d: a block stages an input tile
//               plus halo of one plane in shared memory; each thread computes RY outputs down
//               a column (any stride, dilation and kernel).
// conv_dwreg    depthwise, stride 1 and dilation 1, K = 3/5/7: each thread slides RY outputs
//               down a column straight from global memory (no shared memory, no barrier).
// conv_wgrad    grad_weight = sum over (n, o) of grad_output x input windows: a GEMM whose
//               reduction runs over output positions, split into chunks; each chunk's f32
//               partial goes to the workspace (or straight to grad_weight with one chunk).
// conv_bias_grad  grad_bias partial sums per (channel, chunk), block tree reduction.
// conv_grad_reduce  sums the partials of grad_weight and grad_bias in chunk order and stores.

template <class T> struct ConvAcc { typedef double type; };
template <> struct ConvAcc<iop_half> { typedef float type; };
template <> struct ConvAcc<iop_bf16> { typedef float type; };

#define IG_BK 16
#define IG_THREADS 256
#define IG_BAD (-1073741824)  // coordinate of an invalid row / tap: any sum with it stays < 0

struct IgMeta {
  long long xs[5];     // x strides (N, C, D, H, W)
  long long ys[5];     // y strides
  long long wsn, wsc;  // weight strides along the GEMM column (output channel in group) and the input channel
  long long wsk[3];    // weight strides of the kernel dims
  long long bs;        // bias stride
  long long gwn, gwc;  // group offsets of the weight's column and channel index (fprop: ng, 0; transposed: 0, cg)
  int L[3];            // x spatial sizes
  int O[3];            // y spatial sizes
  int st[3], pd[3], dl[3], ks[3];
  int nt[3];           // taps per dim that one phase can use (fprop: ks)
  int kst[3];          // transposed: tap step s / gcd(s, d)
  int gcd[3], inv[3];  // transposed: gcd(s, d) and the inverse of d / gcd modulo s / gcd
  int nb, cg, ng, groups, phases, K, mtiles;
  int transposed, has_bias;
};

template <class T, int BM, int BN>
__global__ void __launch_bounds__(IG_THREADS) conv_igemm(T* __restrict__ y, const T* __restrict__ x,
                                                           const T* __restrict__ w, const T* __restrict__ b, IgMeta m) {
  typedef typename Compute<T>::type V;
  typedef typename ConvAcc<T>::type A;
  constexpr int TM = BM / 16, TN = BN / 16;
  __shared__ alignas(16) A As[IG_BK][BM];  // staged as accumulator values: converted once
  __shared__ alignas(16) A Bs[IG_BK][BN];
  __shared__ long long mx[BM], my[BM];
  __shared__ int mc[3][BM];
  __shared__ long long kx[IG_BK], kw[IG_BK];
  __shared__ int kc[3][IG_BK];
  __shared__ int kok[IG_BK];

  const int t = threadIdx.x;
  const long long bid = blockIdx.x;
  const int mt = (int)(bid % m.mtiles);
  const int gp = (int)(bid / m.mtiles);
  const int g = gp / m.phases, ph = gp % m.phases;
  const int n0 = blockIdx.y * BN;
  int rho[3] = {0, 0, 0};
  int Q[3];
  if (m.transposed) {
    int r = ph;
    rho[2] = r % m.st[2]; r /= m.st[2];
    rho[1] = r % m.st[1]; r /= m.st[1];
    rho[0] = r;
#pragma unroll
    for (int d = 0; d < 3; ++d) Q[d] = rho[d] < m.O[d] ? (m.O[d] - rho[d] + m.st[d] - 1) / m.st[d] : 0;
  } else {
#pragma unroll
    for (int d = 0; d < 3; ++d) Q[d] = m.O[d];
  }
  const long long M = (long long)m.nb * Q[0] * Q[1] * Q[2];
  const long long m0 = (long long)mt * BM;
  if (m0 >= M) return;  // uniform over the block

  // Row table: x offset and coordinates of the row's window origin, y offset (-1: no row).
  if (t < BM) {
    const long long mm = m0 + t;
    if (mm < M) {
      long long r = mm;
      const int q2 = (int)(r % Q[2]); r /= Q[2];
      const int q1 = (int)(r % Q[1]); r /= Q[1];
      const int q0 = (int)(r % Q[0]); r /= Q[0];
      const long long n = r;
      const int q[3] = {q0, q1, q2};
      long long xo = n * m.xs[0] + (long long)g * m.cg * m.xs[1];
      long long yo = n * m.ys[0];
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        const int ib = m.transposed ? q[d] : q[d] * m.st[d];
        const int o = m.transposed ? q[d] * m.st[d] + rho[d] : q[d];
        mc[d][t] = ib;
        xo += (long long)ib * m.xs[2 + d];
        yo += (long long)o * m.ys[2 + d];
      }
      mx[t] = xo;
      my[t] = yo;
    } else {
      mc[0][t] = IG_BAD; mc[1][t] = IG_BAD; mc[2][t] = IG_BAD;
      mx[t] = 0;
      my[t] = -1;
    }
  }

  A acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = A(0);

  const long long wcol = (long long)g * m.gwn * m.wsn;
  for (int k0 = 0; k0 < m.K; k0 += IG_BK) {
    // Tap table: x offset and coordinate shift, weight offset, validity of each k of the tile.
    if (t < IG_BK) {
      const int k = k0 + t;
      int ok = k < m.K;
      int c[3] = {IG_BAD, IG_BAD, IG_BAD};
      long long xo = 0, wo = 0;
      if (ok) {
        int r = k;
        int tap[3];
        tap[2] = r % m.nt[2]; r /= m.nt[2];
        tap[1] = r % m.nt[1]; r /= m.nt[1];
        tap[0] = r % m.nt[0]; r /= m.nt[0];
        const int ci = r;
        xo = (long long)ci * m.xs[1];
        wo = ((long long)g * m.gwc + ci) * m.wsc;
#pragma unroll
        for (int d = 0; d < 3; ++d) {
          int kap, cd;
          if (m.transposed) {
            const int rp = rho[d] + m.pd[d];
            if (rp % m.gcd[d]) { ok = 0; kap = 0; cd = 0; }
            else {
              const int k0d = (int)(((long long)(rp / m.gcd[d]) * m.inv[d]) % m.kst[d]);
              kap = k0d + tap[d] * m.kst[d];
              if (kap >= m.ks[d]) ok = 0;
              cd = (rp - kap * m.dl[d]) / m.st[d];  // exact: rp = kap*d (mod s)
            }
          } else {
            kap = tap[d];
            cd = kap * m.dl[d] - m.pd[d];
          }
          c[d] = cd;
          xo += (long long)cd * m.xs[2 + d];
          wo += (long long)kap * m.wsk[d];
        }
      }
      if (!ok) { c[0] = IG_BAD; c[1] = IG_BAD; c[2] = IG_BAD; }
      kc[0][t] = c[0]; kc[1][t] = c[1]; kc[2][t] = c[2];
      kx[t] = xo;
      kw[t] = wo;
      kok[t] = ok;
    }
    __syncthreads();
#pragma unroll
    for (int e0 = 0; e0 < IG_BK * BM; e0 += IG_THREADS) {
      const int e = e0 + t;
      const int mm = e % BM, kk = e / BM;
      const int i0 = mc[0][mm] + kc[0][kk], i1 = mc[1][mm] + kc[1][kk], i2 = mc[2][mm] + kc[2][kk];
      V v = V(0);
      if ((unsigned)i0 < (unsigned)m.L[0] && (unsigned)i1 < (unsigned)m.L[1] && (unsigned)i2 < (unsigned)m.L[2])
        v = iop_load(x[mx[mm] + kx[kk]]);
      As[kk][mm] = A(v);
    }
#pragma unroll
    for (int e0 = 0; e0 < IG_BK * BN; e0 += IG_THREADS) {
      const int e = e0 + t;
      const int kk = e % IG_BK, nn = e / IG_BK;
      const int n = n0 + nn;
      V v = V(0);
      if (n < m.ng && kok[kk]) v = iop_load(w[wcol + (long long)n * m.wsn + kw[kk]]);
      Bs[kk][nn] = A(v);
    }
    __syncthreads();
    const int tx = t % 16, ty = t / 16;
#pragma unroll
    for (int kk = 0; kk < IG_BK; ++kk) {
      A a[TM], bb[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = A(As[kk][tx * TM + i]);
#pragma unroll
      for (int j = 0; j < TN; ++j) bb[j] = A(Bs[kk][ty * TN + j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * bb[j];
    }
    __syncthreads();
  }
  __syncthreads();  // the row table, when K == 0

  const int tx = t % 16, ty = t / 16;
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int n = n0 + ty * TN + j;
    if (n >= m.ng) continue;
    const long long ch = (long long)g * m.ng + n;
    const A bias = m.has_bias ? A(iop_load(b[ch * m.bs])) : A(0);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const long long yo = my[tx * TM + i];
      if (yo >= 0) y[yo + ch * m.ys[1]] = Conv<T>::from(acc[i][j] + bias);
    }
  }
}

// ------------------------------------------------------------------------------------------
struct DirMeta {
  long long xs[5], ys[5], ws[5];
  long long bs;
  int L[3], O[3], st[3], pd[3], dl[3], ks[3];
  int nb, cg, ng, groups, cchunks, kvol;
  long long positions;  // nb * prod(O)
  int has_bias;
};

#define DIR_THREADS 128

// K > 0: a 2-d K x K kernel known at compile time (the tap loops unroll, so a thread has all
// of a channel's K*K loads in flight); K == 0: any kernel, any rank.
template <class T, int COB, int K>
__global__ void __launch_bounds__(DIR_THREADS) conv_direct(T* __restrict__ y, const T* __restrict__ x,
                                                             const T* __restrict__ w, const T* __restrict__ b, DirMeta m) {
  typedef typename Compute<T>::type V;
  typedef typename ConvAcc<T>::type A;
  extern __shared__ unsigned char dir_smem[];
  A* Ws = reinterpret_cast<A*>(dir_smem);  // [cg * kvol][COB], staged as accumulator values
  const int g = blockIdx.y / m.cchunks, chunk = blockIdx.y % m.cchunks;
  const int c0 = chunk * COB;  // first output channel of the block within the group
  const int nw = m.cg * m.kvol * COB;
  for (int e = threadIdx.x; e < nw; e += DIR_THREADS) {
    const int c = e % COB;
    int r = e / COB;
    const int kx = r % m.ks[2]; r /= m.ks[2];
    const int ky = r % m.ks[1]; r /= m.ks[1];
    const int kz = r % m.ks[0]; r /= m.ks[0];
    const int ci = r;
    A v = A(0);
    if (c0 + c < m.ng) {
      const long long co = (long long)g * m.ng + c0 + c;
      v = A(iop_load(w[co * m.ws[0] + ci * m.ws[1] + kz * m.ws[2] + ky * m.ws[3] + kx * m.ws[4]]));
    }
    Ws[e] = v;
  }
  __syncthreads();
  const long long p = (long long)blockIdx.x * DIR_THREADS + threadIdx.x;
  if (p >= m.positions) return;
  long long r = p;
  const int ow = (int)(r % m.O[2]); r /= m.O[2];
  const int oh = (int)(r % m.O[1]); r /= m.O[1];
  const int od = (int)(r % m.O[0]); r /= m.O[0];
  const long long n = r;
  const int b0 = od * m.st[0] - m.pd[0], b1 = oh * m.st[1] - m.pd[1], b2 = ow * m.st[2] - m.pd[2];
  const T* xb = x + n * m.xs[0] + (long long)g * m.cg * m.xs[1];
  A acc[COB];
#pragma unroll
  for (int c = 0; c < COB; ++c) acc[c] = A(0);
  if (K > 0) {
    constexpr int KK = K > 0 ? K : 1;
    const T* xr0 = xb + (long long)b1 * m.xs[3] + (long long)b2 * m.xs[4];
    for (int ci = 0; ci < m.cg; ++ci) {
      const T* xc = xr0 + ci * m.xs[1];
      const A* wr = Ws + ci * KK * KK * COB;
#pragma unroll
      for (int ky = 0; ky < KK; ++ky) {
        const int i1 = b1 + ky * m.dl[1];
        const bool ok1 = (unsigned)i1 < (unsigned)m.L[1];
#pragma unroll
        for (int kx = 0; kx < KK; ++kx) {
          const int i2 = b2 + kx * m.dl[2];
          const bool ok = ok1 && (unsigned)i2 < (unsigned)m.L[2];
          const A v = ok ? A(iop_load(xc[(long long)ky * m.dl[1] * m.xs[3] + (long long)kx * m.dl[2] * m.xs[4]])) : A(0);
#pragma unroll
          for (int c = 0; c < COB; ++c) acc[c] += v * wr[(ky * KK + kx) * COB + c];
        }
      }
    }
  } else {
    for (int ci = 0; ci < m.cg; ++ci) {
      const T* xc = xb + ci * m.xs[1];
      for (int kz = 0; kz < m.ks[0]; ++kz) {
        const int i0 = b0 + kz * m.dl[0];
        if ((unsigned)i0 >= (unsigned)m.L[0]) continue;
        for (int ky = 0; ky < m.ks[1]; ++ky) {
          const int i1 = b1 + ky * m.dl[1];
          if ((unsigned)i1 >= (unsigned)m.L[1]) continue;
          const T* xr = xc + (long long)i0 * m.xs[2] + (long long)i1 * m.xs[3];
          const A* wr = Ws + ((ci * m.ks[0] + kz) * m.ks[1] + ky) * m.ks[2] * COB;
          for (int kx = 0; kx < m.ks[2]; ++kx) {
            const int i2 = b2 + kx * m.dl[2];
            if ((unsigned)i2 >= (unsigned)m.L[2]) continue;
            const A v = A(iop_load(xr[(long long)i2 * m.xs[4]]));
  #pragma unroll
            for (int c = 0; c < COB; ++c) acc[c] += v * wr[kx * COB + c];
          }
        }
      }
    }
  }
  const long long yb = n * m.ys[0] + od * m.ys[2] + oh * m.ys[3] + ow * m.ys[4];
#pragma unroll
  for (int c = 0; c < COB; ++c) {
    if (c0 + c < m.ng) {
      const long long co = (long long)g * m.ng + c0 + c;
      const A bias = m.has_bias ? A(iop_load(b[co * m.bs])) : A(0);
      y[yb + co * m.ys[1]] = Conv<T>::from(acc[c] + bias);
    }
  }
}

// ------------------------------------------------------------------------------------------
struct DwMeta {
  long long xs[4], ys[4];  // (N, C, H, W); 1-d: H of size 1
  long long ws0, wsh, wsw, bs;
  int H, W, OH, OW, sh, sw, ph, pw, dh, dw, kh, kw;
  int C, mult;             // output channels, output channels per input channel
  int tilesW, IR, IC;      // tiles along W; staged rows and columns per plane
  long long planes;        // N * C
  int has_bias;
};

// Block (BX, BY, PB): PB planes, each a BX-wide, BY*RY-high output tile. K > 0: a K x K kernel
// known at compile time (UNIT: stride 1 and dilation 1 along both dims); K == 0: any kernel.
template <class T, int K, bool UNIT, int RY>
__global__ void __launch_bounds__(256) conv_dw2d(T* __restrict__ y, const T* __restrict__ x,
                                                   const T* __restrict__ w, const T* __restrict__ b, DwMeta m) {
  typedef typename Compute<T>::type V;
  typedef typename ConvAcc<T>::type A;
  extern __shared__ unsigned char dw_smem[];
  const int BX = blockDim.x, BY = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
  const int KH = K > 0 ? K : m.kh, KW = K > 0 ? K : m.kw;
  const int SH = UNIT ? 1 : m.sh, SW = UNIT ? 1 : m.sw, DH = UNIT ? 1 : m.dh, DW = UNIT ? 1 : m.dw;
  const int tile = m.IR * m.IC;
  A* S = reinterpret_cast<A*>(dw_smem) + tz * (tile + (K > 0 ? 0 : KH * KW));  // accumulator values
  A* Wsm = S + tile;  // K == 0 only
  const long long plane = (long long)blockIdx.x * blockDim.z + tz;
  const bool live = plane < m.planes;
  const long long n = live ? plane / m.C : 0;
  const int co = live ? (int)(plane % m.C) : 0;
  const int ci = co / m.mult;
  const int tr = blockIdx.y / m.tilesW, tc = blockIdx.y % m.tilesW;
  const int or0 = tr * BY * RY, oc0 = tc * BX;
  const int ir0 = or0 * SH - m.ph, ic0 = oc0 * SW - m.pw;
  const T* xp = x + n * m.xs[0] + (long long)ci * m.xs[1];
  const T* wp = w + (long long)co * m.ws0;
  A wr[K > 0 ? K * K : 1];
  if (K > 0) {
#pragma unroll
    for (int a = 0; a < (K > 0 ? K : 1); ++a)
#pragma unroll
      for (int c = 0; c < (K > 0 ? K : 1); ++c) wr[a * (K > 0 ? K : 1) + c] = live ? A(iop_load(wp[a * m.wsh + c * m.wsw])) : A(0);
  } else {
    for (int e = ty * BX + tx; e < KH * KW; e += BX * BY) Wsm[e] = live ? A(iop_load(wp[(e / KW) * m.wsh + (e % KW) * m.wsw])) : A(0);
  }
  // Stage the tile: each thread issues NL loads before storing any (enough bytes in flight to
  // keep HBM busy; a load-store-load chain per thread leaves it mostly idle).
  {
    constexpr int NL = sizeof(T) >= 4 ? 8 : 16;
    const int nth = BX * BY, tid = ty * BX + tx;
    for (int e0 = tid; e0 < tile; e0 += nth * NL) {
      V v[NL];
#pragma unroll
      for (int i = 0; i < NL; ++i) {
        const int e = e0 + i * nth;
        const int r = e / m.IC, c = e - r * m.IC;
        const int ir = ir0 + r, ic = ic0 + c;
        const bool ok = live && e < tile && (unsigned)ir < (unsigned)m.H && (unsigned)ic < (unsigned)m.W;
        v[i] = ok ? iop_load(xp[(long long)ir * m.xs[2] + (long long)ic * m.xs[3]]) : V(0);
      }
#pragma unroll
      for (int i = 0; i < NL; ++i) {
        const int e = e0 + i * nth;
        if (e < tile) S[e] = A(v[i]);
      }
    }
  }
  __syncthreads();
  if (!live) return;
  const int oc = oc0 + tx;
  if (oc >= m.OW) return;
  const A bias = m.has_bias ? A(iop_load(b[(long long)co * m.bs])) : A(0);
  const long long yb = n * m.ys[0] + (long long)co * m.ys[1] + (long long)oc * m.ys[3];
#pragma unroll
  for (int j = 0; j < RY; ++j) {
    const int orow = or0 + ty * RY + j;
    if (orow >= m.OH) break;
    A acc = A(0);
    const A* s0 = S + ((ty * RY + j) * SH) * m.IC + tx * SW;
    if (K > 0) {
#pragma unroll
      for (int a = 0; a < (K > 0 ? K : 1); ++a)
#pragma unroll
        for (int c = 0; c < (K > 0 ? K : 1); ++c) acc += s0[a * DH * m.IC + c * DW] * wr[a * (K > 0 ? K : 1) + c];
    } else {
      for (int a = 0; a < KH; ++a)
        for (int c = 0; c < KW; ++c) acc += s0[a * DH * m.IC + c * DW] * Wsm[a * KW + c];
    }
    y[yb + (long long)orow * m.ys[2]] = Conv<T>::from(acc + bias);
  }
}

// Depthwise, stride 1 and dilation 1, K x K known at compile time: no shared memory. A thread
// computes RY outputs down one column, reading each of the RY + K - 1 input rows it needs once
// (K values each, straight from global memory: neighbouring threads' reads coalesce and
// overlap in L1) and sliding them over the RY accumulators; all its loads are independent, so
// they are in flight together. DwMeta.tilesW holds the number of RY-row strips per plane.
template <class T, int K, int RY>
__global__ void __launch_bounds__(256) conv_dwreg(T* __restrict__ y, const T* __restrict__ x,
                                                    const T* __restrict__ w, const T* __restrict__ b, DwMeta m) {
  typedef typename ConvAcc<T>::type A;
  // 32-bit index math: the host guarantees threads < 2^31 and a plane's span < 2^31 elements.
  const unsigned t = blockIdx.x * 256u + threadIdx.x;
  const unsigned per_plane = (unsigned)m.OW * (unsigned)m.tilesW;
  if (t >= (unsigned)m.planes * per_plane) return;
  const unsigned plane = t / per_plane;
  const unsigned rem = t - plane * per_plane;
  const int strip = (int)(rem / (unsigned)m.OW), col = (int)(rem - strip * (unsigned)m.OW);
  const unsigned n = plane / (unsigned)m.C;
  const int co = (int)(plane - n * (unsigned)m.C);
  const int ci = co / m.mult;
  const T* xp = x + (long long)n * m.xs[0] + (long long)ci * m.xs[1];
  const T* wp = w + (long long)co * m.ws0;
  const int sh = (int)m.xs[2], sw = (int)m.xs[3];
  A wr[K * K];
#pragma unroll
  for (int a = 0; a < K; ++a)
#pragma unroll
    for (int c = 0; c < K; ++c) wr[a * K + c] = A(iop_load(wp[a * m.wsh + c * m.wsw]));
  A acc[RY];
#pragma unroll
  for (int j = 0; j < RY; ++j) acc[j] = A(0);
  const int r0 = strip * RY - m.ph, c0 = col - m.pw;
#pragma unroll
  for (int r = 0; r < RY + K - 1; ++r) {
    const int ir = r0 + r;
    const bool rok = (unsigned)ir < (unsigned)m.H;
    A v[K];
#pragma unroll
    for (int c = 0; c < K; ++c) {
      const int ic = c0 + c;
      v[c] = rok && (unsigned)ic < (unsigned)m.W ? A(iop_load(xp[ir * sh + ic * sw])) : A(0);
    }
#pragma unroll
    for (int a = 0; a < K; ++a) {
      const int j = r - a;
      if (j >= 0 && j < RY) {
#pragma unroll
        for (int c = 0; c < K; ++c) acc[j] += v[c] * wr[a * K + c];
      }
    }
  }
  const A bias = m.has_bias ? A(iop_load(b[(long long)co * m.bs])) : A(0);
  T* yp = y + (long long)n * m.ys[0] + (long long)co * m.ys[1];
  const int yh = (int)m.ys[2], yw = (int)m.ys[3];
#pragma unroll
  for (int j = 0; j < RY; ++j) {
    const int orow = strip * RY + j;
    if (orow < m.OH) yp[orow * yh + col * yw] = Conv<T>::from(acc[j] + bias);
  }
}

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
