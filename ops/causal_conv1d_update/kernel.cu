// causal_conv1d_update. Tensor slots: 0 out, 1 conv_state, 2 x, 3 weight, 4 bias,
// 5 conv_state_indices. common.cuh precedes this file. CcArgs fields here: x/o strides of x and
// out as (B, D, T) (L = T new tokens), is: conv_state strides (S, D, W-1), nseg: S,
// sq[0]: conv_state_indices stride, CC_SEQ / CC_SEQ64: indices present / i64.

// One thread per (b, d), a block per batch row b (blockIdx.y) and up to blockDim.x channels:
// the window [state, x_0 .. x_{T-1}] in registers, one output per new token, then the last W-1
// values back into the state. A row whose index is < 0 or >= S, or names a slot another row
// names too, is a padding slot: its outputs are 0 and its state is neither read nor written
// (so no two threads touch one slot, and the result is the same run to run).
template <class T, int W>
__global__ void __launch_bounds__(256)
ccu(T* out, T* state, const T* x, const void* wt, const void* bias, const void* idx, const CcArgs a) {
  constexpr int H = W - 1;
  const bool silu = (a.flags & CC_SILU) != 0, has_idx = (a.flags & CC_SEQ) != 0;
  for (long long b = blockIdx.y; b < a.B; b += gridDim.y) {
    const long long s = has_idx ? cc_seq(idx, b * a.sq[0], a.flags) : b;
    bool pad = s < 0 || s >= a.nseg;
    if (has_idx && !pad) {  // block-uniform: every thread of the block takes this branch
      int found = 0;
      for (long long j = threadIdx.x; j < a.B; j += blockDim.x)
        if (j != b && cc_seq(idx, j * a.sq[0], a.flags) == s) found = 1;
      pad = __syncthreads_or(found) != 0;
    }
    for (long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x; d < a.D; d += (long long)gridDim.x * blockDim.x) {
      T* orow = out + b * a.o[0] + d * a.o[1];
      if (pad) {
#pragma unroll
        for (int t = 0; t < 8; ++t)
          if (t < a.L) orow[t * a.o[2]] = Conv<T>::from(0.f);
        continue;
      }
      float w[W], bv;
      cc_weights<W>(wt, bias, d, a, w, bv);
      T* st = state + s * a.is[0] + d * a.is[1];
      const T* xr = x + b * a.x[0] + d * a.x[1];
      float win[W];
#pragma unroll
      for (int j = 0; j < H; ++j) win[j] = cc_f(st[j * a.is[2]]);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        if (t < a.L) {
          win[H] = cc_f(xr[t * a.x[2]]);
          float acc = bv;
#pragma unroll
          for (int k = 0; k < W; ++k) acc = fmaf(w[k], win[k], acc);
          orow[t * a.o[2]] = Conv<T>::from(silu ? cc_silu<T>(acc) : acc);
#pragma unroll
          for (int j = 0; j < H; ++j) win[j] = win[j + 1];
        }
      }
#pragma unroll
      for (int j = 0; j < H; ++j) st[j * a.is[2]] = Conv<T>::from(win[j]);
    }
  }
}
