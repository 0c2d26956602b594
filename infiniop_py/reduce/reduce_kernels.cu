// Reductions over any set of axes of a strided tensor (sum, max, mean). Appended to reduce.cuh.
//
// The host (infiniop_py/reduce/plan.py) collapses the kept and the reduced dims separately and
// picks one of two kernels:
//   reduce_rows  the innermost reduced dim is the input's fastest: a group of G threads (a warp,
//                or the whole block) reduces one output "row", 16-byte vector loads when the row
//                is contiguous;
//   reduce_cols  a kept dim is the input's fastest: threadIdx.x walks 32 neighbouring outputs
//                (coalesced), threadIdx.y and the loop walk the reduced extent of each.
// With few outputs the reduced extent is split over S chunks (blockIdx.y): each chunk writes a
// partial into the workspace and reduce_finish combines the S partials of an output in a fixed
// order, so results are bitwise identical run to run (no atomics).

struct RedMeta {
  DimMeta kept;     // kept dims; stride[0] input, stride[1] output
  DimMeta red;      // rows: outer reduced dims; cols: all reduced dims; stride[0] input
  long long M;      // number of outputs
  long long L;      // reduced elements per output
  long long Ri;     // rows: innermost reduced extent
  long long si;     // rows: its input stride; cols (red.ndim == 1): the reduced stride
  long long Ro;     // rows: number of outer reduced positions (L / Ri)
  long long chunk;  // extent of one split chunk (rows: along Ri or Ro; cols: along L)
  int S;            // number of chunks
  int split_outer;  // rows: 1 when chunks split Ro instead of Ri
};

template <class T, class Op, int MEAN>
__device__ __forceinline__ void red_store(T* y, long long off, typename Acc<T>::type acc, long long L) {
  typedef typename Acc<T>::type A;
  if (MEAN) acc = acc / (A)L;
  y[off] = Conv<T>::from(acc);
}

// The part of a row that split chunk s reduces: outer positions [j0, j1) x inner [i0, i1).
__device__ __forceinline__ void row_chunk(const RedMeta& p, int s, long long& j0, long long& j1, long long& i0,
                                          long long& i1) {
  j0 = 0, j1 = p.Ro, i0 = 0, i1 = p.Ri;
  if (p.S > 1) {
    if (p.split_outer) {
      j0 = (long long)s * p.chunk;
      j1 = min(j1, j0 + p.chunk);
    } else {
      i0 = (long long)s * p.chunk;
      i1 = min(i1, i0 + p.chunk);
    }
  }
}

// Relaxed memory operations for the flagged-slot finish (LAST = 3).
__device__ __forceinline__ unsigned int red_atom_add_relaxed(unsigned int* a, unsigned int v) {
  unsigned int r;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(a), "r"(v) : "memory");
  return r;
}
__device__ __forceinline__ unsigned long long red_ld_relaxed64(const unsigned long long* a) {
  unsigned long long r;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(r) : "l"(a) : "memory");
  return r;
}
__device__ __forceinline__ void red_st_relaxed64(unsigned long long* a, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(a), "l"(v) : "memory");
}

// LAST = 3 start: tid 0 of each split block draws a start ticket of its row (relaxed atomic,
// issued before the loads; the value is only needed at the end, so its latency is hidden).
template <int LAST>
__device__ __forceinline__ unsigned int row_start_ticket(unsigned int* __restrict__ ticket, int tid) {
  if (LAST == 3 && tid == 0) return red_atom_add_relaxed(&ticket[blockIdx.x], 1u);
  return 0u;
}

// The end of reduce_rows: combine the block's partial of its row; with one split
// (S == 1) store it, else finish the S partials of the row in one launch (LAST) or write the
// partial to the workspace for reduce_finish (LAST = 0). LAST (blockDim.y == 1):
//   1  each block writes its partial to the workspace, __threadfence + atomicAdd on the row's
//      ticket; the block that draws S - 1 combines the S partials;
//   3  no fence, no atomic at the end: a block publishes {flag, partial} as ONE 64-bit relaxed
//      store into a descriptor-owned slot (flag and value are single-copy atomic together); the
//      block that drew the last START ticket (row_start_ticket: every block of the row has
//      started, so waiting for them cannot deadlock) polls the S slots until all are flagged,
//      clears them and combines (float accumulators only).
// The combine order is the same in both (thread tid reads s = tid, tid + G, ... in order, then
// block_reduce), so the result is bitwise identical whichever block finishes, and identical
// between LAST = 1 and 3 for the same grid. Tickets and slots reset themselves.
template <class T, class Op, int MEAN, int LAST, class A>
__device__ __forceinline__ void row_finish(A acc, T* __restrict__ y, long long yoff, A* __restrict__ ws,
                                           unsigned int* __restrict__ ticket, const RedMeta& p, long long row,
                                           int s, int tid, int G, A* smem, unsigned int tk = 0u) {
  if (G == 32) acc = warp_reduce<Op, A>(acc);
  else acc = block_reduce<Op, A>(acc, smem, tid, G);
  if constexpr (LAST != 0) {  // blockDim.y == 1: row is uniform over the block
    __shared__ int is_fin;
    A a = Op::template identity<A>();
    if constexpr (LAST == 3) {
      static_assert(sizeof(A) == 4, "LAST = 3 packs a 32-bit accumulator with its flag");
      unsigned long long* slots = reinterpret_cast<unsigned long long*>(ticket + ((gridDim.x + 1u) & ~1u)) + row;
      if (tid == 0) {
        const int fin = tk == (unsigned int)(p.S - 1);
        if (!fin) red_st_relaxed64(slots + (long long)s * p.M, (1ull << 32) | __float_as_uint(acc));
        is_fin = fin;
      }
      __syncthreads();
      if (!is_fin) return;
      for (int q0 = tid; q0 < p.S; q0 += 8 * G) {
        unsigned long long w[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int q = q0 + k * G;
          w[k] = (q < p.S && q != s) ? red_ld_relaxed64(slots + (long long)q * p.M) : 0ull;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int q = q0 + k * G;
          if (q < p.S) {
            A v = acc;
            if (q != s) {
              while (!(w[k] >> 32)) w[k] = red_ld_relaxed64(slots + (long long)q * p.M);
              v = __uint_as_float((unsigned int)w[k]);
              red_st_relaxed64(slots + (long long)q * p.M, 0ull);
            }
            a = Op::template combine<A>(a, v);
          }
        }
      }
    } else {
      if (tid == 0) {
        int last = 0;
        if (row < p.M) {
          ws[(long long)s * p.M + row] = acc;
          __threadfence();
          const unsigned int old = atomicAdd(&ticket[blockIdx.x], 1u);
          last = old == (unsigned int)(p.S - 1);
        }
        is_fin = last;
      }
      __syncthreads();
      if (!is_fin) return;
      __threadfence();
      for (int q = tid; q < p.S; q += G) a = Op::template combine<A>(a, __ldcg(ws + (long long)q * p.M + row));
    }
    a = block_reduce<Op, A>(a, smem, tid, G);
    if (tid == 0) {
      red_store<T, Op, MEAN>(y, yoff, a, p.L);
      ticket[blockIdx.x] = 0u;
    }
    return;
  }
  if (row < p.M && tid == 0) {
    if (p.S > 1) ws[(long long)s * p.M + row] = acc;
    else red_store<T, Op, MEAN>(y, yoff, acc, p.L);
  }
}

// A thread's accumulator over the 16-byte packs (Word) and single elements of a row. RowState:
// one accumulator of type Acc<T> combined element by element. R16State (f16 / bf16 packs of 8,
// each taken as 4 raw 32-bit words):
//   sum / mean: each word becomes two floats (bf16: two integer ops; f16: cvt), added into two
//               independent f32 accumulators (even / odd elements), summed at the end;
//   max:        max.NaN.{f16,bf16}x2 on packed pairs into 4 packed accumulators (no conversion;
//               exact, NaN propagates as with MaxOp), converted once at the end.
template <class T, class Op, int VEC>
struct RowState {
  typedef typename Acc<T>::type A;
  typedef Pack<T, VEC> Word;
  A a;
  __device__ __forceinline__ void init() { a = Op::template identity<A>(); }
  __device__ __forceinline__ void add1(A v) { a = Op::template combine<A>(a, v); }
  __device__ __forceinline__ void add(const Word& pk) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) a = Op::template combine<A>(a, red_load(pk.v[k]));
  }
  __device__ __forceinline__ A result() const { return a; }
};

template <class T, class Op> struct R16State;
template <class T> struct R16State<T, SumOp> {
  float a0, a1;
  __device__ __forceinline__ void init() { a0 = 0.f; a1 = 0.f; }
  __device__ __forceinline__ void add1(float v) { a0 += v; }
  __device__ __forceinline__ void add(uint4 w) {
    a0 += RawWord<T>::get(w.x, 0); a1 += RawWord<T>::get(w.x, 1);
    a0 += RawWord<T>::get(w.y, 0); a1 += RawWord<T>::get(w.y, 1);
    a0 += RawWord<T>::get(w.z, 0); a1 += RawWord<T>::get(w.z, 1);
    a0 += RawWord<T>::get(w.w, 0); a1 += RawWord<T>::get(w.w, 1);
  }
  __device__ __forceinline__ float result() const { return a0 + a1; }
};
template <class T> struct R16State<T, MaxOp> {
  unsigned int m0, m1, m2, m3;
  float s;  // scalar head / tail elements
  __device__ __forceinline__ void init() { m0 = m1 = m2 = m3 = RawWord<T>::ninf2; s = red_neg_inf(0.f); }
  __device__ __forceinline__ void add1(float v) { s = MaxOp::combine<float>(s, v); }
  __device__ __forceinline__ void add(uint4 w) {
    m0 = RawWord<T>::max2(m0, w.x); m1 = RawWord<T>::max2(m1, w.y);
    m2 = RawWord<T>::max2(m2, w.z); m3 = RawWord<T>::max2(m3, w.w);
  }
  __device__ __forceinline__ float result() const {
    const unsigned int m = RawWord<T>::max2(RawWord<T>::max2(m0, m1), RawWord<T>::max2(m2, m3));
    return MaxOp::combine<float>(MaxOp::combine<float>(s, RawWord<T>::get(m, 0)), RawWord<T>::get(m, 1));
  }
};

template <class Op> struct RowState<iop_half, Op, 8> : R16State<iop_half, Op> { typedef uint4 Word; };
template <class Op> struct RowState<iop_bf16, Op, 8> : R16State<iop_bf16, Op> { typedef uint4 Word; };

// reduce_rows: a group of G = blockDim.x threads per row. VEC > 1: the contiguous path loads U = 8
// 16-byte packs per thread before combining them (U loads in flight per thread: what reaches the
// read bandwidth when a thread owns only a few packs); VEC == 1 is a plain strided loop.
// Deterministic (fixed order per thread).
//
// ILV = 1 (f16 / bf16, one contiguous row split over S blocks, Ro == 1, no outer split): a
// grid-stride sweep instead of one contiguous chunk per block. Thread g = s * G + tid of NT = S * G
// takes packs g, g + NT, ... (U in flight), so every block reads the same number of packs (within
// one) and the whole grid streams one window of the row at a time; block 0 also takes the
// unaligned head and the tail (< VEC elements each).
//
// LAST = 1 (split plans with one row per block): no second launch; each block writes its
// partial, draws a ticket (integer atomic on ticket[blockIdx.x]) and the block that draws S - 1
// combines the S partials of its row in a fixed order (thread tid reads s = tid, tid + G, ...,
// then block_reduce: the same result whichever block is last) and resets the ticket to 0. The
// tickets are device memory owned by the descriptor, one array per stream, zeroed once.
template <class T, class Op, int MEAN, int VEC, int LAST, int ILV = 0>
__global__ void __launch_bounds__(1024) reduce_rows(T* __restrict__ y, const T* __restrict__ x,
                                                    typename Acc<T>::type* __restrict__ ws, RedMeta p,
                                                    unsigned int* __restrict__ ticket) {
  typedef typename Acc<T>::type A;
  typedef typename RowState<T, Op, VEC>::Word W;
  constexpr int U = 8;
  __shared__ A smem[32];
  const int G = blockDim.x;
  const int tid = threadIdx.x;
  const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const int s = blockIdx.y;
  const unsigned int tk = row_start_ticket<LAST>(ticket, tid);
  RowState<T, Op, VEC> st;
  st.init();
  long long off[2] = {0, 0};
  if (ILV) {
    dim_offsets<2>(p.kept, row, off);
    const T* p0 = x + off[0];
    const long long n = p.Ri;
    long long head = (long long)((VEC - (reinterpret_cast<unsigned long long>(p0) / sizeof(T)) % VEC) % VEC);
    if (head > n) head = n;
    if (s == 0 && tid < head) st.add1(red_load(p0[tid]));
    const W* pv = reinterpret_cast<const W*>(p0 + head);
    const long long nv = (n - head) / VEC;
    const long long NT = (long long)p.S * G;
    const long long v0 = (long long)s * G + tid;
    const W* q = pv + v0;
    long long left = nv - v0;  // packs from q on
    for (; left > (long long)(U - 1) * NT; left -= (long long)U * NT, q += (long long)U * NT) {
      W pk[U];
#pragma unroll
      for (int u = 0; u < U; ++u) pk[u] = q[(long long)u * NT];
#pragma unroll
      for (int u = 0; u < U; ++u) st.add(pk[u]);
    }
    for (; left > 0; left -= NT, q += NT) st.add(*q);
    const long long done = head + nv * VEC;
    if (s == 0 && tid < n - done) st.add1(red_load(p0[done + tid]));
  } else if (row < p.M) {
    dim_offsets<2>(p.kept, row, off);
    long long j0, j1, i0, i1;
    row_chunk(p, s, j0, j1, i0, i1);
    for (long long j = j0; j < j1; ++j) {
      long long ro = 0;
      if (p.red.ndim) dim_offsets<1>(p.red, j, &ro);
      const T* px = x + off[0] + ro;
      if (VEC > 1) {
        const T* p0 = px + i0;
        const long long n = i1 - i0;
        long long head = (long long)((VEC - (reinterpret_cast<unsigned long long>(p0) / sizeof(T)) % VEC) % VEC);
        if (head > n) head = n;
        if (tid < head) st.add1(red_load(p0[tid]));
        const W* pv = reinterpret_cast<const W*>(p0 + head);
        const long long nv = (n - head) / VEC;
        long long v = tid;
        for (; v + (long long)(U - 1) * G < nv; v += (long long)U * G) {
          W pk[U];
#pragma unroll
          for (int u = 0; u < U; ++u) pk[u] = pv[v + (long long)u * G];
#pragma unroll
          for (int u = 0; u < U; ++u) st.add(pk[u]);
        }
#pragma unroll 4
        for (; v < nv; v += G) {
          const W pk = pv[v];
          st.add(pk);
        }
        const long long done = head + nv * VEC;
        if (tid < n - done) st.add1(red_load(p0[done + tid]));
      } else {
        const long long si = p.si;
#pragma unroll 4
        for (long long i = i0 + tid; i < i1; i += G) st.add1(red_load(px[i * si]));
      }
    }
  }
  row_finish<T, Op, MEAN, LAST>(st.result(), y, off[1], ws, ticket, p, row, s, tid, G, smem, tk);
}

// Every element of pack pk combined into its accumulator acc[k].
template <class Op, class A, class T, int VEC>
__device__ __forceinline__ void red_add_pack(A (&acc)[VEC], const Pack<T, VEC>& pk) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = Op::template combine<A>(acc[k], red_load(pk.v[k]));
}

// The packs at reduced positions f, f + BY, ... < f1 (over the dims of p.red) of the columns at px.
template <class Op, class A, class T, int VEC>
__device__ __forceinline__ void red_add_cols(A (&acc)[VEC], const RedMeta& p, const T* px, long long f, long long f1, int BY) {
  for (; f < f1; f += BY) {
    long long ro;
    dim_offsets<1>(p.red, f, &ro);
    const Pack<T, VEC> pk = *reinterpret_cast<const Pack<T, VEC>*>(px + ro);
    red_add_pack<Op>(acc, pk);
  }
}

// reduce_cols (VEC = 1: scalar, else 16-byte packs): thread tx owns VEC neighbouring
// outputs along the kept innermost dim (for VEC > 1: contiguous in x, extent a multiple of VEC,
// every other x stride a multiple of VEC, x 16-byte aligned: checked by the host), so a warp
// reads 32 * VEC contiguous elements of each reduced position and keeps VEC accumulators. Thread
// ty takes positions f0+ty, f0+ty+BY, ..., then ty = 0..BY-1 are combined in order: the same
// per-output order for every VEC, so both are bitwise identical.
template <class T, class Op, int MEAN, int VEC>
__global__ void __launch_bounds__(256) reduce_cols(T* __restrict__ y, const T* __restrict__ x,
                                                   typename Acc<T>::type* __restrict__ ws, RedMeta p) {
  typedef typename Acc<T>::type A;
  __shared__ A sh[8][VEC][33];
  const int tx = threadIdx.x, ty = threadIdx.y, BY = blockDim.y;
  const long long m = ((long long)blockIdx.x * 32 + tx) * VEC;
  const int s = blockIdx.y;
  A acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = Op::template identity<A>();
  long long off[2] = {0, 0};
  if (m < p.M) {
    dim_offsets<2>(p.kept, m, off);
    const T* px = x + off[0];
    long long f0 = 0, f1 = p.L;
    if (p.S > 1) {
      f0 = (long long)s * p.chunk;
      f1 = min(f1, f0 + p.chunk);
    }
    if (p.red.ndim <= 1) {
      const long long sr = p.si;
#pragma unroll(VEC == 1 ? 8 : 4)
      for (long long f = f0 + ty; f < f1; f += BY) {
        const Pack<T, VEC> pk = *reinterpret_cast<const Pack<T, VEC>*>(px + f * sr);
        red_add_pack<Op>(acc, pk);
      }
    } else {
      red_add_cols<Op>(acc, p, px, f0 + ty, f1, BY);
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) sh[ty][k][tx] = acc[k];
  __syncthreads();
  if (ty == 0 && m < p.M) {
    const long long so = VEC > 1 ? p.kept.stride[1][p.kept.ndim - 1] : 0;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      A a = acc[k];
      for (int q = 1; q < BY; ++q) a = Op::template combine<A>(a, sh[q][k][tx]);
      if (p.S > 1) ws[(long long)s * p.M + m + k] = a;
      else red_store<T, Op, MEAN>(y, off[1] + k * so, a, p.L);
    }
  }
}

// Second pass: the S partials of an output combined in a fixed order, by a warp (BLOCK = 0,
// blockDim.x / 32 outputs per block) or, for few outputs (full reductions), by a block whose
// threads read them in parallel (BLOCK = 1: one round trip instead of S / 32).
template <class T, class Op, int MEAN, int BLOCK>
__global__ void __launch_bounds__(BLOCK ? 1024 : 256) reduce_finish(T* __restrict__ y,
                                                                    const typename Acc<T>::type* __restrict__ ws, RedMeta p) {
  typedef typename Acc<T>::type A;
  __shared__ A smem[32];
  const long long row = BLOCK ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int tid = BLOCK ? threadIdx.x : threadIdx.x & 31, nt = BLOCK ? blockDim.x : 32;
  if (!BLOCK && row >= p.M) return;  // uniform per warp
  A acc = Op::template identity<A>();
  if (BLOCK) {
#pragma unroll 4
    for (int s = tid; s < p.S; s += nt) acc = Op::template combine<A>(acc, ws[(long long)s * p.M + row]);
  } else {
    for (int s = tid; s < p.S; s += nt) acc = Op::template combine<A>(acc, ws[(long long)s * p.M + row]);
  }
  acc = BLOCK ? block_reduce<Op, A>(acc, smem, tid, nt) : warp_reduce<Op, A>(acc);
  if (tid == 0) {
    long long off[2];
    dim_offsets<2>(p.kept, row, off);
    red_store<T, Op, MEAN>(y, off[1], acc, p.L);
  }
}

// One-launch column reduction (no split, no workspace): a block owns TX * VEC neighbouring
// outputs (blockDim.x = TX threads of VEC outputs each, 16-byte packs when VEC > 1: same
// alignment rules as reduce_cols) and the whole reduced extent, which its BY = blockDim.y
// (a power of two) thread rows share: row ty takes positions ty, ty + BY, ... with U = 4 loads
// in flight, then the BY partials are combined by a fixed pairwise tree in shared memory (dynamic:
// BY / 2 * TX * VEC accumulators). Deterministic; the per-output order differs from reduce_cols.
template <class T, class Op, int MEAN, int VEC>
__global__ void __launch_bounds__(1024) reduce_cols_tile(T* __restrict__ y, const T* __restrict__ x, RedMeta p) {
  typedef typename Acc<T>::type A;
  constexpr int U = 4;
  extern __shared__ __align__(16) unsigned char red_tile_smem[];
  A* sh = reinterpret_cast<A*>(red_tile_smem);
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, BY = blockDim.y;
  const long long m = ((long long)blockIdx.x * TX + tx) * VEC;
  A acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = Op::template identity<A>();
  long long off[2] = {0, 0};
  if (m < p.M) {
    dim_offsets<2>(p.kept, m, off);
    const T* px = x + off[0];
    const long long L = p.L;
    if (p.red.ndim <= 1) {
      const long long sr = p.si;
      long long f = ty;
      for (; f + (long long)(U - 1) * BY < L; f += (long long)U * BY) {
        Pack<T, VEC> pk[U];
#pragma unroll
        for (int u = 0; u < U; ++u) pk[u] = *reinterpret_cast<const Pack<T, VEC>*>(px + (f + (long long)u * BY) * sr);
#pragma unroll
        for (int u = 0; u < U; ++u) red_add_pack<Op>(acc, pk[u]);
      }
      for (; f < L; f += BY) {
        const Pack<T, VEC> pk = *reinterpret_cast<const Pack<T, VEC>*>(px + f * sr);
        red_add_pack<Op>(acc, pk);
      }
    } else {
      red_add_cols<Op>(acc, p, px, ty, L, BY);
    }
  }
  // fixed pairwise tree over ty: rows [h, 2h) hand their partials to rows [0, h)
  for (int h = BY >> 1; h > 0; h >>= 1) {
    if (ty >= h && ty < 2 * h) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) sh[((ty - h) * VEC + k) * TX + tx] = acc[k];
    }
    __syncthreads();
    if (ty < h) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = Op::template combine<A>(acc[k], sh[(ty * VEC + k) * TX + tx]);
    }
    __syncthreads();
  }
  if (ty == 0 && m < p.M) {
    const long long so = p.kept.stride[1][p.kept.ndim - 1];
#pragma unroll
    for (int k = 0; k < VEC; ++k) red_store<T, Op, MEAN>(y, off[1] + k * so, acc[k], p.L);
  }
}

// reduce_rows_warp (rule rows-warp): short contiguous rows (Ro == 1, unit stride, no split) of f32 /
// f16 / bf16, one warp per row, blockDim = (32, rows per block), no block barrier and no shared
// memory. Each lane issues NP 16-byte loads (packs lane, lane + 32, ...) before it
// combines any, so a row of up to 32 * NP packs costs one memory round trip (4 x 512 x 896:
// 3.5 packs per lane in f16, 7 in f32); longer rows loop over batches of NP. The unaligned head
// and the tail (< 16 bytes each) are taken by the first lanes as scalars. Halves combine raw
// words (R16State: two f32 sums, packed max.NaN); f32 keeps four accumulators (one per pack
// component). Fixed order per lane, butterfly across the warp: deterministic.
template <class Op> struct RWIsMax { static constexpr bool v = false; };
template <> struct RWIsMax<MaxOp> { static constexpr bool v = true; };
template <class T, class Op> struct RWState : R16State<T, Op> {
  static constexpr unsigned int NEUTRAL = RWIsMax<Op>::v ? RawWord<T>::ninf2 : 0x80008000u;
};
template <class Op> struct RWState<float, Op> {
  static constexpr unsigned int NEUTRAL = RWIsMax<Op>::v ? 0xff800000u : 0x80000000u;
  float a0, a1, a2, a3;
  __device__ __forceinline__ void init() { a0 = a1 = a2 = a3 = Op::template identity<float>(); }
  __device__ __forceinline__ void add1(float v) { a0 = Op::template combine<float>(a0, v); }
  __device__ __forceinline__ void add(uint4 w) {
    a0 = Op::template combine<float>(a0, __uint_as_float(w.x));
    a1 = Op::template combine<float>(a1, __uint_as_float(w.y));
    a2 = Op::template combine<float>(a2, __uint_as_float(w.z));
    a3 = Op::template combine<float>(a3, __uint_as_float(w.w));
  }
  __device__ __forceinline__ float result() const {
    return Op::template combine<float>(Op::template combine<float>(a0, a1), Op::template combine<float>(a2, a3));
  }
};

template <class T, class Op, int MEAN, int NP, int DEP>
__global__ void __launch_bounds__(512) reduce_rows_warp(T* __restrict__ y, const T* __restrict__ x, float* __restrict__ ws,
                                                        RedMeta p, unsigned int* __restrict__ ticket) {
  constexpr int VEC = 16 / sizeof(T);
  const int lane = threadIdx.x;
  const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= p.M) return;  // the whole warp: nothing below synchronizes the block
  long long off0, off1;
  if (p.kept.ndim == 1) {  // no division for the common collapsed case
    off0 = row * p.kept.stride[0][0];
    off1 = row * p.kept.stride[1][0];
  } else {
    long long off[2];
    dim_offsets<2>(p.kept, row, off);
    off0 = off[0];
    off1 = off[1];
  }
  const T* p0 = x + off0;
  const long long n = p.Ri;
  long long head = (long long)((VEC - (reinterpret_cast<unsigned long long>(p0) / sizeof(T)) % VEC) % VEC);
  if (head > n) head = n;
  RWState<T, Op> st;
  st.init();
  if (lane < head) st.add1(red_load(p0[lane]));
  const uint4* pv = reinterpret_cast<const uint4*>(p0 + head);
  const long long nv = (n - head) / VEC;
  // every load unconditional (index clamped to the last pack, so no predicate splits the batch
  // and the compiler issues all NP before the first use); packs past the end are replaced by
  // the neutral words (-0.0 for sums, -inf for max) before they are combined
  const unsigned int id = RWState<T, Op>::NEUTRAL;
  const uint4* const pend = pv + (nv - 1);
  for (const uint4* q = pv + lane; q <= pend; q += 32 * NP) {
    uint4 pk[NP];
#pragma unroll
    for (int u = 0; u < NP; ++u) pk[u] = __ldg(q + 32 * u < pend ? q + 32 * u : pend);
    // ptxas otherwise interleaves the combines of the first packs with the later loads (a warp
    // stalls on its first use, so the later loads would wait a round trip): every word is
    // XORed with z, zero at run time (p.kept.pad_ is 0) but a function of all NP loads
    // (DEP = 0, for max: without it)
    unsigned int z = pk[0].x;
#pragma unroll
    for (int u = 1; u < NP; ++u) z ^= pk[u].x;
    z = DEP ? z & (unsigned int)p.kept.pad_ : 0u;
#pragma unroll
    for (int u = 0; u < NP; ++u) {
      pk[u].x ^= z, pk[u].y ^= z, pk[u].z ^= z, pk[u].w ^= z;
      if (u > 0 && q + 32 * u > pend) pk[u] = make_uint4(id, id, id, id);
      st.add(pk[u]);
    }
  }
  const long long done = head + nv * VEC;
  if (lane < n - done) st.add1(red_load(p0[done + lane]));
  const float r = warp_reduce<Op, float>(st.result());
  if (lane == 0) red_store<T, Op, MEAN>(y, off1, r, p.L);
}
