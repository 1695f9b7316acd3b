/* fusec_cuda_emu.cc: the runtime of the CUDA emulation (header: fusec_cuda_emu.h; design and
 * guarantees: docs/cuda_emu.md).
 *
 * A launch runs its blocks on a pool of FCEMU_WORKERS OS threads (2), each taking block
 * indices from a shared counter (increasing, or decreasing in reverse mode). A worker runs
 * one block at a time: one fiber per CUDA thread, each with its own stack (64 KiB, a guard
 * page below), switched by a hand-written x86-64 context switch (callee-saved registers,
 * MXCSR and the x87 control word; ucontext elsewhere). The worker's scheduler resumes the
 * runnable fibers in thread order (or reverse order) until each blocks or ends:
 *   - __syncthreads: the fiber waits; when no fiber can run and every live fiber waits at the
 *     same __syncthreads, all are released. Threads that exited while others wait, or that
 *     wait at different __syncthreads, are reported (the launch fails).
 *   - a warp operation (shuffle, vote, reduction, __syncwarp): the lanes named by the mask
 *     meet; the last to arrive wakes the others. A shuffle, vote or reduction meets twice
 *     (write, then after reading), so the exchange area is never overwritten before every lane
 *     has read it.
 *   - no fiber can run and no barrier can be released: a deadlock, reported.
 * Shared memory (FCEMU_SHARED / FCEMU_DYN_SHARED) lives in per-worker buffers that end at a
 * guard page and are refilled with 0xFF bytes when a block first touches them.
 *
 * Invariants: one launch at a time (the AOT host code launches synchronously); a fiber runs
 * only on the worker that created it; an error aborts the launch (the fibers of the failing
 * block are abandoned mid-way: their stacks are simply reused).
 */
#include "fusec_cuda_emu.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace fcemu {

__thread Ctx *cur_ctx;

/* MAX_SLOTS: the distinct __shared__ declarations of a unit, all its kernels together (a worker
 * keeps their memory from launch to launch); the f16 training unit of examples/llama_layer.tf has
 * 82. */
enum { WORKERS = 2, STACK_BYTES = 64 * 1024, MAX_MEETS = 32, MAX_SLOTS = 256, MAX_GUARDS = 4096 };

/* ---- context switch ---------------------------------------------------------------------- */
#if defined(__x86_64__)
extern "C" void fcemu_switch(void **save_sp, void *to_sp);
extern "C" void fcemu_fiber_start(void);
/* fcemu_switch saves rbp rbx r12-r15, MXCSR and the x87 control word on the current stack,
 * stores the stack pointer in *save_sp, and restores the same from to_sp. A new fiber's stack
 * is prepared so that its first switch "returns" into fcemu_fiber_start with r12 = the
 * argument and r13 = the function. */
asm(R"(
    .text
    .globl fcemu_switch
    .hidden fcemu_switch
    .type fcemu_switch, @function
    .p2align 4
fcemu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size fcemu_switch, .-fcemu_switch

    .globl fcemu_fiber_start
    .hidden fcemu_fiber_start
    .type fcemu_fiber_start, @function
    .p2align 4
fcemu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size fcemu_fiber_start, .-fcemu_fiber_start
)");
#endif

struct Worker;
enum FiberState { F_RUNNABLE, F_BARRIER, F_WARP, F_DONE };

struct Fiber {
    Ctx ctx;                 /* first: cur_ctx points here */
    Worker *w;
    FiberState state;
    int line;                /* the __syncthreads or warp operation it waits at */
    char *stack;             /* lowest usable byte (the guard page is below) */
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
};

struct Meet {                /* lanes of one warp meeting at a warp operation */
    unsigned mask;           /* 0: free */
    unsigned arrived;
    int line;
};
struct Warp {
    Meet meet[MAX_MEETS];
    unsigned long long val[32];
    unsigned lanes;          /* lanes that exist (a partial last warp has fewer) */
};

struct Slot {                /* one shared array of some kernel, on this worker */
    const void *site;
    const char *name;
    char *data;
    size_t bytes;
    unsigned long long gen;  /* block generation it was last poisoned for */
};

struct Launch {
    const char *name;
    dim3 grid, block;
    size_t smem;
    ThreadFn fn;
    void *closure;
    unsigned long long nblocks;
    unsigned nthreads;
    bool reverse;
    std::atomic<unsigned long long> next;
    std::atomic<bool> failed;
};

struct Worker {
    int id;
    Launch *L;
    Fiber *fib;              /* [fib_cap] */
    unsigned fib_cap;
    char *stacks;            /* one mapping: per fiber a guard page then STACK_BYTES */
    size_t stacks_bytes;
    Warp *warps;             /* [32] */
    unsigned nthreads, live, runnable, at_barrier;
    unsigned long long block_lin;
    unsigned long long gen;  /* block generation: shared memory is refilled once per block */
    Slot slots[MAX_SLOTS];
    int nslots;
    char *dyn;               /* dynamic shared memory: dyn_bytes before a guard page */
    size_t dyn_bytes, dyn_cap;
    unsigned long long dyn_gen;
#if defined(__x86_64__)
    void *sched_sp;
#else
    ucontext_t sched_uc;
#endif
    char *altstack;
};

static Worker g_workers[WORKERS];   /* reused across launches (stacks and slots are cached) */
static __thread Worker *cur_worker;
static __thread Fiber *cur_fiber;
static bool g_reverse;
static std::mutex g_err_mu;
static char g_err[4096];
static cudaError_t g_last_error = cudaSuccess;
static const char *g_kernel = "(none)";

/* Guard pages, for describing a fault (read without a lock from a signal handler). */
struct Guard { const char *lo, *hi; const char *what; const char *name; };
static Guard g_guards[MAX_GUARDS];
static std::atomic<int> g_nguards;

static void add_guard(const char *lo, size_t n, const char *what, const char *name) {
    int i = g_nguards.load();
    if (i >= MAX_GUARDS) return;
    g_guards[i] = Guard{lo, lo + n, what, name};
    g_nguards.store(i + 1);
}

/* Forgets the guard pages inside [lo, hi) (a mapping about to be unmapped). */
static void drop_guards(const char *lo, const char *hi) {
    int n = g_nguards.load(), k = 0;
    for (int i = 0; i < n; i++)
        if (!(g_guards[i].lo >= lo && g_guards[i].lo < hi)) g_guards[k++] = g_guards[i];
    g_nguards.store(k);
}

static size_t page_size() {
    static size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

/* `bytes` of memory ending exactly at a PROT_NONE page (data aligned to `align`, which divides
 * bytes for every caller, so nothing is left between the data and the guard). */
static char *guarded_alloc(size_t bytes, size_t align, const char *what, const char *name) {
    size_t ps = page_size();
    size_t span = (bytes + align + ps - 1) / ps * ps;
    char *m = (char *)mmap(nullptr, span + ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    if (mprotect(m + span, ps, PROT_NONE) != 0) return nullptr;
    add_guard(m + span, ps, what, name);
    uintptr_t end = (uintptr_t)(m + span);
    return (char *)((end - bytes) & ~(uintptr_t)(align - 1));
}

/* ---- errors ----------------------------------------------------------------------------- */
static void vrecord(const char *fmt, va_list ap) {
    std::lock_guard<std::mutex> lk(g_err_mu);
    Launch *L = cur_worker ? cur_worker->L : nullptr;
    if (L && L->failed.exchange(true)) return;   /* the first error of a launch wins */
    char msg[3072];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (cur_fiber && cur_worker)
        snprintf(g_err, sizeof g_err, "kernel %s, block %llu, thread %u: %s", g_kernel, cur_worker->block_lin,
                 cur_fiber->ctx.linear, msg);
    else if (cur_worker)
        snprintf(g_err, sizeof g_err, "kernel %s, block %llu: %s", g_kernel, cur_worker->block_lin, msg);
    else
        snprintf(g_err, sizeof g_err, "%s", msg);
}

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vrecord(fmt, ap);
    va_end(ap);
}

static void to_scheduler(Fiber *f) {
#if defined(__x86_64__)
    fcemu_switch(&f->sp, f->w->sched_sp);
#else
    swapcontext(&f->uc, &f->w->sched_uc);
#endif
}

void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vrecord(fmt, ap);
    va_end(ap);
    Fiber *f = cur_fiber;
    if (f) {
        f->w->L->failed.store(true);
        f->state = F_DONE;
        for (;;) to_scheduler(f);   /* abandoned: never resumed */
    }
}

void set_last_error(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
}
cudaError_t take_last_error(void) {
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
cudaError_t peek_last_error(void) { return g_last_error; }

/* ---- fibers ------------------------------------------------------------------------------- */
static void fiber_main(void *arg) {
    Fiber *f = (Fiber *)arg;
    f->w->L->fn(f->w->L->closure);
    f->state = F_DONE;
    f->w->live--;
    f->w->runnable--;
    for (;;) to_scheduler(f);
}

#if !defined(__x86_64__)
static void fiber_entry_uc(unsigned lo, unsigned hi) {
    fiber_main((void *)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

static void fiber_init(Fiber *f) {
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)f->stack + STACK_BYTES) & ~(uintptr_t)15;
    void **r = (void **)(top - 24);                   /* return address slot: r + 8 is 16-aligned */
    r[0] = (void *)fcemu_fiber_start;
    r[-1] = nullptr;                                  /* rbp */
    r[-2] = nullptr;                                  /* rbx */
    r[-3] = (void *)f;                                /* r12: the argument */
    r[-4] = (void *)fiber_main;                       /* r13: the function */
    r[-5] = nullptr;                                  /* r14 */
    r[-6] = nullptr;                                  /* r15 */
    char *csr = (char *)(r - 7);
    unsigned int mxcsr;
    unsigned short fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    std::memcpy(csr, &mxcsr, 4);
    std::memcpy(csr + 4, &fpucw, 2);
    f->sp = (void *)csr;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = nullptr;
    uintptr_t a = (uintptr_t)f;
    makecontext(&f->uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)(a & 0xffffffffu), (unsigned)(a >> 32));
#endif
}

static void resume(Worker *w, Fiber *f) {
    cur_ctx = &f->ctx;
    cur_fiber = f;
#if defined(__x86_64__)
    fcemu_switch(&w->sched_sp, f->sp);
#else
    swapcontext(&w->sched_uc, &f->uc);
#endif
    cur_fiber = nullptr;
    cur_ctx = nullptr;
}

/* Room for n fibers on worker w (stacks cached across launches). */
static bool ensure_fibers(Worker *w, unsigned n) {
    if (w->fib_cap >= n) return true;
    if (w->stacks) {
        drop_guards(w->stacks, w->stacks + w->stacks_bytes);
        munmap(w->stacks, w->stacks_bytes);
    }
    std::free(w->fib);
    std::free(w->warps);
    size_t ps = page_size(), per = STACK_BYTES + ps;
    w->stacks_bytes = per * n;
    w->stacks = (char *)mmap(nullptr, w->stacks_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                             -1, 0);
    w->fib = (Fiber *)std::calloc(n, sizeof(Fiber));
    w->warps = (Warp *)std::calloc(32, sizeof(Warp));
    if (w->stacks == MAP_FAILED || !w->fib || !w->warps) {
        w->stacks = nullptr;
        w->fib_cap = 0;
        return false;
    }
    for (unsigned i = 0; i < n; i++) {
        char *g = w->stacks + per * i;
        if (mprotect(g, ps, PROT_NONE) != 0) return false;
        add_guard(g, ps, "the guard page below a thread's stack:", "a stack overflow");
        w->fib[i].stack = g + ps;
    }
    w->fib_cap = n;
    return true;
}

/* ---- barriers and warps ------------------------------------------------------------------- */
static void block_on(Fiber *f, FiberState s, int line) {
    f->state = s;
    f->line = line;
    f->w->runnable--;
    to_scheduler(f);
}

void syncthreads(int line) {
    Fiber *f = cur_fiber;
    if (!f) { record("__syncthreads() called outside a kernel"); return; }
    f->w->at_barrier++;
    block_on(f, F_BARRIER, line);
}

/* The lanes of `mask` in f's warp meet at `line` (line tags also say which phase). */
static void meet(Fiber *f, unsigned mask, int line, const char *what) {
    Worker *w = f->w;
    unsigned lane = f->ctx.linear & 31u, wi = f->ctx.linear >> 5;
    Warp *W = &w->warps[wi];
    unsigned bit = 1u << lane;
    if (!(mask & bit))
        fail("line %d: %s with mask 0x%08x, which does not include the calling lane %u", line < 0 ? -line : line,
             what, mask, lane);
    if (mask & ~W->lanes)
        fail("line %d: %s with mask 0x%08x names lanes that do not exist (warp %u has lanes 0x%08x)",
             line < 0 ? -line : line, what, mask, wi, W->lanes);
    /* Lanes whose masks overlap may sit in different meetings for a while (one half of a warp
     * still finishing an operation the other half left); only lanes of one mask at different
     * operations are an error, and meetings that can never complete are a deadlock. */
    Meet *m = nullptr;
    for (int i = 0; i < MAX_MEETS && !m; i++)
        if (W->meet[i].mask == mask) m = &W->meet[i];
    if (!m) {
        for (int i = 0; i < MAX_MEETS && !m; i++)
            if (!W->meet[i].mask) m = &W->meet[i];
        if (!m) fail("line %d: more than %d concurrent warp operations in one warp", line, MAX_MEETS);
        m->mask = mask;
        m->arrived = 0;
        m->line = line;
    } else if (m->line != line) {
        fail("lanes of warp %u meet at different warp operations: line %d and line %d (mask 0x%08x)", wi,
             line < 0 ? -line : line, m->line < 0 ? -m->line : m->line, mask);
    }
    m->arrived |= bit;
    if (m->arrived != mask) {
        block_on(f, F_WARP, line);
        return;
    }
    /* the last lane: release the others */
    m->mask = 0;
    m->arrived = 0;
    for (unsigned l = 0; l < 32; l++) {
        if (!(mask & (1u << l)) || l == lane) continue;
        Fiber *o = &w->fib[wi * 32 + l];
        if (o->state != F_WARP) fail("internal: lane %u of warp %u is not waiting", l, wi);
        o->state = F_RUNNABLE;
        w->runnable++;
    }
}

/* f's lane puts v in its warp's exchange area and meets the lanes of `mask`; the caller reads
 * their values, then meets them again at -line (nobody writes val before all have read). */
static Warp *deposit(Fiber *f, unsigned mask, unsigned long long v, int line, const char *what) {
    Warp *W = &f->w->warps[f->ctx.linear >> 5];
    W->val[f->ctx.linear & 31u] = v;
    meet(f, mask, line, what);
    return W;
}

unsigned long long warp_exchange(unsigned mask, unsigned long long v, int src, int line) {
    Fiber *f = cur_fiber;
    if (!f) { record("a warp shuffle called outside a kernel"); return v; }
    Warp *W = deposit(f, mask, v, line, "a warp shuffle");
    unsigned long long r;
    if (src < 0) r = v;
    else if (src < 32 && (mask & (1u << src))) r = W->val[src];
    else r = ~0ull;   /* a lane outside the mask: undefined on a GPU, 0xFF bytes here */
    meet(f, mask, -line, "a warp shuffle");   /* nobody writes val before all have read */
    return r;
}

unsigned warp_vote(unsigned mask, bool pred, int line) {
    Fiber *f = cur_fiber;
    if (!f) { record("a warp vote called outside a kernel"); return 0; }
    Warp *W = deposit(f, mask, pred, line, "a warp vote");
    unsigned r = 0;
    for (unsigned l = 0; l < 32; l++)
        if ((mask & (1u << l)) && W->val[l]) r |= 1u << l;
    meet(f, mask, -line, "a warp vote");
    return r;
}

unsigned warp_max(unsigned mask, unsigned v, int line) {
    Fiber *f = cur_fiber;
    if (!f) { record("a warp reduction called outside a kernel"); return v; }
    Warp *W = deposit(f, mask, v, line, "a warp reduction");
    unsigned r = 0;
    for (unsigned l = 0; l < 32; l++)
        if ((mask & (1u << l)) && (unsigned)W->val[l] > r) r = (unsigned)W->val[l];
    meet(f, mask, -line, "a warp reduction");
    return r;
}

unsigned warp_lanes(void) {
    Fiber *f = cur_fiber;
    if (!f) { record("__activemask called outside a kernel"); return 0; }
    return f->w->warps[f->ctx.linear >> 5].lanes;
}

void syncwarp(int line, unsigned mask) {
    Fiber *f = cur_fiber;
    if (!f) { record("__syncwarp called outside a kernel"); return; }
    meet(f, mask, line, "__syncwarp");
}

/* ---- shared memory ------------------------------------------------------------------------ */
void *shared_slot(const void *site, size_t bytes, size_t align, const char *name) {
    Worker *w = cur_worker;
    if (!w || !cur_fiber) { record("shared array %s declared outside a kernel", name); return nullptr; }
    Slot *s = nullptr;
    for (int i = 0; i < w->nslots; i++)
        if (w->slots[i].site == site) { s = &w->slots[i]; break; }
    if (!s) {
        if (w->nslots == MAX_SLOTS) fail("more than %d shared arrays", MAX_SLOTS);
        char *d = guarded_alloc(bytes, align, "the guard page after shared array", name);
        if (!d) fail("out of memory for shared array %s", name);
        s = &w->slots[w->nslots++];
        *s = Slot{site, name, d, bytes, 0};
    }
    if (s->bytes != bytes) fail("shared array %s changed size", name);
    if (s->gen != w->gen) {     /* the first touch in this block: fresh garbage */
        std::memset(s->data, 0xff, s->bytes);
        s->gen = w->gen;
    }
    return s->data;
}

void *dynamic_shared(void) {
    Worker *w = cur_worker;
    if (!w || !cur_fiber) { record("dynamic shared memory used outside a kernel"); return nullptr; }
    if (w->dyn_gen != w->gen) {
        std::memset(w->dyn, 0xff, w->dyn_bytes);
        w->dyn_gen = w->gen;
    }
    return w->dyn;
}

/* ---- running blocks ------------------------------------------------------------------------ */
static const char *state_name(FiberState s) {
    switch (s) {
    case F_RUNNABLE: return "runnable";
    case F_BARRIER: return "at __syncthreads";
    case F_WARP: return "in a warp operation";
    default: return "exited";
    }
}

static void run_block(Worker *w, unsigned long long b) {
    Launch *L = w->L;
    unsigned n = L->nthreads;
    w->block_lin = b;
    w->gen++;
    uint3 bi = {(unsigned)(b % L->grid.x), (unsigned)(b / L->grid.x % L->grid.y),
                (unsigned)(b / ((unsigned long long)L->grid.x * L->grid.y))};
    for (unsigned i = 0; i < n; i++) {
        Fiber *f = &w->fib[i];
        f->w = w;
        f->ctx.thread_idx = uint3{i % L->block.x, i / L->block.x % L->block.y, i / (L->block.x * L->block.y)};
        f->ctx.block_idx = bi;
        f->ctx.block_dim = L->block;
        f->ctx.grid_dim = L->grid;
        f->ctx.linear = i;
        f->state = F_RUNNABLE;
        f->line = 0;
        fiber_init(f);
    }
    for (unsigned wi = 0; wi < (n + 31) / 32; wi++) {
        unsigned cnt = n - wi * 32 < 32 ? n - wi * 32 : 32;
        std::memset(w->warps[wi].meet, 0, sizeof w->warps[wi].meet);
        w->warps[wi].lanes = cnt == 32 ? 0xffffffffu : (1u << cnt) - 1u;
    }
    w->nthreads = n;
    w->live = n;
    w->runnable = n;
    w->at_barrier = 0;
    for (;;) {
        for (unsigned k = 0; k < n; k++) {
            Fiber *f = &w->fib[L->reverse ? n - 1 - k : k];
            if (f->state != F_RUNNABLE) continue;
            resume(w, f);
            if (L->failed.load()) return;
        }
        if (w->live == 0) return;
        if (w->runnable > 0) continue;
        /* nobody can run: a barrier to release, or a deadlock */
        Fiber *first = nullptr;
        for (unsigned i = 0; i < n && !first; i++)
            if (w->fib[i].state == F_BARRIER) first = &w->fib[i];
        if (first && w->at_barrier == w->live) {
            if (w->live != n) {
                unsigned gone = 0;
                while (w->fib[gone].state != F_DONE) gone++;
                record("__syncthreads at line %d is awaited by %u threads while %u threads have exited (thread %u "
                       "among them): a barrier in divergent code", first->line, w->live, n - w->live, gone);
                return;
            }
            for (unsigned i = 0; i < n; i++)
                if (w->fib[i].line != first->line) {
                    record("threads wait at different __syncthreads: thread %u at line %d, thread %u at line %d",
                           first->ctx.linear, first->line, i, w->fib[i].line);
                    return;
                }
            for (unsigned i = 0; i < n; i++) w->fib[i].state = F_RUNNABLE;
            w->runnable = n;
            w->at_barrier = 0;
            continue;
        }
        char desc[1024];
        size_t o = 0;
        int shown = 0;
        for (unsigned i = 0; i < n && shown < 6 && o < sizeof desc - 100; i++) {
            Fiber *f = &w->fib[i];
            if (i > 0 && f->state == w->fib[i - 1].state && f->line == w->fib[i - 1].line) continue;
            o += (size_t)snprintf(desc + o, sizeof desc - o, "%sthread %u %s", shown ? ", " : "", i, state_name(f->state));
            if (f->state == F_BARRIER || f->state == F_WARP)
                o += (size_t)snprintf(desc + o, sizeof desc - o, " (line %d)", f->line < 0 ? -f->line : f->line);
            shown++;
        }
        record("deadlock: no thread can go on (%s%s)", desc, shown == 6 ? ", ..." : "");
        return;
    }
}

static void *worker_main(void *arg) {
    Worker *w = (Worker *)arg;
    Launch *L = w->L;
    cur_worker = w;
    stack_t ss;
    if (!w->altstack) w->altstack = (char *)std::malloc(65536);
    if (w->altstack) {
        ss.ss_sp = w->altstack;
        ss.ss_size = 65536;
        ss.ss_flags = 0;
        sigaltstack(&ss, nullptr);   /* so a fault handler can run after a fiber's stack overflows */
    }
    for (;;) {
        if (L->failed.load()) break;
        unsigned long long i = L->next.fetch_add(1);
        if (i >= L->nblocks) break;
        run_block(w, L->reverse ? L->nblocks - 1 - i : i);
    }
    if (w->altstack) {
        ss.ss_flags = SS_DISABLE;
        sigaltstack(&ss, nullptr);
    }
    cur_worker = nullptr;
    return nullptr;
}

/* cudaFuncSetAttribute(MaxDynamicSharedMemorySize), per kernel */
static std::mutex g_dyn_mu;
static std::map<const void *, size_t> g_dyn_max;
cudaError_t set_max_dynamic_shared(const void *key, int bytes) {
    if (bytes < 0 || bytes > 227 * 1024) {
        record("cudaFuncSetAttribute: %d bytes of dynamic shared memory (the most is 227 KiB)", bytes);
        return cudaErrorInvalidValue;
    }
    std::lock_guard<std::mutex> lk(g_dyn_mu);
    g_dyn_max[key] = (size_t)bytes;
    return cudaSuccess;
}

cudaError_t launch_erased(const char *name, const void *key, dim3 grid, dim3 block, size_t dyn_smem, unsigned bound,
                          ThreadFn fn, void *closure) {
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    {
        std::lock_guard<std::mutex> lk(g_err_mu);
        g_err[0] = 0;
    }
    g_kernel = name;
    if (nthreads < 1 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x < 1 ||
        grid.x > 2147483647u || grid.y < 1 || grid.y > 65535 || grid.z < 1 || grid.z > 65535) {
        record("kernel %s: invalid configuration: grid (%u, %u, %u), block (%u, %u, %u)", name, grid.x, grid.y, grid.z,
               block.x, block.y, block.z);
        return cudaErrorInvalidConfiguration;
    }
    if (bound && nthreads > bound) {
        record("kernel %s: launched with %llu threads a block, over its __launch_bounds__(%u)", name, nthreads, bound);
        return cudaErrorLaunchOutOfResources;
    }
    size_t dyn_max = 48 * 1024;
    {
        std::lock_guard<std::mutex> lk(g_dyn_mu);
        auto it = g_dyn_max.find(key);
        if (it != g_dyn_max.end() && it->second > dyn_max) dyn_max = it->second;
    }
    if (dyn_smem > dyn_max) {
        record("kernel %s: %zu bytes of dynamic shared memory (over %zu: %s)", name, dyn_smem, dyn_max,
               dyn_max == 48 * 1024 ? "48 KiB without cudaFuncSetAttribute" : "its cudaFuncSetAttribute");
        return cudaErrorInvalidValue;
    }
    Launch L;
    L.name = name;
    L.grid = grid;
    L.block = block;
    L.smem = dyn_smem;
    L.fn = fn;
    L.closure = closure;
    L.nblocks = (unsigned long long)grid.x * grid.y * grid.z;
    L.nthreads = (unsigned)nthreads;
    L.reverse = g_reverse;
    L.next.store(0);
    L.failed.store(false);
    int nw = L.nblocks < WORKERS ? (int)L.nblocks : WORKERS;
    for (int i = 0; i < nw; i++) {
        Worker *w = &g_workers[i];
        w->id = i;
        w->L = &L;
        if (!ensure_fibers(w, L.nthreads)) {
            record("kernel %s: out of memory for %u thread stacks", name, L.nthreads);
            return cudaErrorMemoryAllocation;
        }
        if (w->dyn_cap < dyn_smem || !w->dyn) {
            size_t cap = dyn_smem < 4096 ? 4096 : dyn_smem;
            char *d = guarded_alloc(cap, 1, "the guard page after dynamic shared memory", "extern __shared__");
            if (!d) return cudaErrorMemoryAllocation;
            w->dyn = d;   /* cap bytes before the guard; the launch's part is its end */
            w->dyn_cap = cap;
        }
        /* dynamic shared memory of this launch: its last dyn_smem bytes, aligned to the
         * largest power of two (up to 16) that divides its size */
        size_t al = 16;
        while (al > 1 && dyn_smem % al) al /= 2;
        char *end = w->dyn + w->dyn_cap;
        w->dyn = (char *)(((uintptr_t)end - dyn_smem) & ~(uintptr_t)(al - 1));
        w->dyn_cap = (size_t)(end - w->dyn);
        w->dyn_bytes = dyn_smem;
        w->dyn_gen = 0;
    }
    pthread_t th[WORKERS];
    int started = 0;
    for (int i = 0; i < nw; i++) {
        if (pthread_create(&th[i], nullptr, worker_main, &g_workers[i]) != 0) {
            L.failed.store(true);
            record("kernel %s: cannot start a worker thread", name);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], nullptr);
    g_kernel = "(none)";
    return L.failed.load() ? cudaErrorLaunchFailure : cudaSuccess;
}

} /* namespace fcemu */

extern "C" const char *fcemu_last_error(void) { return fcemu::g_err; }
extern "C" void fcemu_set_reverse(int reverse) { fcemu::g_reverse = reverse != 0; }

/* For a fault handler: what addr is, and which thread touched it. Async-signal-safe enough
 * for a crash path (no locks, no allocation). Returns the length written. */
extern "C" int fcemu_describe_fault(const void *addr, char *buf, size_t len) {
    using namespace fcemu;
    const char *a = (const char *)addr;
    const char *what = nullptr, *name = nullptr;
    int n = g_nguards.load();
    for (int i = 0; i < n; i++)
        if (a >= g_guards[i].lo && a < g_guards[i].hi) { what = g_guards[i].what; name = g_guards[i].name; break; }
    int o = 0;
    if (cur_ctx && cur_worker)
        o = snprintf(buf, len, "kernel %s, block %llu, thread %u", g_kernel, cur_worker->block_lin, cur_ctx->linear);
    else
        o = snprintf(buf, len, "outside a kernel");
    if (o < 0 || (size_t)o >= len) return o < 0 ? 0 : (int)len - 1;
    if (what) o += snprintf(buf + o, len - (size_t)o, ": %s %s", what, name);
    return o;
}
