// The emulator's scheduler (see include/tj_simt.h for the model), compiled once per process into a library
// that kernel modules call into: the fibers, barriers, warp exchanges and launch orders.
#define TJ_CORE
#include "tj_simt.h"

extern "C" void abort() noexcept;
extern "C" char* strncpy(char*, const char*, size_t) noexcept;
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

extern "C" {
tj::Coordinates tj_now;
}

namespace {

using namespace tj;

constexpr size_t STACK = 64 * 1024;
constexpr uint64_t GARBAGE = ~(uint64_t)0;
enum { ERR_DEADLOCK = 1, ERR_BLOCK_SIZE = 2, ERR_SYNC_WITHOUT_FIBERS = 3, ERR_NO_MEMORY = 4, ERR_FAULT = 5 };
enum State : unsigned char { RUNNABLE, AT_BARRIER, AT_WARP, EXITED };
enum { FORWARD = 0, REVERSE = 1, SHUFFLED = 2 };

struct Fiber {
#if defined(__x86_64__)
    void* sp;
#else
    ucontext_t context;
#endif
    State state;
};

Fiber fibers[MAX_THREADS];
uint64_t deposited[MAX_THREADS];
char* stacks;                   // MAX_THREADS stacks, mapped once
unsigned current;               // the running fiber
bool direct;                    // a launch without fibers
void (*thread_fn)(void**);
void** thread_args;
int error_code;
char error_text[256];
uint64_t rng_state;
sigjmp_buf fault_jump;          // where a memory fault inside a launch returns to
char fault_stack[64 * 1024];    // the fault handler's own stack: a fiber's may be what overflowed


#if defined(__x86_64__)
// save the callee-saved registers on this stack, switch stacks, restore the other's and return there
extern "C" void tj_fiber_switch(void** save_sp, void* to_sp);
asm(R"(
.text
.globl tj_fiber_switch
.hidden tj_fiber_switch
.type tj_fiber_switch,@function
tj_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size tj_fiber_switch, .-tj_fiber_switch
)");
void* scheduler_sp;
#else
ucontext_t scheduler_context;
#endif

void fail(int code, const char* text) {
    if (!error_code) {
        error_code = code;
        strncpy(error_text, text, sizeof error_text - 1);
    }
}

void yield() {
#if defined(__x86_64__)
    tj_fiber_switch(&fibers[current].sp, scheduler_sp);
#else
    swapcontext(&fibers[current].context, &scheduler_context);
#endif
}

void fiber_main() {
    thread_fn(thread_args);
    fibers[current].state = EXITED;
    yield();
    abort();   // an exited fiber is never resumed
}

void start_fiber(unsigned i) {
    char* base = stacks + (size_t)i * STACK;
#if defined(__x86_64__)
    void** sp = (void**)(((uintptr_t)(base + STACK)) & ~(uintptr_t)15);
    *--sp = nullptr;                   // fiber_main's return address: none
    *--sp = (void*)&fiber_main;        // where tj_fiber_switch's ret goes
    for (int r = 0; r < 6; r++) *--sp = nullptr;
    fibers[i].sp = sp;
#else
    getcontext(&fibers[i].context);
    fibers[i].context.uc_stack.ss_sp = base;
    fibers[i].context.uc_stack.ss_size = STACK;
    fibers[i].context.uc_link = nullptr;
    makecontext(&fibers[i].context, fiber_main, 0);
#endif
    fibers[i].state = RUNNABLE;
}

void enter(unsigned i) {
    const uint3v& d = tj_now.block_dim;
    current = tj_now.linear_tid = i;
    tj_now.thread_idx = {i % d.x, i / d.x % d.y, i / (d.x * d.y)};
}

void resume(unsigned i) {
    enter(i);
#if defined(__x86_64__)
    tj_fiber_switch(&scheduler_sp, fibers[i].sp);
#else
    swapcontext(&scheduler_context, &fibers[i].context);
#endif
}

uint64_t next_random() {   // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

void make_order(unsigned* order, unsigned n, unsigned mode) {
    for (unsigned i = 0; i < n; i++) order[i] = mode == REVERSE ? n - 1 - i : i;
    if (mode == SHUFFLED)
        for (unsigned i = n; i > 1; i--) {
            unsigned j = (unsigned)(next_random() % i);
            unsigned t = order[i - 1]; order[i - 1] = order[j]; order[j] = t;
        }
}

// release the warps whose every live lane waits at an exchange: publish what they deposited
bool release_warps(unsigned n) {
    bool released = false;
    for (unsigned w = 0; w < n; w += WARP) {
        unsigned end = w + WARP < n ? w + WARP : n, at = 0, live = 0;
        for (unsigned i = w; i < end; i++) {
            live += fibers[i].state != EXITED;
            at += fibers[i].state == AT_WARP;
        }
        if (!at || at != live) continue;
        for (unsigned i = w; i < w + WARP; i++) {
            bool in = i < end && fibers[i].state == AT_WARP;
            tj_now.active[i] = in;
            tj_now.published[i] = in ? deposited[i] : GARBAGE;
            if (in) fibers[i].state = RUNNABLE;
        }
        released = true;
    }
    return released;
}

int run_block(unsigned n, unsigned mode) {
    unsigned order[MAX_THREADS];
    for (unsigned i = 0; i < n; i++) start_fiber(i);
    for (;;) {
        make_order(order, n, mode);
        for (unsigned k = 0; k < n; k++)
            if (fibers[order[k]].state == RUNNABLE) resume(order[k]);
        unsigned exited = 0, waiting = 0;
        for (unsigned i = 0; i < n; i++) {
            exited += fibers[i].state == EXITED;
            waiting += fibers[i].state == AT_BARRIER;
        }
        if (exited == n) return 0;
        if (release_warps(n)) continue;
        if (waiting && waiting + exited == n) {
            for (unsigned i = 0; i < n; i++)
                if (fibers[i].state == AT_BARRIER) fibers[i].state = RUNNABLE;
            continue;
        }
        fail(ERR_DEADLOCK, "deadlock: some threads of a block wait at a barrier while others of it wait at a warp "
                           "function (shuffle, vote or SIMD-group reduction)");
        return ERR_DEADLOCK;
    }
}

unsigned long long gcd(unsigned long long a, unsigned long long b) {
    while (b) { unsigned long long t = a % b; a = b; b = t; }
    return a;
}

// a memory fault (SIGSEGV, SIGBUS) in a kernel: back to the launch, which reports it
void on_fault(int, siginfo_t* info, void*) {
    snprintf(error_text, sizeof error_text, "a thread touched memory outside every buffer (address %p, block %u, "
             "thread %u): an index out of bounds in the kernel, or a fiber's 60 KiB stack overflowed",
             info->si_addr, tj_now.block_idx.x, tj_now.linear_tid);
    error_code = ERR_FAULT;
    siglongjmp(fault_jump, 1);
}

bool map_stacks() {
    if (stacks) return true;
    void* p = mmap(nullptr, STACK * MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return false;
    stacks = (char*)p;
    for (unsigned i = 0; i < MAX_THREADS; i++)   // a guard page below each stack: an overflow faults
        mprotect(stacks + (size_t)i * STACK, 4096, PROT_NONE);
    return true;
}

int run_grid(unsigned n, unsigned mode, unsigned long long seed, char* shared, unsigned long shared_size) {
    const uint3v g = tj_now.grid_dim;
    unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
    // shuffled blocks: k -> (k * stride + offset) mod blocks, a permutation for a stride prime to blocks
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    unsigned long long stride = blocks > 1 ? next_random() % blocks : 1, offset = blocks ? next_random() % blocks : 0;
    while (gcd(stride, blocks) != 1) stride++;
    unsigned order[MAX_THREADS];
    for (unsigned long long k = 0; k < blocks; k++) {
        unsigned long long b = mode == REVERSE ? blocks - 1 - k : mode == SHUFFLED ? (k * stride + offset) % blocks : k;
        tj_now.block_idx = {(unsigned)(b % g.x), (unsigned)(b / g.x % g.y), (unsigned)(b / ((unsigned long long)g.x * g.y))};
        if (shared_size) memset(shared, 0xFF, shared_size);
        if (direct) {
            make_order(order, n, mode);
            for (unsigned t = 0; t < n; t++) {
                enter(order[t]);
                thread_fn(thread_args);
            }
        } else if (int rc = run_block(n, mode)) {
            return rc;
        }
    }
    return error_code;
}

}  // namespace

extern "C" {

void tj_barrier() {
    if (direct) {
        fail(ERR_SYNC_WITHOUT_FIBERS, "a barrier in a kernel launched without fibers");
        return;
    }
    fibers[current].state = AT_BARRIER;
    yield();
}

void tj_exchange(uint64_t value) {
    if (direct) {
        fail(ERR_SYNC_WITHOUT_FIBERS, "a warp function in a kernel launched without fibers");
        return;
    }
    deposited[current] = value;
    fibers[current].state = AT_WARP;
    yield();
}

// Run fn (a module's tj_thread_NAME) over a grid; no_fibers: the kernel never waits, its threads are calls.
// 0, or an error whose text tj_error_text() gives. A memory fault inside is such an error, not a crash.
__attribute__((visibility("default"))) int tj_launch(void (*fn)(void**), void** args, unsigned gx, unsigned gy,
                                                     unsigned gz, unsigned bx, unsigned by, unsigned bz, int no_fibers,
                                                     unsigned mode, unsigned long long seed, char* shared,
                                                     unsigned long shared_size) {
    error_code = 0;
    error_text[0] = 0;
    unsigned n = bx * by * bz;
    if (n == 0 || n > MAX_THREADS) {
        fail(ERR_BLOCK_SIZE, "a block has 1 to 1024 threads");
        return ERR_BLOCK_SIZE;
    }
    direct = no_fibers != 0;
    if (!direct && !map_stacks()) {
        fail(ERR_NO_MEMORY, "could not map the fibers' stacks");
        return ERR_NO_MEMORY;
    }
    thread_fn = fn;
    thread_args = args;
    tj_now.block_dim = {bx, by, bz};
    tj_now.grid_dim = {gx, gy, gz};
    struct sigaction on{}, old_segv{}, old_bus{};
    on.sa_sigaction = on_fault;
    on.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&on.sa_mask);
    stack_t alt{}, old_alt{};
    alt.ss_sp = fault_stack;
    alt.ss_size = sizeof fault_stack;
    sigaltstack(&alt, &old_alt);
    sigaction(SIGSEGV, &on, &old_segv);
    sigaction(SIGBUS, &on, &old_bus);
    int rc = sigsetjmp(fault_jump, 1) ? ERR_FAULT : run_grid(n, mode, seed, shared, shared_size);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    sigaltstack(&old_alt, nullptr);
    return rc;
}

__attribute__((visibility("default"))) const char* tj_error_text() { return error_text; }

}  // extern "C"
