// rms_norm: y = x * w / sqrt(mean(x^2, last) + eps). Tensor slots: 0 y, 1 x, 2 w.

// Row r's output y = x * rinv * w from its packs.
template <int TPR, class T, int VEC, int NP, class TW, class A>
__device__ __forceinline__ void rms_fwd_row(T* y, const NormRows& m, long long r, A rinv, const NormPack<T, VEC> (&xk)[NP],
                                            const NormPack<TW, VEC> (&wk)[NP]) {
  T* yr = y + norm_row_off<0>(m, r);
  norm_packs<TPR, VEC, NP>(m.D, [&](int p, long long e) {
    A o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = norm_cv<A>(xk[p], j) * rinv * norm_cv<A>(wk[p], j);
    norm_store_pk<T, VEC, A>(yr, e, m.dstride[0], o);
  });
}

// A row group of TPR threads keeps its row in registers (see norm.cuh). A block of ROWS groups
// handles R * ROWS consecutive rows per step: each thread loads R rows (NORM_NP packs each) and
// its weight packs before using any of them, so R * NORM_NP (+ NORM_NP) requests are in flight
// per thread; the R row sums are reduced together.
template <class T, class TW, int VEC, int TPR, int R>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
rms_norm_fwd(T* y, const T* x, const TW* __restrict__ w, const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * R];
  const long long D = m.D;
  norm_fwd_groups<1, TPR, ROWS, R, NORM_NP, VEC>(x, m, [&](const auto& xk, const long long (&r)[R]) {
    NormPack<TW, VEC> wk[NORM_NP];
    norm_load_param_row<TW, VEC, TPR, NORM_NP>(w, m.dstride[2], D, wk);
    A ss[R];
#pragma unroll
    for (int i = 0; i < R; ++i) ss[i] = norm_row_sum<A>(xk[i], [](A v) { return v * v; });
    norm_group_sum<TPR, ROWS, R>(ss, sm);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (r[i] < m.rows) rms_fwd_row<TPR>(y, m, r[i], A(1) / sqrt(ss[i] / A(D) + A(eps)), xk[i], wk);
    }
  });
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

// Persistent pipelined variant (vector path only): one wave of blocks; each row group walks
// rows g, g + grid, ... and the x rows S - 1 steps ahead are copied to shared memory with
// cp.async (norm_fwd_ring), so they are in flight during the reduction and the stores without
// holding registers. The weight packs are loaded once per block. Dynamic shared memory:
// S * NP * B * 16 bytes.
template <class T, class TW, int VEC, int TPR, int S>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
rms_norm_fwd_cp(T* y, const T* x, const TW* __restrict__ w, const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32)];
  NormPack<TW, VEC> wk[NORM_NP];
  norm_fwd_ring<1, TPR, ROWS, S, VEC>(
      x, m, [&] { norm_load_param_row<TW, VEC, TPR, NORM_NP>(w, m.dstride[2], m.D, wk); },
      [&](const auto& xk, long long r) {
        A ss[1] = {norm_row_sum<A>(xk, [](A v) { return v * v; })};
        norm_group_sum<TPR, ROWS, 1>(ss, sm);
        if (r < m.rows) rms_fwd_row<TPR>(y, m, r, A(1) / sqrt(ss[0] / A(m.D) + A(eps)), xk, wk);
      });
}
