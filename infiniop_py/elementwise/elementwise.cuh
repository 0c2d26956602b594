// Elementwise kernels shared by every pointwise operator (and by rearrange, as a bit copy).
//
// An operator supplies `struct Op { template <class TO, class T, class A, class B, class C>
// static __device__ auto apply(const Scalars& s, A a, B b, C c); }`, called on values already
// converted to their compute types (f32 for half types); the result is converted once to the
// output storage type. Inputs not read by the op are passed as null `const char*`.
//
// The host collapses dims (innermost last, ordered by the output's strides) and picks one of:
//  ew_vec<.., V, U>      every operand dense in the same order: V elements per 16-byte pack,
//                        U packs in flight per thread (loads issued before any store).
//  ew_pipe<.., V>        the same over a grid of about one wave, next pack loaded ahead.
//  ew_exact<.., V, U, NT> NT threads, U packs each, all loads first, grid covering n exactly.
//  ew_rowvec<.., V, BM>  innermost dim contiguous (stride 1) or broadcast (stride 0, bit k of
//                        BM) for every operand, sizes/strides multiples of V: 16-byte packs
//                        along rows, broadcast operands loaded once and splatted.
//  ew_tiled<.., SM>      an input transposed relative to the output (bit k of SM): staged
//                        through a shared-memory tile so reads and writes are both coalesced.
//  ew_strided<.., Index> anything else (zero strides broadcast), with 32-bit fast division.

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

// The op on element o0 / o1 / o2 of the inputs it reads (scalar tails, strided kernels).
template <class Op, class TO, int NIN, class T0, class T1, class T2, class I>
__device__ __forceinline__ TO ew_at(const Scalars& s, const T0* in0, const T1* in1, const T2* in2, I o0, I o1, I o2) {
  T0 a0{}; T1 a1{}; T2 a2{};
  if constexpr (NIN >= 1) a0 = in0[o0];
  if constexpr (NIN >= 2) a1 = in1[o1];
  if constexpr (NIN >= 3) a2 = in2[o2];
  return ew_apply<Op, TO, T0, T1, T2, NIN>(s, a0, a1, a2);
}

// The op on each element of a pack of every input.
template <class Op, class TO, int NIN, class T0, class T1, class T2, int V>
__device__ __forceinline__ Pack<TO, V> ew_pk(const Scalars& s, const Pack<T0, V>& p0, const Pack<T1, V>& p1, const Pack<T2, V>& p2) {
  Pack<TO, V> r;
#pragma unroll
  for (int j = 0; j < V; ++j) r.v[j] = ew_apply<Op, TO, T0, T1, T2, NIN>(s, p0.v[j], p1.v[j], p2.v[j]);
  return r;
}

// Pack v (in packs from q0 / q1 / q2) of every input the op reads.
template <int NIN, class Q0, class Q1, class Q2, class P0, class P1, class P2>
__device__ __forceinline__ void ew_get(const Q0* q0, const Q1* q1, const Q2* q2, long long v, P0& p0, P1& p1, P2& p2) {
  if constexpr (NIN >= 1) p0 = reinterpret_cast<const P0*>(q0)[v];
  if constexpr (NIN >= 2) p1 = reinterpret_cast<const P1*>(q1)[v];
  if constexpr (NIN >= 3) p2 = reinterpret_cast<const P2*>(q2)[v];
}

template <class Op, class TO, class T0, class T1, class T2, int NIN, int V, int U>
__global__ void __launch_bounds__(256) ew_vec(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                              const T2* __restrict__ in2, long long n, Scalars s) {
  const long long nvec = n / V;
  const long long chunk = (long long)blockDim.x * U;
  for (long long base = (long long)blockIdx.x * chunk + threadIdx.x; base < nvec; base += (long long)gridDim.x * chunk) {
    Pack<T0, V> p0[U]; Pack<T1, V> p1[U]; Pack<T2, V> p2[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long v = base + (long long)u * blockDim.x;
      if (v < nvec) {
        ew_get<NIN>(in0, in1, in2, v, p0[u], p1[u], p2[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long v = base + (long long)u * blockDim.x;
      if (v < nvec) {
        reinterpret_cast<Pack<TO, V>*>(out)[v] = ew_pk<Op, TO, NIN>(s, p0[u], p1[u], p2[u]);
      }
    }
  }
  if constexpr (V > 1) {
    const long long i = nvec * V + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
      out[i] = ew_at<Op, TO, NIN>(s, in0, in1, in2, i, i, i);
    }
  }
}

// Same contract as ew_vec, for a grid of about one resident wave: each thread walks its packs
// with a stride of the whole grid and issues the loads of its next pack before computing and
// storing the current one, so a load stays in flight while the op's arithmetic runs.
template <class Op, class TO, class T0, class T1, class T2, int NIN, int V>
__global__ void __launch_bounds__(256) ew_pipe(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                               const T2* __restrict__ in2, long long n, Scalars s) {
  const long long nvec = n / V;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  Pack<T0, V> a0; Pack<T1, V> a1; Pack<T2, V> a2;
  if (v < nvec) {
    ew_get<NIN>(in0, in1, in2, v, a0, a1, a2);
  }
  while (v < nvec) {
    const long long w = v + stride;
    Pack<T0, V> b0; Pack<T1, V> b1; Pack<T2, V> b2;
    if (w < nvec) {
      ew_get<NIN>(in0, in1, in2, w, b0, b1, b2);
    }
    reinterpret_cast<Pack<TO, V>*>(out)[v] = ew_pk<Op, TO, NIN>(s, a0, a1, a2);
    a0 = b0; a1 = b1; a2 = b2;
    v = w;
  }
  if constexpr (V > 1) {
    const long long i = nvec * V + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
      out[i] = ew_at<Op, TO, NIN>(s, in0, in1, in2, i, i, i);
    }
  }
}

// "Exact grid" dense shape: NT threads per block, U packs per thread at stride NT (coalesced),
// every load of the thread issued before any arithmetic, then every store; the grid covers the
// packs exactly (no grid-stride loop). Full blocks skip the bounds checks; the last block also
// does the n % V scalar tail.
template <class Op, class TO, class T0, class T1, class T2, int NIN, int V, int U, int NT>
__global__ void __launch_bounds__(NT) ew_exact(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                               const T2* __restrict__ in2, long long n, Scalars s) {
  const long long nvec = n / V;
  const long long base = (long long)blockIdx.x * (NT * U) + threadIdx.x;
  const Pack<T0, V>* q0 = reinterpret_cast<const Pack<T0, V>*>(in0) + base;
  const Pack<T1, V>* q1 = reinterpret_cast<const Pack<T1, V>*>(in1) + base;
  const Pack<T2, V>* q2 = reinterpret_cast<const Pack<T2, V>*>(in2) + base;
  Pack<TO, V>* qo = reinterpret_cast<Pack<TO, V>*>(out) + base;
  Pack<T0, V> p0[U]; Pack<T1, V> p1[U]; Pack<T2, V> p2[U];
  if ((long long)blockIdx.x * (NT * U) + NT * U <= nvec) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      ew_get<NIN>(q0, q1, q2, u * NT, p0[u], p1[u], p2[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      qo[u * NT] = ew_pk<Op, TO, NIN>(s, p0[u], p1[u], p2[u]);
    }
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * NT < nvec) {
        ew_get<NIN>(q0, q1, q2, u * NT, p0[u], p1[u], p2[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * NT < nvec) {
        qo[u * NT] = ew_pk<Op, TO, NIN>(s, p0[u], p1[u], p2[u]);
      }
    }
  }
  if constexpr (V > 1) {
    if (blockIdx.x == gridDim.x - 1) {
      const long long i = nvec * V + threadIdx.x;
      if (i < n) {
        out[i] = ew_at<Op, TO, NIN>(s, in0, in1, in2, i, i, i);
      }
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
    } else {
      q = i / (Index)m.shape[d];
    }
    r = i - q * (Index)m.shape[d];
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
    out[off[0]] = ew_at<Op, TO, NIN>(s, in0, in1, in2, off[1], off[2], off[3]);
  }
}

// Load V consecutive elements (a pack) or one broadcast element splatted V times.
template <class T, int V, bool BCAST>
__device__ __forceinline__ Pack<T, V> ew_load_pack(const T* p, unsigned int off) {
  Pack<T, V> r;
  if constexpr (BCAST) {
    const T x = p[off];
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = x;
  } else {
    r = *reinterpret_cast<const Pack<T, V>*>(p + off);
  }
  return r;
}

// Meta is over packs: the innermost size is divided by V and its strides are V (or 0).
template <class Op, class TO, class T0, class T1, class T2, int NIN, int V, int BM>
__global__ void __launch_bounds__(256) ew_rowvec(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                                 const T2* __restrict__ in2, StridedMeta m, Scalars s) {
  const unsigned int n = (unsigned int)m.n;
  const unsigned int nthreads = gridDim.x * blockDim.x;
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nthreads) {
    unsigned int off[4];
    ew_offsets<unsigned int>(m, i, off, NIN + 1);
    Pack<T0, V> p0; Pack<T1, V> p1; Pack<T2, V> p2;
    if constexpr (NIN >= 1) p0 = ew_load_pack<T0, V, (BM & 2) != 0>(in0, off[1]);
    if constexpr (NIN >= 2) p1 = ew_load_pack<T1, V, (BM & 4) != 0>(in1, off[2]);
    if constexpr (NIN >= 3) p2 = ew_load_pack<T2, V, (BM & 8) != 0>(in2, off[3]);
    *reinterpret_cast<Pack<TO, V>*>(out + off[0]) = ew_pk<Op, TO, NIN>(s, p0, p1, p2);
  }
}

// Two dims A (the output's contiguous one) and B (where staged inputs are contiguous) are
// tiled; up to 6 more "batch" dims are walked by blockIdx.z.
struct TiledMeta {
  long long size_a, size_b;
  long long sa[4], sb[4];
  long long batch_shape[6];
  long long batch_stride[4][6];
  long long batch;
  int nbatch;
  int pad_;
};

template <class T, int TILE, bool USE>
struct EwTile { T v[USE ? TILE : 1][USE ? TILE + 1 : 1]; };

template <class Op, class TO, class T0, class T1, class T2, int NIN, int TILE, int ROWS, int SM, class Index>
__global__ void __launch_bounds__(TILE * ROWS) ew_tiled(TO* out, const T0* __restrict__ in0, const T1* __restrict__ in1,
                                                       const T2* __restrict__ in2, TiledMeta m, Scalars s) {
  __shared__ EwTile<T0, TILE, (SM & 2) != 0> t0;
  __shared__ EwTile<T1, TILE, (SM & 4) != 0> t1;
  __shared__ EwTile<T2, TILE, (SM & 8) != 0> t2;
  const Index size_a = (Index)m.size_a, size_b = (Index)m.size_b;
  Index sa[4], sb[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) { sa[k] = (Index)m.sa[k]; sb[k] = (Index)m.sb[k]; }
  const Index tiles_b = (size_b + TILE - 1) / TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (long long z = blockIdx.z; z < m.batch; z += gridDim.z) {
    Index base[4] = {0, 0, 0, 0};
    long long rem = z;
    for (int d = m.nbatch - 1; d >= 0; --d) {
      const long long q = rem / m.batch_shape[d];
      const Index r = (Index)(rem - q * m.batch_shape[d]);
#pragma unroll
      for (int k = 0; k < 4; ++k) base[k] += r * (Index)m.batch_stride[k][d];
      rem = q;
    }
    const Index a0 = (Index)blockIdx.x * TILE;
    for (Index tb = blockIdx.y; tb < tiles_b; tb += gridDim.y) {
      const Index b0 = tb * TILE;
      if constexpr (SM != 0) {
#pragma unroll
        for (int j = ty; j < TILE; j += ROWS) {
          const Index a = a0 + j, b = b0 + tx;
          if (a < size_a && b < size_b) {
            if constexpr ((SM & 2) != 0) t0.v[j][tx] = in0[base[1] + a * sa[1] + b * sb[1]];
            if constexpr ((SM & 4) != 0) t1.v[j][tx] = in1[base[2] + a * sa[2] + b * sb[2]];
            if constexpr ((SM & 8) != 0) t2.v[j][tx] = in2[base[3] + a * sa[3] + b * sb[3]];
          }
        }
        __syncthreads();
      }
#pragma unroll
      for (int j = ty; j < TILE; j += ROWS) {
        const Index a = a0 + tx, b = b0 + j;
        if (a < size_a && b < size_b) {
          T0 x0{}; T1 x1{}; T2 x2{};
          if constexpr (NIN >= 1) { if constexpr ((SM & 2) != 0) x0 = t0.v[tx][j]; else x0 = in0[base[1] + a * sa[1] + b * sb[1]]; }
          if constexpr (NIN >= 2) { if constexpr ((SM & 4) != 0) x1 = t1.v[tx][j]; else x1 = in1[base[2] + a * sa[2] + b * sb[2]]; }
          if constexpr (NIN >= 3) { if constexpr ((SM & 8) != 0) x2 = t2.v[tx][j]; else x2 = in2[base[3] + a * sa[3] + b * sb[3]]; }
          out[base[0] + a * sa[0] + b * sb[0]] = ew_apply<Op, TO, T0, T1, T2, NIN>(s, x0, x1, x2);
        }
      }
      if constexpr (SM != 0) __syncthreads();
    }
  }
}
