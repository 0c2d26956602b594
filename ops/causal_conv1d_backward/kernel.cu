// causal_conv1d_backward. Tensor slots: 0 dx, 1 dweight, 2 dbias, 3 dinitial_states, 4 x,
// 5 weight, 6 bias, 7 dout, 8 initial_states, 9 seq_idx. common.cuh precedes this file.
// g = dout·silu'(pre) (or dout), 0 at padding tokens; dx[p] = sum_k w[k]·g[p + H - k] (taps
// masked as in the forward), dinitial_states likewise for p < 0; dweight[d, k] = sum g[t]·x̃[t+k]
// and dbias = sum g: per-block f32 partial rows part[p][d][0..W] in the workspace, summed in a
// fixed order by cc_reduce (bitwise reproducible).

// dx of one lane's run (positions p0 .. p0+E-1) from that run's g and ids, the next run's g and
// ids (gn, sn; valid when has_next) for the lanes at the top of the warp, or else g read from
// global memory.
template <class T, int W, bool SEQ, int E>
__device__ __forceinline__ void cc_dx_run(T* dxr, long long p0, int lane, bool vec, const float (&gr)[E],
                                          const long long (&sr)[SEQ ? E : 1], const float (&gn)[E],
                                          const long long (&sn)[SEQ ? E : 1], bool has_next, const T* xr, const T* dr,
                                          const T* ir, const void* seq, long long sb, const float (&w)[W], float bv,
                                          const CcArgs& a) {
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
    float h = __shfl_down_sync(CC_FULL, gr[idx], fwd);
    const float hn = __shfl_sync(CC_FULL, gn[idx], (lane + fwd) & 31);
    const long long q = p0 + E + j;
    if (lane + fwd > 31) h = has_next ? hn : cc_g_at<T, W>(q, xr, 1, dr, 1, ir, a.is[2], seq, sb, w, bv, a);
    gc[E + j] = h;
    if constexpr (SEQ) {
      long long hs = __shfl_down_sync(CC_FULL, sr[idx], fwd);
      const long long hsn = __shfl_sync(CC_FULL, sn[idx], (lane + fwd) & 31);
      if (lane + fwd > 31) hs = has_next ? hsn : (q < a.L ? cc_seq(seq, sb + q * a.sq[1], a.flags) : -1);
      sc[E + j] = hs;
    }
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
  cc_store_run<T, E>(dxr, p0, a.L, vec, v);
}

// Channel-first (x, dout and dx have time stride 1): a warp walks rseg consecutive runs of 32·E
// steps of one (b, d) row, lane l holding E = 16 bytes of T of each run, the next run loaded
// before the current one is computed; the W-1 steps of x̃ before the task are loaded at its start
// as the top lanes' previous run (cc_history), the taps come by one shuffle each (cc_taps), as
// in ccf_cf. Per run: g from dout and the recomputed pre; dweight/dbias terms into per-lane sums; dx of the previous run
// (its forward halo of g comes from this run by shuffles); after the last run, its dx with the
// halo read from global memory. The warp's sums go, reduced in a fixed order, to the partial
// row b·tasks_per_row + task. The row's first run writes dinitial_states (CC_FINAL).
template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(128, SEQ ? 1 : 4)
ccb_cf(T* dx, float* part, T* dinit, const T* x, const void* wt, const void* bias, const T* dout, const T* init,
       const void* seq, const CcArgs a) {
  constexpr int E = 16 / sizeof(T);
  constexpr int H = W - 1;
  constexpr int N = H + E;
  constexpr int ES = SEQ ? E : 1;
  const int lane = threadIdx.x & 31;
  const long long tpr = (a.nseg + a.rseg - 1) / a.rseg;
  const bool vec = (a.flags & CC_VEC) != 0, silu = (a.flags & CC_SILU) != 0;
  const long long wpb = blockDim.x >> 5;
  const long long nrow = a.D * (W + 1);
#pragma unroll 1
  for (long long task = (long long)blockIdx.x * wpb + (threadIdx.x >> 5); task < a.ntask; task += (long long)gridDim.x * wpb) {
    const long long row = task / tpr;
    const long long tk = task - row * tpr;
    const long long s0 = tk * a.rseg;
    const long long s1 = min(s0 + (long long)a.rseg, a.nseg);
    const long long b = row / a.D, d = row - b * a.D;
    float w[W], bv;
    cc_weights<W>(wt, bias, d, a, w, bv);
    const T* xr = x + b * a.x[0] + d * a.x[1];
    const T* dr = dout + b * a.g[0] + d * a.g[1];
    T* dxr = dx + b * a.o[0] + d * a.o[1];
    const T* ir = init + b * a.is[0] + d * a.is[1];
    const long long sb = b * a.sq[0];
    float acc[W + 1];
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[k] = 0.f;
    float xcur[E], xprv[E], dcur[E], gprv[E];
    long long scur[ES], sprv[ES];
#pragma unroll
    for (int i = 0; i < E; ++i) gprv[i] = 0.f;
    cc_history<T, W, SEQ, E>(s0 * 32 * E, lane, xr, ir, seq, sb, a, xprv, sprv);
    cc_load_run<T, E>(xr, s0 * 32 * E + lane * E, a.L, vec, xcur);
    cc_load_run<T, E>(dr, s0 * 32 * E + lane * E, a.L, vec, dcur);
    if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], s0 * 32 * E + lane * E, a, scur);
#pragma unroll 1
    for (long long s = s0; s < s1; ++s) {
      const long long p0 = s * (32 * E) + lane * E;
      float xnxt[E], dnxt[E];
      long long snxt[ES];
      if (s + 1 < s1) {
        cc_load_run<T, E>(xr, p0 + 32 * E, a.L, vec, xnxt);
        cc_load_run<T, E>(dr, p0 + 32 * E, a.L, vec, dnxt);
        if constexpr (SEQ) cc_seq_run<E>(seq, sb, a.sq[1], p0 + 32 * E, a, snxt);
      }
      float comb[N];
      long long scomb[SEQ ? N : 1];
      cc_taps<W, SEQ, E>(xcur, xprv, scur, sprv, lane, comb, scomb);
      float g[E];
#pragma unroll
      for (int i = 0; i < E; ++i) {
        float gi = dcur[i];
        if (silu) gi *= cc_dsilu(cc_pre<W, SEQ, N>(comb, scomb, i, bv, w));
        if constexpr (SEQ) {
          if (scur[i] < 0) gi = 0.f;
        }
        g[i] = gi;
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
      if ((a.flags & CC_FINAL) && s == 0) {  // dinitial_states[u] = sum_{k <= u} w[k]·g[u - k]
        float gq[H];
#pragma unroll
        for (int q = 0; q < H; ++q) gq[q] = __shfl_sync(CC_FULL, g[q % E], q / E);
        float v = 0.f;
#pragma unroll
        for (int u = 0; u < H; ++u) {
          float t = 0.f;
#pragma unroll
          for (int k = 0; k <= u; ++k) t = fmaf(w[k], gq[u - k], t);
          if (lane == u) v = t;
        }
        if (lane < H) dinit[b * a.fs[0] + d * a.fs[1] + lane * a.fs[2]] = Conv<T>::from(v);
      }
      if (s > s0)
        cc_dx_run<T, W, SEQ, E>(dxr, p0 - 32 * E, lane, vec, gprv, sprv, g, scur, true, xr, dr, ir, seq, sb, w, bv, a);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        gprv[i] = g[i];
        xprv[i] = xcur[i];
        xcur[i] = xnxt[i];
        dcur[i] = dnxt[i];
        if constexpr (SEQ) {
          sprv[i] = scur[i];
          scur[i] = snxt[i];
        }
      }
    }
    cc_dx_run<T, W, SEQ, E>(dxr, (s1 - 1) * (32 * E) + lane * E, lane, vec, gprv, sprv, gprv, sprv, false, xr, dr, ir, seq,
                            sb, w, bv, a);
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[k] = cc_warp_sum(acc[k]);
    if (lane == 0) {
      float* pr = part + (b * tpr + tk) * nrow + d * (W + 1);
#pragma unroll
      for (int k = 0; k <= W; ++k) pr[k] = acc[k];
    }
  }
}

// Channel-last (x, dout and dx have channel stride 1): the thread layout of ccf_cl. A tile
// [t0, t1) walks t from t0 to t1 + W - 2: g[t] (pre from the sliding x window), its dweight and
// dbias terms while t < t1, and dx[t - H] from the sliding g window once t - H >= t0. Sums of
// the block's time groups are combined in shared memory in a fixed order and written as the
// partial row blockIdx.y. The tile at t0 = 0 writes dinitial_states (CC_FINAL). CCB_E channels
// per thread (fewer than the forward's: the backward keeps x and g windows and the sums).
#define CCB_E 2
template <class T, int W, bool SEQ>
__global__ void __launch_bounds__(256, SEQ ? 1 : 2)
ccb_cl(T* dx, float* part, T* dinit, const T* x, const void* wt, const void* bias, const T* dout, const T* init,
       const void* seq, const CcArgs a) {
  constexpr int E = CCB_E, CH = CC_CH, H = W - 1, J = E * (W + 1);
  __shared__ float red[J * 8 * 32];
  const long long d0 = ((long long)blockIdx.x * 32 + threadIdx.x) * E;
  const bool live = d0 < a.D;
  const int ne = live ? (int)min((long long)E, a.D - d0) : 0;
  const bool vec = (a.flags & CC_VEC) != 0 && ne == E, silu = (a.flags & CC_SILU) != 0;
  float acc[E][W + 1];
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int k = 0; k <= W; ++k) acc[e][k] = 0.f;
  if (live) {
    float w[E][W], bv[E];
#pragma unroll
    for (int e = 0; e < E; ++e) cc_weights<W>(wt, bias, e < ne ? d0 + e : d0, a, w[e], bv[e]);
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
        float xc[CH][E], dc[CH][E];
        long long sc[SEQ ? CH : 1];
#pragma unroll
        for (int c = 0; c < CH; ++c) {
          cc_load_pack<T, E>(xb, a.x[1], a.x[2], t + c, tend, ne, vec, xc[c]);
          cc_load_pack<T, E>(db, a.g[1], a.g[2], t + c, tend, ne, vec, dc[c]);
          if constexpr (SEQ) sc[c] = t + c < tend ? cc_seq(seq, sb + (t + c) * a.sq[1], a.flags) : -1;
        }
#pragma unroll
        for (int c = 0; c < CH; ++c) {
          const long long tc = t + c;
          const long long sid = SEQ ? sc[SEQ ? c : 0] : 0;
          float g[E];
#pragma unroll
          for (int e = 0; e < E; ++e) {
            float gv = dc[c][e];
            if (silu) {
              float pre = bv[e];
#pragma unroll
              for (int k = 0; k < H; ++k)
                if (!SEQ || sw[SEQ ? k : 0] == sid) pre = fmaf(w[e][k], xw[k][e], pre);
              pre = fmaf(w[e][H], xc[c][e], pre);
              gv *= cc_dsilu(pre);
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
              acc[e][H] = fmaf(g[e], xc[c][e], acc[e][H]);
              acc[e][W] += g[e];
            }
          }
          const long long p = tc - H;
          if (p >= t0 && p < t1) {  // dx[p] = sum_k w[k]·g[tc - k]
            const long long sp = SEQ ? sw[0] : 0;
            float v[E];
#pragma unroll
            for (int e = 0; e < E; ++e) {
              float s = 0.f;
#pragma unroll
              for (int k = 0; k < W; ++k) {
                const float gk = k == 0 ? g[e] : gw[H - k][e];
                const long long sk = SEQ ? (k == 0 ? sid : sw[SEQ ? H - k : 0]) : 0;
                if (!SEQ || sk == sp) s = fmaf(w[e][k], gk, s);
              }
              v[e] = s;
            }
            cc_store_pack<T, E>(ob, a.o[1], a.o[2], p, ne, vec, v);
          }
#pragma unroll
          for (int j = 0; j < H; ++j) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
              xw[j][e] = j + 1 < H ? xw[j + 1][e] : xc[c][e];
              gw[j][e] = j + 1 < H ? gw[j + 1][e] : g[e];
            }
            if constexpr (SEQ) sw[j] = j + 1 < H ? sw[j + 1] : sid;
          }
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
  if (threadIdx.y == 0 && live) {
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
      gv *= cc_dsilu(acc);
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

// dweight / dbias from the partial rows part[p][d][k] (k = W for the bias), summed over p in
// order: one thread per (d, k).
template <class TW>
__global__ void __launch_bounds__(256) cc_reduce(TW* dw, TW* db, const float* part, const CcArgs a) {
  const int W = a.W;
  const long long n = a.D * (W + 1);
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (long long p = 0; p < a.nparts; ++p) s += part[p * n + j];
    const long long d = j / (W + 1);
    const int k = (int)(j - d * (W + 1));
    if (k < W) dw[d * a.dw[0] + k * a.dw[1]] = Conv<TW>::from(s);
    else if (a.flags & CC_BIAS) db[d * a.dbs] = Conv<TW>::from(s);
  }
}

