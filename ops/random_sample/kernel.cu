// random_sample: the upstream library rule over one row of logits. f64: one block, no workspace
// (below); f32/f16/bf16: the multi-block path (multiblock.cu, sampled.cu, compiled after this file).
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

// Fixed-point weight of value v (0 for NaN; at most `scale`).
template <class A>
__device__ __forceinline__ unsigned long long rs_weight(A v, A v0, A temp, double scale) {
  A e = OrderKey<A>::ex((v - v0) / temp);
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
  typedef typename OrderKey<A>::U U;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) {
    sh.prefix = 0;
    sh.above_c = 0;
    sh.above_w = 0;
    sh.stop = 0;
  }
  __syncthreads();
  for (int shift = OrderKey<A>::BITS - 4; shift >= 0; shift -= 4) {
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
      const U k = OrderKey<A>::key(v);
      if (shift + 4 < OrderKey<A>::BITS && ((k ^ prefix) >> (shift + 4)) != 0) continue;
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
  typedef typename OrderKey<A>::U U;
  __shared__ RsShared sh;
  __shared__ U s_key[RS_WARPS];
  __shared__ long long s_idx[RS_WARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long n = p.n;

  // 1. argmax by key (ties -> lower index): each thread walks increasing indices.
  U bk = 0;
  long long bi = n;
  for (long long i = tid; i < n; i += RS_THREADS) {
    const U k = OrderKey<A>::key(red_load(x[i]));
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
  const A v0 = OrderKey<A>::val(s_key[0]);
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
  for (long long i = lo; i < hi; ++i) cnt += ((OrderKey<A>::key(red_load(x[i])) ^ prefix) >> shift) == 0;
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
      if (((OrderKey<A>::key(red_load(x[i])) ^ prefix) >> shift) == 0) {
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
