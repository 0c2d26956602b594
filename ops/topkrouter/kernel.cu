// topkrouter: DeepSeek-style grouped sigmoid routing of x [ntoken, 256] (last-dim stride 1), f32.
// One warp per row (4 rows per 128-thread block); lane l caches experts 8l..8l+7, so group g
// (experts 32g..32g+31) is lanes 4g..4g+3.
//   s = sigmoid(x) rounded to T (as upstream; a no-op for f32 and f64), c = s + bias; group
//   score = sum of the group's two largest c (merged over its 4 lanes with commutative
//   max/min, so all 4 lanes agree); the 4 best groups are kept
//   (ties -> lower group) and c = 0 elsewhere; round j takes the largest (c, index) pair ranked
//   below round j-1's (ties -> lower index); values = s at the chosen experts, scaled by
//   routed_scaling_factor / (sum + 1e-20).

#define TR_ROWS 4
#define TR_EXPERTS 256
#define TR_PER_LANE 8
#define TR_GROUPS 8
#define TR_KEEP 4

struct RouterMeta {
  long long ntoken, topk;
  long long sx0;       // x row stride (the expert stride is 1)
  long long sb;        // correction_bias stride
  long long sv0, sv1;  // values strides
  long long si0, si1;  // indices strides
};

__device__ __forceinline__ unsigned int tr_key(float v) {
  const unsigned b = __float_as_uint(v == 0.f ? 0.f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

template <class T>
__global__ void __launch_bounds__(32 * TR_ROWS) topk_router(float* values, int* indices, const T* __restrict__ x,
                                                            const float* __restrict__ bias, RouterMeta m, float scale) {
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * TR_ROWS + (threadIdx.x >> 5);
  if (r >= m.ntoken) return;  // uniform per warp
  const T* px = x + r * m.sx0 + lane * TR_PER_LANE;
  float s[TR_PER_LANE], c[TR_PER_LANE];
#pragma unroll
  for (int q = 0; q < TR_PER_LANE; ++q) {
    const float v = (float)iop_load(px[q]);
    s[q] = (float)iop_load(Conv<T>::from(1.f / (1.f + expf(-v))));
    c[q] = s[q] + bias[(long long)(lane * TR_PER_LANE + q) * m.sb];
  }
  // The two largest c of the lane, then of the group (lanes 4g..4g+3).
  float a1 = __int_as_float(0xff800000), a2 = a1;
#pragma unroll
  for (int q = 0; q < TR_PER_LANE; ++q) {
    if (c[q] > a1) {
      a2 = a1;
      a1 = c[q];
    } else if (c[q] > a2) {
      a2 = c[q];
    }
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    const float b1 = __shfl_xor_sync(0xffffffffu, a1, o);
    const float b2 = __shfl_xor_sync(0xffffffffu, a2, o);
    const float hi = fmaxf(a1, b1);
    const float second = fmaxf(fminf(a1, b1), fmaxf(a2, b2));
    a1 = hi;
    a2 = second;
  }
  const float score = a1 + a2;
  const int group = lane >> 2;
  int rank = 0;
#pragma unroll
  for (int h = 0; h < TR_GROUPS; ++h) {
    const float gh = __shfl_sync(0xffffffffu, score, h * 4);
    if (gh > score || (gh == score && h < group)) ++rank;
  }
  if (rank >= TR_KEEP) {
#pragma unroll
    for (int q = 0; q < TR_PER_LANE; ++q) c[q] = 0.f;
  }
  unsigned int key[TR_PER_LANE];
#pragma unroll
  for (int q = 0; q < TR_PER_LANE; ++q) key[q] = tr_key(c[q]);
  float* pv = values + r * m.sv0;
  int* pi = indices + r * m.si0;
  unsigned int pk = 0xffffffffu;
  int pidx = -1;  // nothing chosen yet: every pair ranks below (pk, pidx)
  float sum = 0.f;
  for (long long j = 0; j < m.topk; ++j) {
    unsigned int bk = 0;
    int bi = TR_EXPERTS;
#pragma unroll
    for (int q = 0; q < TR_PER_LANE; ++q) {
      const int i = lane * TR_PER_LANE + q;
      const unsigned int k = key[q];
      const bool below = j == 0 || k < pk || (k == pk && i > pidx);
      if (below && (bi == TR_EXPERTS || k > bk || (k == bk && i < bi))) {
        bk = k;
        bi = i;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned int k2 = __shfl_xor_sync(0xffffffffu, bk, o);
      const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
      if (i2 < TR_EXPERTS && (bi == TR_EXPERTS || k2 > bk || (k2 == bk && i2 < bi))) {
        bk = k2;
        bi = i2;
      }
    }
    const int sel = bi < TR_EXPERTS ? bi : 0;
    float sv = 0.f;
#pragma unroll
    for (int q = 0; q < TR_PER_LANE; ++q)
      if ((sel & (TR_PER_LANE - 1)) == q) sv = s[q];
    sv = __shfl_sync(0xffffffffu, sv, sel / TR_PER_LANE);
    if (lane == 0) {
      pv[j * m.sv1] = sv;
      pi[j * m.si1] = sel;
      sum += sv;
    }
    pk = bk;
    pidx = bi;
  }
  if (lane == 0) {
    const float denom = sum + 1e-20f;
    for (long long j = 0; j < m.topk; ++j) pv[j * m.sv1] = pv[j * m.sv1] / denom * scale;
  }
}
