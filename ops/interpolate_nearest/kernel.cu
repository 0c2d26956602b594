// Nearest-neighbour interpolation (legacy "nearest"): per spatial dim
// src = min(floor(dst * scale), in - 1), scale = in / out computed in f32 (as torch does).
// Dims are (N, C, S0[, S1[, S2]]); a block row handles one output line along the last dim.

struct InterpMeta {
  long long oshape[5], ishape[5], ostr[5], istr[5];
  float scale[5];
  int nd, pad_;
  long long rows;
};

template <class U>
__global__ void interp_nearest(U* __restrict__ out, const U* __restrict__ in, InterpMeta m) {
  const int last = m.nd - 1;
  const long long W = m.oshape[last];
  for (long long r = blockIdx.y; r < m.rows; r += gridDim.y) {
    long long oo = 0, io = 0, rest = r;
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
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < W; x += (long long)gridDim.x * blockDim.x) {
      long long s = (long long)floorf((float)x * m.scale[last]);
      if (s > m.ishape[last] - 1) s = m.ishape[last] - 1;
      out[oo + x * m.ostr[last]] = in[io + s * m.istr[last]];
    }
  }
}
