// row_lse: cross entropy (CE / CE_LOSS) of contiguous rows on the 16-byte path. Nothing is
// written per element, so nothing is cached: the row is streamed once. Each thread folds
// batches of U packs into an online (max, sum): one max over the batch (16-bit packs: packed
// pairs on the raw words, as row_softmax_warp), one rescale of the running sum (one exp per
// batch), then exp(v - m) per value, converted where it is used. G = blockDim.x threads per
// row (a power of two), blockDim.y rows per block only when G is 32 (warp shuffles only).
//   The batch loop has no bounds checks while every lane of the warp has U packs left (a
// warp-uniform test); the rest of the row is one batch whose loads are clamped into the row
// and whose values past it count as -inf, so a warp never splits into two load phases.
//   The label's logit is taken from the registers of the thread whose batch holds its pack (one
// compare per batch) and handed to thread 0 through shared memory: loading it after the label
// arrives would put two memory latencies in a row ahead of the loss.
//   The threads' (max, sum) pairs are combined as a max reduction, one rescale of each sum to
// that max, and a sum reduction: merging pairs along the tree costs two exps per step.
template <class T, int U>
__device__ __forceinline__ typename Acc<T>::type lse_max(const Pack<T, 16 / sizeof(T)> (&q)[U]) {
  typedef typename Acc<T>::type A;
  if constexpr (sizeof(T) == 2) {  // packed max.NaN pairs on the raw words, converted once
    typedef Pack<unsigned int, 4> W4;
    W4 mw = reinterpret_cast<const W4&>(q[0]);
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) mw.v[i] = RawWord<T>::max2(mw.v[i], reinterpret_cast<const W4&>(q[u]).v[i]);
    const unsigned int w = RawWord<T>::max2(RawWord<T>::max2(mw.v[0], mw.v[1]), RawWord<T>::max2(mw.v[2], mw.v[3]));
    return MaxOp::combine<float>(RawWord<T>::get(w, 0), RawWord<T>::get(w, 1));
  } else {
    A bm = red_neg_inf(A(0));
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < 16 / sizeof(T); ++k) bm = MaxOp::combine<A>(bm, red_load(q[u].v[k]));
    return bm;
  }
}

template <class T, int U, bool CHECK>
__device__ __forceinline__ void lse_batch(MaxSum<typename Acc<T>::type>& st, Pack<T, 16 / sizeof(T)>& pq,
                                          Pack<T, 16 / sizeof(T)> (&q)[U], long long b, int G, long long nv, bool pick,
                                          int pu) {
  typedef typename Acc<T>::type A;
  const int VEC = 16 / sizeof(T);
  const A NINF = red_neg_inf(A(0));
  if (CHECK) {  // packs past the row count as -inf
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (b + (long long)u * G >= nv) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) q[u].v[k] = Conv<T>::from(NINF);
      }
  }
  if (pick) {  // this batch holds the label's pack (one thread, once per row)
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u == pu) pq = q[u];
  }
  const A nm = MaxOp::combine<A>(st.m, lse_max<T, U>(q));  // NaN once any value is NaN, and it stays NaN
  if (nm == NINF) return;                                  // only -inf so far: the sum stays 0
  A s = st.m == NINF ? A(0) : st.s * RowMath<T>::exp_(st.m - nm);
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int k = 0; k < VEC; ++k) s += RowMath<T>::exp_(red_load(q[u].v[k]) - nm);
  st.m = nm;
  st.s = s;
}

#define LSE_MAX_ROWS 8  // rows per block of row_lse (G = 32, 256 threads)

template <class T, int MODE, class TI, int U>
__global__ void __launch_bounds__(256) row_lse(T* y, const T* x, const TI* __restrict__ tgt,
                                               typename Acc<T>::type* __restrict__ ws, RowMeta p) {
  typedef typename Acc<T>::type A;
  const int VEC = 16 / sizeof(T);
  typedef Pack<T, VEC> PK;
  __shared__ A sm[32], ss[32], spick[LSE_MAX_ROWS];
  const int G = blockDim.x, tid = threadIdx.x, lane = tid & 31;
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= p.R) return;  // only with G = 32 (several rows per block): no block barrier below
  long long off[3];
  dim_offsets<3>(p.rows, r, off);
  const T* px = x + off[0];
  const long long N = p.N;
  const long long lab = (long long)tgt[off[2]];  // every thread: one broadcast load per warp
  const long long head = row_head<VEC>(px, N);
  const long long nv = (N - head) / VEC;  // >= 1: the host sends rows of >= 2 * VEC here
  const long long tail0 = head + nv * VEC;
  const bool ok = lab >= 0 && lab < N;
  // the label's pack lp belongs to thread lp % G, batch lp / G / U, slot lp / G % U (G and U
  // are powers of two: shifts, not the 64-bit division call)
  const int gs = __ffs(G) - 1;
  const long long lp = lab >= head && lab < tail0 ? (lab - head) / VEC : -1;
  const bool mine = ok && (lab < head ? lab == tid : lab >= tail0 ? lab - tail0 == tid : (lp & (G - 1)) == tid);
  const long long pbatch = lp >= 0 && mine ? (lp >> gs) / U : -1;
  const int pu = (int)((lp >> gs) & (U - 1)), pk = (int)((lab - head) & (VEC - 1));
  MaxSum<A> st;
  st.m = red_neg_inf(A(0));
  st.s = A(0);
  A pv = A(0);
  PK pq;
  if (tid < head) {
    const A hv = red_load(px[tid]);
    ms_add<T, A>(st, hv);
    if (mine) pv = hv;
  }
  if (tid < N - tail0) {
    const A tv = red_load(px[tail0 + tid]);
    ms_add<T, A>(st, tv);
    if (mine && lab >= tail0) pv = tv;
  }
  const PK* xv = reinterpret_cast<const PK*>(px + head);
  const long long step = (long long)G * U;
  long long b = tid, it = 0;
  for (; b + (31 - lane) + (U - 1) * (long long)G < nv; b += step, ++it) {
    PK q[U];
#pragma unroll
    for (int u = 0; u < U; ++u) q[u] = xv[b + u * (long long)G];
    lse_batch<T, U, false>(st, pq, q, b, G, nv, it == pbatch, pu);
  }
  if (b - lane < nv) {  // warp-uniform: the rest of the row, at most U packs per lane
    PK q[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = b + u * (long long)G;
      q[u] = xv[i < nv ? i : nv - 1];
    }
    lse_batch<T, U, true>(st, pq, q, b, G, nv, it == pbatch, pu);
  }
  if (pbatch >= 0) {
#pragma unroll
    for (int k = 0; k < VEC; ++k)
      if (k == pk) pv = red_load(pq.v[k]);
  }
  if (mine) spick[threadIdx.y] = pv;
  const A NINF = red_neg_inf(A(0));
  const A m = G == 32 ? warp_reduce<MaxOp, A>(st.m) : block_reduce<MaxOp, A>(st.m, sm, tid, G);
  A s = m != m ? m : st.m == NINF ? A(0) : st.s * RowMath<T>::exp_(st.m - m);
  s = G == 32 ? warp_reduce<SumOp, A>(s) : block_reduce<SumOp, A>(s, ss, tid, G);  // its barriers publish spick
  if (G == 32) __syncwarp();
  if (tid == 0) rw_ce_put<T, MODE>(y, ws, p, r, off, ok, ok ? m + RowMath<T>::log_(s) - spick[threadIdx.y] : A(0));
}
