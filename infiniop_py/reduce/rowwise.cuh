// Row-wise kernels along one dim of a strided tensor: softmax, log_softmax, causal softmax,
// cross entropy (per-row loss) and cross entropy loss (per-row partials, then ce_loss_finish's
// mean). The loader (rowwise.py ROWWISE_FILES) appends to reduce.cuh this header (modes, row
// metadata, per-row helpers) and the kernel families: row_softmax.cu (row_softmax: any mode,
// G threads per row; col_softmax: rows across threads), row_warp.cu (row_softmax_warp, _hyb and
// _short: 16-byte packs of the softmax modes), row_lse.cu (row_lse: cross entropy streamed).

// MODE: what a row kernel computes (the planner names it RW_<the operator's row mode>).
enum RowMode {
  RW_SOFTMAX = 0,
  RW_LOG_SOFTMAX = 1,
  RW_CAUSAL = 2,   // softmax under a causal mask (the modes up to here write a row)
  RW_CE = 3,       // one cross-entropy loss per row
  RW_CE_LOSS = 4,  // per-row losses and counts into the workspace, then ce_loss_finish
};

struct RowMeta {
  DimMeta rows;     // row dims; stride[0] x, stride[1] y (or the per-row output), stride[2] target
  long long N;      // row length (extent of the dim)
  long long sx;     // x stride along the dim
  long long sy;     // y stride along the dim (softmax modes)
  long long R;      // number of rows
  long long seq;    // causal: rows are (..., seq) with seq innermost
  long long shift;  // causal: row i keeps columns j <= i + shift
  long long ne;     // row_softmax: cached vectors per thread (0: loop mode)
};

// The unaligned head of a row at p: elements up to the next HA-element boundary (HA a power of
// two: 16 bytes for the pack kernels, 128 bytes where packs start at a line), at most n.
template <int HA, class T>
__device__ __forceinline__ int row_head(const T* p, long long n) {
  const int h = (int)((HA - reinterpret_cast<unsigned long long>(p) / sizeof(T)) & (HA - 1));
  return h > n ? (int)n : h;
}

// An opaque zero z (p.ne >> 40: row counts stay below 2^40) xor-ed into a thread's cached raw words
// before the write pass: ptxas then converts them again instead of keeping the sum pass's
// converted values live in registers (the log path of row_softmax spilled 88 bytes without it).
template <int P, int K> __device__ __forceinline__ void opaque_xor(unsigned int (&w)[P][K], unsigned int z) {
#pragma unroll
  for (int e = 0; e < P; ++e)
#pragma unroll
    for (int i = 0; i < K; ++i) asm volatile("xor.b32 %0, %0, %1;" : "+r"(w[e][i]) : "r"(z));
}

template <class T, int MODE>
__device__ __forceinline__ typename Acc<T>::type rw_value(typename Acc<T>::type v, typename Acc<T>::type m,
                                                           typename Acc<T>::type inv, typename Acc<T>::type lg) {
  if (MODE == RW_LOG_SOFTMAX) return v - m - lg;
  return RowMath<T>::exp_(v - m) * inv;
}

// Where a row's cross entropy goes: the loss (CE), or the loss and whether it counts (CE_LOSS).
template <class T, int MODE>
__device__ __forceinline__ void rw_ce_put(T* y, typename Acc<T>::type* ws, const RowMeta& p, long long r,
                                          const long long* off, bool ok, typename Acc<T>::type loss) {
  typedef typename Acc<T>::type A;
  if (MODE == RW_CE) {
    y[off[1]] = Conv<T>::from(loss);
  } else {
    ws[r] = loss;
    ws[p.R + r] = ok ? A(1) : A(0);
  }
}

// Per-row epilogue of the cross-entropy modes (one thread per row).
template <class T, int MODE, class TI>
__device__ __forceinline__ void rw_ce_store(T* y, const T* px, const TI* tgt, typename Acc<T>::type* ws,
                                            const RowMeta& p, long long r, const long long* off,
                                            typename Acc<T>::type m, typename Acc<T>::type s) {
  typedef typename Acc<T>::type A;
  const long long lab = (long long)tgt[off[2]];
  const bool ok = lab >= 0 && lab < p.N;
  rw_ce_put<T, MODE>(y, ws, p, r, off, ok, ok ? m + RowMath<T>::log_(s) - red_load(px[lab * p.sx]) : A(0));
}

