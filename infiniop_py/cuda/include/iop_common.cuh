// Common device helpers for every infiniop_py kernel. Prepended to each source by the compile
// cache, so kernels need no CUDA toolkit headers (NVRTC runs without them).
#pragma once

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

// Storage types for half precision: plain 16-bit patterns, converted with PTX cvt.
struct iop_half { unsigned short bits; };
struct iop_bf16 { unsigned short bits; };

__device__ __forceinline__ float iop_h2f(iop_half h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits)); return f;
}
__device__ __forceinline__ float iop_b2f(iop_bf16 b) {
  return __uint_as_float(((unsigned)b.bits) << 16);
}
__device__ __forceinline__ iop_half iop_f2h(float f) {
  unsigned short b; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f)); return iop_half{b};
}
__device__ __forceinline__ iop_half iop_d2h(double f) {
  unsigned short b; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(b) : "d"(f)); return iop_half{b};
}
__device__ __forceinline__ iop_bf16 iop_f2b(float f) {
  unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return iop_bf16{b};
}

// Compute<T>::type is the arithmetic type for storage type T: half types compute in f32.
template <class T> struct Compute { typedef T type; __device__ static T load(T x) { return x; } };
template <> struct Compute<iop_half> { typedef float type; __device__ static float load(iop_half x) { return iop_h2f(x); } };
template <> struct Compute<iop_bf16> { typedef float type; __device__ static float load(iop_bf16 x) { return iop_b2f(x); } };

template <class T> __device__ __forceinline__ typename Compute<T>::type iop_load(T x) { return Compute<T>::load(x); }

// Conv<To>::from(x): convert a compute value to storage type To, rounding once.
// float->int truncates toward zero (cvt.rzi saturates out-of-range values; NaN gives 0);
// int->int wraps; x->bool is x != 0.
template <class To> struct Conv {
  template <class F> __device__ static To from(F x) { return static_cast<To>(x); }
};
template <> struct Conv<bool> {
  template <class F> __device__ static bool from(F x) { return x != F(0); }
  __device__ static bool from(bool x) { return x; }
};
template <> struct Conv<iop_half> {
  __device__ static iop_half from(float x) { return iop_f2h(x); }
  __device__ static iop_half from(double x) { return iop_d2h(x); }
  __device__ static iop_half from(bool x) { return iop_f2h(x ? 1.f : 0.f); }
  template <class F> __device__ static iop_half from(F x) { return iop_f2h(static_cast<float>(x)); }
};
template <> struct Conv<iop_bf16> {
  __device__ static iop_bf16 from(float x) { return iop_f2b(x); }
  __device__ static iop_bf16 from(bool x) { return iop_f2b(x ? 1.f : 0.f); }
  template <class F> __device__ static iop_bf16 from(F x) { return iop_f2b(static_cast<float>(x)); }
};

template <class T> __device__ __forceinline__ bool iop_truth(T x) { return Conv<bool>::from(x); }

// A fixed-size pack for 16-byte vector loads and stores.
template <class T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

// Fast unsigned division by a run-time constant (valid for n, d < 2^31):
// q = (umulhi(n, m) + n) >> s with m, s precomputed on the host.
struct FastDiv {
  unsigned int d, m, s;
  __device__ __forceinline__ unsigned int div(unsigned int n) const { return (__umulhi(n, m) + n) >> s; }
};

#define IOP_MAXD 8

// Strided layout of up to 4 operands over a collapsed index space (innermost dim last).
struct StridedMeta {
  long long shape[IOP_MAXD];
  long long stride[4][IOP_MAXD];
  FastDiv div[IOP_MAXD];
  long long n;
  int ndim;
  int pad_;
};

struct Scalars { double v[4]; };
