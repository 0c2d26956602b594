// tril / triu: out[..., i, j] = keep(j - i) ? in[..., i, j] : 0, copied by element bytes
// (zero is all-zero bytes for every supported dtype). Elements that become zero are never
// read; in place (out == in, same layout) the kept elements are not rewritten either.

struct TriMeta {
  long long M, N, so_r, so_c, si_r, si_c;
  long long bshape[6], bso[6], bsi[6];
  long long nb, diag;
  int nbd, lower, inplace, pad_;
};

__device__ __forceinline__ bool tri_keep(const TriMeta& m, long long i, long long j) {
  long long d = j - i;
  return m.lower ? (d <= m.diag) : (d >= m.diag);
}

// U: unsigned integer of the element size; VEC: elements per thread along a row (VEC > 1
// requires unit column strides, aligned rows and N % VEC == 0).
template <class U, int VEC>
__global__ void tri_kernel(U* out, const U* in, TriMeta m) {
  const long long step = (long long)gridDim.x * blockDim.x * VEC;
  for (long long b = blockIdx.z; b < m.nb; b += gridDim.z) {
    long long oo = 0, oi = 0, rest = b;
    for (int d = m.nbd - 1; d >= 0; --d) {
      long long q = rest / m.bshape[d], r = rest - q * m.bshape[d];
      oo += r * m.bso[d];
      oi += r * m.bsi[d];
      rest = q;
    }
    for (long long i = blockIdx.y; i < m.M; i += gridDim.y) {
      U* orow = out + oo + i * m.so_r;
      const U* irow = in + oi + i * m.si_r;
      for (long long j0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * VEC; j0 < m.N; j0 += step) {
        if (VEC > 1) {
          bool k0 = tri_keep(m, i, j0), k1 = tri_keep(m, i, j0 + VEC - 1);
          if (k0 && k1) {
            if (!m.inplace) *reinterpret_cast<Pack<U, VEC>*>(orow + j0) = *reinterpret_cast<const Pack<U, VEC>*>(irow + j0);
          } else if (!k0 && !k1) {
            Pack<U, VEC> z;
#pragma unroll
            for (int t = 0; t < VEC; ++t) z.v[t] = U(0);
            *reinterpret_cast<Pack<U, VEC>*>(orow + j0) = z;
          } else {
            Pack<U, VEC> v = *reinterpret_cast<const Pack<U, VEC>*>(irow + j0);
#pragma unroll
            for (int t = 0; t < VEC; ++t)
              if (!tri_keep(m, i, j0 + t)) v.v[t] = U(0);
            *reinterpret_cast<Pack<U, VEC>*>(orow + j0) = v;
          }
        } else {
          if (tri_keep(m, i, j0)) {
            if (!m.inplace) orow[j0 * m.so_c] = irow[j0 * m.si_c];
          } else {
            orow[j0 * m.so_c] = U(0);
          }
        }
      }
    }
  }
}
