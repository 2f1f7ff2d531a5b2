// CUDA C on tracejit's CPU SIMT emulator (tj_simt.h): the qualifiers, index builtins, barrier, warp functions,
// atomics, bit casts and half conversions that CUDA kernels use. Force-included (-include) before the
// kernel's source; the kernel's own `#include <cuda_fp16.h>` finds the empty file next to this one.
#pragma once
#include "tj_simt.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __shared__ static TJ_SHARED_SECTION
#define __constant__ static

typedef tj::uint3v dim3;
#define threadIdx (tj_now.thread_idx)
#define blockIdx (tj_now.block_idx)
#define blockDim (tj_now.block_dim)
#define gridDim (tj_now.grid_dim)
static const int warpSize = 32;

static inline void __syncthreads() { tj::barrier(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { tj::warp_exchange(0); }
static inline void __threadfence() {}
static inline void __threadfence_block() {}

template <class T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    return tj::shuffle_idx(v, (unsigned)src, (unsigned)width);
}
template <class T> static inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    return tj::shuffle_down(v, delta, (unsigned)width);
}
template <class T> static inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    return tj::shuffle_up(v, delta, (unsigned)width);
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    return tj::shuffle_xor(v, (unsigned)mask, (unsigned)width);
}
static inline unsigned __ballot_sync(unsigned, int p) { return tj::warp_ballot(p != 0); }
static inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
static inline int __all_sync(unsigned, int p) {
    uint32_t yes = tj::warp_ballot(p != 0), live = tj::warp_ballot(true);
    return yes == live;
}
static inline unsigned __activemask() { return tj::warp_ballot(true); }

// ---- tensor cores ----
// codegen/mma.py calls tj_mma_m16n8k16 where NVRTC gets `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
// (inline PTX). Here each fragment register is exchanged across the warp once, and every lane computes its four
// results from the whole rows and columns, with the fragment layout PTX defines (group = lane / 4, pair =
// lane % 4): a[r] holds row group (+8 when r is odd), columns 2 * pair and + 1 (+8 when r >= 2); b0 and b1 rows
// 2 * pair and + 1 (+8 for b1) of column group; c rows group and group + 8, columns 2 * pair and + 1.
#define TJ_EMULATED_MMA 1
static inline void tj_mma_m16n8k16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    unsigned l = tj::lane(), g = l / 4, p = l % 4;
    float A[2][16], B[2][16];   // rows group and group + 8 of A; columns 2 * pair and + 1 of B
    for (int r = 0; r < 4; r++) {
        tj::warp_exchange(a[r]);
        for (unsigned q = 0; q < 4; q++) {
            uint32_t w = (uint32_t)tj::lane_value(4 * g + q);
            A[r & 1][(r >= 2 ? 8 : 0) + 2 * q] = tj::f16_to_f32((uint16_t)w);
            A[r & 1][(r >= 2 ? 8 : 0) + 2 * q + 1] = tj::f16_to_f32((uint16_t)(w >> 16));
        }
    }
    for (int r = 0; r < 2; r++) {
        tj::warp_exchange(r ? b1 : b0);
        for (unsigned j = 0; j < 2; j++)
            for (unsigned q = 0; q < 4; q++) {
                uint32_t w = (uint32_t)tj::lane_value(4 * (2 * p + j) + q);
                B[j][8 * r + 2 * q] = tj::f16_to_f32((uint16_t)w);
                B[j][8 * r + 2 * q + 1] = tj::f16_to_f32((uint16_t)(w >> 16));
            }
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float s = c[2 * i + j];
            for (int k = 0; k < 16; k++) s += A[i][k] * B[j][k];
            c[2 * i + j] = s;
        }
}
// cp.async (codegen/mma.py's double-buffered copies): done at once, which is one order the GPU may take
static inline void tj_cp_async16(void* dst, const void* src, int bytes) {
    __builtin_memset(dst, 0, 16);
    __builtin_memcpy(dst, src, (size_t)bytes);
}
static inline void tj_cp_async_commit() {}
static inline void tj_cp_async_wait1() {}
static inline void tj_cp_async_wait0() {}

// ---- bit casts ----
static inline float __int_as_float(int x) { return tj::from_bits<float>((uint32_t)x); }
static inline float __uint_as_float(unsigned x) { return tj::from_bits<float>(x); }
static inline int __float_as_int(float x) { return (int)(uint32_t)tj::to_bits(x); }
static inline unsigned __float_as_uint(float x) { return (uint32_t)tj::to_bits(x); }
static inline double __longlong_as_double(long long x) { return tj::from_bits<double>((uint64_t)x); }
static inline long long __double_as_longlong(double x) { return (long long)tj::to_bits(x); }

// ---- half (cuda_fp16.h) ----
typedef tj::half __half;
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half(float x) { return __half(x); }
static inline __half __float2half_rn(float x) { return __half(x); }
static inline __half __double2half(double x) { return __half(x); }
static inline unsigned short __half_as_ushort(__half h) { return h.bits; }
static inline __half __ushort_as_half(unsigned short b) { __half h; h.bits = b; return h; }

// ---- intrinsics with plain C equivalents ----
#define __expf expf   // glibc's math.h declares these names: macros, not definitions
#define __logf logf
#define __sinf sinf
#define __cosf cosf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }

// ---- vector types ----
#define TJ_VECTORS(T, N) \
    struct N##2 { T x, y; }; struct N##3 { T x, y, z; }; struct alignas(sizeof(T) * 4 <= 16 ? sizeof(T) * 4 : 16) N##4 { T x, y, z, w; }; \
    static inline N##2 make_##N##2(T x, T y) { return {x, y}; } \
    static inline N##3 make_##N##3(T x, T y, T z) { return {x, y, z}; } \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return {x, y, z, w}; }
TJ_VECTORS(float, float) TJ_VECTORS(double, double) TJ_VECTORS(int, int) TJ_VECTORS(unsigned int, uint)
TJ_VECTORS(long long, longlong) TJ_VECTORS(short, short) TJ_VECTORS(signed char, char)
TJ_VECTORS(unsigned char, uchar)
#undef TJ_VECTORS

// ---- atomics: int, unsigned int, unsigned long long, long long, float, double ----
#define TJ_ATOMIC(T) \
    static inline T atomicAdd(T* p, T v) { return tj::atomic_rmw(p, v, 0); } \
    static inline T atomicSub(T* p, T v) { return tj::atomic_rmw(p, v, 1); } \
    static inline T atomicMax(T* p, T v) { return tj::atomic_rmw(p, v, 2); } \
    static inline T atomicMin(T* p, T v) { return tj::atomic_rmw(p, v, 3); } \
    static inline T atomicExch(T* p, T v) { return tj::atomic_rmw(p, v, 4); }
TJ_ATOMIC(int) TJ_ATOMIC(unsigned int) TJ_ATOMIC(unsigned long long) TJ_ATOMIC(long long) TJ_ATOMIC(float)
TJ_ATOMIC(double)
#undef TJ_ATOMIC
#define TJ_ATOMIC_BITS(T) \
    static inline T atomicAnd(T* p, T v) { return tj::atomic_bits(p, v, 0); } \
    static inline T atomicOr(T* p, T v) { return tj::atomic_bits(p, v, 1); } \
    static inline T atomicXor(T* p, T v) { return tj::atomic_bits(p, v, 2); } \
    static inline T atomicCAS(T* p, T compare, T v) { T old = *p; if (old == compare) *p = v; return old; }
TJ_ATOMIC_BITS(int) TJ_ATOMIC_BITS(unsigned int) TJ_ATOMIC_BITS(unsigned long long)
#undef TJ_ATOMIC_BITS
static inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short v) {
    unsigned short old = *p; if (old == compare) *p = v; return old;
}
static inline unsigned atomicInc(unsigned* p, unsigned limit) { unsigned old = *p; *p = old >= limit ? 0 : old + 1; return old; }
static inline unsigned atomicDec(unsigned* p, unsigned limit) {
    unsigned old = *p; *p = (old == 0 || old > limit) ? limit : old - 1; return old;
}

// ---- the entry the emulator calls for each thread: the kernel with its arguments read from the void* array
// cuLaunchKernel received (each entry points at one argument's value); and the sizes of those arguments, which
// a CUDA graph copies when it captures a launch ----
namespace tj {
template <class... A, unsigned... I> static inline void call_kernel(void (*f)(A...), void** a, indices<I...>) {
    f(*(typename bare<A>::type*)a[I]...);
}
template <class... A> static inline void call_kernel(void (*f)(A...), void** a) {
    call_kernel(f, a, typename make_indices<sizeof...(A)>::type());
}
template <class... A> static inline unsigned param_sizes(void (*)(A...), unsigned* out) {
    const unsigned sizes[] = {(unsigned)sizeof(typename bare<A>::type)..., 0u};
    for (unsigned i = 0; i < sizeof...(A); i++) out[i] = sizes[i];
    return sizeof...(A);
}
}  // namespace tj
#define TJ_CUDA_ENTRY(name) \
    TJ_EXPORT void tj_thread_##name(void** a) { ::tj::call_kernel(name, a); } \
    TJ_EXPORT unsigned tj_params_##name(unsigned* sizes) { return ::tj::param_sizes(name, sizes); }
