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
// conv_dwvec    the same with "same" padding on W-contiguous rows: RY rows x 16 bytes of
//               columns per thread, 16-byte loads of each input row and its halo.
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

// Depthwise, stride 1, dilation 1, K x K with "same" padding P = (K - 1) / 2 along W, rows stored
// contiguously (host: unit W strides, P <= VW, W a multiple of VW and every other stride of x and y a
// multiple of VW, VW = 16 bytes of T). A thread computes RY outputs in each of VW adjacent
// columns: for each of its RY + K - 1 input rows it loads its own VW inputs and the two
// neighbouring groups (the halo; L1 hits, their owners load them too) as 16-byte vectors, and
// slides them over the RY x VW accumulators. Misaligned base pointers take the same path with
// element loads. Accumulates in Compute<T> (f32 also for f32: at most 49 products per output).
template <class T, int K, int RY>
__global__ void __launch_bounds__(256) conv_dwvec(T* __restrict__ y, const T* __restrict__ x,
                                                    const T* __restrict__ w, const T* __restrict__ b, DwMeta m) {
  typedef typename Compute<T>::type A;  // f32 for half types and f32, f64 for f64
  constexpr int VW = 16 / (int)sizeof(T);
  constexpr int P = (K - 1) / 2;
  // 32-bit index math: the host guarantees threads < 2^31 and a plane's span < 2^31 elements.
  const unsigned t = blockIdx.x * 256u + threadIdx.x;
  const unsigned groups = (unsigned)m.OW / VW;
  const unsigned per_plane = groups * (unsigned)m.tilesW;
  if (t >= (unsigned)m.planes * per_plane) return;
  const unsigned plane = t / per_plane;
  const unsigned rem = t - plane * per_plane;
  const int strip = (int)(rem / groups), c0 = (int)(rem - strip * groups) * VW;
  const unsigned n = plane / (unsigned)m.C;
  const int co = (int)(plane - n * (unsigned)m.C);
  const int ci = co / m.mult;
  const bool vec = ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)) & 15ull) == 0;
  const T* xp = x + (long long)n * m.xs[0] + (long long)ci * m.xs[1];
  const T* wp = w + (long long)co * m.ws0;
  const int sh = (int)m.xs[2];
  A wr[K * K];
#pragma unroll
  for (int a = 0; a < K; ++a)
#pragma unroll
    for (int c = 0; c < K; ++c) wr[a * K + c] = A(iop_load(wp[a * m.wsh + c * m.wsw]));
  A acc[RY][VW];
#pragma unroll
  for (int j = 0; j < RY; ++j)
#pragma unroll
    for (int e = 0; e < VW; ++e) acc[j][e] = A(0);
  const int r0 = strip * RY - m.ph;
#pragma unroll
  for (int r = 0; r < RY + K - 1; ++r) {
    const int ir = r0 + r;
    const bool rok = (unsigned)ir < (unsigned)m.H;
    A v[3 * VW];  // columns c0 - VW .. c0 + 2 VW - 1
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const int col = c0 + (q - 1) * VW;
      const bool ok = rok && (unsigned)col < (unsigned)m.W;  // W % VW == 0: a group is all in or all out
      Pack<T, VW> pk;
      if (ok && vec) {
        pk = *reinterpret_cast<const Pack<T, VW>*>(xp + ir * sh + col);
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) pk.v[e] = ok ? xp[ir * sh + col + e] : Conv<T>::from(A(0));
      }
#pragma unroll
      for (int e = 0; e < VW; ++e) v[q * VW + e] = A(iop_load(pk.v[e]));
    }
#pragma unroll
    for (int a = 0; a < K; ++a) {
      const int j = r - a;
      if (j >= 0 && j < RY) {
#pragma unroll
        for (int e = 0; e < VW; ++e)
#pragma unroll
          for (int c = 0; c < K; ++c) acc[j][e] += v[VW + e - P + c] * wr[a * K + c];
      }
    }
  }
  const A bias = m.has_bias ? A(iop_load(b[(long long)co * m.bs])) : A(0);
  T* yp = y + (long long)n * m.ys[0] + (long long)co * m.ys[1] + c0;
  const int yh = (int)m.ys[2];
#pragma unroll
  for (int j = 0; j < RY; ++j) {
    const int orow = strip * RY + j;
    if (orow < m.OH) {
      Pack<T, VW> pk;
#pragma unroll
      for (int e = 0; e < VW; ++e) pk.v[e] = Conv<T>::from(acc[j][e] + bias);
      if (vec) {
        *reinterpret_cast<Pack<T, VW>*>(yp + orow * yh) = pk;
      } else {
#pragma unroll
        for (int e = 0; e < VW; ++e) yp[orow * yh + e] = pk.v[e];
      }
    }
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

