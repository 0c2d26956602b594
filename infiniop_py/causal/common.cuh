// causal_conv1d family: helpers shared by the forward, backward and update kernels.
// Notation: x (B, D, L), weight (D, W), H = W - 1; x̃ = [initial_states | x] along time.
// pre[t] = bias + sum_k w[k]·x̃[t + k] (f32, taps in order k = 0 .. W-1); with seq_idx the tap
// k of t counts only if t' = t - H + k >= 0 and seq[t'] == seq[t]; seq[t] < 0 gives 0.

#define CC_FULL 0xffffffffu

// Flags of CcArgs::flags.
#define CC_BIAS 1
#define CC_INIT 2
#define CC_FINAL 4  // forward: final_states; backward: dinitial_states
#define CC_SEQ 8
#define CC_SEQ64 16
#define CC_SILU 32
#define CC_VEC 64  // the vector accesses of this launch are aligned

// Layout and options of one launch, passed by value (mirrors plan.CcArgs).
struct CcArgs {
  long long B, D, L;
  long long x[3];   // x strides (b, d, t)
  long long o[3];   // out / dx strides
  long long g[3];   // dout strides (backward)
  long long is[3];  // initial_states strides
  long long fs[3];  // final_states / dinitial_states strides
  long long sq[2];  // seq_idx strides (b, t)
  long long w[2];   // weight strides (d, k)
  long long bs;     // bias stride
  long long dw[2];  // dweight strides (backward)
  long long dbs;    // dbias stride (backward)
  long long nseg;   // channel-first: segments per row; channel-last: time tiles per row
  long long ntask;  // channel-first: warp tasks; channel-last: (batch, tile) items
  long long nparts; // backward: partial rows in the workspace
  int W;            // the width (generic kernels)
  int flags;
  int wcode;        // weight / bias dtype: 0 f32, 1 f16, 2 bf16
  int rseg;         // channel-first: segments per warp task; channel-last: steps per tile / 8
};

__device__ __forceinline__ float cc_ld(const void* p, long long i, int code) {
  if (code == 0) return static_cast<const float*>(p)[i];
  if (code == 1) return iop_h2f(static_cast<const iop_half*>(p)[i]);
  return iop_b2f(static_cast<const iop_bf16*>(p)[i]);
}

__device__ __forceinline__ void cc_st(void* p, long long i, int code, float v) {
  if (code == 0) static_cast<float*>(p)[i] = v;
  else if (code == 1) static_cast<iop_half*>(p)[i] = iop_f2h(v);
  else static_cast<iop_bf16*>(p)[i] = iop_f2b(v);
}

__device__ __forceinline__ long long cc_seq(const void* p, long long i, int flags) {
  return (flags & CC_SEQ64) ? static_cast<const long long*>(p)[i] : (long long)static_cast<const int*>(p)[i];
}

// SiLU of the pre-activation of an output stored as T. f32: expf and IEEE division. 16-bit T:
// exp by ex2.approx (__expf) and the approximate reciprocal (__fdividef), a few f32 ulps from
// the f32 form, far below the storage rounding (2^-9 relative for bf16, 2^-12 for f16) and
// about a third of the instructions (no range-reduced expf, no division slow path).
template <class T>
__device__ __forceinline__ float cc_silu(float v) {
  if constexpr (sizeof(T) == 2) return __fdividef(v, 1.f + __expf(-v));
  else return v / (1.f + expf(-v));
}

// d silu / d pre = s·(1 + pre·(1 - s)), s = sigmoid(pre); the exp and the reciprocal as in
// cc_silu<T>.
template <class T>
__device__ __forceinline__ float cc_dsilu(float v) {
  float s;
  if constexpr (sizeof(T) == 2) s = __fdividef(1.f, 1.f + __expf(-v));
  else s = 1.f / (1.f + expf(-v));
  return s * (1.f + v * (1.f - s));
}

template <class T>
__device__ __forceinline__ float cc_f(T v) { return (float)iop_load(v); }

// The width's weights of channel d (and its bias) as f32.
template <int W>
__device__ __forceinline__ void cc_weights(const void* wt, const void* bias, long long d, const CcArgs& a, float (&w)[W], float& bv) {
#pragma unroll
  for (int k = 0; k < W; ++k) w[k] = cc_ld(wt, d * a.w[0] + k * a.w[1], a.wcode);
  bv = (a.flags & CC_BIAS) ? cc_ld(bias, d * a.bs, a.wcode) : 0.f;
}

// x̃ at time q of the row (b, d) whose x elements are xr[q * xst]: q < 0 reads initial_states
// (or 0), q >= L gives 0.
template <class T>
__device__ __forceinline__ float cc_xt(const T* xr, long long xst, const T* ir, long long ist, long long q, const CcArgs& a) {
  if (q >= a.L) return 0.f;
  if (q >= 0) return cc_f(xr[q * xst]);
  if (a.flags & CC_INIT) return cc_f(ir[(q + a.W - 1) * ist]);
  return 0.f;
}

// g at time q of one row, from global memory (used where a tile's neighbours are not at hand):
// dout[q]·silu'(pre[q]) (or dout[q]), 0 at padding tokens and for q >= L.
template <class T, int W>
__device__ float cc_g_at(long long q, const T* xr, long long xst, const T* dr, long long dst, const T* ir, long long ist,
                         const void* seq, long long sb, const float (&w)[W], float bv, const CcArgs& a) {
  if (q < 0 || q >= a.L) return 0.f;
  const float dv = cc_f(dr[q * dst]);
  long long s = 0;
  const bool has_seq = (a.flags & CC_SEQ) != 0;
  if (has_seq) {
    s = cc_seq(seq, sb + q * a.sq[1], a.flags);
    if (s < 0) return 0.f;
  }
  if (!(a.flags & CC_SILU)) return dv;
  float acc = bv;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const long long p = q - (W - 1) + k;
    bool keep = true;
    if (has_seq) keep = p >= 0 && cc_seq(seq, sb + p * a.sq[1], a.flags) == s;
    if (keep) acc = fmaf(w[k], cc_xt(xr, xst, ir, ist, p, a), acc);
  }
  return dv * cc_dsilu<T>(acc);
}

// Loads E consecutive elements p0 .. p0+E-1 of a row (stride 1) as f32, 0 beyond L: one
// 16-byte access when allowed and the whole pack is inside the row.
template <class T, int E>
__device__ __forceinline__ void cc_load_run(const T* r, long long p0, long long L, bool vec, float (&v)[E]) {
  if (vec && p0 + E <= L) {
    const Pack<T, E> pk = *reinterpret_cast<const Pack<T, E>*>(r + p0);
#pragma unroll
    for (int i = 0; i < E; ++i) v[i] = cc_f(pk.v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) v[i] = p0 + i < L ? cc_f(r[p0 + i]) : 0.f;
  }
}

template <class T>
struct CcBf16 {
  static constexpr bool value = false;
};
template <>
struct CcBf16<iop_bf16> {
  static constexpr bool value = true;
};

// v rounded to T as one pack; bf16 pairs by one cvt.rn.bf16x2.f32 each (the same rounding as
// Conv<iop_bf16>::from, half the conversions).
template <class T, int E>
__device__ __forceinline__ Pack<T, E> cc_pack(const float (&v)[E]) {
  if constexpr (CcBf16<T>::value && E % 2 == 0) {
    union {
      Pack<T, E> pk;
      unsigned u[E / 2];
    } r;
#pragma unroll
    for (int i = 0; i < E / 2; ++i) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r.u[i]) : "f"(v[2 * i + 1]), "f"(v[2 * i]));
    return r.pk;
  } else {
    Pack<T, E> pk;
#pragma unroll
    for (int i = 0; i < E; ++i) pk.v[i] = Conv<T>::from(v[i]);
    return pk;
  }
}

template <class T, int E>
__device__ __forceinline__ void cc_store_run(T* r, long long p0, long long L, bool vec, const float (&v)[E]) {
  if (vec && p0 + E <= L) {
    *reinterpret_cast<Pack<T, E>*>(r + p0) = cc_pack<T, E>(v);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i)
      if (p0 + i < L) r[p0 + i] = Conv<T>::from(v[i]);
  }
}

// The pack of E elements p0 .. p0+E-1 of a row (stride 1), 0 beyond L: one 16-byte access
// when allowed and the whole pack is inside the row (kept in T until used).
template <class T, int E>
__device__ __forceinline__ Pack<T, E> cc_load_raw(const T* r, long long p0, long long L, bool vec) {
  Pack<T, E> pk;
  if (vec && p0 + E <= L) {
    pk = *reinterpret_cast<const Pack<T, E>*>(r + p0);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) pk.v[i] = p0 + i < L ? r[p0 + i] : Conv<T>::from(0.f);
  }
  return pk;
}

template <class T, int E>
__device__ __forceinline__ void cc_unpack(const Pack<T, E>& pk, float (&v)[E]) {
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] = cc_f(pk.v[i]);
}

// The "previous run" of a lane before the warp walk that starts at step p (a multiple of 32·E):
// v[i] = x̃ at p - 32·E + lane·E + i where that is one of the W-1 steps before p (initial_states
// or 0 before t = 0), else 0; with SEQ, s[i] its id (-1 before t = 0 and where v is 0).
template <class T, int W, bool SEQ, int E>
__device__ __forceinline__ void cc_history(long long p, int lane, const T* xr, const T* ir, const void* seq, long long sb,
                                           const CcArgs& a, float (&v)[E], long long (&s)[SEQ ? E : 1]) {
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const long long q = p - 32 * E + lane * E + i;
    const bool live = q >= p - (W - 1);
    v[i] = live ? cc_xt(xr, 1, ir, a.is[2], q, a) : 0.f;
    if constexpr (SEQ) s[i] = live && q >= 0 ? cc_seq(seq, sb + q * a.sq[1], a.flags) : -1;
  }
}

// The taps of one lane's run: comb[H + i] = cur[i] and comb[j] = the value H - j steps before
// the run, from the lane below (the run cur of every lane) or, for the lowest lanes, from the
// top lanes' previous run prv; one shuffle each (the sending lane picks cur or prv by where its
// value lands). With SEQ, scomb holds the ids the same way.
template <int W, bool SEQ, int E>
__device__ __forceinline__ void cc_taps(const float (&cur)[E], const float (&prv)[E], const long long (&scur)[SEQ ? E : 1],
                                        const long long (&sprv)[SEQ ? E : 1], int lane, float (&comb)[W - 1 + E],
                                        long long (&scomb)[SEQ ? W - 1 + E : 1]) {
  constexpr int H = W - 1;
#pragma unroll
  for (int j = 0; j < H; ++j) {
    const int dist = H - j, back = (dist + E - 1) / E, idx = back * E - dist;
    const bool wraps = lane + back > 31;  // this lane's value lands in a lane below back
    comb[j] = __shfl_sync(CC_FULL, wraps ? prv[idx] : cur[idx], (lane - back) & 31);
    if constexpr (SEQ) scomb[j] = __shfl_sync(CC_FULL, wraps ? sprv[idx] : scur[idx], (lane - back) & 31);
  }
#pragma unroll
  for (int i = 0; i < E; ++i) {
    comb[H + i] = cur[i];
    if constexpr (SEQ) scomb[H + i] = scur[i];
  }
}

// Sum of v over the warp, the same value in every lane (fixed butterfly order).
__device__ __forceinline__ float cc_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(CC_FULL, v, o);
  return v;
}

// Channel-last kernels: E channels per thread, tiles of rseg·(steps per chunk) time steps.
#define CC_E 4
#define CC_CH 8
// Steps per chunk of the channel-last kernels: two lanes' chunks for 16-bit T up to W = 4 (more
// bytes in flight per lane; wider windows would spill).
#define CC_CL_CH(T, W) (sizeof(T) == 2 && (W) <= 4 ? 2 * CC_CH : CC_CH)

// Channel-last packs of Q·E channels shared by Q = 1 or 2 neighbouring lanes: the lane of phase
// ph = lane % Q owns the channels ph·E .. ph·E+E-1 of its pack (r points at its first one). With
// Q = 2 the pair covers the steps q and q + 1 together: phase ph loads the whole pack at step
// q + ph and the two swap halves (one shuffle per 32-bit word), so each holds its own E channels
// at both steps; a store swaps back and each lane writes the whole pack at its step. VEC
// (aligned packs, each pack wholly inside D or wholly beyond it) is the same in the whole warp
// for Q = 2 (every lane calls these: the shuffles); without it a lane reads and writes its own
// ne channels one by one. Q = 1 decides per access by vec instead (VEC is true).
template <class T, int E>
union CcWords {
  Pack<T, E> pk;
  unsigned u[E * sizeof(T) / 4];
};

// v[s] = the lane's E channels at step q + s (s < Q), 0 from step qend on.
template <class T, int E, int Q, bool VEC>
__device__ __forceinline__ void cc_cl_load(const T* r, long long sd, long long st, long long q, long long qend, int ne, int ph,
                                           bool vec, Pack<T, E>* v) {
  if constexpr (!VEC) {
#pragma unroll
    for (int s = 0; s < Q; ++s)
#pragma unroll
      for (int e = 0; e < E; ++e) v[s].v[e] = e < ne && q + s < qend ? r[e * sd + (q + s) * st] : Conv<T>::from(0.f);
  } else if constexpr (Q == 1) {
    if (q >= qend) {
#pragma unroll
      for (int e = 0; e < E; ++e) v[0].v[e] = Conv<T>::from(0.f);
    } else if (vec) {
      v[0] = *reinterpret_cast<const Pack<T, E>*>(r + q * st);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) v[0].v[e] = e < ne ? r[e * sd + q * st] : Conv<T>::from(0.f);
    }
  } else {
    static_assert(Q == 2, "pairs of lanes");
    constexpr int NW = E * sizeof(T) / 4;
    CcWords<T, 2 * E> in;
#pragma unroll
    for (int w = 0; w < 2 * NW; ++w) in.u[w] = 0u;
    if (ne > 0 && q + ph < qend) in.pk = *reinterpret_cast<const Pack<T, 2 * E>*>(r - ph * E + (q + ph) * st);
    CcWords<T, E> lo, hi;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const unsigned keep = ph ? in.u[NW + w] : in.u[w];
      const unsigned got = __shfl_xor_sync(CC_FULL, ph ? in.u[w] : in.u[NW + w], 1);
      lo.u[w] = ph ? got : keep;
      hi.u[w] = ph ? keep : got;
    }
    v[0] = lo.pk;
    v[1] = hi.pk;
  }
}

// Stores y[s] (the lane's E channels at step q + s, s < Q) where lo <= q + s < hi.
template <class T, int E, int Q, bool VEC>
__device__ __forceinline__ void cc_cl_store(T* r, long long sd, long long st, long long q, long long lo, long long hi, int ne,
                                            int ph, bool vec, const float (*y)[E]) {
  if constexpr (!VEC) {
#pragma unroll
    for (int s = 0; s < Q; ++s)
      if (q + s >= lo && q + s < hi)
#pragma unroll
        for (int e = 0; e < E; ++e)
          if (e < ne) r[e * sd + (q + s) * st] = Conv<T>::from(y[s][e]);
  } else if constexpr (Q == 1) {
    if (q < lo || q >= hi) return;
    if (vec) {
      *reinterpret_cast<Pack<T, E>*>(r + q * st) = cc_pack<T, E>(y[0]);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (e < ne) r[e * sd + q * st] = Conv<T>::from(y[0][e]);
    }
  } else {
    constexpr int NW = E * sizeof(T) / 4;
    CcWords<T, E> a, b;
    a.pk = cc_pack<T, E>(y[0]);
    b.pk = cc_pack<T, E>(y[1]);
    CcWords<T, 2 * E> o;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const unsigned own = ph ? b.u[w] : a.u[w];
      const unsigned got = __shfl_xor_sync(CC_FULL, ph ? a.u[w] : b.u[w], 1);
      o.u[w] = ph ? got : own;
      o.u[NW + w] = ph ? own : got;
    }
    if (ne > 0 && q + ph >= lo && q + ph < hi) *reinterpret_cast<Pack<T, 2 * E>*>(r - ph * E + (q + ph) * st) = o.pk;
  }
}

// Whether the channel-last launch takes the packed accesses: CC_VEC and the lane's pack (first
// channel dp, Q·E channels) wholly inside D or beyond it, in every lane of the warp for Q = 2.
template <int E, int Q>
__device__ __forceinline__ bool cc_cl_vec(const CcArgs& a, long long dp) {
  const bool ok = (a.flags & CC_VEC) != 0 && (dp + Q * E <= a.D || dp >= a.D);
  if constexpr (Q == 1) return ok;
  else return __all_sync(CC_FULL, ok);
}

// seq_idx ids of E consecutive steps p0 .. p0+E-1 of row sb (time stride st); -1 from step
// end on (end = L: beyond the row).
template <int E>
__device__ __forceinline__ void cc_seq_run(const void* seq, long long sb, long long st, long long p0, long long end,
                                           const CcArgs& a, long long (&v)[E]) {
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] = p0 + i < end ? cc_seq(seq, sb + (p0 + i) * st, a.flags) : -1;
}

// pre at the position whose taps are comb[i .. i+W-1] (x̃ as f32); with SEQ, scomb holds their
// ids and the position's own id is scomb[i + W - 1].
template <int W, bool SEQ, int N>
__device__ __forceinline__ float cc_pre(const float (&comb)[N], const long long (&scomb)[SEQ ? N : 1], int i, float bv,
                                        const float (&w)[W]) {
  float acc = bv;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    if constexpr (SEQ) {
      if (scomb[i + k] == scomb[i + W - 1]) acc = fmaf(w[k], comb[i + k], acc);
    } else {
      acc = fmaf(w[k], comb[i + k], acc);
    }
  }
  return acc;
}

// act(pre) there (output type T), 0 at a padding token.
template <class T, int W, bool SEQ, int N>
__device__ __forceinline__ float cc_out(const float (&comb)[N], const long long (&scomb)[SEQ ? N : 1], int i, float bv,
                                        const float (&w)[W], bool silu) {
  const float acc = cc_pre<W, SEQ, N>(comb, scomb, i, bv, w);
  float y = silu ? cc_silu<T>(acc) : acc;
  if constexpr (SEQ) {
    if (scomb[i + W - 1] < 0) y = 0.f;
  }
  return y;
}

// (b, d, t) of flat index i over (B, D, L): rseg = 1 puts channels fastest, else time.
__device__ __forceinline__ void cc_split(long long i, const CcArgs& a, long long& b, long long& d, long long& t) {
  if (a.rseg == 1) {
    d = i % a.D;
    const long long r = i / a.D;
    t = r % a.L;
    b = r / a.L;
  } else {
    t = i % a.L;
    const long long r = i / a.L;
    d = r % a.D;
    b = r / a.D;
  }
}
