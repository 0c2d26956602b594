// equal, whole-tensor mode (torch.equal): c = 1, then any thread that finds a differing pair
// stores 0. All writers store the same byte, so the result is deterministic without atomics.
// T is the storage type (ints/bool as unsigned of their size; halves compared as f32).

__global__ void equal_set_true(unsigned char* c) { *c = 1; }

template <class Index>
__device__ __forceinline__ void equal_offsets(const StridedMeta& m, Index i, Index& oa, Index& ob) {
  oa = 0;
  ob = 0;
#pragma unroll
  for (int j = 0; j < IOP_MAXD; ++j) {
    const int d = m.ndim - 1 - j;
    if (d < 0) break;
    Index q;
    if constexpr (sizeof(Index) == 4) q = m.div[d].div(i);
    else q = i / (Index)m.shape[d];
    const Index r = i - q * (Index)m.shape[d];
    oa += r * (Index)m.stride[0][d];
    ob += r * (Index)m.stride[1][d];
    i = q;
  }
}

template <class T, class Index>
__global__ void __launch_bounds__(256) equal_all(unsigned char* c, const T* __restrict__ a, const T* __restrict__ b,
                                                 StridedMeta m) {
  const Index n = (Index)m.n;
  const Index step = (Index)gridDim.x * blockDim.x;
  bool diff = false;
  if (m.ndim == 1 && m.stride[0][0] == 1 && m.stride[1][0] == 1) {
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
      diff |= !(iop_load(a[i]) == iop_load(b[i]));
  } else {
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
      Index oa, ob;
      equal_offsets<Index>(m, i, oa, ob);
      diff |= !(iop_load(a[oa]) == iop_load(b[ob]));
    }
  }
  if (diff) *c = 0;
}
