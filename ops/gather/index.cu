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

template <class IT>
__device__ __forceinline__ void idx_offsets(const IdxMeta& m, IT t, long long& o0, long long& o1, long long& o2) {
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
