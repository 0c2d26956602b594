// causal_conv1d_backward. Tensor slots: 0 dx, 1 dweight, 2 dbias, 3 dinitial_states, 4 x,
// 5 weight, 6 bias, 7 dout, 8 initial_states, 9 seq_idx. common.cuh precedes this file.
// g = dout·silu'(pre) (or dout), 0 at padding tokens; dx[p] = sum_k w[k]·g[p + H - k] (taps
// masked as in the forward), dinitial_states likewise for p < 0; dweight[d, k] = sum g[t]·x̃[t+k]
// and dbias = sum g: per-block f32 partial rows part[p][d][0..W] in the workspace, summed in a
// fixed order by cc_reduce (bitwise reproducible).

// dx of one lane's run (positions p0 .. p0+E-1 of the row) from that run's g and ids (gr, sr)
// and the next run's (gn, sn): the W-1 values of g after the lane's elements come from the
// lanes above, the top lanes' from the bottom lanes' next run; one shuffle each (the sending lane
// picks its run or its next run by where its value lands).
template <class T, int W, bool SEQ, int E>
__device__ __forceinline__ void cc_dx_run(T* dxr, long long p0, int lane, bool vec, const float (&gr)[E],
                                          const long long (&sr)[SEQ ? E : 1], const float (&gn)[E],
                                          const long long (&sn)[SEQ ? E : 1], const float (&w)[W], long long L) {
  constexpr int H = W - 1, N = E + H;
  float gc[N];
  long long sc[SEQ ? N : 1];
#pragma unroll
  for (int i = 0; i < E; ++i) {
    gc[i] = gr[i];
    if constexpr (SEQ) sc[i] = sr[i];
  }
#pragma unroll
  for (int j = 0; j < H; ++j) {
    const int fwd = (E + j) / E, idx = E + j - fwd * E;
    const bool next = lane < fwd;  // this lane's value lands in a lane fwd above it, wrapping to the top
    gc[E + j] = __shfl_sync(CC_FULL, next ? gn[idx] : gr[idx], (lane + fwd) & 31);
    if constexpr (SEQ) sc[E + j] = __shfl_sync(CC_FULL, next ? sn[idx] : sr[idx], (lane + fwd) & 31);
  }
  float v[E];
#pragma unroll
  for (int i = 0; i < E; ++i) {
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if constexpr (SEQ) {
        if (sc[i + H - k] == sc[i]) acc = fmaf(w[k], gc[i + H - k], acc);
      } else {
        acc = fmaf(w[k], gc[i + H - k], acc);
      }
    }
    v[i] = acc;
  }
  cc_store_run<T, E>(dxr, p0, L, vec, v);
}

// g of one lane's run from its x (cur), dout (dcur) and ids (scur) and the previous run's x and
// ids (prv, sprv; the taps of cc_taps); its dweight/dbias terms go into acc when SUMS.
template <class T, int W, bool SEQ, int E, bool SUMS>
__device__ __forceinline__ void cc_g_run(const float (&cur)[E], const float (&dcur)[E], const long long (&scur)[SEQ ? E : 1],
                                         const float (&prv)[E], const long long (&sprv)[SEQ ? E : 1], int lane,
                                         const float (&w)[W], float bv, bool silu, float (&g)[E], float (&acc)[W + 1]) {
  constexpr int N = W - 1 + E;
  float comb[N];
  long long scomb[SEQ ? N : 1];
  cc_taps<W, SEQ, E>(cur, prv, scur, sprv, lane, comb, scomb);
#pragma unroll
  for (int i = 0; i < E; ++i) {
    float gi = dcur[i];
    if (silu) gi *= cc_dsilu<T>(cc_pre<W, SEQ, N>(comb, scomb, i, bv, w));
    if constexpr (SEQ) {
      if (scur[i] < 0) gi = 0.f;
    }
    g[i] = gi;
    if constexpr (SUMS) {
#pragma unroll
      for (int k = 0; k < W; ++k) {
        if constexpr (SEQ) {
          if (scomb[i + k] == scur[i]) acc[k] = fmaf(gi, comb[i + k], acc[k]);
        } else {
          acc[k] = fmaf(gi, comb[i + k], acc[k]);
        }
      }
      acc[W] += gi;
    }
  }
}

// Channel-first (x, dout and dx have time stride 1): the walk of ccf_cf. A warp takes rseg
// consecutive chunks of one (b, d) row, a chunk being CCB_U runs of 32·E steps, lane l holding
// E = 16 bytes of T of each run of x and of dout (2·CCB_U independent 16-byte loads); the next
// chunk is loaded before the current one is computed, and after the task's last chunk the run
// that follows it (its lowest lanes only: the W-1 steps of g after the task). The W-1 steps of
// x̃ before the task (cc_history) and the weights are loaded at its start; taps come by one
// shuffle each (cc_taps). Per run: g from dout and the recomputed pre, its dweight/dbias terms
// into per-lane sums, and dx of the previous run (its W-1 steps of g after come from this run by
// shuffles); the last run's dx takes them from the run after the task, whose g is computed in
// registers. The warp's sums go, reduced in a fixed order, to the partial row b·tasks_per_row +
// task. The row's first run writes dinitial_states (CC_FINAL).
#define CCB_U 2

template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(128, SEQ ? 1 : 4)
ccb_cf(T* dx, float* part, T* dinit, const T* x, const void* wt, const void* bias, const T* dout, const T* init,
       const void* seq, const CcArgs a) {
  constexpr int E = 16 / sizeof(T);
  constexpr int H = W - 1;
  constexpr int ES = SEQ ? E : 1;
  constexpr int U = CCB_U;
  constexpr int HL = (H + E - 1) / E;  // lanes holding the W-1 steps after a task in the run after it
  constexpr long long R = 32 * E, C = R * U;  // steps per run, per chunk
  const int lane = threadIdx.x & 31;
  const long long tpr = (a.nseg + a.rseg - 1) / a.rseg;
  const bool vec = (a.flags & CC_VEC) != 0, silu = (a.flags & CC_SILU) != 0;
  const long long wpb = blockDim.x >> 5;
  const long long nrow = a.D * (W + 1);
#pragma unroll 1
  for (long long task = (long long)blockIdx.x * wpb + (threadIdx.x >> 5); task < a.ntask; task += (long long)gridDim.x * wpb) {
    const long long row = task / tpr;
    const long long tk = task - row * tpr;
    const long long c0 = tk * a.rseg;
    const long long c1 = min(c0 + (long long)a.rseg, a.nseg);
    const long long b = row / a.D, d = row - b * a.D;
    const T* xr = x + b * a.x[0] + d * a.x[1];
    const T* dr = dout + b * a.g[0] + d * a.g[1];
    T* dxr = dx + b * a.o[0] + d * a.o[1];
    const T* ir = init + b * a.is[0] + d * a.is[1];  // read only with CC_INIT
    const long long sb = b * a.sq[0];
    // The lane's first step of chunk c is c·C + lane·E; its run u lies u·R further.
    Pack<T, E> xk[U], dk[U];
    long long sk[U][ES];
    {
      const long long p = c0 * C + lane * E;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        xk[u] = cc_load_raw<T, E>(xr + p, u * R, a.L - p, vec);
        dk[u] = cc_load_raw<T, E>(dr + p, u * R, a.L - p, vec);
        if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], p + u * R, a.L, a, sk[u]);
      }
    }
    float xprv[E], gprv[E];
    long long sprv[ES];
    cc_history<T, W, SEQ, E>(c0 * C, lane, xr, ir, seq, sb, a, xprv, sprv);
    float w[W], bv;
    cc_weights<W>(wt, bias, d, a, w, bv);
    float acc[W + 1];
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[k] = 0.f;
#pragma unroll
    for (int i = 0; i < E; ++i) gprv[i] = 0.f;
#pragma unroll 1
    for (long long c = c0; c < c1; ++c) {
      const long long p = c * C + lane * E;
      const bool more = c + 1 < c1;
      Pack<T, E> xn[U], dn[U];
      long long sn[U][ES];
#pragma unroll
      for (int u = 0; u < U; ++u) {  // the next chunk, or the run after the task's lowest lanes
        const long long end = more || (u == 0 && lane < HL) ? a.L : 0;
        xn[u] = cc_load_raw<T, E>(xr + p + C, u * R, end - (p + C), vec);
        dn[u] = cc_load_raw<T, E>(dr + p + C, u * R, end - (p + C), vec);
        if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], p + C + u * R, end, a, sn[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float cur[E], dcur[E], g[E];
        cc_unpack<T, E>(xk[u], cur);
        cc_unpack<T, E>(dk[u], dcur);
        cc_g_run<T, W, SEQ, E, true>(cur, dcur, sk[u], xprv, sprv, lane, w, bv, silu, g, acc);
        if ((a.flags & CC_FINAL) && c == 0 && u == 0) {  // dinitial_states[u] = sum_{k <= u} w[k]·g[u - k]
          float gq[H];
#pragma unroll
          for (int q = 0; q < H; ++q) gq[q] = __shfl_sync(CC_FULL, g[q % E], q / E);
          float v = 0.f;
#pragma unroll
          for (int m = 0; m < H; ++m) {
            float t = 0.f;
#pragma unroll
            for (int k = 0; k <= m; ++k) t = fmaf(w[k], gq[m - k], t);
            if (lane == m) v = t;
          }
          if (lane < H) dinit[b * a.fs[0] + d * a.fs[1] + lane * a.fs[2]] = Conv<T>::from(v);
        }
        if (c > c0 || u > 0) cc_dx_run<T, W, SEQ, E>(dxr, p + u * R - R, lane, vec, gprv, sprv, g, sk[u], w, a.L);
#pragma unroll
        for (int i = 0; i < E; ++i) {
          gprv[i] = g[i];
          xprv[i] = cur[i];
        }
#pragma unroll
        for (int i = 0; i < ES; ++i) sprv[i] = sk[u][i];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        xk[u] = xn[u];
        dk[u] = dn[u];
#pragma unroll
        for (int i = 0; i < ES; ++i) sk[u][i] = sn[u][i];
      }
    }
    {  // the last run's dx: g of the run after the task (0 from L on) in its lowest lanes
      float cur[E], dcur[E], g[E];
      cc_unpack<T, E>(xk[0], cur);
      cc_unpack<T, E>(dk[0], dcur);
      cc_g_run<T, W, SEQ, E, false>(cur, dcur, sk[0], xprv, sprv, lane, w, bv, silu, g, acc);
      const long long p = c1 * C + lane * E;
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (p + i >= a.L) g[i] = 0.f;
      cc_dx_run<T, W, SEQ, E>(dxr, p - R, lane, vec, gprv, sprv, g, sk[0], w, a.L);
    }
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[k] = cc_warp_sum(acc[k]);
    if (lane == 0) {
      float* pr = part + (b * tpr + tk) * nrow + d * (W + 1);
#pragma unroll
      for (int k = 0; k <= W; ++k) pr[k] = acc[k];
    }
  }
}

// Channel-last (x, dout and dx have channel stride 1): the thread layout of ccf_cl, E = CCB_E
// channels per lane (fewer than the forward's: the backward keeps x and g windows and the sums),
// a pack of 2·E channels of x, dout and dx shared by the pair of lanes (cc_cl_load/cc_cl_store).
// A tile [t0, t1) walks t from t0 to t1 + W - 2: g[t] (pre from the sliding x window), its
// dweight and dbias terms while t < t1, and dx[t - H] from the sliding g window once t - H >=
// t0. Sums of the block's time groups are combined in shared memory in a fixed order and written
// as the partial row blockIdx.y. The tile at t0 = 0 writes dinitial_states (CC_FINAL).
#define CCB_E 2
template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(256, SEQ ? 1 : 2)
ccb_cl(T* dx, float* part, T* dinit, const T* x, const void* wt, const void* bias, const T* dout, const T* init,
       const void* seq, const CcArgs a) {
  constexpr int E = CCB_E, Q = 2, CH = CC_CL_CH(T, W), H = W - 1, J = E * (W + 1);
  static_assert(Q == 2 && CH % Q == 0, "pairs of lanes");
  __shared__ float red[J * 8 * 32];
  const int ph = threadIdx.x % Q;
  const long long d0 = ((long long)blockIdx.x * 32 + threadIdx.x) * E;
  const int ne = (int)max(0LL, min((long long)E, a.D - d0));
  const bool vec = cc_cl_vec<E, Q>(a, d0 - ph * E), silu = (a.flags & CC_SILU) != 0;
  float acc[E][W + 1];
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[e][k] = 0.f;
  float w[E][W], bv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) cc_weights<W>(wt, bias, e < ne ? d0 + e : 0, a, w[e], bv[e]);
  const long long tl = (long long)a.rseg * CH;
#pragma unroll 1
  for (long long item = (long long)blockIdx.y * 8 + threadIdx.y; item < a.ntask; item += (long long)gridDim.y * 8) {
    const long long b = item / a.nseg, t0 = (item - b * a.nseg) * tl;
    const long long t1 = min(t0 + tl, a.L);
    const long long tend = min(t1 + H, a.L);  // g is needed up to t1 + H - 1 (0 from L on)
    const T* xb = x + b * a.x[0] + d0 * a.x[1];
    const T* db = dout + b * a.g[0] + d0 * a.g[1];
    T* ob = dx + b * a.o[0] + d0 * a.o[1];
    const T* ib = init + b * a.is[0] + d0 * a.is[1];
    const long long sb = b * a.sq[0];
    if ((a.flags & CC_FINAL) && t0 == 0) {  // dinitial_states[u] = sum_{k <= u} w[k]·g[u - k]
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (e >= ne) continue;
        const T* xe = xb + e * a.x[1];
        const T* de = db + e * a.g[1];
        const T* ie = ib + e * a.is[1];
        float gq[H];
#pragma unroll
        for (int q = 0; q < H; ++q) gq[q] = cc_g_at<T, W>(q, xe, a.x[2], de, a.g[2], ie, a.is[2], seq, sb, w[e], bv[e], a);
#pragma unroll
        for (int u = 0; u < H; ++u) {
          float s = 0.f;
#pragma unroll
          for (int k = 0; k <= u; ++k) s = fmaf(w[e][k], gq[u - k], s);
          dinit[b * a.fs[0] + (d0 + e) * a.fs[1] + u * a.fs[2]] = Conv<T>::from(s);
        }
      }
    }
    float xw[H][E], gw[H][E];
    long long sw[SEQ ? H : 1];
#pragma unroll
    for (int j = 0; j < H; ++j) {
      const long long q = t0 - H + j;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        xw[j][e] = e < ne ? cc_xt(xb + e * a.x[1], a.x[2], ib + e * a.is[1], a.is[2], q, a) : 0.f;
        gw[j][e] = 0.f;  // g before t0 is never read
      }
      if constexpr (SEQ) sw[j] = q >= 0 ? cc_seq(seq, sb + q * a.sq[1], a.flags) : -1;
    }
#pragma unroll 1
    for (long long t = t0; t < t1 + H; t += CH) {
      Pack<T, E> xc[CH], dc[CH];
      long long sc[SEQ ? CH : 1];
      if (vec) {
#pragma unroll
        for (int c = 0; c < CH; c += Q) {
          cc_cl_load<T, E, Q, true>(xb, a.x[1], a.x[2], t + c, tend, ne, ph, true, xc + c);
          cc_cl_load<T, E, Q, true>(db, a.g[1], a.g[2], t + c, tend, ne, ph, true, dc + c);
        }
      } else {
#pragma unroll
        for (int c = 0; c < CH; c += Q) {
          cc_cl_load<T, E, Q, false>(xb, a.x[1], a.x[2], t + c, tend, ne, ph, false, xc + c);
          cc_cl_load<T, E, Q, false>(db, a.g[1], a.g[2], t + c, tend, ne, ph, false, dc + c);
        }
      }
      if constexpr (SEQ) {
#pragma unroll
        for (int c = 0; c < CH; ++c) sc[c] = t + c < tend ? cc_seq(seq, sb + (t + c) * a.sq[1], a.flags) : -1;
      }
      float v[Q][E];
#pragma unroll
      for (int c = 0; c < CH; ++c) {
        const long long tc = t + c;
        const long long sid = SEQ ? sc[SEQ ? c : 0] : 0;
        float xe[E], g[E];
        cc_unpack<T, E>(xc[c], xe);
        cc_unpack<T, E>(dc[c], g);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          float gv = g[e];
          if (silu) {
            float pre = bv[e];
#pragma unroll
            for (int k = 0; k < H; ++k)
              if (!SEQ || sw[SEQ ? k : 0] == sid) pre = fmaf(w[e][k], xw[k][e], pre);
            pre = fmaf(w[e][H], xe[e], pre);
            gv *= cc_dsilu<T>(pre);
          }
          if (SEQ && sid < 0) gv = 0.f;
          g[e] = gv;
        }
        if (tc < t1) {
#pragma unroll
          for (int e = 0; e < E; ++e) {
#pragma unroll
            for (int k = 0; k < H; ++k)
              if (!SEQ || sw[SEQ ? k : 0] == sid) acc[e][k] = fmaf(g[e], xw[k][e], acc[e][k]);
            acc[e][H] = fmaf(g[e], xe[e], acc[e][H]);
            acc[e][W] += g[e];
          }
        }
        {  // dx[tc - H] = sum_k w[k]·g[tc - k]
          const long long sp = SEQ ? sw[0] : 0;
#pragma unroll
          for (int e = 0; e < E; ++e) {
            float s = 0.f;
#pragma unroll
            for (int k = 0; k < W; ++k) {
              const float gk = k == 0 ? g[e] : gw[H - k][e];
              const long long sk = SEQ ? (k == 0 ? sid : sw[SEQ ? H - k : 0]) : 0;
              if (!SEQ || sk == sp) s = fmaf(w[e][k], gk, s);
            }
            v[c % Q][e] = s;
          }
        }
        if (c % Q == Q - 1) {
          if (vec) cc_cl_store<T, E, Q, true>(ob, a.o[1], a.o[2], tc - (Q - 1) - H, t0, t1, ne, ph, true, v);
          else cc_cl_store<T, E, Q, false>(ob, a.o[1], a.o[2], tc - (Q - 1) - H, t0, t1, ne, ph, false, v);
        }
#pragma unroll
        for (int j = 0; j < H; ++j) {
#pragma unroll
          for (int e = 0; e < E; ++e) {
            xw[j][e] = j + 1 < H ? xw[j + 1][e] : xe[e];
            gw[j][e] = j + 1 < H ? gw[j + 1][e] : g[e];
          }
          if constexpr (SEQ) sw[j] = j + 1 < H ? sw[j + 1] : sid;
        }
      }
    }
  }
  // the block's 8 time groups, in order
  const int lid = threadIdx.y * 32 + threadIdx.x;
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int k = 0; k <= W; ++k) red[(e * (W + 1) + k) * 256 + lid] = acc[e][k];
  __syncthreads();
  if (threadIdx.y == 0 && ne > 0) {
    float* pr = part + (long long)blockIdx.y * a.D * (W + 1);
#pragma unroll
    for (int e = 0; e < E; ++e) {
#pragma unroll
      for (int k = 0; k <= W; ++k) {
        float s = 0.f;
#pragma unroll
        for (int y = 0; y < 8; ++y) s += red[(e * (W + 1) + k) * 256 + y * 32 + threadIdx.x];
        if (e < ne) pr[(d0 + e) * (W + 1) + k] = s;
      }
    }
  }
}

// Generic path (any strides, any width): g of every element into the workspace, then dx and
// dinitial_states per element, then dweight/dbias by one block per (d, k).

// gbuf[(b·D + d)·L + t] = g at (b, d, t).
template <class T>
__global__ void __launch_bounds__(256)
ccb_g(float* gbuf, const T* x, const void* wt, const void* bias, const T* dout, const T* init, const void* seq, const CcArgs a) {
  const long long n = a.B * a.D * a.L;
  const int H = a.W - 1;
  const bool has_seq = (a.flags & CC_SEQ) != 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long b, d, t;
    cc_split(i, a, b, d, t);
    const long long sb = b * a.sq[0];
    float gv = cc_f(dout[b * a.g[0] + d * a.g[1] + t * a.g[2]]);
    const long long s = has_seq ? cc_seq(seq, sb + t * a.sq[1], a.flags) : 0;
    if (has_seq && s < 0) {
      gv = 0.f;
    } else if (a.flags & CC_SILU) {
      const T* xr = x + b * a.x[0] + d * a.x[1];
      const T* ir = init + b * a.is[0] + d * a.is[1];
      float acc = (a.flags & CC_BIAS) ? cc_ld(bias, d * a.bs, a.wcode) : 0.f;
      for (int k = 0; k < a.W; ++k) {
        const long long q = t - H + k;
        if (has_seq && (q < 0 || cc_seq(seq, sb + q * a.sq[1], a.flags) != s)) continue;
        acc = fmaf(cc_ld(wt, d * a.w[0] + k * a.w[1], a.wcode), cc_xt(xr, a.x[2], ir, a.is[2], q, a), acc);
      }
      gv *= cc_dsilu<T>(acc);
    }
    gbuf[(b * a.D + d) * a.L + t] = gv;
  }
}

// x̃ position u of (b, d): sum_k w[k]·g[u - k] over 0 <= u - k < L, taps masked by
// seq[u - H] == seq[u - k]; u >= H is dx[u - H], u < H dinitial_states[u] (CC_FINAL).
// rseg = 1: channels fastest.
template <class T>
__global__ void __launch_bounds__(256) ccb_dx(T* dx, T* dinit, const float* gbuf, const void* wt, const void* seq, const CcArgs a) {
  const int H = a.W - 1;
  const long long lh = a.L + H;
  const long long n = a.B * a.D * lh;
  const bool has_seq = (a.flags & CC_SEQ) != 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long b, d, u;
    if (a.rseg == 1) {
      d = i % a.D;
      const long long r = i / a.D;
      u = r % lh;
      b = r / lh;
    } else {
      u = i % lh;
      const long long r = i / lh;
      d = r % a.D;
      b = r / a.D;
    }
    if (u < H && !(a.flags & CC_FINAL)) continue;
    const long long p = u - H, sb = b * a.sq[0];
    const long long s = has_seq && p >= 0 ? cc_seq(seq, sb + p * a.sq[1], a.flags) : 0;
    const float* gr = gbuf + (b * a.D + d) * a.L;
    float v = 0.f;
    for (int k = 0; k < a.W; ++k) {
      const long long t = u - k;
      if (t < 0 || t >= a.L) continue;
      if (has_seq && p >= 0 && cc_seq(seq, sb + t * a.sq[1], a.flags) != s) continue;
      v = fmaf(cc_ld(wt, d * a.w[0] + k * a.w[1], a.wcode), gr[t], v);
    }
    if (u < H) dinit[b * a.fs[0] + d * a.fs[1] + u * a.fs[2]] = Conv<T>::from(v);
    else dx[b * a.o[0] + d * a.o[1] + p * a.o[2]] = Conv<T>::from(v);
  }
}

// dweight[d, k] (k < W) and dbias[d] (k = W): one block per (d, k), summed in a fixed order.
template <class T>
__global__ void __launch_bounds__(256)
ccb_dw(void* dw, void* db, const float* gbuf, const T* x, const T* init, const void* seq, const CcArgs a) {
  __shared__ float sm[256];
  const int W = a.W, H = W - 1;
  const bool has_seq = (a.flags & CC_SEQ) != 0;
  for (long long blk = blockIdx.x; blk < a.D * (W + 1); blk += gridDim.x) {
    const long long d = blk / (W + 1);
    const int k = (int)(blk - d * (W + 1));
    float s = 0.f;
    for (long long j = threadIdx.x; j < a.B * a.L; j += blockDim.x) {
      const long long b = j / a.L, t = j - b * a.L;
      const float g = gbuf[(b * a.D + d) * a.L + t];
      if (k == W) {
        s += g;
        continue;
      }
      const long long q = t - H + k, sb = b * a.sq[0];
      if (has_seq && (q < 0 || cc_seq(seq, sb + q * a.sq[1], a.flags) != cc_seq(seq, sb + t * a.sq[1], a.flags))) continue;
      s = fmaf(g, cc_xt(x + b * a.x[0] + d * a.x[1], a.x[2], init + b * a.is[0] + d * a.is[1], a.is[2], q, a), s);
    }
    sm[threadIdx.x] = s;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
      if ((int)threadIdx.x < o) sm[threadIdx.x] += sm[threadIdx.x + o];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (k < W) cc_st(dw, d * a.dw[0] + k * a.dw[1], a.wcode, sm[0]);
      else if (a.flags & CC_BIAS) cc_st(db, d * a.dbs, a.wcode, sm[0]);
    }
    __syncthreads();
  }
}

// dweight / dbias from the partial rows part[p][d][k] (k = W for the bias): blocks of 32
// columns (d, k) × 8 slices; slice y sums its contiguous range of rows in order (loads batched
// ahead of the adds), then the 8 slice sums are added in slice order. The order depends on
// nparts only: bitwise reproducible (and the plain sum in row order when nparts <= 8).
template <class TW>
__global__ void __launch_bounds__(256) cc_reduce(TW* dw, TW* db, const float* __restrict__ part, const CcArgs a) {
  __shared__ float sm[8][33];
  const int W = a.W;
  const long long n = a.D * (W + 1);
  const long long per = (a.nparts + 7) / 8;
  const long long p0 = min(threadIdx.y * per, a.nparts), p1 = min(p0 + per, a.nparts);
  for (long long j0 = (long long)blockIdx.x * 32; j0 < n; j0 += (long long)gridDim.x * 32) {
    const long long j = j0 + threadIdx.x;
    float s = 0.f;
    if (j < n) {
#pragma unroll 8
      for (long long p = p0; p < p1; ++p) s += __ldg(part + p * n + j);
    }
    sm[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
      float t = sm[0][threadIdx.x];
#pragma unroll
      for (int y = 1; y < 8; ++y) t += sm[y][threadIdx.x];
      const long long d = j / (W + 1);
      const int k = (int)(j - d * (W + 1));
      if (k < W) dw[d * a.dw[0] + k * a.dw[1]] = Conv<TW>::from(t);
      else if (a.flags & CC_BIAS) db[d * a.dbs] = Conv<TW>::from(t);
    }
    __syncthreads();
  }
}
