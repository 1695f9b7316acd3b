/* copy_bw.c: the machine's copy bandwidth two ways, side by side (not part of CI).
 *
 *   cc -O2 -pthread bench/copy_bw.c -o /tmp/copy_bw && /tmp/copy_bw [threads] [MiB per array]
 *
 * 1. regular stores (`a[i] = b[i]`, what STREAM's Copy compiles to, and the figure
 *    `fusec bench` reports as "STREAM copy", with memcpy): every destination line is read
 *    before it is written (read for ownership), so the bus carries 3 bytes per 2 counted;
 * 2. non-temporal stores (SSE2 `movntps`, 16 bytes at a time): no read for ownership.
 * Both count (bytes read + bytes written) / time, as STREAM does. Each is timed 15 times,
 * interleaved with the other (so a change in the machine's load affects both), after 3
 * warm-up copies; it prints the median, best and worst. Arrays default to 256 MiB each (4 x a
 * 32 MiB last-level cache at least), first touched by the threads that copy them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

enum { REPS = 15, WARM = 3 };
static int nth = 2;
static size_t bytes;
static float *src, *dst;
static pthread_barrier_t bar;
static double times[2][REPS];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void copy_plain(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
}
static void copy_nt(float *restrict d, const float *restrict s, size_t n) {
#if defined(__x86_64__)
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {   /* d is 64-byte aligned per thread: n per thread is */
        _mm_stream_ps(d + i, _mm_load_ps(s + i));
        _mm_stream_ps(d + i + 4, _mm_load_ps(s + i + 4));
        _mm_stream_ps(d + i + 8, _mm_load_ps(s + i + 8));
        _mm_stream_ps(d + i + 12, _mm_load_ps(s + i + 12));
    }
    for (; i < n; i++) d[i] = s[i];
    _mm_sfence();
#else
    copy_plain(d, s, n);
#endif
}

static void *worker(void *arg) {
    long t = (long)arg;
    size_t n = bytes / sizeof(float) / (size_t)nth;
    float *d = dst + (size_t)t * n;
    const float *s = src + (size_t)t * n;
    for (size_t i = 0; i < n; i++) { d[i] = 0.0f; ((float *)s)[i] = (float)(i & 1023); }   /* first touch */
    for (int r = 0; r < 2 * (REPS + WARM); r++) {
        int kind = r & 1;
        pthread_barrier_wait(&bar);
        double t0 = now();
        if (kind) copy_nt(d, s, n);
        else copy_plain(d, s, n);
        pthread_barrier_wait(&bar);
        if (t == 0 && r / 2 >= WARM) times[kind][r / 2 - WARM] = now() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc > 1) nth = atoi(argv[1]);
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
    if (nth < 1 || nth > 256 || mib < 1 || mib > 65536) {
        fprintf(stderr, "usage: copy_bw [threads 1-256] [MiB per array]\n");
        return 2;
    }
    bytes = mib << 20;
    bytes -= bytes % ((size_t)nth * 64);
    src = aligned_alloc(64, bytes);
    dst = aligned_alloc(64, bytes);
    if (!src || !dst) { fprintf(stderr, "copy_bw: out of memory\n"); return 1; }
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    pthread_t th[256];
    for (long t = 0; t < nth; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < nth; t++) pthread_join(th[t], NULL);
    static const char *const names[2] = {"regular stores (STREAM Copy)", "non-temporal stores"};
    printf("copy of %zu MiB, %d thread%s, GB/s as (read + written) / time, %d runs:\n", bytes >> 20, nth,
           nth == 1 ? "" : "s", REPS);
    for (int k = 0; k < 2; k++) {
        qsort(times[k], REPS, sizeof(double), cmp);
        double gb = 2.0 * (double)bytes / 1e9;
        printf("  %-30s median %6.1f  best %6.1f  worst %6.1f\n", names[k], gb / times[k][REPS / 2], gb / times[k][0],
               gb / times[k][REPS - 1]);
    }
    return 0;
}
