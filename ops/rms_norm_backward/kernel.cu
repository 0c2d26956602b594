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

// One row of rms_norm_backward from its packs in registers: grad_x = (w * dy - xh * c) * rinv
// stored, and dy * xh added into the thread's weight-gradient accumulators.
template <class T, int VEC, int TPR, int NP, class TW, class A>
__device__ __forceinline__ void rms_bwd_row(T* gr, long long gstride, long long D, int lane, A rinv, A c,
                                            const NormPack<T, VEC> (&xk)[NP], const NormPack<T, VEC> (&dk)[NP],
                                            const NormPack<TW, VEC> (&wk)[NP], A (&acc)[NP][VEC]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const long long e = ((long long)p * TPR + lane) * VEC;
    if (e < D) {
      A o[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A dv = norm_cv<A>(dk[p], j);
        const A xh = norm_cv<A>(xk[p], j) * rinv;
        o[j] = (norm_cv<A>(wk[p], j) * dv - xh * c) * rinv;
        acc[p][j] += dv * xh;
      }
      norm_store_pk<T, VEC, A>(gr, e, gstride, o);
    }
  }
}

// Persistent blocks; a row group of TPR threads keeps its row in registers and accumulates
// its columns' dy * xh over the rows it visits. The loads of the group's next row are issued
// before the reductions of the current one (software pipelining), and all loads of a row are
// issued together (raw packs, converted where used).
template <class T, class TW, int VEC, int TPR>
__global__ void __launch_bounds__(TPR >= 256 ? TPR : 256)
rms_norm_bwd(T* gx, typename Compute<T>::type* part, const T* gy, const T* x, const TW* __restrict__ w,
             const NormRows m, double eps) {
  typedef typename Compute<T>::type A;
  constexpr int NP = NORM_NP_BWD;
  constexpr bool PF = TPR < 1024;  // prefetch the next row (1024-thread groups: registers too tight)
  constexpr int ROWS = TPR >= 256 ? 1 : 256 / TPR;
  __shared__ A sm[ROWS * (TPR / 32) * 2];
  __shared__ A smp[ROWS > 1 ? ROWS * TPR * NP * VEC : 1];
  const int lane = threadIdx.x % TPR;
  const long long D = m.D;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  NormPack<TW, VEC> wk[NP];
  norm_load_param_row<TW, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A acc[NP][VEC];
  norm_zero(acc);
  NormPack<T, VEC> xk[NP], dk[NP];
  {
    const long long r = (long long)blockIdx.x * ROWS + threadIdx.x / TPR;
    const bool live = blockIdx.x < ngroups && r < m.rows;
    norm_load_row<T, VEC, TPR, NP>(x + (live ? norm_row_off<3>(m, r) : 0), m.dstride[3], D, live, xk);
    norm_load_row<T, VEC, TPR, NP>(gy + (live ? norm_row_off<2>(m, r) : 0), m.dstride[2], D, live, dk);
  }
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const long long r = g * ROWS + threadIdx.x / TPR;
    const bool live = r < m.rows;
    A s[2] = {A(0), A(0)};
    rms_bwd_sums(s, xk, dk, wk);
    // next row of this group, in flight during the reductions and the stores
    NormPack<T, VEC> xn[NP], dn[NP];
    if constexpr (PF) {
      const long long rn = (g + gridDim.x) * ROWS + threadIdx.x / TPR;
      const bool ln = g + gridDim.x < ngroups && rn < m.rows;
      norm_load_row<T, VEC, TPR, NP>(x + (ln ? norm_row_off<3>(m, rn) : 0), m.dstride[3], D, ln, xn);
      norm_load_row<T, VEC, TPR, NP>(gy + (ln ? norm_row_off<2>(m, rn) : 0), m.dstride[2], D, ln, dn);
    }
    norm_group_sum<TPR, ROWS, 2>(s, sm);
    if (live) {
      const A rinv = A(1) / sqrt(s[0] / A(D) + A(eps));
      const A c = s[1] / A(D) * rinv;  // mean(u * xh)
      rms_bwd_row<T, VEC, TPR>(gx + norm_row_off<0>(m, r), m.dstride[0], D, lane, rinv, c, xk, dk, wk, acc);
    }
    if constexpr (PF) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        xk[p] = xn[p];
        dk[p] = dn[p];
      }
    } else {
      const long long rn = (g + gridDim.x) * ROWS + threadIdx.x / TPR;
      const bool ln = g + gridDim.x < ngroups && rn < m.rows;
      norm_load_row<T, VEC, TPR, NP>(x + (ln ? norm_row_off<3>(m, rn) : 0), m.dstride[3], D, ln, xk);
      norm_load_row<T, VEC, TPR, NP>(gy + (ln ? norm_row_off<2>(m, rn) : 0), m.dstride[2], D, ln, dk);
    }
  }
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

// Pipelined variant (vector path only): the rows of x and dy a group will need S - 1 steps
// ahead are copied to shared memory with cp.async (norm.cuh), so 2 * (S - 1) rows per group
// are in flight without holding registers. Dynamic shared memory: S * 2 * NP * B * 16 bytes.
// OPT (bit mask, as layer_norm_bwd_cp): 4: 16-byte partial-row stores; 8: two 256-thread row
// groups per block (half the partial rows), combined through the ring's shared memory.
template <class T, class TW, int VEC, int TPR, int S, int OPT = 0>
__global__ void __launch_bounds__(norm_bwd_block(TPR, OPT))
rms_norm_bwd_cp(T* gx, typename Compute<T>::type* part, const T* gy, const T* x, const TW* __restrict__ w,
                const NormRows m, double eps) {
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
  auto issue = [&](long long g, int s) {
    const long long r = g * ROWS + slot;
    const bool live = g < ngroups && r < m.rows;
    const unsigned d = ring.stage(s);
    ring.copy(d, x + (live ? norm_row_off<3>(m, r) : 0), D, live);
    ring.copy(d + ring.TS, gy + (live ? norm_row_off<2>(m, r) : 0), D, live);
  };
  ring.fill(issue);
  NormPack<TW, VEC> wk[NP];
  norm_load_param_row<TW, VEC, TPR, NP>(w, m.dstride[4], D, wk);
  A acc[NP][VEC];
  norm_zero(acc);
  int rd = 0, wr = S - 1;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    ring.next(issue, g, wr);
    NormPack<T, VEC> xk[NP], dk[NP];
    ring.read(rd, 0, xk);
    ring.read(rd, 1, dk);
    rd = norm_stage_after<S>(rd);
    wr = norm_stage_after<S>(wr);
    const long long r = g * ROWS + slot;
    const bool live = r < m.rows;
    A s[2] = {A(0), A(0)};
    rms_bwd_sums(s, xk, dk, wk);
    norm_group_sum<TPR, ROWS, 2>(s, sm);
    if (live) {
      const A rinv = A(1) / sqrt(s[0] / A(D) + A(eps));
      const A c = s[1] / A(D) * rinv;  // mean(u * xh)
      rms_bwd_row<T, VEC, TPR>(gx + norm_row_off<0>(m, r), m.dstride[0], D, lane, rinv, c, xk, dk, wk, acc);
    }
  }
  norm_cp_wait<0>();
  if constexpr (RING_SMP && ROWS > 1) __syncthreads();  // every thread's ring reads are done
  norm_store_partial<TPR, ROWS, VEC, NP, PV>(acc, part, D, smpp);
}
