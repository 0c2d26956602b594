// rms_norm: y = x * w / sqrt(mean(x^2, last) + eps). Tensor slots: 0 y, 1 x, 2 w.

// A row group of TPR threads keeps its row in registers (see norm.cuh).
template <class T, class TW, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
rms_norm_fwd(T* y, const T* x, const TW* __restrict__ w, const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32)];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const long long r = g * ROWS + threadIdx.x / TPR;
    const bool live = r < m.rows;
    const T* xr = x + (live ? norm_row_off<1>(m, r) : 0);
    A v[NORM_NP][VEC];
    A ss[1] = {A(0)};
#pragma unroll
    for (int p = 0; p < NORM_NP; ++p) {
      const long long e = ((long long)p * TPR + lane) * VEC;
      if (live && e < D) {
        norm_load<T, VEC, A>(xr, e, m.dstride[1], v[p]);
#pragma unroll
        for (int j = 0; j < VEC; ++j) ss[0] += v[p][j] * v[p][j];
      }
    }
    norm_group_sum<TPR, ROWS, 1>(ss, sm);
    if (live) {
      const A rinv = A(1) / sqrt(ss[0] / A(D) + A(eps));
      T* yr = y + norm_row_off<0>(m, r);
#pragma unroll
      for (int p = 0; p < NORM_NP; ++p) {
        const long long e = ((long long)p * TPR + lane) * VEC;
        if (e < D) {
          A wv[VEC], o[VEC];
          norm_load_param<TW, VEC, A>(w, e, m.dstride[2], wv);
#pragma unroll
          for (int j = 0; j < VEC; ++j) o[j] = v[p][j] * rinv * wv[j];
          norm_store<T, VEC, A>(yr, e, m.dstride[0], o);
        }
      }
    }
  }
}

// Rows longer than the register capacity: one block of 1024 threads per row, two passes over
// global memory (the second mostly from L2).
template <class T, class TW>
__global__ void __launch_bounds__(1024)
rms_norm_fwd_big(T* y, const T* x, const TW* __restrict__ w, const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  __shared__ A sm[32];
  const long long D = m.D;
  for (long long r = blockIdx.x; r < m.rows; r += gridDim.x) {
    const T* xr = x + norm_row_off<1>(m, r);
    T* yr = y + norm_row_off<0>(m, r);
    A ss[1] = {A(0)};
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A v = (A)iop_load(xr[e * m.dstride[1]]);
      ss[0] += v * v;
    }
    norm_group_sum<1024, 1, 1>(ss, sm);
    const A rinv = A(1) / sqrt(ss[0] / A(D) + A(eps));
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A v = (A)iop_load(xr[e * m.dstride[1]]);
      yr[e * m.dstride[0]] = Conv<T>::from(v * rinv * (A)iop_load(w[e * m.dstride[2]]));
    }
  }
}
