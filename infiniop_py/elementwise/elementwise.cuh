// Elementwise kernels shared by every pointwise operator.
//
// An operator supplies `struct Op { template <class TO, class T, class A, class B, class C>
// static __device__ auto apply(const Scalars& s, A a, B b, C c); }`, called on values already
// converted to their compute types (f32 for half types); the result is converted once to the
// output storage type. Inputs not read by the op are passed as null `const char*`.
//
// ew_vec<.., V>:  all operands dense in the same order; each thread handles V consecutive
//                 elements per step (16-byte loads when V * sizeof(T) == 16), V == 1 is the
//                 unaligned fallback. Grid-stride loop; the tail is done element by element.
// ew_strided<.., Index>: any strides (zero strides broadcast inputs). The linear index over the
//                 collapsed shape (innermost dim last, ordered by the output's strides) is
//                 decomposed with fast 32-bit division when Index is unsigned int.

template <class Op, class TO, class T0, class T1, class T2, int NIN>
__device__ __forceinline__ TO ew_apply(const Scalars& s, T0 x0, T1 x1, T2 x2) {
  typedef typename Compute<TO>::type CO;
  if constexpr (NIN == 0) {
    return Conv<TO>::from(Op::template apply<CO, CO>(s, 0, 0, 0));
  } else if constexpr (NIN == 1) {
    return Conv<TO>::from(Op::template apply<CO, typename Compute<T0>::type>(s, iop_load(x0), 0, 0));
  } else if constexpr (NIN == 2) {
    return Conv<TO>::from(Op::template apply<CO, typename Compute<T0>::type>(s, iop_load(x0), iop_load(x1), 0));
  } else {
    return Conv<TO>::from(Op::template apply<CO, typename Compute<T0>::type>(s, iop_load(x0), iop_load(x1), iop_load(x2)));
  }
}

template <class Op, class TO, class T0, class T1, class T2, int NIN, int V>
__global__ void __launch_bounds__(256) ew_vec(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                              const T2* __restrict__ in2, long long n, Scalars s) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long nthreads = (long long)gridDim.x * blockDim.x;
  const long long nvec = n / V;
  for (long long v = tid; v < nvec; v += nthreads) {
    Pack<T0, V> p0; Pack<T1, V> p1; Pack<T2, V> p2;
    if constexpr (NIN >= 1) p0 = reinterpret_cast<const Pack<T0, V>*>(in0)[v];
    if constexpr (NIN >= 2) p1 = reinterpret_cast<const Pack<T1, V>*>(in1)[v];
    if constexpr (NIN >= 3) p2 = reinterpret_cast<const Pack<T2, V>*>(in2)[v];
    Pack<TO, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = ew_apply<Op, TO, T0, T1, T2, NIN>(s, p0.v[j], p1.v[j], p2.v[j]);
    reinterpret_cast<Pack<TO, V>*>(out)[v] = r;
  }
  if constexpr (V > 1) {
    const long long i = nvec * V + tid;
    if (i < n) {
      T0 a0{}; T1 a1{}; T2 a2{};
      if constexpr (NIN >= 1) a0 = in0[i];
      if constexpr (NIN >= 2) a1 = in1[i];
      if constexpr (NIN >= 3) a2 = in2[i];
      out[i] = ew_apply<Op, TO, T0, T1, T2, NIN>(s, a0, a1, a2);
    }
  }
}

template <class Index>
__device__ __forceinline__ void ew_offsets(const StridedMeta& m, Index i, Index* off, int nop) {
#pragma unroll
  for (int k = 0; k < 4; ++k) off[k] = 0;
#pragma unroll
  for (int j = 0; j < IOP_MAXD; ++j) {
    const int d = m.ndim - 1 - j;
    if (d < 0) break;
    Index q, r;
    if constexpr (sizeof(Index) == 4) {
      q = m.div[d].div(i);
      r = i - q * (Index)m.shape[d];
    } else {
      q = i / (Index)m.shape[d];
      r = i - q * (Index)m.shape[d];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (k < nop) off[k] += r * (Index)m.stride[k][d];
    i = q;
  }
}

template <class Op, class TO, class T0, class T1, class T2, int NIN, class Index>
__global__ void __launch_bounds__(256) ew_strided(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                                  const T2* __restrict__ in2, StridedMeta m, Scalars s) {
  const Index n = (Index)m.n;
  const Index nthreads = (Index)gridDim.x * blockDim.x;
  for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
    Index off[4];
    ew_offsets<Index>(m, i, off, NIN + 1);
    T0 a0{}; T1 a1{}; T2 a2{};
    if constexpr (NIN >= 1) a0 = in0[off[1]];
    if constexpr (NIN >= 2) a1 = in1[off[2]];
    if constexpr (NIN >= 3) a2 = in2[off[3]];
    out[off[0]] = ew_apply<Op, TO, T0, T1, T2, NIN>(s, a0, a1, a2);
  }
}
