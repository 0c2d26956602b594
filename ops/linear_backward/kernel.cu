// grad_b = column sums of grad_y (M x N, strides (sr, sc)), deterministic in two stages:
// colsum_partial: block (32 columns x 8 row lanes) over one row split, fixed-order tree in
// shared memory -> part[split][col]; colsum_final: per column, splits summed in order.
template <class T, class A>
__global__ void colsum_partial(A* __restrict__ part, const T* __restrict__ g, long long M, long long N,
                               long long sr, long long sc, long long rows_per_split) {
  __shared__ A sh[8][33];
  long long col = (long long)blockIdx.x * 32 + threadIdx.x;
  long long r0 = (long long)blockIdx.y * rows_per_split;
  long long r1 = r0 + rows_per_split < M ? r0 + rows_per_split : M;
  A acc = A(0);
  if (col < N)
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) acc += (A)iop_load(g[r * sr + col * sc]);
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
    A s = sh[0][threadIdx.x];
#pragma unroll
    for (int k = 1; k < 8; ++k) s += sh[k][threadIdx.x];
    part[(long long)blockIdx.y * N + col] = s;
  }
}

template <class T, class A>
__global__ void colsum_final(T* __restrict__ out, const A* __restrict__ part, long long N, long long so, int splits) {
  long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  A s = A(0);
  for (int k = 0; k < splits; ++k) s += part[(long long)k * N + col];
  out[col * so] = Conv<T>::from(s);
}
