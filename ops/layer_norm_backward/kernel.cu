// layer_norm_backward. Tensor slots: 0 grad_input, 1 grad_weight, 2 grad_bias, 3 grad_output,
// 4 weight, 5 input_standardization, 6 input_std_deviation.
// Per row: g = dy * w; grad_input = (g - mean(g) - xh * mean(g * xh)) / std.
// grad_weight = sum_rows dy * xh, grad_bias = sum_rows dy: per-block partial rows in the
// workspace (pw, pb), summed in fixed order by norm_col_sum2 afterwards.

// One row of layer_norm_backward from its packs (k.a: dy, k.b: xh, k.sd: std) in registers, with
// s the row's sums: grad_input = (dy * w - mean(dy w) - xh * mean(dy w xh)) / std stored, dy * xh
// and dy added into the weight / bias accumulators.
template <int TPR, class T, int VEC, int NP, class A>
__device__ __forceinline__ void ln_bwd_out(T* gi, const NormRows& m, long long r, const A (&s)[2], const NormRow2<T, VEC, NP>& k,
                                           const NormPack<T, VEC> (&wk)[NP], A (&accw)[NP][VEC], A (&accb)[NP][VEC]) {
  const A mg = s[0] / A(m.D), mgh = s[1] / A(m.D);
  const A rs = A(1) / (A)iop_load(k.sd);
  T* gr = gi + norm_row_off<0>(m, r);
  norm_packs<TPR, VEC, NP>(m.D, [&](int p, long long e) {
    A o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A dv = norm_cv<A>(k.a[p], j), hv = norm_cv<A>(k.b[p], j);
      o[j] = (dv * norm_cv<A>(wk[p], j) - mg - hv * mgh) * rs;
      accw[p][j] += dv * hv;
      accb[p][j] += dv;
    }
    norm_store_pk<T, VEC, A>(gr, e, m.dstride[0], o);
  });
}

// s[0] = sum of g = dy * w, s[1] = sum of g * xh over a row's packs.
template <class A, class T, int VEC, int NP>
__device__ __forceinline__ void ln_bwd_sums(A (&s)[2], const NormPack<T, VEC> (&dk)[NP], const NormPack<T, VEC> (&hk)[NP],
                                            const NormPack<T, VEC> (&wk)[NP]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A gg = norm_cv<A>(dk[p], j) * norm_cv<A>(wk[p], j);
      s[0] += gg;
      s[1] += gg * norm_cv<A>(hk[p], j);
    }
  }
}

// Persistent blocks as in rms_norm_backward (norm_bwd_rows): the row's dy, xh and std in registers.
template <class T, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
layer_norm_bwd(T* gi, typename Compute<T>::type* pw, typename Compute<T>::type* pb, const T* dy,
               const T* __restrict__ w, const T* xh, const T* stdv, const NormRows m, int has_bias) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[ROWS > 1 ? ROWS * TPR * NP * VEC : 1];
  const long long D = m.D;
  NormPack<T, VEC> wk[NP];
  norm_load_param_row<T, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A accw[NP][VEC], accb[NP][VEC];
  norm_zero(accw);
  norm_zero(accb);
  norm_bwd_rows<TPR, ROWS, (TPR < 1024), NormRow2<T, VEC, NP>>(
      m, sm,
      [&](auto& k, long long r, bool live) {
        norm_load_row<T, VEC, TPR, NP>(dy + (live ? norm_row_off<3>(m, r) : 0), m.dstride[3], D, live, k.a);
        norm_load_row<T, VEC, TPR, NP>(xh + (live ? norm_row_off<5>(m, r) : 0), m.dstride[5], D, live, k.b);
        if (live) k.sd = stdv[norm_row_off<6>(m, r)];
      },
      [&](A (&s)[2], const auto& k) { ln_bwd_sums(s, k.a, k.b, wk); },
      [&](const auto& k, long long r, const A (&s)[2]) { ln_bwd_out<TPR>(gi, m, r, s, k, wk, accw, accb); });
  norm_store_partial<TPR, ROWS, VEC, NP>(accw, pw, D, smp);
  if (has_bias) norm_store_partial<TPR, ROWS, VEC, NP>(accb, pb, D, smp);
}

// Long rows: a block of 1024 threads per row; the block's partial rows live in the workspace.
template <class T>
__global__ void __launch_bounds__(1024)
layer_norm_bwd_big(T* gi, typename Compute<T>::type* pw, typename Compute<T>::type* pb, const T* dy,
                   const T* __restrict__ w, const T* xh, const T* stdv, const NormRows m, int has_bias) {
  typedef typename Compute<T>::type A;
  __shared__ A sm[64];
  const long long D = m.D;
  A* pwr = pw + (long long)blockIdx.x * D;
  A* pbr = pb + (long long)blockIdx.x * D;
  for (long long e = threadIdx.x; e < D; e += 1024) {
    pwr[e] = A(0);
    if (has_bias) pbr[e] = A(0);
  }
  for (long long r = blockIdx.x; r < m.rows; r += gridDim.x) {
    const T* dr = dy + norm_row_off<3>(m, r);
    const T* hr = xh + norm_row_off<5>(m, r);
    T* gr = gi + norm_row_off<0>(m, r);
    const A sd = (A)iop_load(stdv[norm_row_off<6>(m, r)]);
    A s[2] = {A(0), A(0)};
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A gg = (A)iop_load(dr[e * m.dstride[3]]) * (A)iop_load(w[e * m.dstride[4]]);
      s[0] += gg;
      s[1] += gg * (A)iop_load(hr[e * m.dstride[5]]);
    }
    norm_group_sum<1024, 1, 2>(s, sm);
    const A mg = s[0] / A(D), mgh = s[1] / A(D);
    for (long long e = threadIdx.x; e < D; e += 1024) {
      const A d = (A)iop_load(dr[e * m.dstride[3]]);
      const A h = (A)iop_load(hr[e * m.dstride[5]]);
      gr[e * m.dstride[0]] = Conv<T>::from((d * (A)iop_load(w[e * m.dstride[4]]) - mg - h * mgh) / sd);
      pwr[e] += d * h;
      if (has_bias) pbr[e] += d;
    }
  }
}

// Pipelined variant (vector path only, norm_bwd_ring): dy and xh rows S - 1 steps ahead are in
// flight through cp.async, their std in a register ring. Dynamic shared memory:
// S * 2 * NP * B * 16 bytes. OPT (bit mask):
//   4: 16-byte stores of the weight-gradient partial rows (norm_store_partial with V16).
//   8: 256-thread row groups run two per block (B = 512), halving the partial rows; their
//      combine reuses the ring's shared memory.
template <class T, int VEC, int TPR, int S, int OPT = 0>
__global__ void __launch_bounds__(norm_bwd_block(TPR, OPT))
layer_norm_bwd_cp(T* gi, typename Compute<T>::type* pw, typename Compute<T>::type* pb, const T* dy,
                  const T* __restrict__ w, const T* xh, const T* stdv, const NormRows m, int has_bias) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr int ROWS = norm_bwd_block(TPR, OPT) / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[norm_ring_smp(TPR, ROWS, OPT, NP * VEC)];
  const long long D = m.D;
  NormPack<T, VEC> wk[NP];
  A accw[NP][VEC], accb[NP][VEC];
  norm_bwd_ring<3, 5, 6, TPR, ROWS, S, VEC>(
      dy, xh, stdv, m, sm,
      [&] {
        norm_load_param_row<T, VEC, TPR, NP>(w, m.dstride[4], D, wk);
        norm_zero(accw);
        norm_zero(accb);
      },
      [&](A (&s)[2], const auto& k) { ln_bwd_sums(s, k.a, k.b, wk); },
      [&](const auto& k, long long r, const A (&s)[2]) { ln_bwd_out<TPR>(gi, m, r, s, k, wk, accw, accb); });
  A* const psm = norm_ring_partials<ROWS, OPT>(smp);
  norm_store_partial<TPR, ROWS, VEC, NP, (OPT & 4) != 0>(accw, pw, D, psm);
  if (has_bias) norm_store_partial<TPR, ROWS, VEC, NP, (OPT & 4) != 0>(accb, pb, D, psm);
}
