// A row's online max / sum pass over elements tid, tid + G, ... below nvalid (of N) (reduce(st) combines
// the G threads' states), then the write pass (zeros past nvalid) or the cross entropy. Every
// thread of the group calls it; those of an inactive row only take part in the reduction.
template <class T, int MODE, class TI, class A, class F>
__device__ __forceinline__ void rw_two_pass(T* y, const T* px, T* py, const TI* tgt, A* ws, const RowMeta& p, long long r,
                                            const long long* off, long long N, long long nvalid, bool active, int tid, int G,
                                            F&& reduce) {
  MaxSum<A> st;
  st.m = red_neg_inf(A(0));
  st.s = A(0);
  if (active) {
    for (long long i = tid; i < nvalid; i += G) ms_add<T, A>(st, red_load(px[i * p.sx]));
  }
  st = reduce(st);
  if (!active) return;
  if (MODE <= RW_CAUSAL) {
    const A inv = A(1) / st.s;
    const A lg = RowMath<T>::log_(st.s);
    for (long long i = tid; i < N; i += G) {
      A o = i < nvalid ? rw_value<T, MODE>(red_load(px[i * p.sx]), st.m, inv, lg) : A(0);
      py[i * p.sy] = Conv<T>::from(o);
    }
  } else if (tid == 0) {
    rw_ce_store<T, MODE, TI>(y, px, tgt, ws, p, r, off, st.m, st.s);
  }
}

// row_softmax: the dim is the input's fastest; G threads (a warp with several rows per block, or
// a whole block of up to 1024) own one row, cached in registers (up to MAXE vectors of VEC
// elements per thread) so that it is read once and written once; 16-byte vectors with a scalar
// head and tail when rows are contiguous. Longer rows (p.ne == 0) take an online max / sum pass
// and a write pass. RAW (16-bit types with 16-byte vectors): the cache holds the raw packs (VEC / 2
// registers per pack) and converts at each use, so twice as many packs per thread fit the same
// registers as an f32 cache (more loads in flight per thread).
template <class T, int MODE, int VEC, int MAXE, class TI, int RAW>
__global__ void __launch_bounds__(1024) row_softmax(T* y, const T* x, const TI* __restrict__ tgt,
                                                    typename Acc<T>::type* __restrict__ ws, RowMeta p) {
  typedef typename Acc<T>::type A;
  __shared__ A sm[32], ss[32];
  const int G = blockDim.x, tid = threadIdx.x;
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const bool active = r < p.R;  // uniform per group
  long long off[3] = {0, 0, 0};
  if (active) dim_offsets<3>(p.rows, r, off);
  const T* px = x + off[0];
  T* py = y + off[1];
  const long long N = p.N;
  long long nvalid = N;
  if (MODE == RW_CAUSAL) nvalid = min(N, r % p.seq + p.shift + 1);
  const A NINF = red_neg_inf(A(0));
  A m, s;
  if (p.ne > 0) {
    A c[RAW ? 1 : MAXE][VEC];
    // RAW: raw words; an empty asm "+r" on every word after each pass keeps the compiler from
    // holding the converted values across passes (that would need the f32 cache's registers)
    const int RW = RAW ? VEC / 2 : 1;
    unsigned int rw[RAW ? MAXE : 1][RAW ? VEC / 2 : 1];
    const unsigned int WNINF = RawWord<T>::ninf2;
#define RW_C(e, k) (RAW ? (A)RawWord<T>::get(rw[RAW ? (e) : 0][RAW ? (k) / 2 : 0], (k) & 1) : c[RAW ? 0 : (e)][k])
#define RW_FENCE()                                     \
  if (RAW) {                                           \
    _Pragma("unroll") for (int e = 0; e < MAXE; ++e)   \
      _Pragma("unroll") for (int i = 0; i < RW; ++i)   \
        asm volatile("" : "+r"(rw[RAW ? e : 0][i]));   \
  }
    A hv = NINF, tv = NINF;
    long long head = 0, nv = N;
    if (VEC > 1) {
      head = row_head<VEC>(px, N);
      nv = (N - head) / VEC;
    }
    const long long tail0 = head + nv * VEC;
    if (active) {
      if (VEC > 1 && tid < head) hv = red_load(px[tid]);
#pragma unroll
      for (int e = 0; e < MAXE; ++e) {
        const long long v = tid + (long long)e * G;
        if (e < p.ne && v < nv) {
          if (RAW) {
            const Pack<unsigned int, 4> q = reinterpret_cast<const Pack<unsigned int, 4>*>(px + head)[v];
#pragma unroll
            for (int i = 0; i < RW; ++i) rw[RAW ? e : 0][i] = q.v[i];
          } else if (VEC > 1) {
            const Pack<T, VEC> pk = reinterpret_cast<const Pack<T, VEC>*>(px + head)[v];
#pragma unroll
            for (int k = 0; k < VEC; ++k) c[RAW ? 0 : e][k] = red_load(pk.v[k]);
          } else {
            c[RAW ? 0 : e][0] = red_load(px[v * p.sx]);
          }
        } else {
          if (RAW) {
#pragma unroll
            for (int i = 0; i < RW; ++i) rw[RAW ? e : 0][i] = WNINF;
          } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) c[RAW ? 0 : e][k] = NINF;
          }
        }
      }
      if (VEC > 1 && tid < N - tail0) tv = red_load(px[tail0 + tid]);
      if (MODE == RW_CAUSAL) {
        if (tid >= nvalid) hv = NINF;
        if (tail0 + tid >= nvalid) tv = NINF;
#pragma unroll
        for (int e = 0; e < MAXE; ++e)
#pragma unroll
          for (int k = 0; k < VEC; ++k)
            if (head + (tid + (long long)e * G) * VEC + k >= nvalid) {
              if (RAW) {
                unsigned int& w = rw[RAW ? e : 0][RAW ? k / 2 : 0];
                w = (k & 1) ? ((w & 0xffffu) | (RawWord<T>::ninf << 16)) : ((w & 0xffff0000u) | RawWord<T>::ninf);
              } else {
                c[RAW ? 0 : e][k] = NINF;
              }
            }
      }
    }
    m = MaxOp::combine<A>(hv, tv);
#pragma unroll
    for (int e = 0; e < MAXE; ++e)
#pragma unroll
      for (int k = 0; k < VEC; ++k) m = MaxOp::combine<A>(m, RW_C(e, k));
    RW_FENCE();
    m = G == 32 ? warp_reduce<MaxOp, A>(m) : block_reduce<MaxOp, A>(m, sm, tid, G);
    s = A(0);
    if (VEC > 1) s = RowMath<T>::exp_(hv - m) + RowMath<T>::exp_(tv - m);
#pragma unroll
    for (int e = 0; e < MAXE; ++e)
#pragma unroll
      for (int k = 0; k < VEC; ++k) s += RowMath<T>::exp_(RW_C(e, k) - m);
    RW_FENCE();
    s = G == 32 ? warp_reduce<SumOp, A>(s) : block_reduce<SumOp, A>(s, ss, tid, G);
    if (!active) return;
    if (MODE <= RW_CAUSAL) {
      const A inv = A(1) / s;
      const A lg = RowMath<T>::log_(s);
      RW_FENCE();
      if (RAW) opaque_xor(rw, (unsigned int)(p.ne >> 40));
      if (VEC > 1 && tid < head) py[tid] = Conv<T>::from(MODE == RW_CAUSAL && tid >= nvalid ? A(0) : rw_value<T, MODE>(hv, m, inv, lg));
#pragma unroll
      for (int e = 0; e < MAXE; ++e) {
        const long long v = tid + (long long)e * G;
        if (e < p.ne && v < nv) {
          if (VEC > 1) {
            Pack<T, VEC> pk;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
              A o = rw_value<T, MODE>(RW_C(e, k), m, inv, lg);
              if (MODE == RW_CAUSAL && head + v * VEC + k >= nvalid) o = A(0);
              pk.v[k] = Conv<T>::from(o);
            }
            reinterpret_cast<Pack<T, VEC>*>(py + head)[v] = pk;
          } else {
            A o = rw_value<T, MODE>(RW_C(e, 0), m, inv, lg);
            if (MODE == RW_CAUSAL && v >= nvalid) o = A(0);
            py[v * p.sy] = Conv<T>::from(o);
          }
        }
      }
      if (VEC > 1 && tid < N - tail0)
        py[tail0 + tid] = Conv<T>::from(MODE == RW_CAUSAL && tail0 + tid >= nvalid ? A(0) : rw_value<T, MODE>(tv, m, inv, lg));
    } else if (tid == 0) {
      rw_ce_store<T, MODE, TI>(y, px, tgt, ws, p, r, off, m, s);
    }
    return;
#undef RW_C
#undef RW_FENCE
  }
  // Loop mode: rows longer than the register cache.
  rw_two_pass<T, MODE, TI>(y, px, py, tgt, ws, p, r, off, N, nvalid, active, tid, G, [&](MaxSum<A> st) {
    return G == 32 ? warp_reduce_ms<T, A>(st) : block_reduce_ms<T, A>(st, sm, ss, tid, G);
  });
}

// col_softmax: the dim is not the fastest: one thread per row, neighbouring threads on
// neighbouring rows (coalesced), an online max / sum pass then a write pass.
template <class T, int MODE, class TI>
__global__ void __launch_bounds__(256) col_softmax(T* y, const T* x, const TI* __restrict__ tgt,
                                                   typename Acc<T>::type* __restrict__ ws, RowMeta p) {
  typedef typename Acc<T>::type A;
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.R) return;
  long long off[3];
  dim_offsets<3>(p.rows, r, off);
  const T* px = x + off[0];
  T* py = y + off[1];
  const long long N = p.N;
  long long nvalid = N;
  if (MODE == RW_CAUSAL) nvalid = min(N, r % p.seq + p.shift + 1);
  rw_two_pass<T, MODE, TI>(y, px, py, tgt, ws, p, r, off, N, nvalid, true, 0, 1, [](MaxSum<A> st) { return st; });
}

// cross_entropy_loss: loss = sum(partials) / count, summed in a fixed order by one block.
template <class T>
__global__ void __launch_bounds__(1024) ce_loss_finish(T* loss, const typename Acc<T>::type* __restrict__ ws, long long R) {
  typedef typename Acc<T>::type A;
  __shared__ A sh[32];
  const int tid = threadIdx.x;
  A s = A(0), c = A(0);
  for (long long r = tid; r < R; r += blockDim.x) {
    s += ws[r];
    c += ws[R + r];
  }
  s = block_reduce<SumOp, A>(s, sh, tid, blockDim.x);
  c = block_reduce<SumOp, A>(c, sh, tid, blockDim.x);
  if (tid == 0) loss[0] = Conv<T>::from(s / c);
}

