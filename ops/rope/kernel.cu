// RoPE: rotate pairs of x by the (cos, sin) table row of each position (ops.md §1.11).
// GPT_J (ALGO 0) pairs (x[2i], x[2i+1]); GPT_NEOX (ALGO 1) pairs (x[i], x[i + half]).
// One block per (batch, seq) row, threads over (head, pair group); each thread rotates P
// pairs: P == 1 uses scalar accesses (any even/odd strides), P > 1 packed 16-byte-or-less
// accesses (the host checks divisibility of strides and pointer alignment).
// A position outside [0, table_len) writes zeros for the whole row.

struct RopeMeta {
  long long rows, seq, table_len;
  long long xs_b, xs_s, xs_h;  // x strides (elements) of batch, seq, head
  long long ys_b, ys_s, ys_h;
  long long ps_b, ps_s;        // pos_ids strides of batch (0 for [seq]) and seq
  int nhead, half, nj, pos_kind;  // nj = half / P pair groups per head
};

__device__ __forceinline__ long long rope_pos(const void* p, int kind, long long off) {
  switch (kind) {
    case 0: return ((const signed char*)p)[off];
    case 1: return ((const short*)p)[off];
    case 2: return ((const int*)p)[off];
    case 3: return ((const long long*)p)[off];
    case 4: return ((const unsigned char*)p)[off];
    case 5: return ((const unsigned short*)p)[off];
    case 6: return ((const unsigned int*)p)[off];
    default: {
      const unsigned long long v = ((const unsigned long long*)p)[off];
      return v > 0x7fffffffffffffffULL ? -1LL : (long long)v;
    }
  }
}

template <class T, int ALGO, int P>
__global__ void __launch_bounds__(256) rope_kernel(T* y, const T* x, const void* pos, const T* __restrict__ sin_t,
                                                   const T* __restrict__ cos_t, RopeMeta m) {
  typedef typename Compute<T>::type C;
  for (long long row = blockIdx.x; row < m.rows; row += gridDim.x) {
    const long long b = row / m.seq, s = row - b * m.seq;
    const long long p = rope_pos(pos, m.pos_kind, b * m.ps_b + s * m.ps_s);
    const bool valid = p >= 0 && p < m.table_len;
    const T* xr = x + b * m.xs_b + s * m.xs_s;
    T* yr = y + b * m.ys_b + s * m.ys_s;
    const T* sr = sin_t + (valid ? p : 0) * (long long)m.half;
    const T* cr = cos_t + (valid ? p : 0) * (long long)m.half;
    for (int h = threadIdx.y; h < m.nhead; h += blockDim.y) {
      const T* xh = xr + h * m.xs_h;
      T* yh = yr + h * m.ys_h;
      for (int j = threadIdx.x; j < m.nj; j += blockDim.x) {
        const int i0 = j * P;  // first pair index
        C c[P], sn[P], a0[P], a1[P];
        if (!valid) {  // uniform per block; never touches the tables (table_len may be 0)
#pragma unroll
          for (int k = 0; k < P; ++k) { c[k] = C(0); sn[k] = C(0); a0[k] = C(0); a1[k] = C(0); }
        } else if constexpr (P == 1) {
          c[0] = iop_load(cr[i0]);
          sn[0] = iop_load(sr[i0]);
          const int e0 = ALGO == 0 ? 2 * i0 : i0, e1 = ALGO == 0 ? 2 * i0 + 1 : i0 + m.half;
          a0[0] = iop_load(xh[e0]);
          a1[0] = iop_load(xh[e1]);
        } else {
          const Pack<T, P> pc = *reinterpret_cast<const Pack<T, P>*>(cr + i0);
          const Pack<T, P> ps = *reinterpret_cast<const Pack<T, P>*>(sr + i0);
#pragma unroll
          for (int k = 0; k < P; ++k) { c[k] = iop_load(pc.v[k]); sn[k] = iop_load(ps.v[k]); }
          if constexpr (ALGO == 0) {
            const Pack<T, 2 * P> px = *reinterpret_cast<const Pack<T, 2 * P>*>(xh + 2 * i0);
#pragma unroll
            for (int k = 0; k < P; ++k) { a0[k] = iop_load(px.v[2 * k]); a1[k] = iop_load(px.v[2 * k + 1]); }
          } else {
            const Pack<T, P> p0 = *reinterpret_cast<const Pack<T, P>*>(xh + i0);
            const Pack<T, P> p1 = *reinterpret_cast<const Pack<T, P>*>(xh + i0 + m.half);
#pragma unroll
            for (int k = 0; k < P; ++k) { a0[k] = iop_load(p0.v[k]); a1[k] = iop_load(p1.v[k]); }
          }
        }
        T r0[P], r1[P];
#pragma unroll
        for (int k = 0; k < P; ++k) {
          const C v0 = a0[k] * c[k] - a1[k] * sn[k];  // all zero for an invalid position
          const C v1 = a0[k] * sn[k] + a1[k] * c[k];
          r0[k] = Conv<T>::from(v0);
          r1[k] = Conv<T>::from(v1);
        }
        if constexpr (P == 1) {
          const int e0 = ALGO == 0 ? 2 * i0 : i0, e1 = ALGO == 0 ? 2 * i0 + 1 : i0 + m.half;
          yh[e0] = r0[0];
          yh[e1] = r1[0];
        } else if constexpr (ALGO == 0) {
          Pack<T, 2 * P> py;
#pragma unroll
          for (int k = 0; k < P; ++k) { py.v[2 * k] = r0[k]; py.v[2 * k + 1] = r1[k]; }
          *reinterpret_cast<Pack<T, 2 * P>*>(yh + 2 * i0) = py;
        } else {
          Pack<T, P> q0, q1;
#pragma unroll
          for (int k = 0; k < P; ++k) { q0.v[k] = r0[k]; q1.v[k] = r1[k]; }
          *reinterpret_cast<Pack<T, P>*>(yh + i0) = q0;
          *reinterpret_cast<Pack<T, P>*>(yh + i0 + m.half) = q1;
        }
      }
    }
  }
}

// Packed (P > 1) variant with one (head, pair group) unit per thread: block (nj, heads per
// group), grid (row blocks, head groups). Each block walks rows blockIdx.x, + gridDim.x, ...
// (the host sizes gridDim.x to one resident wave); the position and the x packs of the next
// row are loaded before the current row is stored, and the x packs of a row are issued before
// the table loads that depend on its position (rows of y never overlap rows of x other than
// their own: in place means the same layout).
template <class T, int ALGO, int P>
struct RopeUnit {
  typedef typename Compute<T>::type C;
  static constexpr int XV = ALGO == 0 ? 2 * P : P;  // elements per x/y access
  Pack<T, XV> u0, u1;  // GPT_J: u0 holds the 2P interleaved elements; GPT_NEOX: both halves
  __device__ __forceinline__ void load(const T* xh, int i0, int half) {
    if constexpr (ALGO == 0) {
      u0 = *reinterpret_cast<const Pack<T, XV>*>(xh + 2 * i0);
    } else {
      u0 = *reinterpret_cast<const Pack<T, XV>*>(xh + i0);
      u1 = *reinterpret_cast<const Pack<T, XV>*>(xh + i0 + half);
    }
  }
  __device__ __forceinline__ void rotate_store(T* yh, int i0, int half, const Pack<T, P>& pc, const Pack<T, P>& ps,
                                               bool valid) const {
    C r0[P], r1[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const C c = iop_load(pc.v[k]), sn = iop_load(ps.v[k]);
      const C a0 = iop_load(ALGO == 0 ? u0.v[2 * k] : u0.v[k]);
      const C a1 = iop_load(ALGO == 0 ? u0.v[2 * k + 1] : u1.v[k]);
      r0[k] = valid ? a0 * c - a1 * sn : C(0);
      r1[k] = valid ? a0 * sn + a1 * c : C(0);
    }
    if constexpr (ALGO == 0) {
      Pack<T, XV> py;
#pragma unroll
      for (int k = 0; k < P; ++k) { py.v[2 * k] = Conv<T>::from(r0[k]); py.v[2 * k + 1] = Conv<T>::from(r1[k]); }
      *reinterpret_cast<Pack<T, XV>*>(yh + 2 * i0) = py;
    } else {
      Pack<T, XV> q0, q1;
#pragma unroll
      for (int k = 0; k < P; ++k) { q0.v[k] = Conv<T>::from(r0[k]); q1.v[k] = Conv<T>::from(r1[k]); }
      *reinterpret_cast<Pack<T, XV>*>(yh + i0) = q0;
      *reinterpret_cast<Pack<T, XV>*>(yh + i0 + half) = q1;
    }
  }
};

__device__ __forceinline__ void rope_row(const RopeMeta& m, long long row, long long& b, long long& s) {
  if (m.seq == m.rows) { b = 0; s = row; } else { b = row / m.seq; s = row - b * m.seq; }
}

template <class T, int ALGO, int P>
__global__ void __launch_bounds__(256) rope_units(T* y, const T* x, const void* pos, const T* __restrict__ sin_t,
                                                  const T* __restrict__ cos_t, RopeMeta m) {
  const int h = blockIdx.y * blockDim.y + threadIdx.y;
  long long row = blockIdx.x;
  if (h >= m.nhead || row >= m.rows) return;
  const int i0 = threadIdx.x * P;
  long long b, s;
  rope_row(m, row, b, s);
  long long p = rope_pos(pos, m.pos_kind, b * m.ps_b + s * m.ps_s);
  RopeUnit<T, ALGO, P> cur;
  cur.load(x + b * m.xs_b + s * m.xs_s + h * m.xs_h, i0, m.half);
  while (true) {
    const long long next = row + gridDim.x;
    const bool more = next < m.rows;
    long long bn = 0, sn = 0, pn = 0;
    if (more) {
      rope_row(m, next, bn, sn);
      pn = rope_pos(pos, m.pos_kind, bn * m.ps_b + sn * m.ps_s);
    }
    const bool valid = p >= 0 && p < m.table_len;
    Pack<T, P> pc, ps;
    if (valid) {
      pc = *reinterpret_cast<const Pack<T, P>*>(cos_t + p * m.half + i0);
      ps = *reinterpret_cast<const Pack<T, P>*>(sin_t + p * m.half + i0);
    }
    RopeUnit<T, ALGO, P> nxt;
    if (more) nxt.load(x + bn * m.xs_b + sn * m.xs_s + h * m.xs_h, i0, m.half);
    cur.rotate_store(y + b * m.ys_b + s * m.ys_s + h * m.ys_h, i0, m.half, pc, ps, valid);
    if (!more) break;
    row = next; b = bn; s = sn; p = pn;
    cur = nxt;
  }
}

// Exact-grid variant, loads first: block (nj pair groups, hb heads), grid (rows, head chunks of
// hb * U heads); each thread rotates one pair group of U heads of one row (heads h0, h0 + hb,
// ...): the position and every x pack are loaded first, then the one table pack pair shared
// by the U heads (it depends on the position), then the arithmetic, then every store. No loop:
// one block per (row, head chunk). Heads past nhead (last chunk) are skipped.
template <class T, int ALGO, int P, int U>
__global__ void __launch_bounds__(256, U >= 4 ? 2 : 4) rope_heads(T* y, const T* x, const void* pos, const T* __restrict__ sin_t,
                                                  const T* __restrict__ cos_t, RopeMeta m) {
  typedef typename Compute<T>::type C;
  constexpr int XV = ALGO == 0 ? 2 * P : P;  // elements per x/y access
  typedef Pack<T, XV> PX;
  long long b, s;
  rope_row(m, (long long)blockIdx.x, b, s);
  const long long p = rope_pos(pos, m.pos_kind, b * m.ps_b + s * m.ps_s);
  const int i0 = threadIdx.x * P;            // first pair of this thread
  const int e0 = ALGO == 0 ? 2 * i0 : i0;    // first element of its (first) x access
  const int h0 = blockIdx.y * (blockDim.y * U) + threadIdx.y;
  const T* xr = x + b * m.xs_b + s * m.xs_s + e0;
  PX a[U], c[U];
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int h = h0 + k * blockDim.y;
    if (h < m.nhead) {
      a[k] = *reinterpret_cast<const PX*>(xr + h * m.xs_h);
      if constexpr (ALGO == 1) c[k] = *reinterpret_cast<const PX*>(xr + h * m.xs_h + m.half);
    }
  }
  const bool valid = p >= 0 && p < m.table_len;
  Pack<T, P> pc, ps;
  if (valid) {  // uniform per block; never touches the tables otherwise (table_len may be 0)
    pc = *reinterpret_cast<const Pack<T, P>*>(cos_t + p * m.half + i0);
    ps = *reinterpret_cast<const Pack<T, P>*>(sin_t + p * m.half + i0);
  } else {
#pragma unroll
    for (int k = 0; k < P; ++k) { pc.v[k] = Conv<T>::from(0.f); ps.v[k] = Conv<T>::from(0.f); }
  }
  T* yr = y + b * m.ys_b + s * m.ys_s + e0;
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int h = h0 + k * blockDim.y;
    if (h < m.nhead) {
      PX q0, q1;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const C cs = iop_load(pc.v[j]), sn = iop_load(ps.v[j]);
        const C a0 = iop_load(ALGO == 0 ? a[k].v[2 * j] : a[k].v[j]);
        const C a1 = iop_load(ALGO == 0 ? a[k].v[2 * j + 1] : c[k].v[j]);
        const C r0 = valid ? a0 * cs - a1 * sn : C(0);
        const C r1 = valid ? a0 * sn + a1 * cs : C(0);
        if constexpr (ALGO == 0) {
          q0.v[2 * j] = Conv<T>::from(r0);
          q0.v[2 * j + 1] = Conv<T>::from(r1);
        } else {
          q0.v[j] = Conv<T>::from(r0);
          q1.v[j] = Conv<T>::from(r1);
        }
      }
      *reinterpret_cast<PX*>(yr + h * m.ys_h) = q0;
      if constexpr (ALGO == 1) *reinterpret_cast<PX*>(yr + h * m.ys_h + m.half) = q1;
    }
  }
}

// rope_heads with 32-bit index math and the head chunks of a row in consecutive
// blocks. Grid (head chunks, rows): blockIdx.x is the chunk, so the blocks dispatched together
// cover whole rows of x/y (contiguous streams, like a copy) and share the table row; past
// 65535 rows the row is blockIdx.y + blockIdx.z * gridDim.y (no loop). Block (nj, hb), NT threads at most;
// each thread one pair group of U heads (h0, h0 + hb, ...), every x load first, then the table
// packs (the only loads behind the position), then the stores. The host selects it only when
// every element offset of x, y, pos_ids and the tables fits in 31 bits (non-negative strides).
// MB: the blocks per SM ptxas must fit (register cap 65536 / (MB * NT)).
struct RopeMeta32 {
  int rows, seq, table_len;
  int xs_b, xs_s, xs_h;
  int ys_b, ys_s, ys_h;
  int ps_b, ps_s;
  int nhead, half, pos_kind;
};

// Round a compute array to a storage pack; half types two elements per cvt (f16x2 / bf16x2,
// round to nearest even per element, as Conv).
template <class T> struct RopeX2 { static constexpr bool ok = false; };
template <> struct RopeX2<iop_half> {
  static constexpr bool ok = true;
  __device__ static unsigned cvt(float lo, float hi) {
    unsigned u; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo)); return u;
  }
};
template <> struct RopeX2<iop_bf16> {
  static constexpr bool ok = true;
  __device__ static unsigned cvt(float lo, float hi) {
    unsigned u; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo)); return u;
  }
};

template <class T, int N, class C>
__device__ __forceinline__ Pack<T, N> rope_pack(const C (&f)[N]) {
  Pack<T, N> r;
  if constexpr (N % 2 == 0 && RopeX2<T>::ok) {
    union { Pack<T, N> p; unsigned u[N / 2]; } w;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w.u[i] = RopeX2<T>::cvt(f[2 * i], f[2 * i + 1]);
    r = w.p;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = Conv<T>::from(f[i]);
  }
  return r;
}

template <class T, int ALGO, int P, int U, int NT, int MB>
__global__ void __launch_bounds__(NT, MB)
    rope_grid(T* y, const T* x, const void* pos, const T* __restrict__ sin_t, const T* __restrict__ cos_t,
              RopeMeta32 m) {
  typedef typename Compute<T>::type C;
  constexpr int XV = ALGO == 0 ? 2 * P : P;  // elements per x/y access
  typedef Pack<T, XV> PX;
  const int i0 = threadIdx.x * P;          // first pair of this thread
  const int e0 = ALGO == 0 ? 2 * i0 : i0;  // first element of its (first) x access
  const int h0 = blockIdx.x * (blockDim.y * U) + threadIdx.y;
  const int row = blockIdx.y + blockIdx.z * gridDim.y;
  if (row < m.rows) {
    int b, s;
    if (m.seq == m.rows) { b = 0; s = row; } else { b = row / m.seq; s = row - b * m.seq; }
    const long long p = rope_pos(pos, m.pos_kind, b * m.ps_b + s * m.ps_s);
    const int xo = b * m.xs_b + s * m.xs_s + e0;
    PX a[U], c[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int h = h0 + k * blockDim.y;
      if (h < m.nhead) {
        a[k] = *reinterpret_cast<const PX*>(x + (xo + h * m.xs_h));
        if constexpr (ALGO == 1) c[k] = *reinterpret_cast<const PX*>(x + (xo + h * m.xs_h + m.half));
      }
    }
    const bool valid = p >= 0 && p < m.table_len;
    Pack<T, P> pc, ps;
    if (valid) {  // uniform per block; never touches the tables otherwise (table_len may be 0)
      const int to = (int)p * m.half + i0;
      pc = *reinterpret_cast<const Pack<T, P>*>(cos_t + to);
      ps = *reinterpret_cast<const Pack<T, P>*>(sin_t + to);
    } else {  // zero table and zero x: every product is 0 (no select per element; x may hold inf)
#pragma unroll
      for (int k = 0; k < P; ++k) { pc.v[k] = Conv<T>::from(0.f); ps.v[k] = Conv<T>::from(0.f); }
#pragma unroll
      for (int k = 0; k < U; ++k) {
#pragma unroll
        for (int j = 0; j < XV; ++j) { a[k].v[j] = Conv<T>::from(0.f); c[k].v[j] = Conv<T>::from(0.f); }
      }
    }
    const int yo = b * m.ys_b + s * m.ys_s + e0;
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int h = h0 + k * blockDim.y;
      if (h < m.nhead) {
        C f0[XV], f1[XV];
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const C cs = iop_load(pc.v[j]), sn = iop_load(ps.v[j]);
          const C a0 = iop_load(ALGO == 0 ? a[k].v[2 * j] : a[k].v[j]);
          const C a1 = iop_load(ALGO == 0 ? a[k].v[2 * j + 1] : c[k].v[j]);
          const C r0 = a0 * cs - a1 * sn;
          const C r1 = a0 * sn + a1 * cs;
          if constexpr (ALGO == 0) {
            f0[2 * j] = r0;
            f0[2 * j + 1] = r1;
          } else {
            f0[j] = r0;
            f1[j] = r1;
          }
        }
        *reinterpret_cast<PX*>(y + (yo + h * m.ys_h)) = rope_pack<T>(f0);
        if constexpr (ALGO == 1) *reinterpret_cast<PX*>(y + (yo + h * m.ys_h + m.half)) = rope_pack<T>(f1);
      }
    }
  }
}
