// layer_norm_backward. Tensor slots: 0 grad_input, 1 grad_weight, 2 grad_bias, 3 grad_output,
// 4 weight, 5 input_standardization, 6 input_std_deviation.
// Per row: g = dy * w; grad_input = (g - mean(g) - xh * mean(g * xh)) / std.
// grad_weight = sum_rows dy * xh, grad_bias = sum_rows dy: per-block partial rows in the
// workspace (pw, pb), summed in fixed order by norm_col_sum2 afterwards.

// One row of layer_norm_backward from its packs in registers: grad_input = (dy * w - mean(dy w)
// - xh * mean(dy w xh)) / std stored, dy * xh and dy added into the weight / bias accumulators.
template <class T, int VEC, int TPR, int NP, class A>
__device__ __forceinline__ void ln_bwd_row(T* gr, long long gstride, long long D, int lane, A mg, A mgh, A rs,
                                           const NormPack<T, VEC> (&dk)[NP], const NormPack<T, VEC> (&hk)[NP],
                                           const NormPack<T, VEC> (&wk)[NP], A (&accw)[NP][VEC], A (&accb)[NP][VEC]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const long long e = ((long long)p * TPR + lane) * VEC;
    if (e < D) {
      A o[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A dv = norm_cv<A>(dk[p], j), hv = norm_cv<A>(hk[p], j);
        o[j] = (dv * norm_cv<A>(wk[p], j) - mg - hv * mgh) * rs;
        accw[p][j] += dv * hv;
        accb[p][j] += dv;
      }
      norm_store_pk<T, VEC, A>(gr, e, gstride, o);
    }
  }
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

// Persistent blocks as in rms_norm_backward: the next row's loads (dy, xh, std) are issued
// before the current row's reductions; raw packs are converted where used.
template <class T, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
layer_norm_bwd(T* gi, typename Compute<T>::type* pw, typename Compute<T>::type* pb, const T* dy,
               const T* __restrict__ w, const T* xh, const T* stdv, const NormRows m, int has_bias) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr bool PF = TPR < 1024;  // prefetch the next row (1024-thread groups: registers too tight)
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[ROWS > 1 ? ROWS * TPR * NP * VEC : 1];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  NormPack<T, VEC> wk[NP];
  norm_load_param_row<T, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A accw[NP][VEC], accb[NP][VEC];
  norm_zero(accw);
  norm_zero(accb);
  NormPack<T, VEC> dk[NP], hk[NP];
  T sdk = T{};
  {
    const long long r = (long long)blockIdx.x * ROWS + threadIdx.x / TPR;
    const bool live = blockIdx.x < ngroups && r < m.rows;
    norm_load_row<T, VEC, TPR, NP>(dy + (live ? norm_row_off<3>(m, r) : 0), m.dstride[3], D, live, dk);
    norm_load_row<T, VEC, TPR, NP>(xh + (live ? norm_row_off<5>(m, r) : 0), m.dstride[5], D, live, hk);
    if (live) sdk = stdv[norm_row_off<6>(m, r)];
  }
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const long long r = g * ROWS + threadIdx.x / TPR;
    const bool live = r < m.rows;
    A s[2] = {A(0), A(0)};
    ln_bwd_sums(s, dk, hk, wk);
    NormPack<T, VEC> dn[NP], hn[NP];
    T sdn = T{};
    if constexpr (PF) {
      const long long rn = (g + gridDim.x) * ROWS + threadIdx.x / TPR;
      const bool ln = g + gridDim.x < ngroups && rn < m.rows;
      norm_load_row<T, VEC, TPR, NP>(dy + (ln ? norm_row_off<3>(m, rn) : 0), m.dstride[3], D, ln, dn);
      norm_load_row<T, VEC, TPR, NP>(xh + (ln ? norm_row_off<5>(m, rn) : 0), m.dstride[5], D, ln, hn);
      if (ln) sdn = stdv[norm_row_off<6>(m, rn)];
    }
    norm_group_sum<TPR, ROWS, 2>(s, sm);
    if (live) {
      const A mg = s[0] / A(D), mgh = s[1] / A(D);
      const A rs = A(1) / (A)iop_load(sdk);
      ln_bwd_row<T, VEC, TPR>(gi + norm_row_off<0>(m, r), m.dstride[0], D, lane, mg, mgh, rs, dk, hk, wk, accw, accb);
    }
    if constexpr (PF) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        dk[p] = dn[p];
        hk[p] = hn[p];
      }
      sdk = sdn;
    } else {
      const long long rn = (g + gridDim.x) * ROWS + threadIdx.x / TPR;
      const bool ln = g + gridDim.x < ngroups && rn < m.rows;
      norm_load_row<T, VEC, TPR, NP>(dy + (ln ? norm_row_off<3>(m, rn) : 0), m.dstride[3], D, ln, dk);
      norm_load_row<T, VEC, TPR, NP>(xh + (ln ? norm_row_off<5>(m, rn) : 0), m.dstride[5], D, ln, hk);
      if (ln) sdk = stdv[norm_row_off<6>(m, rn)];
    }
  }
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

// Pipelined variant (vector path only): dy and xh rows S - 1 steps ahead are copied to shared
// memory with cp.async (norm.cuh). Dynamic shared memory: S * 2 * NP * B * 16 bytes.
// OPT (bit mask):
//   4: 16-byte stores of the weight-gradient partial rows (norm_store_partial with V16).
//   8: 256-thread row groups run two per block (B = 512), halving the partial rows; their
//      combine reuses the ring's shared memory.
// The std of the rows in flight rides in a register ring of the same depth as the row ring.
template <class T, int VEC, int TPR, int S, int OPT = 0>
__global__ void __launch_bounds__(norm_bwd_block(TPR, OPT))
layer_norm_bwd_cp(T* gi, typename Compute<T>::type* pw, typename Compute<T>::type* pb, const T* dy,
                  const T* __restrict__ w, const T* xh, const T* stdv, const NormRows m, int has_bias) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr int B = norm_bwd_block(TPR, OPT);
  constexpr int ROWS = B / TPR;
  constexpr bool PV = (OPT & 4) != 0, RING_SMP = (OPT & 8) != 0 || ROWS == 1;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[RING_SMP ? 1 : ROWS * TPR * NP * VEC];
  A* const smpp = RING_SMP ? reinterpret_cast<A*>(norm_dsm) : smp;
  const int lane = threadIdx.x % TPR;
  const int slot = threadIdx.x / TPR;
  const long long D = m.D;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  NormRing<T, VEC, TPR, NP, 2, S, B> ring;
  T sdq[S];  // std of the rows in flight (sdq[0]: the current row)
  auto issue = [&](long long g, int s) -> T {
    const long long r = g * ROWS + slot;
    const bool live = g < ngroups && r < m.rows;
    const unsigned d = ring.stage(s);
    ring.copy(d, dy + (live ? norm_row_off<3>(m, r) : 0), D, live);
    ring.copy(d + ring.TS, xh + (live ? norm_row_off<5>(m, r) : 0), D, live);
    return live ? stdv[norm_row_off<6>(m, r)] : T{};
  };
  ring.fill([&](long long g, int s) { sdq[s] = issue(g, s); });
  NormPack<T, VEC> wk[NP];
  norm_load_param_row<T, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A accw[NP][VEC], accb[NP][VEC];
  norm_zero(accw);
  norm_zero(accb);
  int rd = 0, wr = S - 1;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    ring.next([&](long long gn, int s) { sdq[S - 1] = issue(gn, s); }, g, wr);
    NormPack<T, VEC> dk[NP], hk[NP];
    ring.read(rd, 0, dk);
    ring.read(rd, 1, hk);
    rd = norm_stage_after<S>(rd);
    wr = norm_stage_after<S>(wr);
    const T sdk = sdq[0];
#pragma unroll
    for (int s = 0; s < S - 1; ++s) sdq[s] = sdq[s + 1];
    const long long r = g * ROWS + slot;
    const bool live = r < m.rows;
    A s[2] = {A(0), A(0)};
    ln_bwd_sums(s, dk, hk, wk);
    norm_group_sum<TPR, ROWS, 2>(s, sm);
    if (live) {
      const A mg = s[0] / A(D), mgh = s[1] / A(D);
      const A rs = A(1) / (A)iop_load(sdk);
      ln_bwd_row<T, VEC, TPR>(gi + norm_row_off<0>(m, r), m.dstride[0], D, lane, mg, mgh, rs, dk, hk, wk, accw, accb);
    }
  }
  norm_cp_wait<0>();
  if constexpr (RING_SMP && ROWS > 1) __syncthreads();  // every thread's ring reads are done
  norm_store_partial<TPR, ROWS, VEC, NP, PV>(accw, pw, D, smpp);
  if (has_bias) norm_store_partial<TPR, ROWS, VEC, NP, PV>(accb, pb, D, smpp);
}
