// rms_norm_backward. Tensor slots: 0 grad_x, 1 grad_w, 2 grad_y, 3 x, 4 w.
// Per row: r = sqrt(mean(x^2) + eps), xh = x / r, u = w * dy,
// grad_x = (u - xh * mean(u * xh)) / r; grad_w = sum over rows of dy * xh, reduced in two
// deterministic stages (per-block partial rows here, norm_col_sum2 after).

// s[0] = sum of x^2, s[1] = sum of w * dy * x over a row's packs.
template <class A, class T, class TW, int VEC, int NP>
__device__ __forceinline__ void rms_bwd_sums(A (&s)[2], const NormPack<T, VEC> (&xk)[NP], const NormPack<T, VEC> (&dk)[NP],
                                             const NormPack<TW, VEC> (&wk)[NP]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A xv = norm_cv<A>(xk[p], j);
      s[0] += xv * xv;
      s[1] += norm_cv<A>(wk[p], j) * norm_cv<A>(dk[p], j) * xv;
    }
  }
}

// One row of rms_norm_backward from its packs (k.a: x, k.b: dy) in registers, with s the row's
// sums: grad_x = (w * dy - xh * c) * rinv stored, dy * xh added into the thread's weight-gradient
// accumulators.
template <int TPR, class T, int VEC, int NP, class TW, class A>
__device__ __forceinline__ void rms_bwd_out(T* gx, const NormRows& m, long long r, double eps, const A (&s)[2],
                                            const NormRow2<T, VEC, NP>& k, const NormPack<TW, VEC> (&wk)[NP],
                                            A (&acc)[NP][VEC]) {
  const A rinv = A(1) / sqrt(s[0] / A(m.D) + A(eps));
  const A c = s[1] / A(m.D) * rinv;  // mean(u * xh)
  T* gr = gx + norm_row_off<0>(m, r);
  norm_packs<TPR, VEC, NP>(m.D, [&](int p, long long e) {
    A o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A dv = norm_cv<A>(k.b[p], j);
      const A xh = norm_cv<A>(k.a[p], j) * rinv;
      o[j] = (norm_cv<A>(wk[p], j) * dv - xh * c) * rinv;
      acc[p][j] += dv * xh;
    }
    norm_store_pk<T, VEC, A>(gr, e, m.dstride[0], o);
  });
}

// Persistent blocks (norm_bwd_rows); a row group keeps its row in registers and accumulates its
// columns' dy * xh over the rows it visits; all loads of a row are issued together (raw packs,
// converted where used).
template <class T, class TW, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
rms_norm_bwd(T* gx, typename Compute<T>::type* part, const T* gy, const T* x, const TW* __restrict__ w,
             const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[ROWS > 1 ? ROWS * TPR * NP * VEC : 1];
  const long long D = m.D;
  NormPack<TW, VEC> wk[NP];
  norm_load_param_row<TW, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A acc[NP][VEC];
  norm_zero(acc);
  norm_bwd_rows<TPR, ROWS, (TPR < 1024), NormRow2<T, VEC, NP>>(
      m, sm,
      [&](auto& k, long long r, bool live) {
        norm_load_row<T, VEC, TPR, NP>(x + (live ? norm_row_off<3>(m, r) : 0), m.dstride[3], D, live, k.a);
        norm_load_row<T, VEC, TPR, NP>(gy + (live ? norm_row_off<2>(m, r) : 0), m.dstride[2], D, live, k.b);
      },
      [&](A (&s)[2], const auto& k) { rms_bwd_sums(s, k.a, k.b, wk); },
      [&](const auto& k, long long r, const A (&s)[2]) { rms_bwd_out<TPR>(gx, m, r, eps, s, k, wk, acc); });
  norm_store_partial<TPR, ROWS, VEC, NP>(acc, part, D, smp);
}

// Long rows: a block of 1024 threads per row; the block's partial row lives in the workspace
// (each thread owns the same columns every row, so the read-modify-write needs no sync).
template <class T, class TW>
__global__ void __launch_bounds__(1024)
rms_norm_bwd_big(T* gx, typename Compute<T>::type* part, const T* gy, const T* x, const TW* __restrict__ w,
                 const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  __shared__ A sm[64];
  const long long D = m.D;
  A* pr = part + (long long)blockIdx.x * D;
  for (long long e = threadIdx.x; e < D; e += 1024) pr[e] = A(0);
  for (long long r = blockIdx.x; r < m.rows; r += gridDim.x) {
    const T* xr = x + norm_row_off<3>(m, r);
    const T* dr = gy + norm_row_off<2>(m, r);
    T* gr = gx + norm_row_off<0>(m, r);
    A s[2] = {A(0), A(0)};
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A xv = (A)iop_load(xr[e * m.dstride[3]]);
      const A dv = (A)iop_load(dr[e * m.dstride[2]]);
      s[0] += xv * xv;
      s[1] += (A)iop_load(w[e * m.dstride[4]]) * dv * xv;
    }
    norm_group_sum<1024, 1, 2>(s, sm);
    const A rinv = A(1) / sqrt(s[0] / A(D) + A(eps));
    const A c = s[1] / A(D) * rinv;
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A xv = (A)iop_load(xr[e * m.dstride[3]]);
      const A dv = (A)iop_load(dr[e * m.dstride[2]]);
      const A xh = xv * rinv;
      gr[e * m.dstride[0]] = Conv<T>::from(((A)iop_load(w[e * m.dstride[4]]) * dv - xh * c) * rinv);
      pr[e] += dv * xh;
    }
  }
}

// Pipelined variant (vector path only, norm_bwd_ring): x and dy rows S - 1 steps ahead are in
// flight through cp.async. Dynamic shared memory: S * 2 * NP * B * 16 bytes. OPT (bit mask, as
// layer_norm_bwd_cp): 4: 16-byte partial-row stores; 8: two 256-thread row groups per block (half
// the partial rows), combined through the ring's shared memory.
template <class T, class TW, int VEC, int TPR, int S, int OPT = 0>
__global__ void __launch_bounds__(norm_bwd_block(TPR, OPT))
rms_norm_bwd_cp(T* gx, typename Compute<T>::type* part, const T* gy, const T* x, const TW* __restrict__ w,
                const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr int ROWS = norm_bwd_block(TPR, OPT) / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[norm_ring_smp(TPR, ROWS, OPT, NP * VEC)];
  const long long D = m.D;
  NormPack<TW, VEC> wk[NP];
  A acc[NP][VEC];
  norm_bwd_ring<3, 2, -1, TPR, ROWS, S, VEC>(
      x, gy, x, m, sm,
      [&] {
        norm_load_param_row<TW, VEC, TPR, NP>(w, m.dstride[4], D, wk);
        norm_zero(acc);
      },
      [&](A (&s)[2], const auto& k) { rms_bwd_sums(s, k.a, k.b, wk); },
      [&](const auto& k, long long r, const A (&s)[2]) { rms_bwd_out<TPR>(gx, m, r, eps, s, k, wk, acc); });
  A* const psm = norm_ring_partials<ROWS, OPT>(smp);
  norm_store_partial<TPR, ROWS, VEC, NP, (OPT & 4) != 0>(acc, part, D, psm);
}
