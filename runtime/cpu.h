/* cpu.h: the CPU device: JIT-compiles a KirProgram with LLVM ORC (LLJIT), optimized for the
 * host CPU, and runs its launches with a thread pool splitting each grid over threads.
 * For a fixed thread count results are identical bit for bit from run to run. */
#ifndef FUSEC_CPU_H
#define FUSEC_CPU_H

#include "kir.h"
#include "passes.h"

typedef struct RtCpuProgram RtCpuProgram;
/* nthreads <= 0: FUSEC_NUM_THREADS, else all cores. The KirProgram must outlive the result. */
FcStatus rt_cpu_compile(const KirProgram *p, int nthreads, RtCpuProgram **out, FcErr *err);
void rt_cpu_free(RtCpuProgram *cp);
/* Makes a and b, programs that never run at the same time (a training step's forward and
 * backward), use one workspace (the larger one's) and one thread pool (a's). Free b before
 * a; neither may run after the first is freed. */
void rt_cpu_share(RtCpuProgram *a, RtCpuProgram *b);
int rt_cpu_threads(const RtCpuProgram *cp);
/* Runs every launch in order. inputs/outputs: host pointers per block input/output. The
 * workspace is owned by the program. A KS_ERROR that fired returns its status. */
FcStatus rt_cpu_run(RtCpuProgram *cp, void *const *inputs, void *const *outputs, FcErr *err);
/* Runs launch i alone (for per-kernel timing); buffers as for rt_cpu_run. */
FcStatus rt_cpu_run_launch(RtCpuProgram *cp, int i, void *const *inputs, void *const *outputs,
                           FcErr *err);
/* Binds the program's f8 scaling state (KIR_BUF_STATE: host memory of at least that buffer's
 * size, the caller's, kept between runs); a program with a state buffer needs it before it runs. */
void rt_cpu_set_state(RtCpuProgram *cp, float *state);
/* The program's workspace (temporaries at their KirBuffer offsets); NULL when it has none. */
void *rt_cpu_workspace(const RtCpuProgram *cp);
/* A buffer of `bytes` for the CPU: 2 MiB-aligned and advised to use huge pages from 2 MiB
 * on, else 64-byte aligned; *raw is what to fc_free. NULL when out of memory. */
void *rt_cpu_alloc(size_t bytes, void **raw);
/* STREAM copy bandwidth in GB/s (bytes read + written), best of several, with nthreads. */
double rt_cpu_stream_gbps(int nthreads);
/* f32 peak in GFLOP/s with nthreads (<= 0: as rt_cpu_compile): a timed loop of independent
 * vector FMAs on every thread, the widest ISA the CPU has (chosen at run time; *isa, if not
 * NULL, receives its static name, e.g. "AVX-512 FMA"). Measured once per process and thread
 * count (about 25 ms), then cached; thread-safe. 0 when the thread pool cannot be made. */
double rt_cpu_peak_gflops(int nthreads, const char **isa);
/* The host's caches (cpu0's, from sysfs) and vector width (LLVM's host features), the budgets
 * of CPU-shaped schedules (PassOptions.host); read once per process. */
void rt_cpu_host(PassCpu *out);
/* The x86 level the kernels are compiled for: FUSEC_CPU (docs/cpu.md) names x86-64-v2 (SSE4.2),
 * x86-64-v3 (AVX2, FMA) or x86-64-v4 (AVX-512), to check a speed or a result on a lower level
 * than the machine's; unset, empty or "native": the host's CPU and features. Returns the level
 * (2-4), 0 for native, -1 for a value that is none of these or a level the host cannot run;
 * *name: the variable's value (NULL when unset). */
int rt_cpu_level(const char **name);
/* Whether the kernels are compiled with FMA instructions, so that a multiply-add the code
 * generator leaves to LLVM (llvm.fmuladd) is fused: x86-64-v3 and v4, a native host with FMA,
 * any non-x86 host; not x86-64-v2 or a FUSEC_CPU the host cannot run (tests: the bounds and
 * bit-identities that depend on it). */
bool rt_cpu_jit_fma(void);
/* How many stores of cp's module were made non-temporal (KirParam.stream; for tests). */
int rt_cpu_stream_stores(const RtCpuProgram *cp);
/* How many of the vector math's table lookups became register permutes (tests). */
int rt_cpu_table_permutes(const RtCpuProgram *cp);
/* Whether cp's object code came from the kernel cache (its optimizer and code generator
 * skipped: docs/cpu.md, "The object cache"; for tests). */
bool rt_cpu_cache_hit(const RtCpuProgram *cp);

#endif
