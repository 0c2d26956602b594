// Index kernels shared by gather, scatter and index_copy(_inplace).
// Data are moved by element bytes (U = unsigned int of the element size) except where
// arithmetic is needed (scatter add / multiply on the real type T). Index values are data:
// out-of-range ones (negative included) read nothing (gather writes 0) and write nothing.

struct IdxMeta {
  long long shape[8];
  long long s0[8], s1[8], s2[8];
  long long n;          // elements (or lines) of the iteration space
  long long dim_size;   // size of the indexed dim of the indexed tensor
  long long dim_stride; // its stride there
  long long len;        // scatter / index_copy: positions along the axis
  long long st0, st1, st2; // scatter / index_copy: strides along the axis
  int ndim, mode, flag, pad_;
};

template <class IT, class M>
__device__ __forceinline__ void idx_offsets(const M& m, IT t, long long& o0, long long& o1, long long& o2) {
  o0 = o1 = o2 = 0;
  for (int d = m.ndim - 1; d >= 0; --d) {
    IT sh = (IT)m.shape[d];
    IT q = t / sh;
    long long c = (long long)(t - q * sh);
    o0 += c * m.s0[d];
    o1 += c * m.s1[d];
    o2 += c * m.s2[d];
    t = q;
  }
}

// gather: iteration over index/output shape; s0 = output, s1 = index, s2 = input (0 at dim).
template <class U, class I, class IT>
__global__ void gather_kernel(U* __restrict__ out, const I* __restrict__ idx, const U* __restrict__ in, IdxMeta m) {
  IT step = (IT)gridDim.x * blockDim.x;
  for (IT t = (IT)blockIdx.x * blockDim.x + threadIdx.x; t < (IT)m.n; t += step) {
    long long o0, o1, o2;
    idx_offsets<IT>(m, t, o0, o1, o2);
    long long k = (long long)idx[o1];
    out[o0] = (k >= 0 && k < m.dim_size) ? in[o2 + k * m.dim_stride] : U(0);
  }
}

// gather along lines staged in shared memory: one block per line of the index (all coords but
// dim; the meta shape has dim set to 1). Each thread first issues the loads of its first
// GL_PER index values (registers), then the block copies the input line (dim_size values,
// stride dim_stride; 16-byte loads when contiguous and aligned) into shared memory, so the index
// and line loads are in flight together (one memory round trip per line, not several). Then
// every index position of the line reads shared memory: each input value leaves DRAM/L2 once.
// len = index extent along dim; st0 / st1 = output / index strides along dim.
// s0 = output, s1 = index, s2 = input over the line space.
extern __shared__ __align__(16) unsigned char gather_line_smem[];
#define GL_PER 16

template <class U, class I>
__global__ void __launch_bounds__(256, 4) gather_line_kernel(U* __restrict__ out, const I* __restrict__ idx, const U* __restrict__ in, IdxMeta m) {
  U* line = reinterpret_cast<U*>(gather_line_smem);
  const long long B = blockDim.x;
  for (long long l = blockIdx.x; l < m.n; l += gridDim.x) {
    long long o0, o1, o2;
    idx_offsets<unsigned long long>(m, (unsigned long long)l, o0, o1, o2);
    I k[GL_PER];
#pragma unroll
    for (int u = 0; u < GL_PER; ++u) {
      long long j = threadIdx.x + u * B;
      k[u] = j < m.len ? idx[o1 + j * m.st1] : I(-1);
    }
    __syncthreads();  // the previous line is no longer read
    const U* src = in + o2;
    long long head = 0;
    if (m.dim_stride == 1 && (reinterpret_cast<unsigned long long>(src) & 15) == 0) {
      constexpr int E = 16 / sizeof(U);
      const long long packs = m.dim_size / E;
      const uint4* s4 = reinterpret_cast<const uint4*>(src);
      uint4* d4 = reinterpret_cast<uint4*>(line);
#pragma unroll 4
      for (long long p = threadIdx.x; p < packs; p += B) d4[p] = s4[p];
      head = packs * E;
    }
    for (long long j = head + threadIdx.x; j < m.dim_size; j += B) line[j] = src[j * m.dim_stride];
    __syncthreads();
    for (long long j0 = 0;;) {
#pragma unroll
      for (int u = 0; u < GL_PER; ++u) {
        long long j = j0 + threadIdx.x + u * B;
        long long kk = (long long)k[u];
        if (j < m.len) out[o0 + j * m.st0] = (kk >= 0 && kk < m.dim_size) ? line[kk] : U(0);
      }
      j0 += GL_PER * B;
      if (j0 >= m.len) break;
#pragma unroll
      for (int u = 0; u < GL_PER; ++u) {
        long long j = j0 + threadIdx.x + u * B;
        k[u] = j < m.len ? idx[o1 + j * m.st1] : I(-1);
      }
    }
  }
}

// scatter: one warp per line (index positions that differ only along the axis). Lines touch
// disjoint destinations, and inside a line the warp walks the axis in order, 32 positions at a
// time: lanes aiming at the same destination are grouped with __match_any_sync and resolved in
// lane order (replace: the highest lane writes; add/multiply: the lowest lane applies every
// contribution in order). __syncwarp orders successive chunks. Deterministic, no atomics.
// s0 = output, s1 = indices, s2 = updates over the line space (axis dim has size 1).
template <class T, class I, int MODE>  // MODE 0 replace (T = U bytes), 1 add, 2 multiply
__global__ void scatter_kernel(T* __restrict__ out, const I* __restrict__ idx, const T* __restrict__ upd, IdxMeta m) {
  __shared__ T sval[8][32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  for (long long line = (long long)blockIdx.x * (blockDim.x >> 5) + w; line < m.n; line += warps) {
    long long o0, o1, o2;
    idx_offsets<unsigned long long>(m, (unsigned long long)line, o0, o1, o2);
    for (long long base = 0; base < m.len; base += 32) {
      long long j = base + lane;
      bool valid = false;
      long long k = -1;
      T u = T();
      if (j < m.len) {
        k = (long long)idx[o1 + j * m.st1];
        valid = k >= 0 && k < m.dim_size;
        u = upd[o2 + j * m.st2];
      }
      unsigned grp = __match_any_sync(0xffffffffu, valid ? k : -1LL);
      if (MODE == 0) {
        if (valid && lane == 31 - __clz(grp)) out[o0 + k * m.st0] = u;
      } else {
        sval[w][lane] = u;
        __syncwarp();
        if (valid && lane == __ffs(grp) - 1) {
          T* p = out + o0 + k * m.st0;
          typename Compute<T>::type acc = iop_load(*p);
          unsigned bits = grp;
          while (bits) {
            int l = __ffs(bits) - 1;
            bits &= bits - 1;
            typename Compute<T>::type v = iop_load(sval[w][l]);
            acc = MODE == 1 ? (typename Compute<T>::type)(acc + v) : (typename Compute<T>::type)(acc * v);
            acc = iop_load(Conv<T>::from(acc));  // each contribution is rounded to T, as one store would be
          }
          *p = Conv<T>::from(acc);
        }
      }
      __syncwarp();
    }
  }
}

// index_copy: block (chunk, i) copies source slice i to output slice index[i] when i is the
// last position holding that value (last write wins) and the value is in range.
// Iteration space: the slice (source shape with the dim removed); s0 = output, s2 = source.
// st1 = index stride, len = index length, st0 / st2 = output / source stride along dim.
template <class U, class I, class IT>
__global__ void index_copy_kernel(U* __restrict__ out, const I* __restrict__ idx, const U* __restrict__ src, IdxMeta m) {
  for (long long i = blockIdx.y; i < m.len; i += gridDim.y) {
    long long k = (long long)idx[i * m.st1];
    int later = 0;
    for (long long t = i + 1 + threadIdx.x; t < m.len; t += blockDim.x)
      later |= ((long long)idx[t * m.st1] == k);
    later = __syncthreads_or(later);
    if (later || k < 0 || k >= m.dim_size) continue;
    IT step = (IT)gridDim.x * blockDim.x;
    for (IT t = (IT)blockIdx.x * blockDim.x + threadIdx.x; t < (IT)m.n; t += step) {
      long long o0, o1, o2;
      idx_offsets<IT>(m, t, o0, o1, o2);
      out[o0 + k * m.st0] = src[o2 + i * m.st2];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Last-writer tables in shared memory (index_copy and scatter-replace fast paths).
// win[k] = the largest position j whose index value is k, or -1: built with shared atomicMax,
// whose result does not depend on the order of the updates, so exactly one position writes
// each destination and it is the last one in index order. Deterministic, race-free, no
// workspace. Tables hold at most 12288 ints (48 KiB with any static shared memory, no opt-in).

struct TabMeta {
  long long shape[8];
  long long s0[8], s1[8], s2[8]; // index_copy: out / input / source strides, 0 at the axis
  long long dim_size;            // destination extent along the axis
  long long len;                 // positions along the axis (index length / indices extent)
  long long chunk;               // table entries per chunk of destination values
  long long n;                   // product of the non-axis extents (lines for scatter)
  long long st0, st1, st2, sti;  // out / index / source / input strides along the axis
  int ndim, axis, mode, lpb;     // mode (index_copy): 0 copy, 1 in place; lpb (scatter): lines per block
};

// index_copy, one kernel for everything: block row blockIdx.y owns the destination values
// [k0, k0 + kn) (a chunk); every block of that row first builds the chunk's table from the
// whole index (O(len) shared atomics), then
//   mode 0 (out-of-place): walks the output box of the chunk; row k takes source row win[k]
//     if any, else input row k -- so rows that get overwritten are never copied from input;
//   mode 1 (in place): walks the source; row i is written iff win[index[i]] == i.
// Work items are VEC elements along the innermost (unit-stride, non-axis) dim; UNR items per
// thread are loaded before any store for memory-level parallelism.
template <class U, class I, class IT, int VEC>
__global__ void __launch_bounds__(512) index_copy_table_kernel(U* __restrict__ out, const U* __restrict__ in, const I* __restrict__ idx,
                                                               const U* __restrict__ src, TabMeta m) {
  extern __shared__ int win[];
  typedef Pack<U, VEC> V;
  constexpr int UNR = 4;
  const long long chunks = (m.dim_size + m.chunk - 1) / m.chunk;
  for (long long c = blockIdx.y; c < chunks; c += gridDim.y) {
    const long long k0 = c * m.chunk;
    const int kn = (int)(m.dim_size - k0 < m.chunk ? m.dim_size - k0 : m.chunk);
    for (int t = threadIdx.x; t < kn; t += blockDim.x) win[t] = -1;
    __syncthreads();
    for (long long j = threadIdx.x; j < m.len; j += blockDim.x) {
      long long k = (long long)idx[j * m.st1] - k0;
      if (k >= 0 && k < kn) atomicMax(&win[k], (int)j);
    }
    __syncthreads();
    const IT ext = m.mode == 0 ? (IT)kn : (IT)m.len;
    const IT total = (IT)m.n * ext;
    const IT step = (IT)gridDim.x * blockDim.x;
    for (IT base = (IT)blockIdx.x * blockDim.x + threadIdx.x; base < total; base += step * UNR) {
      V val[UNR];
      long long dst[UNR];
      unsigned put = 0;  // bit u: item u stores
#pragma unroll
      for (int u = 0; u < UNR; ++u) {
        IT t = base + (IT)u * step;
        if (t < total) {
          long long o0 = 0, o1 = 0, o2 = 0, ca = 0;
          for (int d = m.ndim - 1; d >= 0; --d) {
            IT sh = d == m.axis ? ext : (IT)m.shape[d];
            IT q = t / sh;
            long long cc = (long long)(t - q * sh);
            t = q;
            if (d == m.axis) {
              ca = cc;
            } else {
              o0 += cc * m.s0[d];
              o1 += cc * m.s1[d];
              o2 += cc * m.s2[d];
            }
          }
          if (m.mode == 0) {
            const long long k = k0 + ca;
            const int w = win[ca];
            dst[u] = o0 + k * m.st0;
            val[u] = w >= 0 ? *reinterpret_cast<const V*>(src + o2 + (long long)w * m.st2)
                            : *reinterpret_cast<const V*>(in + o1 + k * m.sti);
            put |= 1u << u;
          } else {
            const long long k = (long long)idx[ca * m.st1] - k0;
            if (k >= 0 && k < kn && win[k] == (int)ca) {
              dst[u] = o0 + (k0 + k) * m.st0;
              val[u] = *reinterpret_cast<const V*>(src + o2 + ca * m.st2);
              put |= 1u << u;
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < UNR; ++u)
        if (put & (1u << u)) *reinterpret_cast<V*>(out + dst[u]) = val[u];
    }
    __syncthreads();  // the table is rebuilt for the next chunk
  }
}

// The lines l0, l0 + 1, ... of a scatter_table / scatter_line group (at most lpb): their offsets
// (thread t: line l0 + t) into lo0 / lo1 / lo2; returns how many there are.
template <class M>
__device__ __forceinline__ int scatter_group_lines(const M& m, long long l0, int lpb, long long* lo0, long long* lo1,
                                                   long long* lo2) {
  const int nl = (int)(m.n - l0 < lpb ? m.n - l0 : lpb);
  if (threadIdx.x < nl) {
    long long a, b, c2;
    idx_offsets<unsigned long long>(m, (unsigned long long)(l0 + threadIdx.x), a, b, c2);
    lo0[threadIdx.x] = a;
    lo1[threadIdx.x] = b;
    lo2[threadIdx.x] = c2;
  }
  return nl;
}

// scatter with reduction = replace: a block takes lpb lines at a time (adjacent lines, so that
// lanes of a warp read adjacent addresses when the axis is not the fastest dim), builds one
// table of dim_size entries per line, then position j of line l writes iff it is the last
// position of that line aiming at its destination. Lines touch disjoint destinations, so
// every destination has exactly one writer. Iteration space and strides as scatter_kernel:
// shape / s0 / s1 / s2 over the line space, st0 / st1 / st2 along the axis.
// Positions are cached in registers (R per thread) when a group fits in one pass.
template <class U, class I>
__global__ void __launch_bounds__(512) scatter_table_kernel(U* __restrict__ out, const I* __restrict__ idx,
                                                            const U* __restrict__ upd, TabMeta m) {
  extern __shared__ int win[];
  __shared__ long long lo0[32], lo1[32], lo2[32];
  constexpr int R = 8;
  const int lpb = m.lpb;
  const long long groups = (m.n + lpb - 1) / lpb;
  const long long per = (long long)lpb * m.len;
  for (long long g = blockIdx.x; g < groups; g += gridDim.x) {
    const long long l0 = g * lpb;
    const int nl = scatter_group_lines(m, l0, lpb, lo0, lo1, lo2);
    for (long long t = threadIdx.x; t < (long long)nl * m.dim_size; t += blockDim.x) win[t] = -1;
    __syncthreads();
    if (per <= (long long)blockDim.x * R) {
      int kk[R];  // destination (< dim_size <= 12288) or -1
      U uu[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        long long t = (long long)r * blockDim.x + threadIdx.x;
        kk[r] = -1;
        if (t < per) {
          const int ls = (int)(t % lpb);
          const long long j = t / lpb;
          if (ls < nl) {
            long long k = (long long)idx[lo1[ls] + j * m.st1];
            if (k >= 0 && k < m.dim_size) {
              kk[r] = (int)k;
              uu[r] = upd[lo2[ls] + j * m.st2];
              atomicMax(&win[ls * m.dim_size + k], (int)j);
            }
          }
        }
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < R; ++r) {
        long long t = (long long)r * blockDim.x + threadIdx.x;
        if (kk[r] >= 0) {
          const int ls = (int)(t % lpb);
          const long long j = t / lpb;
          if (win[ls * m.dim_size + kk[r]] == (int)j) out[lo0[ls] + kk[r] * m.st0] = uu[r];
        }
      }
    } else {
      for (long long t = threadIdx.x; t < per; t += blockDim.x) {
        const int ls = (int)(t % lpb);
        const long long j = t / lpb;
        if (ls >= nl) continue;
        long long k = (long long)idx[lo1[ls] + j * m.st1];
        if (k >= 0 && k < m.dim_size) atomicMax(&win[ls * m.dim_size + k], (int)j);
      }
      __syncthreads();
      for (long long t = threadIdx.x; t < per; t += blockDim.x) {
        const int ls = (int)(t % lpb);
        const long long j = t / lpb;
        if (ls >= nl) continue;
        long long k = (long long)idx[lo1[ls] + j * m.st1];
        if (k >= 0 && k < m.dim_size && win[ls * m.dim_size + k] == (int)j) out[lo0[ls] + k * m.st0] = upd[lo2[ls] + j * m.st2];
      }
    }
    __syncthreads();  // tables and line offsets are rebuilt for the next group
  }
}

// scatter, reduction = replace, out of place with the input -> output copy merged in: a block
// takes lpb adjacent lines of the output (the index covers every output line, and input and
// output share one layout: s0 / st0 serve both). Per group of lines:
//   1. win[k*lpb + l] = last position of line l aiming at destination k (shared atomicMax),
//      positions' destinations and values kept in registers (R per thread) when they fit;
//   2. each winning position stores its value into the shared line vals[k*lpb + l];
//   3. the block writes the whole output lines in memory order: vals where a position won,
//      else the input value (read only there), so every output element is written exactly once,
//      coalesced, and overwritten input values are never read.
// Shared tables are indexed [k][l] so that lanes (l fastest) touch consecutive words.
// All in-loop indices are 32-bit (lpb * len < 2^31 and lpb * dim_size <= 12032, checked on the host).
extern __shared__ __align__(16) unsigned char scatter_line_smem[];

template <class U, class I>
__global__ void __launch_bounds__(512) scatter_line_kernel(U* __restrict__ out, const I* __restrict__ idx,
                                                           const U* __restrict__ upd, const U* __restrict__ in,
                                                           TabMeta m) {
  constexpr int R = 8;
  __shared__ long long lo0[32], lo1[32], lo2[32];
  const int lpb = m.lpb;
  const int D = (int)m.dim_size;
  const int L = (int)m.len;
  const int tab = lpb * D;
  int* win = reinterpret_cast<int*>(scatter_line_smem);
  U* vals = reinterpret_cast<U*>(scatter_line_smem + ((4 * tab + 15) & ~15));
  const long long groups = (m.n + lpb - 1) / lpb;
  const unsigned ulpb = (unsigned)lpb;
  for (long long g = blockIdx.x; g < groups; g += gridDim.x) {
    const long long l0 = g * lpb;
    const int nl = scatter_group_lines(m, l0, lpb, lo0, lo1, lo2);
    for (int t = threadIdx.x; t < tab; t += blockDim.x) win[t] = -1;
    __syncthreads();
    const int per = lpb * L;  // position t: line t % lpb, position t / lpb along the axis
    if (per <= (int)blockDim.x * R) {
      int kk[R];  // table slot k*lpb + l, or -1
      U uu[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int t = r * (int)blockDim.x + (int)threadIdx.x;
        kk[r] = -1;
        if (t < per) {
          const int j = (int)((unsigned)t / ulpb);
          const int ls = t - j * lpb;
          if (ls < nl) {
            const long long k = (long long)idx[lo1[ls] + (long long)j * m.st1];
            if (k >= 0 && k < D) {
              kk[r] = (int)k * lpb + ls;
              uu[r] = upd[lo2[ls] + (long long)j * m.st2];
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (kk[r] >= 0) atomicMax(&win[kk[r]], (int)((unsigned)(r * (int)blockDim.x + (int)threadIdx.x) / ulpb));
      __syncthreads();
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (kk[r] >= 0 && win[kk[r]] == (int)((unsigned)(r * (int)blockDim.x + (int)threadIdx.x) / ulpb)) vals[kk[r]] = uu[r];
    } else {
      for (int t = threadIdx.x; t < per; t += blockDim.x) {
        const int j = (int)((unsigned)t / ulpb);
        const int ls = t - j * lpb;
        if (ls >= nl) continue;
        const long long k = (long long)idx[lo1[ls] + (long long)j * m.st1];
        if (k >= 0 && k < D) atomicMax(&win[(int)k * lpb + ls], j);
      }
      __syncthreads();
      for (int t = threadIdx.x; t < per; t += blockDim.x) {
        const int j = (int)((unsigned)t / ulpb);
        const int ls = t - j * lpb;
        if (ls >= nl) continue;
        const long long k = (long long)idx[lo1[ls] + (long long)j * m.st1];
        if (k >= 0 && k < D && win[(int)k * lpb + ls] == j) vals[(int)k * lpb + ls] = upd[lo2[ls] + (long long)j * m.st2];
      }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < tab; t += blockDim.x) {
      const int k = (int)((unsigned)t / ulpb);
      const int ls = t - k * lpb;
      if (ls < nl) {
        const long long o = lo0[ls] + (long long)k * m.st0;
        out[o] = win[t] >= 0 ? vals[t] : in[o];
      }
    }
    __syncthreads();  // tables and line offsets are rebuilt for the next group
  }
}
