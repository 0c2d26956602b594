// layer_norm. Tensor slots: 0 output, 1 input_standardization, 2 input_std_deviation, 3 input,
// 4 weight, 5 bias (null when absent). Per row: mean, biased variance (two passes over the
// registers), std = sqrt(var + eps), xh = (x - mean) / std, output = xh * weight + bias.

// Sum of squared deviations from mean over the row's columns.
template <int TPR, class A, class T, int VEC, int NP>
__device__ __forceinline__ A ln_sqdev(const NormPack<T, VEC> (&xk)[NP], A mean, long long D) {
  A q = A(0);
  norm_packs<TPR, VEC, NP>(D, [&](int p, long long) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A d = norm_cv<A>(xk[p], j) - mean;
      q += d * d;
    }
  });
  return q;
}

// Weight and bias packs of a block: loaded once here (PW), else zero bias packs for ln_fwd_row
// to fill pack by pack.
template <class T, int VEC, int TPR, int NP, bool PW>
__device__ __forceinline__ void ln_params(const T* __restrict__ w, const T* __restrict__ b, const NormRows& m,
                                          NormPack<T, VEC> (&wk)[NP], NormPack<T, VEC> (&bk)[NP]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) bk[p].zero();
  if constexpr (PW) {
    norm_load_param_row<T, VEC, TPR, NP>(w, m.dstride[4], m.D, wk);
    if (b != nullptr) norm_load_param_row<T, VEC, TPR, NP>(b, m.dstride[5], m.D, bk);
  }
}

// Row r's outputs from its packs: std, input_standardization = (x - mean) * rs and
// output = xh * weight + bias. !PW: each pack of weight and bias is loaded where used.
template <bool PW, int TPR, class T, int VEC, int NP, class A>
__device__ __forceinline__ void ln_fwd_row(T* out, T* xhat, T* stdv, const T* __restrict__ w, const T* __restrict__ b,
                                           const NormRows& m, long long r, long long D, int lane, A mean, A sd,
                                           const NormPack<T, VEC> (&xk)[NP], NormPack<T, VEC> (&wk)[NP],
                                           NormPack<T, VEC> (&bk)[NP]) {
  const A rs = A(1) / sd;
  T* orow = out + norm_row_off<0>(m, r);
  T* hrow = xhat + norm_row_off<1>(m, r);
  if (lane == 0) stdv[norm_row_off<2>(m, r)] = Conv<T>::from(sd);
  norm_packs<TPR, VEC, NP>(D, [&](int p, long long e) {
    if constexpr (!PW) {
      const long long off = (long long)p * TPR * VEC;
      NormPack<T, VEC> one[1];
      norm_load_param_row<T, VEC, TPR, 1>(w + off * m.dstride[4], m.dstride[4], D - off, one);
      wk[p] = one[0];
      if (b != nullptr) {
        norm_load_param_row<T, VEC, TPR, 1>(b + off * m.dstride[5], m.dstride[5], D - off, one);
        bk[p] = one[0];
      }
    }
    A h[VEC], o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      h[j] = (norm_cv<A>(xk[p], j) - mean) * rs;
      o[j] = h[j] * norm_cv<A>(wk[p], j) + norm_cv<A>(bk[p], j);
    }
    norm_store_pk<T, VEC, A>(hrow, e, m.dstride[1], h);
    norm_store_pk<T, VEC, A>(orow, e, m.dstride[0], o);
  });
}

// A block of ROWS row groups handles R * ROWS consecutive rows per step; each thread issues the
// loads of its R rows together (raw packs, converted where used), reduces the R sums, then the
// R centred sums of squares; weight and bias packs are loaded (all at once) before the second
// reduction, whose latency hides theirs.
template <class T, int VEC, int TPR, int R>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256, TPR >= 1024 ? 1 : TPR == 512 ? 2 : (R == 1 ? 3 : 2))
layer_norm_fwd(T* out, T* xhat, T* stdv, const T* x, const T* __restrict__ w, const T* __restrict__ b,
               const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  constexpr int NP = NORM_NP;
  constexpr bool PW = TPR < 512;  // preload weight and bias (512+ thread groups: registers too tight)
  __shared__ A sm[ROWS * (TPR / 32) * R];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  norm_fwd_groups<3, TPR, ROWS, R, NP, VEC>(x, m, [&](const auto& xk, const long long (&r)[R]) {
    A s[R];
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = norm_row_sum<A>(xk[i], [](A v) { return v; });
    norm_group_sum<TPR, ROWS, R>(s, sm);
    A mean[R], q[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      mean[i] = s[i] / A(D);
      q[i] = ln_sqdev<TPR>(xk[i], mean[i], D);
    }
    NormPack<T, VEC> wk[NP], bk[NP];
    ln_params<T, VEC, TPR, NP, PW>(w, b, m, wk, bk);
    norm_group_sum<TPR, ROWS, R>(q, sm);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (r[i] < m.rows) ln_fwd_row<PW, TPR>(out, xhat, stdv, w, b, m, r[i], D, lane, mean[i], sqrt(q[i] / A(D) + A(eps)), xk[i], wk, bk);
    }
  });
}

// Long rows: one block of 1024 threads per row, three passes over the row in global memory.
template <class T>
__global__ void __launch_bounds__(1024)
layer_norm_fwd_big(T* out, T* xhat, T* stdv, const T* x, const T* __restrict__ w, const T* __restrict__ b,
                   const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  __shared__ A sm[32];
  const long long D = m.D;
  for (long long r = blockIdx.x; r < m.rows; r += gridDim.x) {
    const T* xr = x + norm_row_off<3>(m, r);
    A s[1] = {A(0)};
    for (long long e = threadIdx.x; e < D; e += 1024) s[0] += (A)iop_load(xr[e * m.dstride[3]]);
    norm_group_sum<1024, 1, 1>(s, sm);
    const A mean = s[0] / A(D);
    A q[1] = {A(0)};
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A d = (A)iop_load(xr[e * m.dstride[3]]) - mean;
      q[0] += d * d;
    }
    norm_group_sum<1024, 1, 1>(q, sm);
    const A sd = sqrt(q[0] / A(D) + A(eps));
    const A rs = A(1) / sd;
    T* orow = out + norm_row_off<0>(m, r);
    T* hrow = xhat + norm_row_off<1>(m, r);
    if (threadIdx.x == 0) stdv[norm_row_off<2>(m, r)] = Conv<T>::from(sd);
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A h = ((A)iop_load(xr[e * m.dstride[3]]) - mean) * rs;
      const A bv = b != nullptr ? (A)iop_load(b[e * m.dstride[5]]) : A(0);
      hrow[e * m.dstride[1]] = Conv<T>::from(h);
      orow[e * m.dstride[0]] = Conv<T>::from(h * (A)iop_load(w[e * m.dstride[4]]) + bv);
    }
  }
}

// Persistent pipelined variant (vector path only), as rms_norm_fwd_cp: x rows S - 1 steps
// ahead are in flight through cp.async into shared memory; weight and bias packs are loaded
// once per block (TPR < 512; longer groups load them where used). Dynamic shared memory:
// S * NP * B * 16 bytes.
template <class T, int VEC, int TPR, int S>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256, TPR >= 1024 ? 1 : 2)
layer_norm_fwd_cp(T* out, T* xhat, T* stdv, const T* x, const T* __restrict__ w, const T* __restrict__ b,
                  const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  constexpr int NP = NORM_NP;
  constexpr bool PW = TPR < 512;
  __shared__ A sm[ROWS * (TPR / 32)];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  NormPack<T, VEC> wk[NP], bk[NP];
  norm_fwd_ring<3, TPR, ROWS, S, VEC>(
      x, m, [&] { ln_params<T, VEC, TPR, NP, PW>(w, b, m, wk, bk); },
      [&](const auto& xk, long long r) {
        A s[1] = {norm_row_sum<A>(xk, [](A v) { return v; })};
        norm_group_sum<TPR, ROWS, 1>(s, sm);
        const A mean = s[0] / A(D);
        A q[1] = {ln_sqdev<TPR>(xk, mean, D)};
        norm_group_sum<TPR, ROWS, 1>(q, sm);
        if (r < m.rows) ln_fwd_row<PW, TPR>(out, xhat, stdv, w, b, m, r, D, lane, mean, sqrt(q[0] / A(D) + A(eps)), xk, wk, bk);
      });
}
