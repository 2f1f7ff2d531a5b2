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
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

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
