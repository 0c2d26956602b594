// random_sample, multi-block sampled path (after multiblock.cu): the 2048-bin histogram of the
// top key bits, the compaction of a top-level bucket into a list, and the radix selects in it.

template <class T>
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
  const float v0 = OrderKey<float>::val(vk), temp = (float)p.temperature;
  const long long b0 = (long long)blockIdx.x * RM_EPB;
  const long long b1 = min((long long)n, b0 + RM_EPB);
  constexpr int PER = RM_EPB / RM_THREADS;  // the loads of a thread are issued first
  float xs[PER];
#pragma unroll
  for (int q = 0; q < PER; ++q) {
    const long long i = b0 + threadIdx.x + q * RM_THREADS;
    xs[q] = i < b1 ? red_load(x[i]) : 0.f;
  }
#pragma unroll
  for (int q = 0; q < PER; ++q) {
    if (b0 + threadIdx.x + q * RM_THREADS >= b1) break;
    const unsigned int k = OrderKey<float>::key(xs[q]);
    const int d = (int)(k >> (32 - RM_TOPBITS));
    atomicAdd(&sc[d], 1u);
    atomicAdd(&sw[d], rs_weight<float>(xs[q], v0, temp, p.scale));
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

// rm_pick<MODE, RM_BINS> (ac0 = aw0 = 0) on the global histogram by the whole block:
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
template <class T, int WHICH, int SEL2>
__global__ void __launch_bounds__(RM_THREADS) rm_compact(const T* __restrict__ x, unsigned char* ws, SampleParams p) {
  __shared__ RmPick pk;
  __shared__ unsigned long long red[32];
  __shared__ RmBPick bp;
  const int n = (int)p.n;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  int bucket;
  if (WHICH == 0) {
    rm_pick_hist<0>(c->hist_c, c->hist_w, (unsigned long long)p.kp, bp, &pk);
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
    rm_pick_hist<1>(c->hist_c, c->hist_w, need, bp, &pk);
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
  unsigned long long van = ~0ULL, vor = 0ULL;  // SEL2: AND / OR of this lane's composites
  bool any = false;
  constexpr int PER = RM_EPB / RM_THREADS;
  unsigned int ks[PER];
#pragma unroll
  for (int q = 0; q < PER; ++q) {  // all loads of this thread first
    const long long i = b0 + threadIdx.x + q * RM_THREADS;
    ks[q] = i < b1 ? OrderKey<float>::key(red_load(x[i])) : 0u;
  }
#pragma unroll
  for (int q = 0; q < PER; ++q) {  // warp-uniform trip count
    const long long i0 = b0 + q * RM_THREADS;
    if (i0 >= b1) break;
    const long long i = i0 + threadIdx.x;
    unsigned int k = 0;
    bool hit = false;
    if (i < b1) {
      k = ks[q];
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
        if (SEL2) {
          van &= comp;
          vor |= comp;
        }
      }
      any = true;
    }
  }
  if (SEL2 && any) {  // `any` is warp-uniform (set from the ballot); one atomic pair per warp
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

// One pass of a select: the counts and weights of the d-bit window at bit lo of the composites
// whose bits from `shift` up match the prefix (UNIFORM: a warp-uniform trip count), the pick of its
// bin, and the prefix extended by that bin and by `fixed`.
template <int MODE, bool UNIFORM>
__device__ __forceinline__ void rm_sel_pass(RmSel& s, const unsigned long long* list, unsigned int cnt, int shift, int lo, int d,
                                            unsigned long long fixed, float v0, float temp, double scale,
                                            unsigned long long need) {
  const int tid = threadIdx.x, lane = tid & 31;
  const unsigned long long pre = s.prefix >> shift;
  for (int b = tid; b < 256; b += blockDim.x) { s.c[b] = 0; s.w[b] = 0; }
  __syncthreads();
  for (unsigned int e0 = UNIFORM ? tid - lane : tid; e0 < cnt; e0 += blockDim.x) {
    const unsigned int e = UNIFORM ? e0 + lane : e0;
    if (e >= cnt) continue;
    const unsigned long long k = list[e];
    if ((k >> shift) != pre) continue;
    rm_sel_add(s, k, lo, d, v0, temp, scale);
  }
  __syncthreads();
  rm_sel_pick<MODE>(s, d, need);
  __syncthreads();
  if (tid == 0) {
    s.prefix |= fixed | ((unsigned long long)s.pk.bin << lo);
    s.ac = s.pk.ac;
    s.aw = s.pk.aw;
    s.bc = s.pk.bc;
  }
  __syncthreads();
}

template <int MODE>
__device__ void rm_select(const unsigned long long* list, unsigned int cnt, unsigned long long need, float v0, float temp,
                          double scale, int bucket, RmSel& s) {
  rm_sel_begin(s, bucket, cnt);
  __syncthreads();
  int shift = 64 - RM_TOPBITS;  // bits above `shift` are fixed by the prefix
  while (s.bc > 1 && shift > 0) {
    const int d = shift < 8 ? shift : 8;
    const int lo = shift - d;
    rm_sel_pass<MODE, false>(s, list, cnt, shift, lo, d, 0ull, v0, temp, scale, need);  // d = 8, or 5 last (53 = 6*8 + 5)
    shift = lo;
  }
  rm_sel_find(s, list, cnt, shift);
}

// rm_select2 (SEL2 = 1, f16 / bf16): the same select, but each pass takes the 8-bit window
// starting at the highest bit that varies across the list (the AND / OR of its composites, from
// rm_compact), so bits constant over the whole bucket cost no pass. 16-bit logits have few
// distinct values, so the low float-key bits are constant and ties are common; fixed windows
// spend 3-4 passes over constant key bits and over the index's constant high bits before the
// index bits that break the ties. The chosen composite is the same unique one as with rm_select
// (same rule, exact integer sums), so results are identical.
template <int MODE>
__device__ void rm_select2(const unsigned long long* list, unsigned int cnt, unsigned long long need, float v0, float temp,
                           double scale, int bucket, unsigned long long vand, unsigned long long vor, RmSel& s) {
  const unsigned long long var = vand ^ vor;  // bits that differ somewhere in the list
  rm_sel_begin(s, bucket, cnt);
  __syncthreads();
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
    // bits [h + 1, shift) are the same in every composite: taken from vand
    const unsigned long long fixed = vand & ((1ULL << shift) - 1ULL) & ~((2ULL << h) - 1ULL);
    rm_sel_pass<MODE, true>(s, list, cnt, shift, lo, d, fixed, v0, temp, scale, need);
    shift = lo;
  }
  rm_sel_find(s, list, cnt, shift);
}

// The select of list L: rm_select2 on its AND / OR (SEL2) or rm_select.
template <int MODE, int SEL2>
__device__ __forceinline__ void rm_sel(const RmView& v, int L, unsigned long long need, float v0, float temp, double scale,
                                       int bucket, RmSel& s) {
  if constexpr (SEL2) {
    rm_select2<MODE>(v.list[L], v.c->cnt[L], need, v0, temp, scale, bucket, v.c->vand[L], v.c->vor[L], s);
  } else {
    rm_select<MODE>(v.list[L], v.c->cnt[L], need, v0, temp, scale, bucket, s);
  }
}

template <class T, int SEL2>
__global__ void __launch_bounds__(RM_RTHREADS) rm_refine0(unsigned char* ws, SampleParams p) {
  __shared__ RmSel s;
  __shared__ RmPick pk;
  __shared__ RmBPick bp;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  const float v0 = OrderKey<float>::val(c->vkey), temp = (float)p.temperature;
  const unsigned long long W = rm_total(c, s.red);
  rm_sel<0, SEL2>(v, 0, (unsigned long long)p.kp - c->above_c0, v0, temp, p.scale, c->bucket[0], s);
  const unsigned long long S = c->above_w0 + s.aw + rm_weight_of_key((unsigned int)(s.ans >> 32), v0, temp, p.scale);
  const unsigned long long need = rm_need(p, S, W);
  rm_pick_hist<1>(c->hist_c, c->hist_w, need, bp, &pk);
  __syncthreads();
  if (threadIdx.x == 0) {
    c->bucket[1] = pk.bin;
    c->above_w1 = pk.aw;
    c->need1 = need;
    c->use0 = pk.bin == c->bucket[0];
  }
}

template <class T, class TO, int SEL2>
__global__ void __launch_bounds__(RM_RTHREADS) rm_final(TO* result, unsigned char* ws, SampleParams p) {
  __shared__ RmSel s;
  RmView v = rm_view(ws, p.n, p.pad_);
  RmCtrl* c = v.c;
  const float v0 = OrderKey<float>::val(c->vkey), temp = (float)p.temperature;
  const int L = c->use0 ? 0 : 1;
  rm_sel<1, SEL2>(v, L, c->need1 - c->above_w1, v0, temp, p.scale, c->bucket[1], s);
  if (threadIdx.x == 0) result[0] = Conv<TO>::from((long long)(unsigned int)~(unsigned int)(s.ans & 0xffffffffu));
}
