// batch_norm (training mode) and batch_norm_backward on (B, C, D) (D = 1 for (B, C) inputs).
// Three deterministic stages, each with a fixed reduction order:
//   1. bn_stats:    block (c, j) reduces chunk j of channel c's n = B*D elements (flat index
//                   k = b*D + d) to (mean_j, M2_j) [+ (sum dy, sum dy*(x - mean_j)) backward],
//                   with sums shifted by the chunk's first value for accuracy. Backward f32
//                   input sums in f64 (BnPart), each term exact: sum dy*(x - mean) cancels
//                   heavily when dy has a nonzero mean, and f32 terms and sums lose ~1e-3 of it.
//   2. bn_finalize: one thread per channel combines the chunks in order (Chan's formula, f64):
//                   forward writes (mean, weight*rstd, bias) and updates the running stats;
//                   backward writes grad_weight, grad_bias and the grad_input coefficients.
//   3. bn_apply_*:  output = (x - mean) * a + bias, or grad_input = a*dy - a*mean(dy) - k*(x - mean).

struct BNMeta {
  long long B, C, D, n, chunk;
  long long xs[3];   // input strides (b, c, d)
  long long ys[3];   // output / grad_input strides
  long long gs[3];   // grad_output strides (backward)
  long long ps[5];   // [C] vectors: weight, bias, running_mean, running_var | weight, grad_weight, grad_bias
  FastDiv divD;
  int nchunk;
  int fast;          // n < 2^31: FastDiv for k / D
};

__device__ __forceinline__ void bn_split(const BNMeta& m, long long k, long long& b, long long& d) {
  if (m.fast) {
    b = m.divD.div((unsigned)k);
  } else {
    b = k / m.D;
  }
  d = k - b * m.D;
}

// Type of the statistics sums and partials: the compute type, but f64 for f32 backward.
template <class T, bool BWD>
struct BnPart {
  typedef typename Compute<T>::type type;
};
template <>
struct BnPart<float, true> {
  typedef double type;
};

template <class T, int VEC, bool BWD>
__global__ void __launch_bounds__(256)
bn_stats(typename BnPart<T, BWD>::type* part, const T* x, const T* dy, const BNMeta m) {
  typedef typename Compute<T>::type A;
  typedef typename BnPart<T, BWD>::type S;
  constexpr int NV = BWD ? 4 : 2;
  __shared__ S sm[8 * NV];
  const long long c = blockIdx.x / m.nchunk;
  const int j = blockIdx.x % m.nchunk;
  const long long k0 = (long long)j * m.chunk;
  const long long k1 = min(m.n, k0 + m.chunk);
  const T* xc = x + c * m.xs[1];
  const T* gc = BWD ? dy + c * m.gs[1] : nullptr;
  A K = A(0);
  if (k0 < k1) {
    long long b, d;
    bn_split(m, k0, b, d);
    K = (A)iop_load(xc[b * m.xs[0] + d * m.xs[2]]);
  }
  S s[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) s[i] = S(0);
  for (long long k = k0 + (long long)threadIdx.x * VEC; k < k1; k += 256LL * VEC) {
    long long b, d;
    bn_split(m, k, b, d);
    A xv[VEC], gv[VEC];
    norm_load<T, VEC, A>(xc + b * m.xs[0], d, m.xs[2], xv);
    if (BWD) norm_load<T, VEC, A>(gc + b * m.gs[0], d, m.gs[2], gv);
#pragma unroll
    for (int q = 0; q < VEC; ++q) {
      const S t = (S)xv[q] - (S)K;  // exact in f64 for f32 x
      s[0] += t;
      s[1] += t * t;
      if (BWD) {
        s[2] += (S)gv[q];
        s[3] += (S)gv[q] * t;
      }
    }
  }
  norm_group_sum<256, 1, NV>(s, sm);
  if (threadIdx.x == 0) {
    S* out = part + (long long)blockIdx.x * NV;
    const long long cnt = k1 > k0 ? k1 - k0 : 0;
    if (cnt == 0) {
#pragma unroll
      for (int i = 0; i < NV; ++i) out[i] = S(0);
    } else {
      const S mu = s[0] / S(cnt);  // mean - K
      out[0] = (S)K + mu;
      out[1] = s[1] - s[0] * mu;
      if (BWD) {
        out[2] = s[2];
        out[3] = s[3] - mu * s[2];  // sum dy * (x - mean_j)
      }
    }
  }
}

// Chan's parallel combination of chunk j's (mean, M2) partials (K values per chunk, from
// part[(c * nchunk + j) * K]) into the running (cnt, mean, m2) of channel c; the chunk's partials,
// or null for an empty chunk.
template <int K, class S>
__device__ __forceinline__ const S* bn_merge(const S* part, long long c, int j, const BNMeta& m, double& cnt, double& mean,
                                             double& m2) {
  const long long k0 = (long long)j * m.chunk;
  const double nj = (double)(min(m.n, k0 + m.chunk) - k0);
  if (nj <= 0) return nullptr;
  const S* p = part + (c * m.nchunk + j) * K;
  const double mj = (double)p[0], m2j = (double)p[1];
  const double tot = cnt + nj;
  const double delta = mj - mean;
  mean += delta * nj / tot;
  m2 += m2j + delta * delta * cnt * nj / tot;
  cnt = tot;
  return p;
}

// Forward finalize: coef[c] = (mean, weight * rstd, bias); running stats updated in place.
template <class T, class TS>
__global__ void __launch_bounds__(256)
bn_finalize_fwd(typename Compute<T>::type* coef, const typename Compute<T>::type* part, TS* rmean, TS* rvar,
                const T* w, const T* bias, const BNMeta m, double eps, double momentum) {
  typedef typename Compute<T>::type A;
  const long long c = (long long)blockIdx.x * 256 + threadIdx.x;
  if (c >= m.C) return;
  double cnt = 0.0, mean = 0.0, m2 = 0.0;
  for (int j = 0; j < m.nchunk; ++j) bn_merge<2>(part, c, j, m, cnt, mean, m2);
  const double var = m2 / cnt;
  const double rstd = 1.0 / sqrt(var + eps);
  coef[c * 3 + 0] = (A)mean;
  coef[c * 3 + 1] = (A)((double)iop_load(w[c * m.ps[0]]) * rstd);
  coef[c * 3 + 2] = (A)(double)iop_load(bias[c * m.ps[1]]);
  const double unbiased = m2 / (cnt - 1.0);
  TS* pm = rmean + c * m.ps[2];
  TS* pv = rvar + c * m.ps[3];
  *pm = Conv<TS>::from((1.0 - momentum) * (double)iop_load(*pm) + momentum * mean);
  *pv = Conv<TS>::from((1.0 - momentum) * (double)iop_load(*pv) + momentum * unbiased);
}

// Backward finalize: grad_bias = sum dy, grad_weight = rstd * sum dy (x - mean);
// coef[c] = (a, a * mean(dy), a * rstd^2 * sum dy (x - mean) / n, mean) with a = weight * rstd.
template <class T>
__global__ void __launch_bounds__(256)
bn_finalize_bwd(typename Compute<T>::type* coef, const typename BnPart<T, true>::type* part, T* gw, T* gb,
                const T* w, const BNMeta m, double eps) {
  typedef typename Compute<T>::type A;
  typedef typename BnPart<T, true>::type S;
  const long long c = (long long)blockIdx.x * 256 + threadIdx.x;
  if (c >= m.C) return;
  double cnt = 0.0, mean = 0.0, m2 = 0.0, sdy = 0.0;
  for (int j = 0; j < m.nchunk; ++j) {
    if (const S* p = bn_merge<4>(part, c, j, m, cnt, mean, m2)) sdy += (double)p[2];
  }
  double pdx = 0.0;  // sum dy * (x - mean)
  for (int j = 0; j < m.nchunk; ++j) {
    const long long k0 = (long long)j * m.chunk;
    if (min(m.n, k0 + m.chunk) - k0 <= 0) continue;
    const S* p = part + (c * m.nchunk + j) * 4;
    pdx += (double)p[3] + ((double)p[0] - mean) * (double)p[2];
  }
  const double var = m2 / cnt;
  const double rstd = 1.0 / sqrt(var + eps);
  gb[c * m.ps[2]] = Conv<T>::from(sdy);
  gw[c * m.ps[1]] = Conv<T>::from(rstd * pdx);
  const double a = (double)iop_load(w[c * m.ps[0]]) * rstd;
  coef[c * 4 + 0] = (A)a;
  coef[c * 4 + 1] = (A)(a * sdy / cnt);
  coef[c * 4 + 2] = (A)(a * rstd * rstd * pdx / cnt);
  coef[c * 4 + 3] = (A)mean;
}

template <class A, bool BWD>
__device__ __forceinline__ A bn_apply_one(A xv, A gv, const A* cf) {
  if (BWD) return cf[0] * gv - cf[1] - cf[2] * (xv - cf[3]);
  return (xv - cf[0]) * cf[1] + cf[2];
}

// One block row per (b, c); grid.y splits D. VEC > 1 needs unit d strides.
template <class T, int VEC, bool BWD>
__global__ void __launch_bounds__(256)
bn_apply_rows(T* y, const T* x, const T* dy, const typename Compute<T>::type* coef, const BNMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int NC = BWD ? 4 : 3;
  for (long long row = blockIdx.x; row < m.B * m.C; row += gridDim.x) {
    const long long b = row / m.C, c = row - b * m.C;
    A cf[NC];
#pragma unroll
    for (int i = 0; i < NC; ++i) cf[i] = coef[c * NC + i];
    const T* xr = x + b * m.xs[0] + c * m.xs[1];
    const T* gr = BWD ? dy + b * m.gs[0] + c * m.gs[1] : nullptr;
    T* yr = y + b * m.ys[0] + c * m.ys[1];
    for (long long d = ((long long)blockIdx.y * 256 + threadIdx.x) * VEC; d < m.D; d += (long long)gridDim.y * 256 * VEC) {
      A xv[VEC], gv[VEC], o[VEC];
      norm_load<T, VEC, A>(xr, d, m.xs[2], xv);
      if (BWD) norm_load<T, VEC, A>(gr, d, m.gs[2], gv);
#pragma unroll
      for (int q = 0; q < VEC; ++q) o[q] = bn_apply_one<A, BWD>(xv[q], BWD ? gv[q] : A(0), cf);
      norm_store<T, VEC, A>(yr, d, m.ys[2], o);
    }
  }
}

// Any shape with short D: one thread per element.
template <class T, bool BWD>
__global__ void __launch_bounds__(256)
bn_apply_flat(T* y, const T* x, const T* dy, const typename Compute<T>::type* coef, const BNMeta m) {
  typedef typename Compute<T>::type A;
  constexpr int NC = BWD ? 4 : 3;
  const long long total = m.B * m.C * m.D;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < total; i += (long long)gridDim.x * 256) {
    const long long t = i / m.D, d = i - t * m.D;
    const long long b = t / m.C, c = t - b * m.C;
    const A xv = (A)iop_load(x[b * m.xs[0] + c * m.xs[1] + d * m.xs[2]]);
    const A gv = BWD ? (A)iop_load(dy[b * m.gs[0] + c * m.gs[1] + d * m.gs[2]]) : A(0);
    y[b * m.ys[0] + c * m.ys[1] + d * m.ys[2]] = Conv<T>::from(bn_apply_one<A, BWD>(xv, gv, coef + c * NC));
  }
}
