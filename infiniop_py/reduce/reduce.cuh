// Reusable device helpers for reductions and row-wise kernels (softmax, norms, cross entropy).
// Include by text: ``source = REDUCE_CUH + my_kernel`` (iop_common.cuh is prepended by the
// compile cache). Everything here is deterministic: fixed shuffle trees, fixed shared-memory
// combine order, no atomics.

// Accumulator type: f32 for half types and f32, f64 for f64, 64-bit for integers.
template <class T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };
template <> struct Acc<int8_t> { typedef long long type; };
template <> struct Acc<int16_t> { typedef long long type; };
template <> struct Acc<int32_t> { typedef long long type; };
template <> struct Acc<int64_t> { typedef long long type; };

// Load any storage type as its accumulator type.
template <class T> __device__ __forceinline__ typename Acc<T>::type red_load(T x) {
  return (typename Acc<T>::type)iop_load(x);
}

__device__ __forceinline__ float red_neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double red_neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }
__device__ __forceinline__ long long red_neg_inf(long long) { return (long long)0x8000000000000000ULL; }

// Reduction operators over accumulator type A. max propagates NaN (as torch.amax).
struct SumOp {
  template <class A> __device__ static __forceinline__ A identity() { return A(0); }
  template <class A> __device__ static __forceinline__ A combine(A a, A b) { return a + b; }
};
struct MaxOp {
  template <class A> __device__ static __forceinline__ A identity() { return red_neg_inf(A(0)); }
  template <class A> __device__ static __forceinline__ A combine(A a, A b) { return (a != a || a > b) ? a : b; }
};

// Butterfly reduction inside a warp: every lane ends with the same, deterministic result.
template <class Op, class A> __device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = Op::template combine<A>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduction over the first `nthreads` threads of the block (nthreads a multiple of 32, every
// thread of the block must call it). `smem` holds >= 32 values. The result is returned to all.
template <class Op, class A> __device__ __forceinline__ A block_reduce(A v, A* smem, int tid, int nthreads) {
  v = warp_reduce<Op, A>(v);
  const int nw = nthreads >> 5;
  if (nw == 1) return v;
  __syncthreads();  // smem may still be read by a previous call
  if ((tid & 31) == 0) smem[tid >> 5] = v;
  __syncthreads();
  A r = (tid & 31) < nw ? smem[tid & 31] : Op::template identity<A>();
  return warp_reduce<Op, A>(r);
}

// Exponentials: accurate for f32/f64 storage, fast for half types (their tolerance is 1e-3).
// The half types' exp is ex2.approx.ftz: __expf without --use_fast_math lowers to the
// non-ftz ex2.approx.f32, whose denormal fix-ups cost extra instructions per element
// (docs/perf/reductions.md). Only
// results below 2^-126 differ (0 instead of an f32 denormal): under any f16 output's least
// denormal, and under bf16's least normal.
__device__ __forceinline__ float ex2_ftz(float t) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t));
  return y;
}
__device__ __forceinline__ float exp_ftz(float x) { return ex2_ftz(x * 1.4426950408889634f); }

// exp(v - m) of the half types as one FFMA and one ex2 per element (exp_ftz(v - m) takes a
// subtraction, a multiply and the ex2): with m * log2(e) = hi + lo (lo the FMA residual, exact),
// e(v) = 2^(v * log2(e) - hi) = exp(v - m) * 2^lo. A sum of e(v) is the sum of exp(v - m) times
// 2^lo, so softmax divides e(v) by it unchanged and log_softmax takes log(sum) - lo * ln 2. The
// exponent is rounded once (v * log2(e) - hi inside the FFMA) instead of twice; m = -inf (an all
// -inf row) gives NaN as before.
struct ShiftExp {
  float hi, lo;
  __device__ __forceinline__ explicit ShiftExp(float m) {
    hi = m * 1.4426950408889634f;
    lo = fmaf(m, 1.4426950408889634f, -hi);
  }
  __device__ __forceinline__ float operator()(float v) const { return ex2_ftz(fmaf(v, 1.4426950408889634f, -hi)); }
  __device__ __forceinline__ float log_sum(float s) const { return __logf(s) - lo * 0.6931471805599453f; }
};
template <class T> struct RowMath {
  __device__ static __forceinline__ float exp_(float x) { return expf(x); }
  __device__ static __forceinline__ float log_(float x) { return logf(x); }
};
template <> struct RowMath<iop_half> {
  __device__ static __forceinline__ float exp_(float x) { return exp_ftz(x); }
  __device__ static __forceinline__ float log_(float x) { return __logf(x); }
};
template <> struct RowMath<iop_bf16> {
  __device__ static __forceinline__ float exp_(float x) { return exp_ftz(x); }
  __device__ static __forceinline__ float log_(float x) { return __logf(x); }
};
template <> struct RowMath<double> {
  __device__ static __forceinline__ double exp_(double x) { return exp(x); }
  __device__ static __forceinline__ double log_(double x) { return log(x); }
};

// Raw values in 32-bit words: two 16-bit values (iop_half, iop_bf16; value 0 in the low half,
// EPW = 2) or one f32 (EPW = 1). get(w, k) is value k as f32, max2 the NaN-propagating max of two
// words valuewise, pack2 f32 values rounded into one word; ninf is -inf (ninf2: a word of them).
// Other types: ninf 0, get 0 (never reached; the raw paths are 16-bit and f32 only).
template <class T> struct RawWord {
  static const unsigned int ninf = 0u, ninf2 = 0u;
  __device__ static __forceinline__ float get(unsigned int, int) { return 0.f; }
};
template <> struct RawWord<float> {
  static const unsigned int ninf = 0xff800000u, ninf2 = 0xff800000u;
  static const int EPW = 1;
  __device__ static __forceinline__ float get(unsigned int w, int) { return __uint_as_float(w); }
  __device__ static __forceinline__ unsigned int max2(unsigned int a, unsigned int b) {
    return __float_as_uint(MaxOp::combine<float>(__uint_as_float(a), __uint_as_float(b)));
  }
  __device__ static __forceinline__ unsigned int pack2(float lo, float) { return __float_as_uint(lo); }
};
template <bool BF>  // iop_half (BF false) or iop_bf16 (BF true) pairs
struct RawPair16 {
  static const unsigned int ninf = BF ? 0xFF80u : 0xFC00u, ninf2 = ninf | (ninf << 16);
  static const int EPW = 2;
  __device__ static __forceinline__ float get(unsigned int w, int k) {
    if constexpr (BF) return __uint_as_float(k ? (w & 0xffff0000u) : (w << 16));
    else return iop_h2f(iop_half{(unsigned short)(k ? (w >> 16) : (w & 0xffffu))});
  }
  __device__ static __forceinline__ unsigned int max2(unsigned int a, unsigned int b) {
    unsigned int d;
    if constexpr (BF) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  __device__ static __forceinline__ unsigned int pack2(float lo, float hi) {
    unsigned int d;
    if constexpr (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <> struct RawWord<iop_half> : RawPair16<false> {};
template <> struct RawWord<iop_bf16> : RawPair16<true> {};

// Online softmax state: running max m and sum s of exp(x - m). Merging two states is
// associative up to rounding; fixed trees keep it deterministic. -inf maxima contribute 0.
template <class A> struct MaxSum { A m, s; };

template <class T, class A> __device__ __forceinline__ void ms_add(MaxSum<A>& st, A x) {
  if (x > st.m) {
    st.s = (st.m == red_neg_inf(A(0)) ? A(0) : st.s * RowMath<T>::exp_(st.m - x)) + A(1);
    st.m = x;
  } else if (x == x) {
    st.s += (x == red_neg_inf(A(0))) ? A(0) : RowMath<T>::exp_(x - st.m);
  } else {
    st.m = x;  // NaN: poison the row (m stays NaN)
    st.s = x;
  }
}

template <class T, class A> __device__ __forceinline__ MaxSum<A> ms_merge(MaxSum<A> a, MaxSum<A> b) {
  const A ninf = red_neg_inf(A(0));
  if (a.m != a.m || b.m != b.m) { MaxSum<A> r; r.m = a.m != a.m ? a.m : b.m; r.s = r.m; return r; }
  const A m = a.m > b.m ? a.m : b.m;
  if (m == ninf) { MaxSum<A> r; r.m = m; r.s = A(0); return r; }
  MaxSum<A> r;
  r.m = m;
  r.s = (a.m == ninf ? A(0) : a.s * RowMath<T>::exp_(a.m - m)) + (b.m == ninf ? A(0) : b.s * RowMath<T>::exp_(b.m - m));
  return r;
}

template <class T, class A> __device__ __forceinline__ MaxSum<A> warp_reduce_ms(MaxSum<A> v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum<A> w;
    w.m = __shfl_xor_sync(0xffffffffu, v.m, o);
    w.s = __shfl_xor_sync(0xffffffffu, v.s, o);
    v = ms_merge<T, A>(v, w);
  }
  return v;
}

template <class T, class A>
__device__ __forceinline__ MaxSum<A> block_reduce_ms(MaxSum<A> v, A* sm, A* ss, int tid, int nthreads) {
  v = warp_reduce_ms<T, A>(v);
  const int nw = nthreads >> 5;
  if (nw == 1) return v;
  __syncthreads();
  if ((tid & 31) == 0) { sm[tid >> 5] = v.m; ss[tid >> 5] = v.s; }
  __syncthreads();
  MaxSum<A> r;
  r.m = (tid & 31) < nw ? sm[tid & 31] : red_neg_inf(A(0));
  r.s = (tid & 31) < nw ? ss[tid & 31] : A(0);
  return warp_reduce_ms<T, A>(r);
}

// Order-preserving unsigned keys of f32 / f64 values (larger value -> larger key; -0 and +0 share a
// key; BITS: the key's width), for radix selections and top-k; ex: the accurate exponential.
template <class A> struct OrderKey;
template <> struct OrderKey<float> {
  typedef unsigned int U;
  enum { BITS = 32 };
  __device__ static __forceinline__ U key(float v) {
    const unsigned b = __float_as_uint(v == 0.f ? 0.f : v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  __device__ static __forceinline__ float val(U k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }
  __device__ static __forceinline__ float ex(float x) { return expf(x); }
};
template <> struct OrderKey<double> {
  typedef unsigned long long U;
  enum { BITS = 64 };
  __device__ static __forceinline__ U key(double v) {
    const U b = (U)__double_as_longlong(v == 0.0 ? 0.0 : v);
    return (b & 0x8000000000000000ULL) ? ~b : (b | 0x8000000000000000ULL);
  }
  __device__ static __forceinline__ double val(U k) {
    return __longlong_as_double((long long)((k & 0x8000000000000000ULL) ? (k & 0x7fffffffffffffffULL) : ~k));
  }
  __device__ static __forceinline__ double ex(double x) { return exp(x); }
};

// Decompose a flat index over up to IOP_MAXD dims (innermost last) into up to 3 offsets.
struct DimMeta {
  long long shape[IOP_MAXD];
  long long stride[3][IOP_MAXD];
  int ndim;
  int pad_;
};

// Every caller passes idx < the product of the shape, so the outermost dim takes the last
// quotient without a division, and quotients use 32-bit division while both operands fit (a
// 64-bit division is a ~70-instruction call ahead of the row's first load).
template <int K>
__device__ __forceinline__ void dim_offsets(const DimMeta& d, long long idx, long long* off) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  for (int i = d.ndim - 1; i > 0; --i) {
    const long long n = d.shape[i];
    long long q;
    if ((((unsigned long long)idx | (unsigned long long)n) >> 32) == 0)
      q = (long long)((unsigned int)idx / (unsigned int)n);
    else
      q = idx / n;
    const long long r = idx - q * n;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += r * d.stride[k][i];
    idx = q;
  }
  if (d.ndim > 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += idx * d.stride[k][0];
  }
}
