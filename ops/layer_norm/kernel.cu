// layer_norm. Tensor slots: 0 output, 1 input_standardization, 2 input_std_deviation, 3 input,
// 4 weight, 5 bias (null when absent). Per row: mean, biased variance (two passes over the
// registers), std = sqrt(var + eps), xh = (x - mean) / std, output = xh * weight + bias.

template <class T, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
layer_norm_fwd(T* out, T* xhat, T* stdv, const T* x, const T* __restrict__ w, const T* __restrict__ b,
               const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32)];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const long long r = g * ROWS + threadIdx.x / TPR;
    const bool live = r < m.rows;
    const T* xr = x + (live ? norm_row_off<3>(m, r) : 0);
    A v[NORM_NP][VEC];
    A s[1] = {A(0)};
#pragma unroll
    for (int p = 0; p < NORM_NP; ++p) {
      const long long e = ((long long)p * TPR + lane) * VEC;
      if (live && e < D) {
        norm_load<T, VEC, A>(xr, e, m.dstride[3], v[p]);
#pragma unroll
        for (int j = 0; j < VEC; ++j) s[0] += v[p][j];
      }
    }
    norm_group_sum<TPR, ROWS, 1>(s, sm);
    const A mean = s[0] / A(D);
    A q[1] = {A(0)};
#pragma unroll
    for (int p = 0; p < NORM_NP; ++p) {
      const long long e = ((long long)p * TPR + lane) * VEC;
      if (live && e < D) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          v[p][j] -= mean;
          q[0] += v[p][j] * v[p][j];
        }
      }
    }
    norm_group_sum<TPR, ROWS, 1>(q, sm);
    if (live) {
      const A sd = sqrt(q[0] / A(D) + A(eps));
      const A rs = A(1) / sd;
      T* orow = out + norm_row_off<0>(m, r);
      T* hrow = xhat + norm_row_off<1>(m, r);
      if (lane == 0) stdv[norm_row_off<2>(m, r)] = Conv<T>::from(sd);
#pragma unroll
      for (int p = 0; p < NORM_NP; ++p) {
        const long long e = ((long long)p * TPR + lane) * VEC;
        if (e < D) {
          A wv[VEC], bv[VEC], h[VEC], o[VEC];
          norm_load_param<T, VEC, A>(w, e, m.dstride[4], wv);
          if (b != nullptr) {
            norm_load_param<T, VEC, A>(b, e, m.dstride[5], bv);
          } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) bv[j] = A(0);
          }
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            h[j] = v[p][j] * rs;
            o[j] = h[j] * wv[j] + bv[j];
          }
          norm_store<T, VEC, A>(hrow, e, m.dstride[1], h);
          norm_store<T, VEC, A>(orow, e, m.dstride[0], o);
        }
      }
    }
  }
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
