// rearrange: dst[i] = src[i] for every logical index, copied as raw bits of the element size.
//
// Transposed layouts go through a shared-memory tile so that both the read (along the dim
// where src is contiguous, B) and the write (along dst's contiguous dim, A) are coalesced.
// All other layouts use the shared elementwise copy kernels (vectorised when dense).
//
// Grid: x over tiles of A, y over tiles of B (wrapped into a loop when > 65535), z over the
// flattened batch dims (loop when > 65535). Block: (TILE, ROWS).

struct TileMeta {
  long long size_a, size_b;
  long long dst_a, dst_b, src_a, src_b;       // strides of A and B in dst and src
  long long batch_shape[6];
  long long batch_dst[6], batch_src[6];
  long long batch;                           // product of batch_shape
  int nbatch;
  int pad_;
};

template <class T, int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS) rearrange_tiled(T* __restrict__ dst, const T* __restrict__ src, TileMeta m) {
  __shared__ T tile[TILE][TILE + 1];
  const long long tiles_b = (m.size_b + TILE - 1) / TILE;
  for (long long z = blockIdx.z; z < m.batch; z += gridDim.z) {
    long long rem = z, dofs = 0, sofs = 0;
    for (int d = m.nbatch - 1; d >= 0; --d) {
      const long long q = rem / m.batch_shape[d];
      const long long r = rem - q * m.batch_shape[d];
      dofs += r * m.batch_dst[d];
      sofs += r * m.batch_src[d];
      rem = q;
    }
    const long long a0 = (long long)blockIdx.x * TILE;
    for (long long tb = blockIdx.y; tb < tiles_b; tb += gridDim.y) {
      const long long b0 = tb * TILE;
      // Read: threadIdx.x walks B (src-contiguous), rows walk A.
#pragma unroll
      for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const long long a = a0 + j, b = b0 + threadIdx.x;
        if (a < m.size_a && b < m.size_b) tile[j][threadIdx.x] = src[sofs + a * m.src_a + b * m.src_b];
      }
      __syncthreads();
      // Write: threadIdx.x walks A (dst-contiguous), rows walk B.
#pragma unroll
      for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const long long a = a0 + threadIdx.x, b = b0 + j;
        if (a < m.size_a && b < m.size_b) dst[dofs + a * m.dst_a + b * m.dst_b] = tile[threadIdx.x][j];
      }
      __syncthreads();
    }
  }
}
