// topksoftmax: per row, softmax (f32; f64 for f64 input) then the top-k entries by value,
// descending, ties -> lower index; optional renormalisation by the sum of the k values.
// One warp per row (4 rows per 128-thread block). The ranking uses the exact input values
// (softmax is monotone), through order-preserving unsigned keys; round j takes the largest
// (key, index) pair ranked below round j-1's, so nothing is cached or sorted and any row
// length works. Lane 0 writes the k results in order. Deterministic: fixed shuffle trees.

#define TK_ROWS 4

struct TopkMeta {
  long long ntoken, nexpert, topk;
  long long sx0, sx1;  // x strides
  long long sv0, sv1;  // values strides
  long long si0, si1;  // indices strides
};

// (k, i) ranks before (bk, bi): larger key first, then lower index; bi == n marks "none".
template <class U>
__device__ __forceinline__ bool tk_better(U k, long long i, U bk, long long bi, long long n) {
  return i < n && (bi >= n || k > bk || (k == bk && i < bi));
}

template <class U>
__device__ __forceinline__ void tk_warp_best(U& bk, long long& bi, long long n) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const U k2 = __shfl_xor_sync(0xffffffffu, bk, o);
    const long long i2 = __shfl_xor_sync(0xffffffffu, bi, o);
    if (tk_better<U>(k2, i2, bk, bi, n)) {
      bk = k2;
      bi = i2;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(32 * TK_ROWS) topk_softmax(float* values, int* indices, const T* __restrict__ x,
                                                             TopkMeta m, int norm) {
  typedef typename Acc<T>::type A;
  typedef typename OrderKey<A>::U U;
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * TK_ROWS + (threadIdx.x >> 5);
  if (r >= m.ntoken) return;  // uniform per warp
  const long long E = m.nexpert;
  const T* px = x + r * m.sx0;
  // Round 0: the maximum (ties -> lower index).
  U bk = 0;
  long long bi = E;
  for (long long i = lane; i < E; i += 32) {
    const U k = OrderKey<A>::key(red_load(px[i * m.sx1]));
    if (tk_better<U>(k, i, bk, bi, E)) {
      bk = k;
      bi = i;
    }
  }
  tk_warp_best<U>(bk, bi, E);
  const A v0 = OrderKey<A>::val(bk);
  A s = A(0);
  for (long long i = lane; i < E; i += 32) s += OrderKey<A>::ex(red_load(px[i * m.sx1]) - v0);
  s = warp_reduce<SumOp, A>(s);
  const A inv = A(1) / s;
  float* pv = values + r * m.sv0;
  int* pi = indices + r * m.si0;
  float ksum = 0.f;
  for (long long j = 0; j < m.topk; ++j) {
    if (j > 0) {  // the best pair ranked below the previous one
      const U pk = bk;
      const long long pidx = bi;
      bk = 0;
      bi = E;
      for (long long i = lane; i < E; i += 32) {
        const U k = OrderKey<A>::key(red_load(px[i * m.sx1]));
        const bool below = k < pk || (k == pk && i > pidx);
        if (below && tk_better<U>(k, i, bk, bi, E)) {
          bk = k;
          bi = i;
        }
      }
      tk_warp_best<U>(bk, bi, E);
    }
    if (lane == 0) {
      const float p = (float)(OrderKey<A>::ex(OrderKey<A>::val(bk) - v0) * inv);
      pv[j * m.sv1] = p;
      pi[j * m.si1] = (int)(bi < E ? bi : 0);
      ksum += p;
    }
  }
  if (norm && lane == 0) {
    for (long long j = 0; j < m.topk; ++j) pv[j * m.sv1] = pv[j * m.sv1] / ksum;
  }
}
