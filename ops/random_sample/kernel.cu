// random_sample: the upstream library rule over one row of logits. f64: one block, no workspace
// (below); f32/f16/bf16: the multi-block path at the end of this file.
//
// Greedy: the smallest index among the maxima. Otherwise the entries are ranked by value
// (descending, ties -> lower index) and weighted w = exp((v - v0) / T) in Acc<T>, stored as
// 64-bit fixed point (2^sbits per unit, sbits chosen on the host so that n weights cannot
// overflow) so every sum is an exact integer sum: deterministic whatever the thread order.
// Nothing is sorted: a radix select over the ordered value bits, 4 bits per pass, finds
//   1. the top-k' mass S (the k'-th ranked key, the mass above it, ties counted by index), then
//   2. the first ranked entry whose cumulative mass reaches need = ceil(r * min(S, topp * W)),
// and a block scan finds the j-th lowest index among entries of equal value. Each pass keeps
// per-thread 16-bin histograms in registers and reduces them with fixed shuffle trees.
// Rows whose deciding bucket holds one element stop early.

#define RS_THREADS 512
#define RS_WARPS (RS_THREADS / 32)

struct SampleParams {
  double random_val, topp, temperature, scale;  // scale = 2^sbits
  long long kp;      // min(topk, n)
  long long n;
  long long greedy;  // 1: argmax only
  long long pad_;
};

// Order-preserving unsigned keys (larger value -> larger key; -0 and +0 share a key).
template <class A> struct RsKey;
template <> struct RsKey<float> {
  typedef unsigned int U;
  enum { BITS = 32 };
  __device__ static __forceinline__ U key(float v) {
    const unsigned b = __float_as_uint(v == 0.f ? 0.f : v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  __device__ static __forceinline__ float val(U k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }
  __device__ static __forceinline__ float ex(float x) { return expf(x); }
};
template <> struct RsKey<double> {
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

// Fixed-point weight of value v (0 for NaN; at most `scale`).
template <class A>
__device__ __forceinline__ unsigned long long rs_weight(A v, A v0, A temp, double scale) {
  A e = RsKey<A>::ex((v - v0) / temp);
  if (!(e >= A(0))) e = A(0);
  if (e > A(1)) e = A(1);
  return (unsigned long long)((double)e * scale + 0.5);
}

struct RsShared {
  unsigned int bc[16][RS_WARPS];
  unsigned long long bw[16][RS_WARPS];
  unsigned int tc[16];
  unsigned long long tw[16];
  unsigned long long red[32];
  long long scan[RS_WARPS];
  long long scan_excl[RS_WARPS];
  unsigned long long prefix;
  unsigned long long above_w, bucket_w;
  long long above_c, bucket_c;
  long long ans;
  int shift;
  int stop;
};

// Radix select over the ranked entries: MODE 0 stops where the running count reaches `need`,
// MODE 1 where the running weight does. Leaves in sh: prefix/shift (the bucket: keys with
// (key ^ prefix) >> shift == 0), the count and weight ranked above it, and its own.
template <class T, int MODE>
__device__ void rs_select(const T* __restrict__ x, long long n, typename Acc<T>::type v0, typename Acc<T>::type temp,
                          double scale, unsigned long long need, RsShared& sh) {
  typedef typename Acc<T>::type A;
  typedef typename RsKey<A>::U U;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) {
    sh.prefix = 0;
    sh.above_c = 0;
    sh.above_w = 0;
    sh.stop = 0;
  }
  __syncthreads();
  for (int shift = RsKey<A>::BITS - 4; shift >= 0; shift -= 4) {
    const U prefix = (U)sh.prefix;
    unsigned int c[16];
    unsigned long long w[16];
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      c[b] = 0;
      w[b] = 0;
    }
    for (long long i = tid; i < n; i += RS_THREADS) {
      const A v = red_load(x[i]);
      const U k = RsKey<A>::key(v);
      if (shift + 4 < RsKey<A>::BITS && ((k ^ prefix) >> (shift + 4)) != 0) continue;
      const int d = (int)((k >> shift) & 15);
      const unsigned long long wt = rs_weight<A>(v, v0, temp, scale);
#pragma unroll
      for (int b = 0; b < 16; ++b)
        if (d == b) {
          c[b] += 1;
          w[b] += wt;
        }
    }
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      c[b] = warp_reduce<SumOp, unsigned int>(c[b]);
      w[b] = warp_reduce<SumOp, unsigned long long>(w[b]);
      if (lane == 0) {
        sh.bc[b][warp] = c[b];
        sh.bw[b][warp] = w[b];
      }
    }
    __syncthreads();
    if (tid < 16) {
      unsigned int tc = 0;
      unsigned long long tw = 0;
      for (int q = 0; q < RS_WARPS; ++q) {
        tc += sh.bc[tid][q];
        tw += sh.bw[tid][q];
      }
      sh.tc[tid] = tc;
      sh.tw[tid] = tw;
    }
    __syncthreads();
    if (tid == 0) {
      long long ac = sh.above_c;
      unsigned long long aw = sh.above_w;
      int pick = -1, last = -1;
      for (int b = 15; b >= 0; --b) {
        if (sh.tc[b] == 0) continue;
        const bool reach = MODE == 0 ? (unsigned long long)ac + sh.tc[b] >= need : aw + sh.tw[b] >= need;
        if (reach) {
          pick = b;
          break;
        }
        ac += sh.tc[b];
        aw += sh.tw[b];
        last = b;
      }
      if (pick < 0) {  // not reached (cannot happen for need <= the total): the last bucket
        pick = last < 0 ? 0 : last;
        if (last >= 0) {
          ac -= sh.tc[last];
          aw -= sh.tw[last];
        }
      }
      sh.above_c = ac;
      sh.above_w = aw;
      sh.bucket_c = sh.tc[pick];
      sh.bucket_w = sh.tw[pick];
      sh.prefix = (unsigned long long)(prefix | ((U)pick << shift));
      sh.shift = shift;
      sh.stop = sh.tc[pick] <= 1;
    }
    __syncthreads();
    if (sh.stop) break;
  }
  __syncthreads();
}

template <class T, class TO>
__global__ void __launch_bounds__(RS_THREADS) random_sample(TO* result, const T* __restrict__ x, SampleParams p) {
  typedef typename Acc<T>::type A;
  typedef typename RsKey<A>::U U;
  __shared__ RsShared sh;
  __shared__ U s_key[RS_WARPS];
  __shared__ long long s_idx[RS_WARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long n = p.n;

  // 1. argmax by key (ties -> lower index): each thread walks increasing indices.
  U bk = 0;
  long long bi = n;
  for (long long i = tid; i < n; i += RS_THREADS) {
    const U k = RsKey<A>::key(red_load(x[i]));
    if (k > bk || bi == n) {
      bk = k;
      bi = i;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const U k2 = __shfl_xor_sync(0xffffffffu, bk, o);
    const long long i2 = __shfl_xor_sync(0xffffffffu, bi, o);
    if (i2 < n && (bi == n || k2 > bk || (k2 == bk && i2 < bi))) {
      bk = k2;
      bi = i2;
    }
  }
  if (lane == 0) {
    s_key[warp] = bk;
    s_idx[warp] = bi;
  }
  __syncthreads();
  if (tid == 0) {
    for (int q = 1; q < RS_WARPS; ++q) {
      const U k2 = s_key[q];
      const long long i2 = s_idx[q];
      if (i2 < n && (bi == n || k2 > bk || (k2 == bk && i2 < bi))) {
        bk = k2;
        bi = i2;
      }
    }
    sh.ans = bi < n ? bi : 0;
    s_key[0] = bk;
  }
  __syncthreads();
  if (p.greedy) {
    if (tid == 0) result[0] = Conv<TO>::from(sh.ans);
    return;
  }
  const A v0 = RsKey<A>::val(s_key[0]);
  const A temp = (A)p.temperature;
  const double scale = p.scale;

  // 2. total mass W.
  unsigned long long ws = 0;
  for (long long i = tid; i < n; i += RS_THREADS) ws += rs_weight<A>(red_load(x[i]), v0, temp, scale);
  const unsigned long long W = block_reduce<SumOp, unsigned long long>(ws, sh.red, tid, RS_THREADS);

  // 3. top-k' mass S.
  unsigned long long S = W;
  if (p.kp < n) {
    rs_select<T, 0>(x, n, v0, temp, scale, (unsigned long long)p.kp, sh);
    const unsigned long long each = sh.bucket_c > 0 ? sh.bucket_w / (unsigned long long)sh.bucket_c : 0;
    const long long take = p.kp - sh.above_c;
    S = sh.above_w + (take > 0 ? (unsigned long long)take : 0ULL) * each;
  }

  __syncthreads();  // every thread has read the select results before they are reused

  // 4. the limit in fixed-point units, then the entry where the ranked mass reaches it.
  const double lim = p.random_val * fmin((double)S, p.topp * (double)W);
  unsigned long long need = lim > 0.0 ? (unsigned long long)ceil(lim) : 0ULL;
  if (need > S) need = S;
  rs_select<T, 1>(x, n, v0, temp, scale, need, sh);
  const U prefix = (U)sh.prefix;
  const int shift = sh.shift;
  long long j = 0;
  if (sh.bucket_c > 1 && sh.above_w < need) {  // equal values: the j-th of them by index
    const unsigned long long each = sh.bucket_w / (unsigned long long)sh.bucket_c;
    if (each > 0) j = (long long)((need - sh.above_w + each - 1) / each) - 1;
    if (j < 0) j = 0;
    if (j > sh.bucket_c - 1) j = sh.bucket_c - 1;
  }

  // 5. the j-th lowest index in the bucket: contiguous chunks, a block scan of their counts.
  const long long chunk = (n + RS_THREADS - 1) / RS_THREADS;
  const long long lo = (long long)tid * chunk;
  const long long hi = lo + chunk < n ? lo + chunk : n;
  long long cnt = 0;
  for (long long i = lo; i < hi; ++i) cnt += ((RsKey<A>::key(red_load(x[i])) ^ prefix) >> shift) == 0;
  long long incl = cnt;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const long long t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  if (lane == 31) sh.scan[warp] = incl;
  __syncthreads();
  if (tid == 0) {
    long long run = 0;
    for (int q = 0; q < RS_WARPS; ++q) {
      sh.scan_excl[q] = run;
      run += sh.scan[q];
    }
  }
  __syncthreads();
  const long long excl = sh.scan_excl[warp] + incl - cnt;
  if (j >= excl && j < excl + cnt) {
    long long want = j - excl;
    for (long long i = lo; i < hi; ++i) {
      if (((RsKey<A>::key(red_load(x[i])) ^ prefix) >> shift) == 0) {
        if (want == 0) {
          sh.ans = i;
          break;
        }
        --want;
      }
    }
  }
  __syncthreads();
  if (tid == 0) result[0] = Conv<TO>::from(sh.ans);
}

// ------------------------------------------------------------------------------------------
// Multi-block path (f32, f16, bf16: Acc = float). The same rule and the same fixed-point
// weights, spread over the GPU; every sum is an integer sum (shared/global integer atomics are
// exact and order-independent), so the result is deterministic. Ranking key of entry i:
// the 64-bit composite (value key << 32) | ~i: descending composite order is exactly the
// upstream ranking (value descending, ties -> lower index), and every composite is unique.
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
// Variants (template V, bit flags RM_SEL2 / RM_GATHER / RM_BPICK / RM_BATCH below; Python
// IOP_SAMPLE_SEL, default 13 for f16 / bf16, 12 for f32): rm_select2 (windows over the bits that
// vary across the list, for the ties and constant low key bits of 16-bit logits), the histogram
// picks by the whole block (rm_pick_hist), batched loads; all return the same index.
// Greedy: rm_greedy1 (one block, n <= 65536), rm_greedy_last (one launch, last block finishes)
// or rm_argmax + rm_greedy (IOP_SAMPLE_GREEDY=2pass). The workspace holds the control block,
// partials and 2 lists.

#define RM_BINS 2048
// Variant flags (template V of rm_hist / rm_compact / rm_refine0 / rm_final; IOP_SAMPLE_SEL):
#define RM_SEL2 1    // rm_select2: windows over the bits varying across the list
#define RM_GATHER 2  // rm_select2 gathers the survivors to shared memory
#define RM_BPICK 4   // pick in the 2048-bin global histogram by the whole block (rm_pick_hist)
#define RM_BATCH 8   // rm_hist / rm_compact issue all loads of a thread before using them
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
  unsigned long long vand[2], vor[2];  // AND / OR of list 0 / 1's composites (select V >= 1)
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
  return rs_weight<float>(RsKey<float>::val(k), v0, temp, scale);
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
    const unsigned int k = RsKey<float>::key(red_load(x[i]));
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

template <class T, class TO>
__global__ void __launch_bounds__(RM_THREADS) rm_greedy(TO* result, unsigned char* ws, SampleParams p) {
  __shared__ unsigned int sk[32];
  __shared__ int si[32];
  RmView v = rm_view(ws, p.n, p.pad_);
  unsigned int bk;
  int bi;
  rm_global_max(v, (int)p.n, (int)p.pad_, bk, bi, sk, si);
  if (threadIdx.x == 0) result[0] = Conv<TO>::from((long long)(bi < p.n ? bi : 0));
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
  int head = (int)((VEC - (reinterpret_cast<unsigned long long>(xb) / sizeof(T)) % VEC) % VEC);
  if (head > len) head = len;
  if (tid < head) {
    bk = RsKey<float>::key(red_load(xb[tid]));
    bi = b0 + tid;
  }
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
        const unsigned int kk = RsKey<float>::key(red_load(pk[u].v[k]));
        const int ii = b0 + head + q * VEC + k;
        if (rm_before(kk, ii, bk, bi, n)) { bk = kk; bi = ii; }
      }
    }
  }
  for (int q = tid + RM_GTU * RM_THREADS; q < nv; q += RM_THREADS) {  // RM_EPB / VEC > RM_GTU * RM_THREADS
    const Pack<T, VEC> pq = pv[q];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const unsigned int kk = RsKey<float>::key(red_load(pq.v[k]));
      const int ii = b0 + head + q * VEC + k;
      if (rm_before(kk, ii, bk, bi, n)) { bk = kk; bi = ii; }
    }
  }
  const int done = head + nv * VEC;
  if (tid < len - done) {
    const unsigned int kk = RsKey<float>::key(red_load(xb[done + tid]));
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
  int head = (int)((VEC - (reinterpret_cast<unsigned long long>(x) / sizeof(T)) % VEC) % VEC);
  if (head > n) head = n;
  if (tid < head) {
    bk = RsKey<float>::key(red_load(x[tid]));
    bi = tid;
  }
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
        const unsigned int kk = RsKey<float>::key(red_load(pk[u].v[k]));
        if (bi == n || kk > bk) { bk = kk; bi = head + (v + u * nt) * VEC + k; }
      }
  }
  for (; v < nv; v += nt) {
    const Pack<T, VEC> pk = pv[v];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const unsigned int kk = RsKey<float>::key(red_load(pk.v[k]));
      if (bi == n || kk > bk) { bk = kk; bi = head + v * VEC + k; }
    }
  }
  const int done = head + nv * VEC;
  if (tid < n - done) {
    const unsigned int kk = RsKey<float>::key(red_load(x[done + tid]));
    if (bi == n || kk > bk) { bk = kk; bi = done + tid; }
  }
  rm_block_argmax(bk, bi, n, sk, si);
  if (tid == 0) result[0] = Conv<TO>::from((long long)(bi < n ? bi : 0));
}

template <class T, int V>
__global__ void __launch_bounds__(RM_THREADS) rm_hist(const T* __restrict__ x, unsigned char* ws, SampleParams p) {
  __shared__ unsigned int sc[RM_BINS];
  __shared__ unsigned long long sw[RM_BINS];
  __shared__ unsigned int sk[32];
  __shared__ int si[32];
  const int n = (int)p.n;
  RmView v = rm_view(ws, p.n, p.pad_);
  for (int b = threadIdx.x; b < RM_BINS; b += RM_THREADS) { sc[b] = 0; sw[b] = 0; }
  unsigned int vk;
  int vi;
  rm_global_max(v, n, (int)p.pad_, vk, vi, sk, si);  // syncs: the zeroed bins are visible after
  if (blockIdx.x == 0 && threadIdx.x == 0) v.c->vkey = vk;
  const float v0 = RsKey<float>::val(vk), temp = (float)p.temperature;
  const long long b0 = (long long)blockIdx.x * RM_EPB;
  const long long b1 = min((long long)n, b0 + RM_EPB);
  if (V & RM_BATCH) {  // the same entries and atomics; the RM_EPB / RM_THREADS loads issued first
    constexpr int PER = RM_EPB / RM_THREADS;
    float xs[PER];
#pragma unroll
    for (int q = 0; q < PER; ++q) {
      const long long i = b0 + threadIdx.x + q * RM_THREADS;
      xs[q] = i < b1 ? red_load(x[i]) : 0.f;
    }
#pragma unroll
    for (int q = 0; q < PER; ++q) {
      if (b0 + threadIdx.x + q * RM_THREADS >= b1) break;
      const unsigned int k = RsKey<float>::key(xs[q]);
      const int d = (int)(k >> (32 - RM_TOPBITS));
      atomicAdd(&sc[d], 1u);
      atomicAdd(&sw[d], rs_weight<float>(xs[q], v0, temp, p.scale));
    }
  } else {
    for (long long i = b0 + threadIdx.x; i < b1; i += RM_THREADS) {
      const float xv = red_load(x[i]);
      const unsigned int k = RsKey<float>::key(xv);
      const int d = (int)(k >> (32 - RM_TOPBITS));
      atomicAdd(&sc[d], 1u);
      atomicAdd(&sw[d], rs_weight<float>(xv, v0, temp, p.scale));
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < RM_BINS; b += RM_THREADS)
    if (sc[b]) {
      atomicAdd(&v.c->hist_c[b], sc[b]);
      atomicAdd(&v.c->hist_w[b], sw[b]);
    }
}

// Pick among NB bins (descending bin order = descending rank) by warp 0: the first non-empty
// bin where the running count (MODE 0) or weight (MODE 1) reaches `need`, starting from
// (ac, aw) ranked above; if none reaches, the last non-empty bin. Results in *out (warp 0 lane 0
// writes; the caller syncs): bin, count/weight ranked above it, its own count/weight.
struct RmPick {
  int bin;
  unsigned long long ac, aw, bc, bw;
};

template <int MODE, int NB>
__device__ void rm_pick(const unsigned int* c, const unsigned long long* w, unsigned long long need, unsigned long long ac0,
                        unsigned long long aw0, RmPick* out) {
  const int lane = threadIdx.x & 31;
  if ((threadIdx.x >> 5) != 0) return;
  const int per = NB / 32;
  const int top = NB - 1 - lane * per;  // this lane's bins: top, top-1, ..., top-per+1
  unsigned long long lc = 0, lw = 0;
  for (int q = 0; q < per; ++q) { lc += c[top - q]; lw += w[top - q]; }
  unsigned long long ic = lc, iw = lw;  // inclusive scans over lanes (rank order)
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long tc = __shfl_up_sync(0xffffffffu, ic, o);
    const unsigned long long tw = __shfl_up_sync(0xffffffffu, iw, o);
    if (lane >= o) { ic += tc; iw += tw; }
  }
  const bool reach = ic > 0 && (MODE == 0 ? ac0 + ic >= need : aw0 + iw >= need);
  const unsigned int m = __ballot_sync(0xffffffffu, reach);
  int L;
  bool fallback = false;
  if (m) {
    L = __ffs(m) - 1;
  } else {  // the last lane with entries
    const unsigned int nz = __ballot_sync(0xffffffffu, lc > 0);
    L = nz ? 31 - __clz(nz) : 31;
    fallback = true;
  }
  if (lane == L) {
    unsigned long long ac = ac0 + ic - lc, aw = aw0 + iw - lw;
    int pick = -1, last = -1;
    unsigned long long lac = ac, law = aw;
    for (int q = 0; q < per; ++q) {
      const int b = top - q;
      if (c[b] == 0) continue;
      if (!fallback && (MODE == 0 ? ac + c[b] >= need : aw + w[b] >= need)) { pick = b; break; }
      lac = ac;
      law = aw;
      last = b;
      ac += c[b];
      aw += w[b];
    }
    if (pick < 0) {  // fallback: the last non-empty bin, above = everything before it
      pick = last < 0 ? top : last;
      ac = lac;
      aw = law;
    }
    out->bin = pick;
    out->ac = ac;
    out->aw = aw;
    out->bc = c[pick];
    out->bw = w[pick];
  }
}

// rm_pick<MODE, RM_BINS> (ac0 = aw0 = 0) on the global histogram by the whole block (RM_BPICK):
// thread t loads the RM_BINS / blockDim bins of ranks t * per .. t * per + per - 1 (coalesced),
// a block scan gives the count / weight ranked above each thread, and the one thread where the
// condition first holds walks its few bins. The same bin as rm_pick (the first non-empty bin
// whose running count / weight reaches need, else the last non-empty one), without one lane
// walking up to 64 global bins serially. Every thread must call it; *out is valid after a sync.
struct RmBPick {
  unsigned long long wc[32], ww[32];  // per-warp inclusive totals, then exclusive prefixes
  unsigned long long tc, tw;          // totals
};

template <int MODE>
__device__ void rm_pick_hist(const unsigned int* gc, const unsigned long long* gw, unsigned long long need, RmBPick& sc,
                             RmPick* out) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const int per = RM_BINS / blockDim.x;  // 4 (512 threads) or 2 (1024)
  const int top = RM_BINS - 1 - tid * per;
  unsigned int c[4];
  unsigned long long w[4];
  unsigned long long lc = 0, lw = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    c[q] = 0;
    w[q] = 0;
    if (q < per) {
      c[q] = gc[top - q];
      w[q] = gw[top - q];
    }
    lc += c[q];
    lw += w[q];
  }
  unsigned long long ic = lc, iw = lw;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long tc = __shfl_up_sync(0xffffffffu, ic, o);
    const unsigned long long tw = __shfl_up_sync(0xffffffffu, iw, o);
    if (lane >= o) { ic += tc; iw += tw; }
  }
  if (lane == 31) { sc.wc[warp] = ic; sc.ww[warp] = iw; }
  __syncthreads();
  if (warp == 0) {
    const unsigned long long xc = lane < nw ? sc.wc[lane] : 0ULL, xw = lane < nw ? sc.ww[lane] : 0ULL;
    unsigned long long jc = xc, jw = xw;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const unsigned long long tc = __shfl_up_sync(0xffffffffu, jc, o);
      const unsigned long long tw = __shfl_up_sync(0xffffffffu, jw, o);
      if (lane >= o) { jc += tc; jw += tw; }
    }
    __syncwarp();
    if (lane < nw) { sc.wc[lane] = jc - xc; sc.ww[lane] = jw - xw; }
    if (lane == 31) { sc.tc = jc; sc.tw = jw; }
  }
  __syncthreads();
  const unsigned long long IC = sc.wc[warp] + ic, IW = sc.ww[warp] + iw;  // through this thread
  const unsigned long long PC = IC - lc, PW = IW - lw;                    // ranked above it
  const unsigned long long TC = sc.tc, TW = sc.tw;
  const bool all = TC > 0 && (MODE == 0 ? TC >= need : TW >= need);
  if (all) {
    const bool mine = IC > 0 && (MODE == 0 ? IC >= need : IW >= need);
    const bool before = PC > 0 && (MODE == 0 ? PC >= need : PW >= need);
    if (mine && !before) {
      unsigned long long ac = PC, aw = PW;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (q >= per || c[q] == 0) continue;
        if (MODE == 0 ? ac + c[q] >= need : aw + w[q] >= need) {
          out->bin = top - q;
          out->ac = ac;
          out->aw = aw;
          out->bc = c[q];
          out->bw = w[q];
          break;
        }
        ac += c[q];
        aw += w[q];
      }
    }
  } else if (TC == 0) {  // empty histogram (cannot happen: n >= 1): rm_pick's answer
    if (tid == 0) {
      out->bin = RM_BINS / 32 - 1;
      out->ac = out->aw = out->bc = out->bw = 0;
    }
  } else if (lc > 0 && IC == TC) {  // not reached: the last non-empty bin, above = all before it
    unsigned long long ac = PC, aw = PW;
    int last = 0;
    unsigned long long lac = ac, law = aw;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (q >= per || c[q] == 0) continue;
      lac = ac;
      law = aw;
      last = q;
      ac += c[q];
      aw += w[q];
    }
    out->bin = top - last;
    out->ac = lac;
    out->aw = law;
    out->bc = c[last];
    out->bw = w[last];
  }
}

template <int MODE, int V>
__device__ __forceinline__ void rm_pick_top(const RmCtrl* c, unsigned long long need, RmBPick& sc, RmPick* out) {
  if (V & RM_BPICK) rm_pick_hist<MODE>(c->hist_c, c->hist_w, need, sc, out);
  else rm_pick<MODE, RM_BINS>(c->hist_c, c->hist_w, need, 0, 0, out);
}

// Sum of the histogram's weights (every thread gets it).
__device__ unsigned long long rm_total(const RmCtrl* c, unsigned long long* red) {
  unsigned long long s = 0;
  for (int b = threadIdx.x; b < RM_BINS; b += blockDim.x) s += c->hist_w[b];
  return block_reduce<SumOp, unsigned long long>(s, red, threadIdx.x, blockDim.x);
}

__device__ __forceinline__ unsigned long long rm_need(const SampleParams& p, unsigned long long S, unsigned long long W) {
  const double lim = p.random_val * fmin((double)S, p.topp * (double)W);
  unsigned long long need = lim > 0.0 ? (unsigned long long)ceil(lim) : 0ULL;
  return need > S ? S : need;
}

// Compact the entries of a top-level bucket into list `which`. WHICH 0: the top-k' bucket;
// WHICH 1: the mass bucket (picked here when k' = n, else by rm_refine0; skipped when list 1
// is list 0).
template <class T, int WHICH, int V>
__global__ void __launch_bounds__(RM_THREADS) rm_compact(const T* __restrict__ x, unsigned char* ws, SampleParams p) {
  __shared__ RmPick pk;
  __shared__ unsigned long long red[32];
  __shared__ RmBPick bp;
  const int n = (int)p.n;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  int bucket;
  if (WHICH == 0) {
    rm_pick_top<0, V>(c, (unsigned long long)p.kp, bp, &pk);
    __syncthreads();
    bucket = pk.bin;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      c->bucket[0] = bucket;
      c->above_c0 = pk.ac;
      c->above_w0 = pk.aw;
    }
  } else if (p.kp >= p.n) {
    const unsigned long long W = rm_total(c, red);
    const unsigned long long need = rm_need(p, W, W);
    rm_pick_top<1, V>(c, need, bp, &pk);
    __syncthreads();
    bucket = pk.bin;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      c->bucket[1] = bucket;
      c->above_w1 = pk.aw;
      c->need1 = need;
    }
  } else {
    if (c->use0) return;  // uniform
    bucket = c->bucket[1];
  }
  const int lane = threadIdx.x & 31;
  unsigned long long* list = v.list[WHICH];
  const long long b0 = (long long)blockIdx.x * RM_EPB;
  const long long b1 = min((long long)n, b0 + RM_EPB);
  unsigned long long van = ~0ULL, vor = 0ULL;  // RM_SEL2: AND / OR of this lane's composites
  bool any = false;
  constexpr int PER = RM_EPB / RM_THREADS;
  unsigned int ks[(V & RM_BATCH) ? PER : 1];
  if (V & RM_BATCH) {  // all loads of this thread first
#pragma unroll
    for (int q = 0; q < ((V & RM_BATCH) ? PER : 1); ++q) {
      const long long i = b0 + threadIdx.x + q * RM_THREADS;
      ks[q] = i < b1 ? RsKey<float>::key(red_load(x[i])) : 0u;
    }
  }
#pragma unroll
  for (int q = 0; q < PER; ++q) {  // warp-uniform trip count
    const long long i0 = b0 + q * RM_THREADS;
    if (i0 >= b1) break;
    const long long i = i0 + threadIdx.x;
    unsigned int k = 0;
    bool hit = false;
    if (i < b1) {
      k = (V & RM_BATCH) ? ks[(V & RM_BATCH) ? q : 0] : RsKey<float>::key(red_load(x[i]));
      hit = (int)(k >> (32 - RM_TOPBITS)) == bucket;
    }
    const unsigned int m = __ballot_sync(0xffffffffu, hit);
    if (m) {
      const int leader = __ffs(m) - 1;
      unsigned int base = 0;
      if (lane == leader) base = atomicAdd(&c->cnt[WHICH], (unsigned int)__popc(m));
      base = __shfl_sync(0xffffffffu, base, leader);
      if (hit) {
        const unsigned long long comp = ((unsigned long long)k << 32) | (unsigned int)~(unsigned int)i;
        list[base + __popc(m & ((1u << lane) - 1u))] = comp;
        if (V & RM_SEL2) {
          van &= comp;
          vor |= comp;
        }
      }
      any = true;
    }
  }
  if ((V & RM_SEL2) && any) {  // `any` is warp-uniform (set from the ballot); one atomic pair per warp
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      van &= __shfl_xor_sync(0xffffffffu, van, o);
      vor |= __shfl_xor_sync(0xffffffffu, vor, o);
    }
    if (lane == 0) {
      atomicAnd(&c->vand[WHICH], van);
      atomicOr(&c->vor[WHICH], vor);
    }
  }
}

// Radix select (8-bit digits below the top 11 bits) among the cnt composites of `list` in the
// top-level bucket: MODE 0 stops where the ranked count reaches need, MODE 1 where the ranked
// weight does (need relative to the bucket). Leaves the chosen composite in *ans, the weight
// ranked above it within the bucket in *aw_out. One block of RM_RTHREADS threads.
struct RmSel {
  unsigned int c[256];
  unsigned long long w[256];
  RmPick pk;
  unsigned long long prefix, ac, aw, bc, ans;
  unsigned long long red[32];
};

// Pieces of both selects. Begin: the prefix is the top-level bucket, nothing ranked yet.
__device__ __forceinline__ void rm_sel_begin(RmSel& s, int bucket, unsigned int cnt) {
  if (threadIdx.x == 0) {
    s.prefix = (unsigned long long)bucket << (64 - RM_TOPBITS);
    s.ac = 0;
    s.aw = 0;
    s.bc = cnt;
    s.ans = 0;
  }
}
// Count and weigh composite k in bin (k >> lo) & (2^d - 1).
__device__ __forceinline__ void rm_sel_add(RmSel& s, unsigned long long k, int lo, int d, float v0, float temp, double scale) {
  const int dig = (int)((k >> lo) & ((1u << d) - 1u));
  atomicAdd(&s.c[dig], 1u);
  atomicAdd(&s.w[dig], rm_weight_of_key((unsigned int)(k >> 32), v0, temp, scale));
}
// Pick the bin of a d-bit window (256 bins, or 32 for the 5-bit windows) relative to what is ranked above.
template <int MODE>
__device__ __forceinline__ void rm_sel_pick(RmSel& s, int d, unsigned long long need) {
  const unsigned long long rel_c = s.ac, rel_w = s.aw;
  if (d > 5) rm_pick<MODE, 256>(s.c, s.w, need, rel_c, rel_w, &s.pk);
  else rm_pick<MODE, 32>(s.c, s.w, need, rel_c, rel_w, &s.pk);
}
// The bucket holds one composite (or all bits are fixed): find it among src[0, m).
__device__ __forceinline__ void rm_sel_find(RmSel& s, const unsigned long long* src, unsigned int m, int shift) {
  const unsigned long long pre = s.prefix >> shift;
  for (unsigned int e = threadIdx.x; e < m; e += blockDim.x)
    if ((src[e] >> shift) == pre) s.ans = src[e];  // one writer
  __syncthreads();
}

template <int MODE>
__device__ void rm_select(const unsigned long long* list, unsigned int cnt, unsigned long long need, float v0, float temp,
                          double scale, int bucket, RmSel& s) {
  const int tid = threadIdx.x;
  rm_sel_begin(s, bucket, cnt);
  __syncthreads();
  int shift = 64 - RM_TOPBITS;  // bits above `shift` are fixed by the prefix
  while (s.bc > 1 && shift > 0) {
    const int d = shift < 8 ? shift : 8;
    const int lo = shift - d;
    for (int b = tid; b < 256; b += blockDim.x) { s.c[b] = 0; s.w[b] = 0; }
    __syncthreads();
    const unsigned long long pre = s.prefix >> shift;
    for (unsigned int e = tid; e < cnt; e += blockDim.x) {
      const unsigned long long k = list[e];
      if ((k >> shift) != pre) continue;
      rm_sel_add(s, k, lo, d, v0, temp, scale);
    }
    __syncthreads();
    rm_sel_pick<MODE>(s, d, need);  // d = 8, or 5 last (53 = 6*8 + 5): bins 0..31
    __syncthreads();
    if (tid == 0) {
      s.prefix |= (unsigned long long)s.pk.bin << lo;
      s.ac = s.pk.ac;
      s.aw = s.pk.aw;
      s.bc = s.pk.bc;
    }
    shift = lo;
    __syncthreads();
  }
  rm_sel_find(s, list, cnt, shift);
}

// Select V >= 1 (the default for f16 / bf16; IOP_SAMPLE_SEL): the same select, but each pass
// takes the 8-bit window starting at the highest bit that varies across the list (the AND / OR
// of its composites, from rm_compact), so bits constant over the whole bucket cost no pass.
// 16-bit logits have few distinct values, so the low float-key bits are constant and ties are
// common; the old fixed windows spent 3-4 passes over constant key bits and over the index's
// constant high bits before the index bits that break the ties. V = 1 (GATHER) also copies the
// survivors to shared memory in the first pass where at most RM_CAP remain, so the later passes
// and the final lookup read shared memory instead of the list. The chosen composite is the
// same unique one as with rm_select (same rule, exact integer sums), so results are identical.
#define RM_CAP 2048
struct RmSel2 : RmSel {
  unsigned int nbuf;
  unsigned long long buf[RM_CAP];
};

template <int MODE, int GATHER>
__device__ void rm_select2(const unsigned long long* list, unsigned int cnt, unsigned long long need, float v0, float temp,
                           double scale, int bucket, unsigned long long vand, unsigned long long vor, RmSel2& s) {
  const int tid = threadIdx.x, lane = tid & 31;
  const unsigned long long var = vand ^ vor;  // bits that differ somewhere in the list
  rm_sel_begin(s, bucket, cnt);
  if (tid == 0) s.nbuf = 0;
  __syncthreads();
  const unsigned long long* src = list;
  unsigned int m = cnt;
  bool inbuf = false;
  int shift = 64 - RM_TOPBITS;  // bits at and above `shift` are fixed by the prefix
  for (;;) {
    const unsigned long long vb = var & ((1ULL << shift) - 1ULL);
    const unsigned long long bc = s.bc;
    if (bc <= 1 || vb == 0) break;
    const int h = 63 - __clzll((long long)vb);  // the highest varying bit below shift
    // the window's lowest bit varies too: constant low digit bits would put every digit on a
    // multiple of 2^j (bf16: 5 varying value bits over 3 constant ones = 8-way shared-memory
    // bank conflicts on the 64-bit weight bins); they are taken by a later window
    const int lo = __ffsll((long long)(vb & ~((1ULL << (h >= 7 ? h - 7 : 0)) - 1ULL))) - 1;
    const int d = h - lo + 1;
    const unsigned long long pre = s.prefix >> shift;
    const bool gather = GATHER && !inbuf && bc <= RM_CAP;
    for (int b = tid; b < 256; b += blockDim.x) { s.c[b] = 0; s.w[b] = 0; }
    __syncthreads();
    for (unsigned int e0 = tid - lane; e0 < m; e0 += blockDim.x) {  // warp-uniform trip count
      const unsigned int e = e0 + lane;
      unsigned long long k = 0;
      bool in = false;
      if (e < m) {
        k = src[e];
        in = (k >> shift) == pre;
      }
      if (gather) {
        const unsigned int bm = __ballot_sync(0xffffffffu, in);
        if (bm) {
          const int leader = __ffs(bm) - 1;
          unsigned int base = 0;
          if (lane == leader) base = atomicAdd(&s.nbuf, (unsigned int)__popc(bm));
          base = __shfl_sync(0xffffffffu, base, leader);
          if (in) s.buf[base + __popc(bm & ((1u << lane) - 1u))] = k;
        }
      }
      if (!in) continue;
      rm_sel_add(s, k, lo, d, v0, temp, scale);
    }
    __syncthreads();
    if (gather) {
      src = s.buf;
      m = s.nbuf;
      inbuf = true;
    }
    rm_sel_pick<MODE>(s, d, need);
    __syncthreads();
    if (tid == 0) {  // bits [h + 1, shift) are the same in every composite: take them from vand
      const unsigned long long fixed = vand & ((1ULL << shift) - 1ULL) & ~((2ULL << h) - 1ULL);
      s.prefix |= fixed | ((unsigned long long)s.pk.bin << lo);
      s.ac = s.pk.ac;
      s.aw = s.pk.aw;
      s.bc = s.pk.bc;
    }
    shift = lo;
    __syncthreads();
  }
  rm_sel_find(s, src, m, shift);
}

// The select of variant V: rm_select (V = 0) or rm_select2 on list L's AND / OR.
template <int MODE, int V>
__device__ __forceinline__ void rm_sel(const RmView& v, int L, unsigned long long need, float v0, float temp, double scale,
                                       int bucket, RmSel& s) {
  rm_select<MODE>(v.list[L], v.c->cnt[L], need, v0, temp, scale, bucket, s);
}
template <int MODE, int V>
__device__ __forceinline__ void rm_sel(const RmView& v, int L, unsigned long long need, float v0, float temp, double scale,
                                       int bucket, RmSel2& s) {
  rm_select2<MODE, (V & RM_GATHER) != 0>(v.list[L], v.c->cnt[L], need, v0, temp, scale, bucket, v.c->vand[L], v.c->vor[L], s);
}
template <bool SEL2> struct RmSelPick { typedef RmSel2 type; };
template <> struct RmSelPick<false> { typedef RmSel type; };
template <int V> struct RmSelOf { typedef typename RmSelPick<(V & RM_SEL2) != 0>::type type; };

template <class T, int V>
__global__ void __launch_bounds__(RM_RTHREADS) rm_refine0(unsigned char* ws, SampleParams p) {
  __shared__ typename RmSelOf<V>::type s;
  __shared__ RmPick pk;
  __shared__ RmBPick bp;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  const float v0 = RsKey<float>::val(c->vkey), temp = (float)p.temperature;
  const unsigned long long W = rm_total(c, s.red);
  rm_sel<0, V>(v, 0, (unsigned long long)p.kp - c->above_c0, v0, temp, p.scale, c->bucket[0], s);
  const unsigned long long S = c->above_w0 + s.aw + rm_weight_of_key((unsigned int)(s.ans >> 32), v0, temp, p.scale);
  const unsigned long long need = rm_need(p, S, W);
  rm_pick_top<1, V>(c, need, bp, &pk);
  __syncthreads();
  if (threadIdx.x == 0) {
    c->bucket[1] = pk.bin;
    c->above_w1 = pk.aw;
    c->need1 = need;
    c->use0 = pk.bin == c->bucket[0];
  }
}

template <class T, class TO, int V>
__global__ void __launch_bounds__(RM_RTHREADS) rm_final(TO* result, unsigned char* ws, SampleParams p) {
  __shared__ typename RmSelOf<V>::type s;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  const float v0 = RsKey<float>::val(c->vkey), temp = (float)p.temperature;
  const int L = c->use0 ? 0 : 1;
  rm_sel<1, V>(v, L, c->need1 - c->above_w1, v0, temp, p.scale, c->bucket[1], s);
  if (threadIdx.x == 0) result[0] = Conv<TO>::from((long long)(unsigned int)~(unsigned int)(s.ans & 0xffffffffu));
}
