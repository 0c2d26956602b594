// Nearest-neighbour interpolation (legacy "nearest"): per spatial dim
// src = min(floor(dst * scale), in - 1), scale = in / out computed in f32 (as torch does).
// Dims are (N, C, S0[, S1[, S2]]); an output "row" is one line along the last dim.
//
// A block takes RB rows per step. The row -> (output offset, input offset) decomposition
// (64-bit divisions) is done once per row by RB threads into shared memory; the block's
// threads are then split in groups of `tpr` threads (a power of two, from the host), one
// group per row, and each thread writes V consecutive outputs (V > 1: one 16-byte store,
// host-checked alignment). Per output element only a float multiply, floor and min remain.

struct InterpMeta {
  long long oshape[5], ishape[5], ostr[5], istr[5];
  float scale[5];
  int nd, tpr;  // tpr: threads per row (power of two dividing blockDim.x)
  long long rows;
};

template <int BYTES> struct alignas(BYTES) IpPack { unsigned char b[BYTES]; };

#define INTERP_RB 16

template <class U, int V>
__global__ void __launch_bounds__(256) interp_nearest(U* __restrict__ out, const U* __restrict__ in, InterpMeta m) {
  __shared__ long long s_oo[INTERP_RB], s_io[INTERP_RB];
  const int last = m.nd - 1;
  const long long W = m.oshape[last];
  const long long nv = (W + V - 1) / V;
  const float sc = m.scale[last];
  const long long smax = m.ishape[last] - 1;
  const long long istr = m.istr[last], ostr = m.ostr[last];
  const int tpr = m.tpr, groups = blockDim.x / tpr;
  const int grp = threadIdx.x / tpr, lane = threadIdx.x - grp * tpr;
  for (long long r0 = (long long)blockIdx.x * INTERP_RB; r0 < m.rows; r0 += (long long)gridDim.x * INTERP_RB) {
    __syncthreads();  // the previous step is done with s_oo / s_io
    if (threadIdx.x < INTERP_RB && r0 + threadIdx.x < m.rows) {
      long long oo = 0, io = 0, rest = r0 + threadIdx.x;
      for (int d = last - 1; d >= 0; --d) {
        long long q = rest / m.oshape[d], c = rest - q * m.oshape[d];
        rest = q;
        oo += c * m.ostr[d];
        long long s = c;
        if (d >= 2) {
          s = (long long)floorf((float)c * m.scale[d]);
          if (s > m.ishape[d] - 1) s = m.ishape[d] - 1;
        }
        io += s * m.istr[d];
      }
      s_oo[threadIdx.x] = oo;
      s_io[threadIdx.x] = io;
    }
    __syncthreads();
    const long long left = m.rows - r0;
    const int nr = left < INTERP_RB ? (int)left : INTERP_RB;
    for (int rr = grp; rr < nr; rr += groups) {
      const long long oo = s_oo[rr], io = s_io[rr];
      for (long long v = lane; v < nv; v += tpr) {
        if (V > 1) {  // whole vector in range (W % V == 0), unit output stride, aligned
          union { IpPack<V * sizeof(U)> p; U e[V]; } pk;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            long long s = (long long)floorf((float)(v * V + e) * sc);
            if (s > smax) s = smax;
            pk.e[e] = in[io + s * istr];
          }
          *reinterpret_cast<IpPack<V * sizeof(U)>*>(out + oo + v * V) = pk.p;
        } else {
          long long s = (long long)floorf((float)v * sc);
          if (s > smax) s = smax;
          out[oo + v * ostr] = in[io + s * istr];
        }
      }
    }
  }
}
