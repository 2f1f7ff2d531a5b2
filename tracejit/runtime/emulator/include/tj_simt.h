// tracejit's SIMT model on the CPU, as kernel modules see it: the running thread's coordinates, the warp
// exchange, shared memory, half, atomics. CUDA C (tj_cuda.h) and MSL (metal_stdlib) put their names on top.
// The scheduler itself is tj_core.cpp, compiled once into a library every kernel module calls into:
//
// - blocks (threadgroups) run one after another, in the order of the launch (forward, reverse or shuffled);
// - inside a block every thread is a fiber on its own stack, switched cooperatively on one OS thread. A fiber
//   runs until it waits (a barrier, or a warp / SIMD-group exchange) or returns; then the next one runs.
//   Between two waits the fibers run in the launch's order; a shuffled launch draws a new order for every
//   round, so code that relies on an order the hardware does not promise goes wrong;
// - a barrier releases the block when every thread that has not returned waits at one;
// - a warp exchange (shuffle, vote, SIMD reduction) releases the 32 lanes of a warp when every lane of it
//   that has not returned waits at one; each lane then reads the values all lanes deposited (lane-exact). A
//   lane that has returned, or does not exist (a partial warp), reads as garbage: undefined on hardware;
// - shared (threadgroup) memory: the module's statics in the section tj_shared, filled with 0xFF bytes (NaN,
//   -1) before each block, so code that reads before it writes sees garbage;
// - atomics are plain read-modify-writes: fibers switch only at waits, so nothing interleaves them.
//
// A kernel whose source has no barrier and no warp function is launched without fibers: its threads are
// plain calls, one after another.
//
// The header is parsed for every kernel, so it includes nothing: the C library's math functions are declared
// here (with the float overloads CUDA C and MSL have), which makes a kernel compile in a fraction of the time
// that <math.h> through libstdc++ takes.
#pragma once

typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;
typedef __UINTPTR_TYPE__ uintptr_t;
#define memcpy __builtin_memcpy
#define memset __builtin_memset

// ---- math: the C library's double and float functions, and float overloads of the double names ----
#define TJ_MATH1(fn) extern "C" double fn(double) noexcept; extern "C" float fn##f(float) noexcept; \
    static inline float fn(float x) { return fn##f(x); }
#define TJ_MATH2(fn) extern "C" double fn(double, double) noexcept; extern "C" float fn##f(float, float) noexcept; \
    static inline float fn(float x, float y) { return fn##f(x, y); }
TJ_MATH1(acos) TJ_MATH1(acosh) TJ_MATH1(asin) TJ_MATH1(asinh) TJ_MATH1(atan) TJ_MATH1(atanh) TJ_MATH1(cbrt)
TJ_MATH1(ceil) TJ_MATH1(cos) TJ_MATH1(cosh) TJ_MATH1(erf) TJ_MATH1(erfc) TJ_MATH1(exp) TJ_MATH1(exp2)
TJ_MATH1(expm1) TJ_MATH1(fabs) TJ_MATH1(floor) TJ_MATH1(lgamma) TJ_MATH1(log) TJ_MATH1(log10) TJ_MATH1(log1p)
TJ_MATH1(log2) TJ_MATH1(nearbyint) TJ_MATH1(rint) TJ_MATH1(round) TJ_MATH1(sin) TJ_MATH1(sinh) TJ_MATH1(sqrt)
TJ_MATH1(tan) TJ_MATH1(tanh) TJ_MATH1(tgamma) TJ_MATH1(trunc)
TJ_MATH2(atan2) TJ_MATH2(copysign) TJ_MATH2(fdim) TJ_MATH2(fmax) TJ_MATH2(fmin) TJ_MATH2(fmod) TJ_MATH2(hypot)
TJ_MATH2(nextafter) TJ_MATH2(pow) TJ_MATH2(remainder)
#undef TJ_MATH1
#undef TJ_MATH2
extern "C" double ldexp(double, int) noexcept;
extern "C" float ldexpf(float, int) noexcept;
static inline float ldexp(float x, int e) { return ldexpf(x, e); }
extern "C" double frexp(double, int*) noexcept;
extern "C" float frexpf(float, int*) noexcept;
static inline float frexp(float x, int* e) { return frexpf(x, e); }
extern "C" double fma(double, double, double) noexcept;
extern "C" float fmaf(float, float, float) noexcept;
static inline float fma(float x, float y, float z) { return fmaf(x, y, z); }
static inline float abs(float x) { return fabsf(x); }
static inline double abs(double x) { return fabs(x); }
static inline int abs(int x) { return x < 0 ? -x : x; }
static inline long abs(long x) { return x < 0 ? -x : x; }
static inline long long abs(long long x) { return x < 0 ? -x : x; }
#define TJ_CLASSIFY(T) \
    static inline bool signbit(T x) { return __builtin_signbit(x); } \
    static inline bool isnan(T x) { return __builtin_isnan(x); } \
    static inline bool isinf(T x) { return __builtin_isinf(x); } \
    static inline bool isfinite(T x) { return __builtin_isfinite(x); }
TJ_CLASSIFY(float) TJ_CLASSIFY(double)
#undef TJ_CLASSIFY
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VAL __builtin_huge_val()
#define M_PI 3.14159265358979323846

#define TJ_EXPORT extern "C" __attribute__((visibility("default")))
#define TJ_SHARED_SECTION __attribute__((section("tj_shared")))

namespace tj {

constexpr unsigned WARP = 32;
constexpr unsigned MAX_THREADS = 1024;

struct uint3v { unsigned x, y, z; };

// what the core tells the running thread
struct Coordinates {
    uint3v thread_idx, block_idx, block_dim, grid_dim;
    unsigned linear_tid;                   // the thread's index in its block
    uint64_t published[MAX_THREADS];       // after an exchange: each lane's value, by thread index
    bool active[MAX_THREADS];              // the lane took part in the last exchange of its warp
};

// ---- small templates (no <type_traits>: this header is parsed for every kernel) ----
template <class T> struct bare { typedef T type; };
template <class T> struct bare<T&> { typedef T type; };
template <class T> struct bare<const T> { typedef T type; };
template <class T> struct bare<const T&> { typedef T type; };
template <class T> struct bare<volatile T> { typedef T type; };
template <unsigned... I> struct indices {};
template <unsigned N, unsigned... I> struct make_indices : make_indices<N - 1, N - 1, I...> {};
template <unsigned... I> struct make_indices<0, I...> { typedef indices<I...> type; };

}  // namespace tj

extern "C" tj::Coordinates tj_now;
extern "C" void tj_barrier();
extern "C" void tj_exchange(uint64_t value);

namespace tj {

// ---- half: IEEE binary16 with round-to-nearest-even conversions, in software (the same bits on every
// compiler; clang before 15 has no _Float16 on x86-64). double -> half rounds once. ----
static inline uint16_t f64_to_f16(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    int exp = (int)((b >> 52) & 0x7ff);
    uint64_t mant = b & ((1ull << 52) - 1);
    if (exp == 0x7ff)   // inf, or NaN (quiet, with the payload's top bits)
        return sign | 0x7c00 | (mant ? (uint16_t)(0x200 | (mant >> 42)) : 0);
    if (exp == 0) return sign;                         // zero or a double subnormal: far below half's range
    int e = exp - 1023;
    if (e > 15) return sign | 0x7c00;
    uint64_t m = mant | (1ull << 52);
    int shift = e >= -14 ? 42 : 28 - e;                // normal: keep 11 bits; subnormal: units of 2^-24
    if (shift > 60) return sign;
    uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) q++;
    uint32_t bits = e >= -14 ? (uint32_t)((e + 14) << 10) + (uint32_t)q : (uint32_t)q;   // a carry moves the exponent
    if (bits >= 0x7c00) return sign | 0x7c00;
    return sign | (uint16_t)bits;
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000 | (mant << 13);
    else if (exp) bits = sign | ((exp + 112) << 23) | (mant << 13);
    else if (!mant) bits = sign;
    else {                                             // subnormal: normalise
        int e = -1;
        do { mant <<= 1; e++; } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

struct half {
    uint16_t bits;
    half() = default;
#define TJ_HALF_FROM(T) half(T v) : bits(f64_to_f16((double)v)) {}
    TJ_HALF_FROM(float) TJ_HALF_FROM(double) TJ_HALF_FROM(int) TJ_HALF_FROM(unsigned) TJ_HALF_FROM(long)
    TJ_HALF_FROM(unsigned long) TJ_HALF_FROM(long long) TJ_HALF_FROM(unsigned long long)
#undef TJ_HALF_FROM
    operator float() const { return f16_to_f32(bits); }
};

// ---- values through a warp: up to 8 bytes, as bits ----
template <class T> static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp functions move values of at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T> static inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

static inline unsigned lane() { return tj_now.linear_tid % WARP; }
static inline uint64_t lane_value(unsigned l) { return tj_now.published[(tj_now.linear_tid & ~(WARP - 1)) + l]; }
static inline bool lane_active(unsigned l) { return tj_now.active[(tj_now.linear_tid & ~(WARP - 1)) + l]; }
static inline void barrier() { tj_barrier(); }
static inline void warp_exchange(uint64_t v) { tj_exchange(v); }

// the shuffles: width a power of two up to 32; a source outside the caller's segment keeps its own value
template <class T> static inline T shuffle_down(T v, unsigned delta, unsigned width = WARP) {
    warp_exchange(to_bits(v));
    unsigned l = lane();
    return (l % width) + delta < width ? from_bits<T>(lane_value(l + delta)) : v;
}
template <class T> static inline T shuffle_up(T v, unsigned delta, unsigned width = WARP) {
    warp_exchange(to_bits(v));
    unsigned l = lane();
    return (l % width) >= delta ? from_bits<T>(lane_value(l - delta)) : v;
}
template <class T> static inline T shuffle_xor(T v, unsigned mask, unsigned width = WARP) {
    warp_exchange(to_bits(v));
    unsigned l = lane(), src = l ^ mask;
    return src / width == l / width && src < WARP ? from_bits<T>(lane_value(src)) : v;
}
template <class T> static inline T shuffle_idx(T v, unsigned src, unsigned width = WARP) {
    warp_exchange(to_bits(v));
    unsigned l = lane();
    return from_bits<T>(lane_value(l / width * width + src % width));
}
// every active lane's value combined, in lane order
template <class T, class F> static inline T warp_reduce(T v, F combine) {
    warp_exchange(to_bits(v));
    bool first = true;
    T acc = v;
    for (unsigned l = 0; l < WARP; l++)
        if (lane_active(l)) {
            T x = from_bits<T>(lane_value(l));
            acc = first ? x : combine(acc, x);
            first = false;
        }
    return acc;
}
static inline uint32_t warp_ballot(bool p) {
    warp_exchange(p);
    uint32_t bits = 0;
    for (unsigned l = 0; l < WARP; l++)
        if (lane_active(l) && lane_value(l)) bits |= 1u << l;
    return bits;
}

// ---- atomics: plain read-modify-write, atomic because fibers switch only at waits ----
template <class T> static inline T atomic_rmw(T* p, T v, int op) {
    T old = *p;
    switch (op) {
        case 0: *p = old + v; break;
        case 1: *p = old - v; break;
        case 2: *p = old < v ? v : old; break;
        case 3: *p = v < old ? v : old; break;
        default: *p = v; break;
    }
    return old;
}
template <class T> static inline T atomic_bits(T* p, T v, int op) {
    T old = *p;
    *p = op == 0 ? (old & v) : op == 1 ? (old | v) : (old ^ v);
    return old;
}

}  // namespace tj

#ifndef TJ_CORE
// the module's shared memory, for the core to fill with garbage before each block
extern char __start_tj_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_tj_shared[] __attribute__((weak, visibility("hidden")));
TJ_EXPORT char* tj_shared_memory(unsigned long* size) {
    *size = __start_tj_shared && __stop_tj_shared > __start_tj_shared ? (unsigned long)(__stop_tj_shared - __start_tj_shared) : 0;
    return __start_tj_shared;
}
#endif
