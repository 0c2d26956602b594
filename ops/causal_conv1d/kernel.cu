// causal_conv1d forward. Tensor slots: 0 out, 1 final_states, 2 x, 3 weight, 4 bias,
// 5 initial_states, 6 seq_idx. common.cuh precedes this file.

// Channel-first (x and out have time stride 1). A warp walks rseg consecutive chunks of one
// (b, d) row; a chunk is CCF_U runs of 32·E steps, lane l holding E = 16 bytes of T of each run
// (each run one contiguous 512-byte access of the warp when CC_VEC and the pack lies inside the
// row). At a task's start its first chunk, the W-1 steps before it (initial_states or 0 before
// t = 0, read by the top lanes as their "previous run") and the weights are loaded with no
// dependence between them; the next chunk is loaded before the current one is computed, and the
// last run's elements are carried to the next chunk in registers. The W-1 steps before a lane's
// elements come by one shuffle from the lanes below (or, for the lowest lanes, from the top
// lanes' previous run). Per output the taps are summed in the order of cc_out. The warp that ends
// a row also writes its final states. SEQ: with seq_idx (ids held as 64-bit values).
#define CCF_U 2

template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(128, SEQ ? 1 : 6)
ccf_cf(T* out, T* fin, const T* x, const void* wt, const void* bias, const T* init, const void* seq, const CcArgs a) {
  constexpr int E = 16 / sizeof(T);
  constexpr int H = W - 1;
  constexpr int N = H + E;
  constexpr int ES = SEQ ? E : 1;
  constexpr int U = CCF_U;
  constexpr long long R = 32 * E, C = R * U;  // steps per run, per chunk
  const int lane = threadIdx.x & 31;
  const long long tpr = (a.nseg + a.rseg - 1) / a.rseg;
  const bool vec = (a.flags & CC_VEC) != 0, silu = (a.flags & CC_SILU) != 0;
  const long long wpb = blockDim.x >> 5;
#pragma unroll 1
  for (long long task = (long long)blockIdx.x * wpb + (threadIdx.x >> 5); task < a.ntask; task += (long long)gridDim.x * wpb) {
    const long long row = task / tpr;
    const long long c0 = (task - row * tpr) * a.rseg;
    const long long c1 = min(c0 + (long long)a.rseg, a.nseg);
    const long long b = row / a.D, d = row - b * a.D;
    const T* xr = x + b * a.x[0] + d * a.x[1];
    T* orow = out + b * a.o[0] + d * a.o[1];
    const T* ir = init + b * a.is[0] + d * a.is[1];  // read only with CC_INIT
    const long long sb = b * a.sq[0];
    // The lane's first step of chunk c is c·C + lane·E; its run u lies u·R further.
    Pack<T, E> pk[U];
    long long sk[U][ES];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      pk[u] = cc_load_raw<T, E>(xr + c0 * C + lane * E, u * R, a.L - (c0 * C + lane * E), vec);
      if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], c0 * C + u * R + lane * E, a.L, a, sk[u]);
    }
    float prv[E];
    long long sprv[ES];
    cc_history<T, W, SEQ, E>(c0 * C, lane, xr, ir, seq, sb, a, prv, sprv);
    float w[W], bv;
    cc_weights<W>(wt, bias, d, a, w, bv);
#pragma unroll 1
    for (long long c = c0; c < c1; ++c) {
      Pack<T, E> nx[U];
      long long snx[U][ES];
      const long long p = c * C + lane * E;
      if (c + 1 < c1) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          nx[u] = cc_load_raw<T, E>(xr + p + C, u * R, a.L - (p + C), vec);
          if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], (c + 1) * C + u * R + lane * E, a.L, a, snx[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float cur[E];
        cc_unpack<T, E>(pk[u], cur);
        float comb[N];
        long long scomb[SEQ ? N : 1];
        cc_taps<W, SEQ, E>(cur, prv, sk[u], sprv, lane, comb, scomb);
        float y[E];
#pragma unroll
        for (int i = 0; i < E; ++i) y[i] = cc_out<T, W, SEQ, N>(comb, scomb, i, bv, w, silu);
        cc_store_run<T, E>(orow + p, u * R, a.L - p, vec, y);
#pragma unroll
        for (int i = 0; i < E; ++i) prv[i] = cur[i];
#pragma unroll
        for (int i = 0; i < ES; ++i) sprv[i] = sk[u][i];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        pk[u] = nx[u];
#pragma unroll
        for (int i = 0; i < ES; ++i) sk[u][i] = snx[u][i];
      }
    }
    if ((a.flags & CC_FINAL) && c1 == a.nseg && lane < H)
      fin[b * a.fs[0] + d * a.fs[1] + lane * a.fs[2]] = Conv<T>::from(cc_xt(xr, 1, ir, a.is[2], a.L - H + lane, a));
  }
}

// Channel-last (x and out have channel stride 1). Threads (x: 32 lanes of CC_E channels, y:
// time groups; a warp shares its item) walk (batch, tile) items of rseg·CH steps, loading CH
// steps at a time by 16-byte packs (cc_cl_load: a pack of 16-bit channels is shared by a pair of
// lanes, f32 lanes load their own) and sliding a window of the last W-1 steps in registers; the
// W-1 steps before a tile are read bounds-checked.
template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(256, SEQ ? 1 : 2)
ccf_cl(T* out, T* fin, const T* x, const void* wt, const void* bias, const T* init, const void* seq, const CcArgs a) {
  constexpr int E = CC_E, Q = 16 / (E * sizeof(T)), CH = CC_CL_CH(T, W), H = W - 1;
  const int ph = threadIdx.x % Q;
  const long long d0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * E;
  if (Q == 1 && d0 >= a.D) return;  // (pairs of lanes stay: their shuffles take the whole warp)
  const int ne = (int)max(0LL, min((long long)E, a.D - d0));
  const bool vec = cc_cl_vec<E, Q>(a, d0 - ph * E), silu = (a.flags & CC_SILU) != 0;
  float w[E][W], bv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) cc_weights<W>(wt, bias, e < ne ? d0 + e : 0, a, w[e], bv[e]);
  const long long tl = (long long)a.rseg * CH;
#pragma unroll 1
  for (long long item = (long long)blockIdx.y * blockDim.y + threadIdx.y; item < a.ntask; item += (long long)gridDim.y * blockDim.y) {
    const long long b = item / a.nseg, t0 = (item - b * a.nseg) * tl;
    const long long t1 = min(t0 + tl, a.L);
    const T* xb = x + b * a.x[0] + d0 * a.x[1];
    T* ob = out + b * a.o[0] + d0 * a.o[1];
    const T* ib = init + b * a.is[0] + d0 * a.is[1];
    const long long sb = b * a.sq[0];
    float xw[H][E];
    long long sw[SEQ ? H : 1];
#pragma unroll
    for (int j = 0; j < H; ++j) {
      const long long q = t0 - H + j;
#pragma unroll
      for (int e = 0; e < E; ++e) xw[j][e] = e < ne ? cc_xt(xb + e * a.x[1], a.x[2], ib + e * a.is[1], a.is[2], q, a) : 0.f;
      if constexpr (SEQ) sw[j] = q >= 0 ? cc_seq(seq, sb + q * a.sq[1], a.flags) : -1;
    }
#pragma unroll 1
    for (long long t = t0; t < t1; t += CH) {
      Pack<T, E> xc[CH];
      long long sc[SEQ ? CH : 1];
      if (Q == 1 || vec) {
#pragma unroll
        for (int c = 0; c < CH; c += Q) cc_cl_load<T, E, Q, true>(xb, a.x[1], a.x[2], t + c, t1, ne, ph, vec, xc + c);
      } else {
#pragma unroll
        for (int c = 0; c < CH; c += Q) cc_cl_load<T, E, Q, false>(xb, a.x[1], a.x[2], t + c, t1, ne, ph, vec, xc + c);
      }
      if constexpr (SEQ) {
#pragma unroll
        for (int c = 0; c < CH; ++c) sc[c] = t + c < t1 ? cc_seq(seq, sb + (t + c) * a.sq[1], a.flags) : -1;
      }
      float y[Q][E];
#pragma unroll
      for (int c = 0; c < CH; ++c) {
        float xe[E];
        cc_unpack<T, E>(xc[c], xe);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          float acc = bv[e];
#pragma unroll
          for (int k = 0; k < H; ++k)
            if (!SEQ || sw[SEQ ? k : 0] == sc[SEQ ? c : 0]) acc = fmaf(w[e][k], xw[k][e], acc);
          acc = fmaf(w[e][H], xe[e], acc);
          float v = silu ? cc_silu<T>(acc) : acc;
          if (SEQ && sc[SEQ ? c : 0] < 0) v = 0.f;
          y[c % Q][e] = v;
        }
        if (c % Q == Q - 1) {
          if (Q == 1 || vec) cc_cl_store<T, E, Q, true>(ob, a.o[1], a.o[2], t + c - (Q - 1), t, t1, ne, ph, vec, y);
          else cc_cl_store<T, E, Q, false>(ob, a.o[1], a.o[2], t + c - (Q - 1), t, t1, ne, ph, vec, y);
        }
#pragma unroll
        for (int j = 0; j < H; ++j) {
#pragma unroll
          for (int e = 0; e < E; ++e) xw[j][e] = j + 1 < H ? xw[j + 1][e] : xe[e];
          if constexpr (SEQ) sw[j] = j + 1 < H ? sw[j + 1] : sc[c];
        }
      }
    }
    if ((a.flags & CC_FINAL) && t1 == a.L) {
#pragma unroll
      for (int j = 0; j < H; ++j)
#pragma unroll
        for (int e = 0; e < E; ++e)
          if (e < ne)
            fin[b * a.fs[0] + (d0 + e) * a.fs[1] + j * a.fs[2]] =
                Conv<T>::from(cc_xt(xb + e * a.x[1], a.x[2], ib + e * a.is[1], a.is[2], a.L - H + j, a));
    }
  }
}

// Any strides and any width: one thread per output element. rseg = 1: channels fastest
// (channel-last outputs), else time fastest.
template <class T>
__global__ void __launch_bounds__(256)
ccf_gen(T* out, T* fin, const T* x, const void* wt, const void* bias, const T* init, const void* seq, const CcArgs a) {
  const long long n = a.B * a.D * a.L;
  const int H = a.W - 1;
  const bool has_seq = (a.flags & CC_SEQ) != 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long b, d, t;
    cc_split(i, a, b, d, t);
    const T* xr = x + b * a.x[0] + d * a.x[1];
    const T* ir = init + b * a.is[0] + d * a.is[1];
    const long long sb = b * a.sq[0];
    float acc = (a.flags & CC_BIAS) ? cc_ld(bias, d * a.bs, a.wcode) : 0.f;
    const long long s = has_seq ? cc_seq(seq, sb + t * a.sq[1], a.flags) : 0;
    for (int k = 0; k < a.W; ++k) {
      const long long q = t - H + k;
      if (has_seq && (q < 0 || cc_seq(seq, sb + q * a.sq[1], a.flags) != s)) continue;
      acc = fmaf(cc_ld(wt, d * a.w[0] + k * a.w[1], a.wcode), cc_xt(xr, a.x[2], ir, a.is[2], q, a), acc);
    }
    float y = (a.flags & CC_SILU) ? cc_silu<T>(acc) : acc;
    if (has_seq && s < 0) y = 0.f;
    out[b * a.o[0] + d * a.o[1] + t * a.o[2]] = Conv<T>::from(y);
  }
}

// final_states[b, d, j] = x̃[b, d, L + j] (generic path): one thread per element.
template <class T>
__global__ void __launch_bounds__(256) cc_final(T* fin, const T* x, const T* init, const CcArgs a) {
  const int H = a.W - 1;
  const long long n = a.B * a.D * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long j = i % H, r = i / H;
    const long long d = r % a.D, b = r / a.D;
    const T* xr = x + b * a.x[0] + d * a.x[1];
    const T* ir = init + b * a.is[0] + d * a.is[1];
    fin[b * a.fs[0] + d * a.fs[1] + j * a.fs[2]] = Conv<T>::from(cc_xt(xr, a.x[2], ir, a.is[2], a.L - H + j, a));
  }
}
