// Shared device helpers of the normalization family (rms_norm, layer_norm, batch_norm and their
// backward passes) and the kernel skeletons of the row-wise ones (norm_fwd_groups, norm_fwd_ring,
// norm_bwd_rows, norm_bwd_ring: an operator's kernel.cu supplies only its row math). Prepended,
// as text, to each operator's kernel.cu by infiniop_py/norm.
//
// Row-wise kernels keep a whole row in registers: a group of TPR threads (a power of two >= 32)
// owns one row; thread `lane` holds NP packs (NORM_NP forward, NORM_NP_BWD backward) of VEC elements at columns
// (p * TPR + lane) * VEC + j. ROWS = 256 / TPR row groups share a block when TPR < 256.
// Every reduction has a fixed order (xor butterflies, then warps summed in index order), so
// results are bitwise reproducible run to run.

#define NORM_NP 4
#define NORM_NP_BWD 2
#define NORM_MAXL 8
#define NORM_MAXT 7

// Threads per block of a backward row kernel: TPR (>= 256) or 256 (several row groups); with
// OPT bit 8 (the *_cp kernels), 256-thread groups run two per block.
__host__ __device__ constexpr int norm_bwd_block(int tpr, int opt) {
  return tpr >= 256 ? (((opt & 8) != 0 && tpr == 256) ? 512 : tpr) : 256;
}

// Leading ("row") dimensions of up to NORM_MAXT tensors that share them, plus each tensor's
// stride along the normalised (last) dimension. lshape is innermost last.
struct NormRows {
  long long rows;
  long long D;
  long long lshape[NORM_MAXL];
  long long lstride[NORM_MAXT][NORM_MAXL];
  long long dstride[NORM_MAXT];
  int nl;
  int pad_;
};

template <int T>
__device__ __forceinline__ long long norm_row_off(const NormRows& m, long long r) {
  if (m.nl == 1) return r * m.lstride[T][0];
  long long off = 0;
#pragma unroll
  for (int k = NORM_MAXL - 1; k >= 0; --k) {
    if (k < m.nl) {
      const long long n = m.lshape[k];
      const long long q = r / n;
      off += (r - q * n) * m.lstride[T][k];
      r = q;
    }
  }
  return off;
}

template <class A>
__device__ __forceinline__ A norm_warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum K values over each row group of TPR threads; every thread of the group gets the sums.
// Must be reached by every thread of the block. sm holds ROWS * (TPR / 32) * K values; the
// closing barrier lets the next row reuse it.
template <int TPR, int ROWS, int K, class A>
__device__ __forceinline__ void norm_group_sum(A (&v)[K], A* sm) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = norm_warp_sum(v[k]);
  if (TPR > 32) {
    constexpr int W = TPR / 32;
    const int slot = threadIdx.x / TPR;
    const int w = (threadIdx.x % TPR) / 32;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) sm[(slot * W + w) * K + k] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      A s = A(0);
      for (int i = 0; i < W; ++i) s += sm[(slot * W + i) * K + k];
      v[k] = s;
    }
    __syncthreads();
  }
}

// VEC consecutive elements at p[e] (VEC > 1: one aligned vector load, unit stride) or the
// element p[e * stride] (VEC == 1), converted to the compute type A.
template <class T, int VEC, class A>
__device__ __forceinline__ void norm_load(const T* p, long long e, long long stride, A* out) {
  if constexpr (VEC == 1) {
    out[0] = (A)iop_load(p[e * stride]);
  } else {
    const Pack<T, VEC> k = *reinterpret_cast<const Pack<T, VEC>*>(p + e);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = (A)iop_load(k.v[j]);
  }
}

// Raw (unconverted) packs. NormPack<T, VEC> holds VEC elements as loaded: 16-bit types with an
// even VEC as 32-bit words (two elements per register, converted with a shift or one cvt each),
// other types as Pack<T, VEC>. Values are converted to the compute type where they are used.
template <class T, int VEC, bool W = (sizeof(T) == 2 && VEC % 2 == 0)>
struct alignas(sizeof(T) * VEC) NormPack {
  Pack<T, VEC> k;
  template <class A>
  __device__ __forceinline__ A get(int j) const { return (A)iop_load(k.v[j]); }
  __device__ __forceinline__ void zero() { k = Pack<T, VEC>{}; }
};

// Words of two 16-bit values (iop_half: BF false, iop_bf16: BF true; value 0 in the low half):
// get(u, k) is value k as f32 (bf16: a shift or a mask; f16: one cvt), pack2 two f32 values rounded
// once each into one word.
template <bool BF>
struct NormWord16 {
  __device__ static __forceinline__ float get(unsigned u, int k) {
    if constexpr (BF) {
      return __uint_as_float(k ? (u & 0xffff0000u) : (u << 16));
    } else {
      float f;
      if (k) asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h;}" : "=f"(f) : "r"(u));
      else asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l;}" : "=f"(f) : "r"(u));
      return f;
    }
  }
  __device__ static __forceinline__ unsigned pack2(float lo, float hi) {
    unsigned u;
    if constexpr (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    return u;
  }
};
template <class T> struct NormWord;
template <> struct NormWord<iop_half> : NormWord16<false> {};
template <> struct NormWord<iop_bf16> : NormWord16<true> {};

template <class T, int VEC>
struct alignas(sizeof(T) * VEC) NormPack<T, VEC, true> {
  unsigned u[VEC / 2];
  template <class A>
  __device__ __forceinline__ A get(int j) const { return (A)NormWord<T>::get(u[j >> 1], j & 1); }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) u[i] = 0u;
  }
};

// Loads of a row: pack q of thread `lane` covers columns (q * TPR + lane) * VEC ... + VEC - 1.
// All NP loads are issued before any value is used, so a thread keeps NP memory requests in
// flight; absent packs (past D, or a dead row) are zero.
template <class T, int VEC, int TPR, int NP>
__device__ __forceinline__ void norm_load_row(const T* p, long long stride, long long D, bool live, NormPack<T, VEC> (&k)[NP]) {
  const int lane = threadIdx.x % TPR;
#pragma unroll
  for (int q = 0; q < NP; ++q) {
    const long long e = ((long long)q * TPR + lane) * VEC;
    if (live && e < D) {
      if constexpr (VEC == 1) {
        k[q].k.v[0] = p[e * stride];
      } else {
        k[q] = *reinterpret_cast<const NormPack<T, VEC>*>(p + e);
      }
    } else {
      k[q].zero();
    }
  }
}

// Loads of a [D] parameter vector (weight, bias) laid out like a row; a strided vector
// (stride != 1) is gathered element by element even on the vectorised path.
template <class T, int VEC, int TPR, int NP>
__device__ __forceinline__ void norm_load_param_row(const T* __restrict__ p, long long stride, long long D, NormPack<T, VEC> (&k)[NP]) {
  const int lane = threadIdx.x % TPR;
#pragma unroll
  for (int q = 0; q < NP; ++q) {
    const long long e = ((long long)q * TPR + lane) * VEC;
    if (e < D && (VEC == 1 || stride == 1)) {
      k[q] = *reinterpret_cast<const NormPack<T, VEC>*>(p + e * (VEC == 1 ? stride : 1));
    } else if (e < D) {
      Pack<T, VEC> t;
#pragma unroll
      for (int j = 0; j < VEC; ++j) t.v[j] = p[(e + j) * stride];
      k[q] = *reinterpret_cast<const NormPack<T, VEC>*>(&t);
    } else {
      k[q].zero();
    }
  }
}

// Element j of a pack in the compute type A.
template <class A, class T, int VEC>
__device__ __forceinline__ A norm_cv(const NormPack<T, VEC>& k, int j) {
  return k.template get<A>(j);
}

template <class T, int VEC, class A>
__device__ __forceinline__ void norm_store(T* p, long long e, long long stride, const A* in) {
  if constexpr (VEC == 1) {
    p[e * stride] = Conv<T>::from(in[0]);
  } else {
    Pack<T, VEC> k;
#pragma unroll
    for (int j = 0; j < VEC; ++j) k.v[j] = Conv<T>::from(in[j]);
    *reinterpret_cast<Pack<T, VEC>*>(p + e) = k;
  }
}

// Store of VEC compute values as one pack (VEC > 1: aligned vector store; 16-bit types are
// converted two at a time) or the element p[e * stride] (VEC == 1).
template <class T, int VEC, class A>
__device__ __forceinline__ void norm_store_pk(T* p, long long e, long long stride, const A* in) {
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
    NormPack<T, VEC> k;
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) k.u[i] = NormWord<T>::pack2((float)in[2 * i], (float)in[2 * i + 1]);
    *reinterpret_cast<NormPack<T, VEC>*>(p + e) = k;
  } else {
    norm_store<T, VEC, A>(p, e, stride, in);
  }
}

// Zeroes per-column accumulators.
template <class A, int NP, int VEC>
__device__ __forceinline__ void norm_zero(A (&acc)[NP][VEC]) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[p][j] = A(0);
  }
}

// Elements [i * n, (i + 1) * n) of a register array as one Pack of n (built by value, so the
// array stays in registers).
template <class V, class A, int N>
__device__ __forceinline__ V norm_vpack(const A (&a)[N], int i) {
  constexpr int n = (int)(sizeof(V) / sizeof(A));
  V v;
#pragma unroll
  for (int k = 0; k < n; ++k) v.v[k] = a[i * n + k];
  return v;
}

// The VEC accumulators of one pack at dst[0 .. VEC): 16-byte stores (V16) or one per element.
template <bool V16, int VEC, class A>
__device__ __forceinline__ void norm_put_acc(A* dst, const A (&a)[VEC]) {
  if constexpr (V16) {
    constexpr int VB = VEC * (int)sizeof(A);
    static_assert(VB % 16 == 0, "vector partial store needs 16-byte packs");
    typedef Pack<A, 16 / sizeof(A)> V;
#pragma unroll
    for (int i = 0; i < VB / 16; ++i) reinterpret_cast<V*>(dst)[i] = norm_vpack<V>(a, i);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) dst[j] = a[j];
  }
}

// Stage 1 of a deterministic column sum: the row slots of a block add their per-column
// registers acc[NP][VEC] in slot order and the block writes one partial row
// part[blockIdx.x * D + col]. sm holds ROWS * TPR * NP * VEC values when ROWS > 1. V16: a
// pack's accumulators go out as 16-byte stores (same sums, same order, same results; vector
// path only: D % VEC == 0, part 16-byte aligned).
template <int TPR, int ROWS, int VEC, int NP, bool V16 = false, class A>
__device__ __forceinline__ void norm_store_partial(A (&acc)[NP][VEC], A* part, long long D, A* sm) {
  const int lane = threadIdx.x % TPR;
  A* dst = part + (long long)blockIdx.x * D;
  if constexpr (ROWS == 1) {
#pragma unroll
    for (int p = 0; p < NP; ++p) {
      const long long e = ((long long)p * TPR + lane) * VEC;
      if constexpr (V16) {
        if (e < D) norm_put_acc<true>(dst + e, acc[p]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          if (e + j < D) dst[e + j] = acc[p][j];
        }
      }
    }
  } else {
    constexpr int CAP = TPR * NP * VEC;
    const int slot = threadIdx.x / TPR;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < NP; ++p) norm_put_acc<V16>(sm + slot * CAP + (p * TPR + lane) * VEC, acc[p]);
    __syncthreads();
    for (int c = threadIdx.x; c < CAP && c < D; c += TPR * ROWS) {
      A s = A(0);
#pragma unroll
      for (int r = 0; r < ROWS; ++r) s += sm[r * CAP + c];
      dst[c] = s;
    }
    __syncthreads();
  }
}

// ---- Asynchronous row staging (cp.async, sm_80+) ----------------------------------------------
// The pipelined kernels (template parameter S >= 2) copy the rows they will need S - 1 steps
// ahead from global memory into a per-thread ring in dynamic shared memory with 16-byte
// cp.async, so the bytes in flight do not occupy registers. Each thread copies exactly the
// packs it will read itself, so cp.async.wait_group (no barrier) makes them visible.
// Layout: stage s, tensor t, pack q of thread tid at byte (((s * NT + t) * NP + q) * B + tid) * 16.
extern __shared__ __align__(16) unsigned char norm_dsm[];

__device__ __forceinline__ unsigned norm_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// 16 bytes global -> shared; pred false copies nothing and fills the destination with zeros.
__device__ __forceinline__ void norm_cp16(unsigned dst, const void* src, bool pred) {
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}

__device__ __forceinline__ void norm_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void norm_cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Issue the NP pack copies of one row (the vector layout of norm_load_row) to shared byte
// address dst (this thread's pack 0); packs are pstride bytes apart. Absent packs are zeros.
template <class T, int VEC, int TPR, int NP>
__device__ __forceinline__ void norm_cp_row(unsigned dst, unsigned pstride, const T* p, long long D, bool live) {
  const int lane = threadIdx.x % TPR;
#pragma unroll
  for (int q = 0; q < NP; ++q) {
    const long long e = ((long long)q * TPR + lane) * VEC;
    const bool ok = live && e < D;
    norm_cp16(dst + q * pstride, ok ? (const void*)(p + e) : (const void*)p, ok);
  }
}

// Read back the NP packs this thread copied (generic pointer to its pack 0; packs pstride bytes apart).
template <class T, int VEC, int NP>
__device__ __forceinline__ void norm_sm_row(const unsigned char* src, unsigned pstride, NormPack<T, VEC> (&k)[NP]) {
#pragma unroll
  for (int q = 0; q < NP; ++q) k[q] = *reinterpret_cast<const NormPack<T, VEC>*>(src + q * pstride);
}

// The ring of a persistent pipelined kernel: per thread of a block of B threads, S stages of NT
// row tensors of NP packs each. fill() copies the first S - 1 row groups; before using row group
// g, next() copies the group S - 1 steps ahead into stage wr and waits for stage rd, whose
// tensors read() returns (norm_stage_after then moves both on).
template <class T, int VEC, int TPR, int NP, int NT, int S, int B>
struct NormRing {
  static constexpr unsigned PS = B * 16;   // bytes between packs
  static constexpr unsigned TS = NP * PS;  // between tensors
  static constexpr unsigned SS = NT * TS;  // between stages
  const unsigned base;
  const unsigned char* const gbase;
  __device__ __forceinline__ NormRing() : base(norm_smem_addr(norm_dsm) + threadIdx.x * 16), gbase(norm_dsm + threadIdx.x * 16) {}
  // Shared address of stage s (tensor t of the stage is TS * t bytes further); copy() puts the
  // row at p (zeros unless live) at shared address a.
  __device__ __forceinline__ unsigned stage(int s) const { return base + s * SS; }
  static __device__ __forceinline__ void copy(unsigned a, const T* p, long long D, bool live) {
    norm_cp_row<T, VEC, TPR, NP>(a, PS, p, D, live);
  }
  // issue(g, s) copies the rows of row group g into stage s.
  template <class F>
  __device__ __forceinline__ void fill(F&& issue) const {
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      issue(blockIdx.x + (long long)s * gridDim.x, s);
      norm_cp_commit();
    }
  }
  template <class F>
  __device__ __forceinline__ void next(F&& issue, long long g, int wr) const {
    issue(g + (long long)(S - 1) * gridDim.x, wr);
    norm_cp_commit();
    norm_cp_wait<S - 1>();
  }
  __device__ __forceinline__ void read(int rd, int t, NormPack<T, VEC> (&k)[NP]) const {
    norm_sm_row<T, VEC, NP>(gbase + rd * SS + t * TS, PS, k);
  }
};

// The stage after stage i of a ring of S.
template <int S>
__device__ __forceinline__ int norm_stage_after(int i) {
  return i + 1 == S ? 0 : i + 1;
}

// The sum of f(v) over every value v of a row's packs in the compute type A (absent packs are zero).
template <class A, class T, int VEC, int NP, class F>
__device__ __forceinline__ A norm_row_sum(const NormPack<T, VEC> (&xk)[NP], F&& f) {
  A s = A(0);
#pragma unroll
  for (int p = 0; p < NP; ++p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += f(norm_cv<A>(xk[p], j));
  }
  return s;
}

// f(p, e) for each pack p of this thread's share of a row that starts before column D (e: the
// pack's first column).
template <int TPR, int VEC, int NP, class F>
__device__ __forceinline__ void norm_packs(long long D, F&& f) {
  const int lane = threadIdx.x % TPR;
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const long long e = ((long long)p * TPR + lane) * VEC;
    if (e < D) f(p, e);
  }
}

// ---- Kernel skeletons ---------------------------------------------------------------------------
// The walks the operators' kernels share; an operator's kernel.cu supplies the row math as lambdas.

// Forward register kernels: each step a block of ROWS row groups takes R * ROWS consecutive rows;
// a thread issues the loads of its R rows of x (tensor slot X) together, then f(xk, r) runs.
template <int X, int TPR, int ROWS, int R, int NP, int VEC, class T, class F>
__device__ __forceinline__ void norm_fwd_groups(const T* x, const NormRows& m, F&& f) {
  const int slot = threadIdx.x / TPR;
  const long long ngroups = (m.rows + ROWS * R - 1) / (ROWS * R);
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    NormPack<T, VEC> xk[R][NP];
    long long r[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      r[i] = (g * R + i) * ROWS + slot;
      const bool live = r[i] < m.rows;
      norm_load_row<T, VEC, TPR, NP>(x + (live ? norm_row_off<X>(m, r[i]) : 0), m.dstride[X], m.D, live, xk[i]);
    }
    f(xk, r);
  }
}

// Forward ring kernels (persistent, vector path): row groups g = blockIdx.x, + gridDim.x, ...; the
// x rows (slot X) S - 1 steps ahead are in flight through cp.async (NormRing, NORM_NP packs, one
// tensor). pre() runs once the ring is filled, f(xk, r) for each row.
template <int X, int TPR, int ROWS, int S, int VEC, class T, class P, class F>
__device__ __forceinline__ void norm_fwd_ring(const T* x, const NormRows& m, P&& pre, F&& f) {
  constexpr int NP = NORM_NP;
  const int slot = threadIdx.x / TPR;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  NormRing<T, VEC, TPR, NP, 1, S, TPR * ROWS> ring;
  auto issue = [&](long long g, int s) {
    const long long r = g * ROWS + slot;
    const bool live = g < ngroups && r < m.rows;
    ring.copy(ring.stage(s), x + (live ? norm_row_off<X>(m, r) : 0), m.D, live);
  };
  ring.fill(issue);
  pre();
  int rd = 0, wr = S - 1;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    ring.next(issue, g, wr);
    NormPack<T, VEC> xk[NP];
    ring.read(rd, 0, xk);
    rd = norm_stage_after<S>(rd);
    wr = norm_stage_after<S>(wr);
    f(xk, g * ROWS + slot);
  }
  norm_cp_wait<0>();
}

// The rows of a backward kernel: two row tensors' packs and, for layer_norm, the row's std.
template <class T, int VEC, int NP>
struct NormRow2 {
  NormPack<T, VEC> a[NP], b[NP];
  T sd = T{};
};

// One row of a backward kernel once its packs are in: sums(s, k) adds the row's two sums, the
// group reduces them, out(k, r, s) writes a live row and accumulates its weight gradients.
// between() runs after the sums and before the reduction (the register kernels' prefetch).
template <int TPR, int ROWS, class A, class Row, class F, class G, class H>
__device__ __forceinline__ void norm_bwd_step(A* sm, const Row& k, long long r, bool live, F&& sums, G&& out, H&& between) {
  A s[2] = {A(0), A(0)};
  sums(s, k);
  between();
  norm_group_sum<TPR, ROWS, 2>(s, sm);
  if (live) out(k, r, s);
}

// Backward register kernels (persistent blocks): a row group keeps its row (load(k, r, live):
// the packs of row r, zeros unless live) in registers. With PF the loads of the group's next row
// are issued before the reductions of the current one (software pipelining); without (1024-thread
// groups: registers too tight) after its stores.
template <int TPR, int ROWS, bool PF, class Row, class A, class L, class F, class G>
__device__ __forceinline__ void norm_bwd_rows(const NormRows& m, A* sm, L&& load, F&& sums, G&& out) {
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  Row k;
  {
    const long long r = (long long)blockIdx.x * ROWS + threadIdx.x / TPR;
    load(k, r, blockIdx.x < ngroups && r < m.rows);
  }
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const long long r = g * ROWS + threadIdx.x / TPR;
    auto next = [&](Row& n) {
      const long long rn = (g + gridDim.x) * ROWS + threadIdx.x / TPR;
      load(n, rn, g + gridDim.x < ngroups && rn < m.rows);
    };
    Row n;
    norm_bwd_step<TPR, ROWS>(sm, k, r, r < m.rows, sums, out, [&] {
      if constexpr (PF) next(n);
    });
    if constexpr (PF) {
      k = n;
    } else {
      next(k);
    }
  }
}

// Backward ring kernels (persistent, vector path): the rows of the tensors at slots X0 and X1 a
// group will need S - 1 steps ahead are copied to shared memory with cp.async (NormRing of
// NORM_NP_BWD packs, two tensors), so 2 * (S - 1) rows per group are in flight without holding
// registers; with SD >= 0 the std of the rows in flight (slot SD) rides in a register ring of the
// same depth. pre() runs once the ring is filled; then each row as norm_bwd_step.
template <int X0, int X1, int SD, int TPR, int ROWS, int S, int VEC, class T, class A, class P, class F, class G>
__device__ __forceinline__ void norm_bwd_ring(const T* p0, const T* p1, const T* sdv, const NormRows& m, A* sm, P&& pre,
                                              F&& sums, G&& out) {
  constexpr int NP = NORM_NP_BWD;
  const int slot = threadIdx.x / TPR;
  const long long ngroups = (m.rows + ROWS - 1) / ROWS;
  NormRing<T, VEC, TPR, NP, 2, S, TPR * ROWS> ring;
  T sdq[S];  // std of the rows in flight (sdq[0]: the current row)
  auto issue = [&](long long g, int s) -> T {
    const long long r = g * ROWS + slot;
    const bool live = g < ngroups && r < m.rows;
    const unsigned d = ring.stage(s);
    ring.copy(d, p0 + (live ? norm_row_off<X0>(m, r) : 0), m.D, live);
    ring.copy(d + ring.TS, p1 + (live ? norm_row_off<X1>(m, r) : 0), m.D, live);
    if constexpr (SD >= 0) return live ? sdv[norm_row_off<SD>(m, r)] : T{};
    return T{};
  };
  ring.fill([&](long long g, int s) { sdq[s] = issue(g, s); });
  pre();
  int rd = 0, wr = S - 1;
  for (long long g = blockIdx.x; g < ngroups; g += gridDim.x) {
    ring.next([&](long long gn, int s) { sdq[S - 1] = issue(gn, s); }, g, wr);
    NormRow2<T, VEC, NP> k;
    ring.read(rd, 0, k.a);
    ring.read(rd, 1, k.b);
    rd = norm_stage_after<S>(rd);
    wr = norm_stage_after<S>(wr);
    k.sd = sdq[0];
#pragma unroll
    for (int s = 0; s < S - 1; ++s) sdq[s] = sdq[s + 1];
    const long long r = g * ROWS + slot;
    norm_bwd_step<TPR, ROWS>(sm, k, r, r < m.rows, sums, out, [] {});
  }
  norm_cp_wait<0>();
}

// The shared memory through which a backward ring kernel's row groups combine their partial rows:
// the ring's own (OPT bit 8, or one group per block) once every thread's ring reads are done, else
// smp (its static array, of norm_ring_smp elements).
__host__ __device__ constexpr int norm_ring_smp(int tpr, int rows, int opt, int per_thread) {
  return ((opt & 8) != 0 || rows == 1) ? 1 : rows * tpr * per_thread;
}
template <int ROWS, int OPT, class A>
__device__ __forceinline__ A* norm_ring_partials(A* smp) {
  constexpr bool RING = (OPT & 8) != 0 || ROWS == 1;
  if constexpr (RING && ROWS > 1) __syncthreads();
  return RING ? reinterpret_cast<A*>(norm_dsm) : smp;
}

// Stage 2 of the column sum: block (32, 32); column c = blockIdx.x * 32 + tx; thread row ty adds parts
// ty, ty + 32, ... in order, eight loads issued before their adds; then the 32 row sums are
// added in order. blockIdx.y selects one of two (out, part) pairs (weight and bias gradients in
// one launch). nparts == 0 writes zeros.
template <class TO, class A>
__global__ void __launch_bounds__(1024)
norm_col_sum2(TO* out0, TO* out1, const A* part0, const A* part1, long long D, int nparts, long long os0, long long os1) {
  __shared__ A sm[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  TO* out = blockIdx.y ? out1 : out0;
  const A* part = blockIdx.y ? part1 : part0;
  const long long os = blockIdx.y ? os1 : os0;
  const long long c = (long long)blockIdx.x * 32 + tx;
  A s = A(0);
  if (c < D) {
    int i = ty;
    for (; i + 7 * 32 < nparts; i += 8 * 32) {
      A v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = part[(long long)(i + k * 32) * D + c];
#pragma unroll
      for (int k = 0; k < 8; ++k) s += v[k];
    }
    for (; i < nparts; i += 32) s += part[(long long)i * D + c];
  }
  sm[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < D) {
    A t = A(0);
#pragma unroll
    for (int k = 0; k < 32; ++k) t += sm[k][tx];
    out[c * os] = Conv<TO>::from(t);
  }
}
