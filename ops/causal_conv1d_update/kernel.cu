// causal_conv1d_update. Tensor slots: 0 out, 1 conv_state, 2 x, 3 weight, 4 bias,
// 5 conv_state_indices. common.cuh precedes this file. CcArgs fields here: x/o strides of x and
// out as (B, D, T) (L = T new tokens), is: conv_state strides (S, D, W-1), nseg: S,
// sq[0]: conv_state_indices stride, CC_SEQ / CC_SEQ64: indices present / i64.

// One thread per (b, d): the window [state, x_0 .. x_{T-1}] in registers, one output per new
// token, then the last W-1 values back into the state. A row whose index is < 0 or >= S is a
// padding slot: its outputs are 0 and no state is read or written.
template <class T, int W>
__global__ void __launch_bounds__(256)
ccu(T* out, T* state, const T* x, const void* wt, const void* bias, const void* idx, const CcArgs a) {
  constexpr int H = W - 1;
  const long long n = a.B * a.D;
  const bool silu = (a.flags & CC_SILU) != 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long b = i / a.D, d = i - b * a.D;
    T* orow = out + b * a.o[0] + d * a.o[1];
    const long long s = (a.flags & CC_SEQ) ? cc_seq(idx, b * a.sq[0], a.flags) : b;
    if (s < 0 || s >= a.nseg) {
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
        orow[t * a.o[2]] = Conv<T>::from(silu ? cc_silu(acc) : acc);
#pragma unroll
        for (int j = 0; j < H; ++j) win[j] = win[j + 1];
      }
    }
#pragma unroll
    for (int j = 0; j < H; ++j) st[j * a.is[2]] = Conv<T>::from(win[j]);
  }
}
