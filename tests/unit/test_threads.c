/* test_threads.c: the library is safe to use from several threads on distinct handles.
 *
 * Four threads each compile their own block (from the same source and from different ones),
 * open their own CPU and reference devices, run, and compare with the reference, several
 * times over, all at once. Each thread's results must equal those of the same work done
 * alone beforehand, bit for bit (the CPU backend is deterministic for a fixed thread count).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusec.h"

#define NTHREADS 4
#define ROUNDS 3

static const char *const sources[2] = {
    "dim B = 3, T = 17, C = 40\n"
    "block mlp(x: f32[B, T, C], param g: f32[C], param b: f32[C], param w: f32[C, 2*C], param w2: f32[2*C, C]) {\n"
    "    h = layernorm(x, g, b)\n"
    "    return x + gelu(h @ w) @ w2\n}\n",
    "dim H = 2, T = 9, D = 8\n"
    "block attn(q: f32[H, T, D], k: f32[H, T, D], v: f32[H, T, D]) {\n"
    "    return attention(q, k, v, causal=true), softmax(q, axis=1)\n}\n",
};

typedef struct Work {
    int which;            /* source index */
    uint64_t checksum;    /* of all outputs' bytes */
    int failed;
    char msg[512];
} Work;

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void run(Work *w) {
    FcBlock *b = NULL;
    FcDevice *cpu = NULL, *ref = NULL;
    FcProgram *pc = NULL, *pr = NULL;
    FcTensor *in[8] = {0}, *inr[8] = {0}, *out[8] = {0}, *outr[8] = {0};
    w->checksum = 0xcbf29ce484222325ull;
    if (fc_compile_string(sources[w->which], "t.tf", NULL, &b) != FC_OK) {
        snprintf(w->msg, sizeof w->msg, "compile: %s", fc_block_last_error(b));
        goto fail;
    }
    if (fc_device_open(FC_DEVICE_CPU, 0, &cpu) != FC_OK || fc_device_open(FC_DEVICE_REFERENCE, 0, &ref) != FC_OK) {
        snprintf(w->msg, sizeof w->msg, "device");
        goto fail;
    }
    if (fc_program_new(b, cpu, &pc) != FC_OK || fc_program_new(b, ref, &pr) != FC_OK) {
        snprintf(w->msg, sizeof w->msg, "program: %s", pc ? fc_program_last_error(pc) : "?");
        goto fail;
    }
    int ni = fc_block_num_inputs(b), no = fc_block_num_outputs(b);
    for (int i = 0; i < ni; i++) {
        FcTensorInfo ti;
        fc_block_input_info(b, i, &ti);
        fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &in[i]);
        fc_tensor_new(ref, ti.dtype, ti.rank, ti.dims, &inr[i]);
        fc_block_random_input(b, i, 7, in[i]);
        fc_block_random_input(b, i, 7, inr[i]);
    }
    for (int j = 0; j < no; j++) {
        FcTensorInfo ti;
        fc_block_output_info(b, j, &ti);
        fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &out[j]);
        fc_tensor_new(ref, ti.dtype, ti.rank, ti.dims, &outr[j]);
    }
    if (fc_program_run(pc, in, out) != FC_OK || fc_program_run(pr, inr, outr) != FC_OK) {
        snprintf(w->msg, sizeof w->msg, "run: %s", fc_program_last_error(pc));
        goto fail;
    }
    for (int j = 0; j < no; j++) {
        double ma, mr, tol;
        fc_tensor_compare(out[j], outr[j], &ma, &mr);
        fc_block_output_tolerance(b, j, &tol);
        if (!(mr <= tol)) {
            snprintf(w->msg, sizeof w->msg, "output %d: rel %g > tol %g", j, mr, tol);
            goto fail;
        }
        size_t n = fc_tensor_nbytes(out[j]);
        unsigned char *buf = malloc(n);
        fc_tensor_copy_to_host(out[j], buf, n);
        w->checksum = fnv(w->checksum, buf, n);
        free(buf);
    }
    goto done;
fail:
    w->failed = 1;
done:
    for (int i = 0; i < 8; i++) {
        fc_tensor_free(in[i]); fc_tensor_free(inr[i]); fc_tensor_free(out[i]); fc_tensor_free(outr[i]);
    }
    fc_program_free(pc);
    fc_program_free(pr);
    fc_device_free(cpu);
    fc_device_free(ref);
    fc_block_free(b);
}

static void *thread_main(void *arg) {
    Work *w = arg;
    for (int r = 0; r < ROUNDS && !w->failed; r++) {
        uint64_t prev = w->checksum;
        run(w);
        if (r > 0 && w->checksum != prev && !w->failed) {
            w->failed = 1;
            snprintf(w->msg, sizeof w->msg, "round %d gave other bits", r);
        }
    }
    return NULL;
}

int main(void) {
    setenv("FUSEC_NUM_THREADS", "2", 1);
    uint64_t alone[2];
    for (int s = 0; s < 2; s++) {
        Work w = {.which = s};
        run(&w);
        if (w.failed) { fprintf(stderr, "FAIL alone %d: %s\n", s, w.msg); return 1; }
        alone[s] = w.checksum;
    }
    pthread_t th[NTHREADS];
    Work work[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        memset(&work[t], 0, sizeof work[t]);
        work[t].which = t % 2;
        if (pthread_create(&th[t], NULL, thread_main, &work[t]) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
    }
    int bad = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        if (work[t].failed) { fprintf(stderr, "FAIL thread %d: %s\n", t, work[t].msg); bad++; }
        else if (work[t].checksum != alone[work[t].which]) {
            fprintf(stderr, "FAIL thread %d: results differ from the same work done alone\n", t);
            bad++;
        }
    }
    printf("%s: %d threads x %d rounds\n", bad ? "FAIL" : "ok", NTHREADS, ROUNDS);
    return bad ? 1 : 0;
}
