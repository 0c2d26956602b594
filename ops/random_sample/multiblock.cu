// random_sample, multi-block path (f32, f16, bf16: Acc = float; compiled after kernel.cu). The
// same rule and the same fixed-point weights, spread over the GPU; every sum is an integer sum
// (shared/global integer atomics are exact and order-independent), so the result is
// deterministic. Ranking key of entry i: the 64-bit composite (value key << 32) | ~i: descending
// composite order is exactly the upstream ranking (value descending, ties -> lower index), and
// every composite is unique.
//   rm_argmax   blocks of RM_EPB entries: per-block argmax partials; block 0 zeroes the control
//   rm_hist     global argmax v0 from the partials; 2048-bin histogram (count, weight) of the
//               top 11 key bits (shared atomics, then one global atomic per non-empty bin)
//   rm_compact  picks the top-level bucket (top-k' count, or the mass bucket when k' = n) from
//               the histogram and compacts its entries' composites into a list (warp-aggregated
//               atomics; the order of the list does not matter)
//   rm_refine0  (k' < n) one block: radix select (8-bit digits) in list 0 -> the top-k' mass S,
//               then the mass bucket; reuses list 0 when it is the same bucket
//   rm_compact  (again, k' < n) list 1 for the mass bucket
//   rm_final    one block: radix select in list 1 -> the entry; writes the result
// (rm_hist to rm_final: sampled.cu). The histogram and compaction passes issue all loads of a thread before using them; the
// top-level picks in the histogram are made by the whole block (rm_pick_hist). The radix
// selects of f16 / bf16 (template SEL2 = 1) take windows over the bits that vary across the
// list (rm_select2: the ties and constant low key bits of 16-bit logits), f32's (SEL2 = 0) fixed
// 8-bit windows (rm_select); both return the same index. Greedy: rm_greedy1 (one block, small
// n) or rm_greedy_last (one launch, the last block finishes). The workspace holds the control
// block, partials and 2 lists.

#define RM_BINS 2048
#define RM_TOPBITS 11
#define RM_EPB 4096
#define RM_THREADS 512
#define RM_RTHREADS 1024

struct RmCtrl {
  unsigned long long hist_w[RM_BINS];
  unsigned int hist_c[RM_BINS];
  unsigned int cnt[2];  // entries in list 0 / 1
  unsigned int vkey;    // key of the maximum v0
  int bucket[2];        // top-level buckets of select 0 / 1
  int use0;             // list 1 is list 0
  unsigned long long above_c0, above_w0, above_w1, need1;
  unsigned long long vand[2], vor[2];  // AND / OR of list 0 / 1's composites (rm_select2)
};

struct RmView {
  RmCtrl* c;
  unsigned int* pkey;
  int* pidx;
  unsigned long long* list[2];
};

__device__ __forceinline__ RmView rm_view(unsigned char* ws, long long n, long long B) {
  RmView v;
  v.c = reinterpret_cast<RmCtrl*>(ws);
  size_t o = (sizeof(RmCtrl) + 255) & ~(size_t)255;
  v.pkey = reinterpret_cast<unsigned int*>(ws + o);
  o += ((size_t)B * 4 + 255) & ~(size_t)255;
  v.pidx = reinterpret_cast<int*>(ws + o);
  o += ((size_t)B * 4 + 255) & ~(size_t)255;
  v.list[0] = reinterpret_cast<unsigned long long*>(ws + o);
  o += ((size_t)n * 8 + 255) & ~(size_t)255;
  v.list[1] = reinterpret_cast<unsigned long long*>(ws + o);
  return v;
}

// (k2, i2) ranks before (k1, i1): larger key, ties -> lower index; index n marks "none".
__device__ __forceinline__ bool rm_before(unsigned int k2, int i2, unsigned int k1, int i1, int n) {
  return i2 < n && (i1 >= n || k2 > k1 || (k2 == k1 && i2 < i1));
}

// Block argmax of per-thread (k, i); the result in every thread. Fixed trees.
__device__ void rm_block_argmax(unsigned int& k, int& i, int n, unsigned int* sk, int* si) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned int k2 = __shfl_xor_sync(0xffffffffu, k, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    if (rm_before(k2, i2, k, i, n)) { k = k2; i = i2; }
  }
  __syncthreads();
  if (lane == 0) { sk[warp] = k; si[warp] = i; }
  __syncthreads();
  if (tid == 0) {
    for (int q = 1; q < nw; ++q)
      if (rm_before(sk[q], si[q], k, i, n)) { k = sk[q]; i = si[q]; }
    sk[0] = k;
    si[0] = i;
  }
  __syncthreads();
  k = sk[0];
  i = si[0];
}

__device__ __forceinline__ unsigned long long rm_weight_of_key(unsigned int k, float v0, float temp, double scale) {
  return rs_weight<float>(OrderKey<float>::val(k), v0, temp, scale);
}

template <class T>
__global__ void __launch_bounds__(RM_THREADS) rm_argmax(const T* __restrict__ x, unsigned char* ws, SampleParams p) {
  __shared__ unsigned int sk[32];
  __shared__ int si[32];
  const int n = (int)p.n;
  RmView v = rm_view(ws, p.n, p.pad_);
  const long long b0 = (long long)blockIdx.x * RM_EPB;
  const long long b1 = min((long long)n, b0 + RM_EPB);
  unsigned int bk = 0;
  int bi = n;
  for (long long i = b0 + threadIdx.x; i < b1; i += RM_THREADS) {
    const unsigned int k = OrderKey<float>::key(red_load(x[i]));
    if (bi == n || k > bk) { bk = k; bi = (int)i; }
  }
  rm_block_argmax(bk, bi, n, sk, si);
  if (threadIdx.x == 0) { v.pkey[blockIdx.x] = bk; v.pidx[blockIdx.x] = bi; }
  if (blockIdx.x == 0) {
    for (int b = threadIdx.x; b < RM_BINS; b += RM_THREADS) { v.c->hist_w[b] = 0; v.c->hist_c[b] = 0; }
    if (threadIdx.x == 0) {
      v.c->cnt[0] = v.c->cnt[1] = 0;
      v.c->use0 = 0;
      v.c->vand[0] = v.c->vand[1] = ~0ULL;
      v.c->vor[0] = v.c->vor[1] = 0ULL;
    }
  }
}

// The global argmax from the partials (every thread gets it).
__device__ __forceinline__ void rm_global_max(const RmView& v, int n, int B, unsigned int& bk, int& bi, unsigned int* sk, int* si) {
  bk = 0;
  bi = n;
  for (int q = threadIdx.x; q < B; q += blockDim.x)
    if (rm_before(v.pkey[q], v.pidx[q], bk, bi, n)) { bk = v.pkey[q]; bi = v.pidx[q]; }
  rm_block_argmax(bk, bi, n, sk, si);
}

// The unaligned head of the len entries at xb (those before its first 16-byte boundary): thread
// tid < head takes entry tid (index b0 + tid) as its first candidate. Returns the head's length.
template <int VEC, class T>
__device__ __forceinline__ int rm_head(const T* xb, int len, int b0, unsigned int& bk, int& bi) {
  int head = (int)((VEC - (reinterpret_cast<unsigned long long>(xb) / sizeof(T)) % VEC) % VEC);
  if (head > len) head = len;
  if ((int)threadIdx.x < head) {
    bk = OrderKey<float>::key(red_load(xb[threadIdx.x]));
    bi = b0 + threadIdx.x;
  }
  return head;
}

// Greedy in one launch over many blocks: block b reads entries [b * RM_EPB, (b + 1) * RM_EPB)
// (16-byte packs after an unaligned head, all loads of a thread issued before the compares),
// writes its (key, index) partial to the workspace (rm_argmax's partials) and draws an integer
// ticket; the block that draws B - 1 combines the B partials (rm_global_max: fixed trees, ties
// -> lower index, so the result does not depend on which block is last), writes the result
// and resets the ticket. The tickets are descriptor-owned device memory, one per stream.
#define RM_GTU 4
template <class T, class TO>
__global__ void __launch_bounds__(RM_THREADS) rm_greedy_last(TO* result, const T* __restrict__ x, unsigned char* ws,
                                                            unsigned int* __restrict__ ticket, SampleParams p) {
  __shared__ unsigned int sk[32];
  __shared__ int si[32];
  __shared__ int is_last;
  constexpr int VEC = 16 / sizeof(T);
  const int n = (int)p.n, tid = threadIdx.x;
  RmView v = rm_view(ws, p.n, p.pad_);
  const int b0 = blockIdx.x * RM_EPB;
  const int len = min(n - b0, RM_EPB);
  const T* xb = x + b0;
  unsigned int bk = 0;
  int bi = n;
  const int head = rm_head<VEC>(xb, len, b0, bk, bi);
  const Pack<T, VEC>* pv = reinterpret_cast<const Pack<T, VEC>*>(xb + head);
  const int nv = (len - head) / VEC;
  Pack<T, VEC> pk[RM_GTU];
#pragma unroll
  for (int u = 0; u < RM_GTU; ++u)
    if (tid + u * RM_THREADS < nv) pk[u] = pv[tid + u * RM_THREADS];
#pragma unroll
  for (int u = 0; u < RM_GTU; ++u) {
    const int q = tid + u * RM_THREADS;
    if (q < nv) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const unsigned int kk = OrderKey<float>::key(red_load(pk[u].v[k]));
        const int ii = b0 + head + q * VEC + k;
        if (rm_before(kk, ii, bk, bi, n)) { bk = kk; bi = ii; }
      }
    }
  }
  for (int q = tid + RM_GTU * RM_THREADS; q < nv; q += RM_THREADS) {  // RM_EPB / VEC > RM_GTU * RM_THREADS
    const Pack<T, VEC> pq = pv[q];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const unsigned int kk = OrderKey<float>::key(red_load(pq.v[k]));
      const int ii = b0 + head + q * VEC + k;
      if (rm_before(kk, ii, bk, bi, n)) { bk = kk; bi = ii; }
    }
  }
  const int done = head + nv * VEC;
  if (tid < len - done) {
    const unsigned int kk = OrderKey<float>::key(red_load(xb[done + tid]));
    if (rm_before(kk, b0 + done + tid, bk, bi, n)) { bk = kk; bi = b0 + done + tid; }
  }
  rm_block_argmax(bk, bi, n, sk, si);
  if (tid == 0) {
    v.pkey[blockIdx.x] = bk;
    v.pidx[blockIdx.x] = bi;
    __threadfence();
    is_last = atomicAdd(ticket, 1u) == (unsigned int)(gridDim.x - 1);
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const int B = (int)gridDim.x;
  bk = 0;
  bi = n;
  for (int q = tid; q < B; q += RM_THREADS) {
    const unsigned int k2 = __ldcg(v.pkey + q);
    const int i2 = __ldcg(v.pidx + q);
    if (rm_before(k2, i2, bk, bi, n)) { bk = k2; bi = i2; }
  }
  rm_block_argmax(bk, bi, n, sk, si);
  if (tid == 0) {
    result[0] = Conv<TO>::from((long long)(bi < n ? bi : 0));
    *ticket = 0u;
  }
}

// Greedy in one launch: one block of 1024 threads reads all n entries (16-byte packs after an
// unaligned head, RM_G1U packs in flight per thread) and keeps (key, index) per thread in
// increasing index order (strict >: the lowest index among equal maxima), then the block argmax
// (ties -> lower index). No workspace, no second launch; for vocabularies of up to a few
// hundred thousand entries the single SM's read time is below a launch's host cost.
#define RM_G1U 4
template <class T, class TO>
__global__ void __launch_bounds__(1024) rm_greedy1(TO* result, const T* __restrict__ x, SampleParams p) {
  __shared__ unsigned int sk[32];
  __shared__ int si[32];
  constexpr int VEC = 16 / sizeof(T);
  const int n = (int)p.n, tid = threadIdx.x, nt = blockDim.x;
  unsigned int bk = 0;
  int bi = n;
  const int head = rm_head<VEC>(x, n, 0, bk, bi);
  const Pack<T, VEC>* pv = reinterpret_cast<const Pack<T, VEC>*>(x + head);
  const int nv = (n - head) / VEC;
  int v = tid;
  for (; v + (RM_G1U - 1) * nt < nv; v += RM_G1U * nt) {
    Pack<T, VEC> pk[RM_G1U];
#pragma unroll
    for (int u = 0; u < RM_G1U; ++u) pk[u] = pv[v + u * nt];
#pragma unroll
    for (int u = 0; u < RM_G1U; ++u)
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const unsigned int kk = OrderKey<float>::key(red_load(pk[u].v[k]));
        if (bi == n || kk > bk) { bk = kk; bi = head + (v + u * nt) * VEC + k; }
      }
  }
  for (; v < nv; v += nt) {
    const Pack<T, VEC> pk = pv[v];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const unsigned int kk = OrderKey<float>::key(red_load(pk.v[k]));
      if (bi == n || kk > bk) { bk = kk; bi = head + v * VEC + k; }
    }
  }
  const int done = head + nv * VEC;
  if (tid < n - done) {
    const unsigned int kk = OrderKey<float>::key(red_load(x[done + tid]));
    if (bi == n || kk > bk) { bk = kk; bi = done + tid; }
  }
  rm_block_argmax(bk, bi, n, sk, si);
  if (tid == 0) result[0] = Conv<TO>::from((long long)(bi < n ? bi : 0));
}
