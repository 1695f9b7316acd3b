/* test_cuda_emu_train.c: the training AOT unit (`fusec --train --emit cuda`, docs/cuda.md
 * "Training") run on the CUDA emulation (docs/cuda_emu.md).
 *
 * Each case is the unit of an examples/NAME.tf (fused and eager, at the small odd dims of
 * emu_examples, as in test_cuda_emu; gpt2_mlp also at the file's own dims) called as a user would: fusec_emu_forward,
 * then, with the workspace refilled with 0xFF bytes, fusec_emu_backward with the same inputs and
 * outputs and the `saved` buffer the forward wrote. Inputs and the outputs' gradients are those
 * of `fusec run --train` (fc_block_random_input, fc_block_random_grad_output); the outputs and
 * the inputs' gradients must match the CPU device's forward and fc_program_backward (what
 * `fusec run --train` writes as NAME.npy and grad_NAME.npy) within fc_block_output_tolerance and
 * fc_block_grad_tolerance, in thread order and in reverse order, and the two orders must agree
 * bit for bit.
 * A planted bug must be caught: the backward reading a saved buffer from its workspace instead
 * of `saved` (it finds the 0xFF bytes there, not the forward's values).
 * Exits 77 when no C++ compiler is found; the work folder is kept when something fails, or with
 * FUSEC_EMU_KEEP=1.
 */
#include "emu_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUSEC_CXX
#define FUSEC_CXX "c++"
#endif
#define EMU_DIR FUSEC_SOURCE_DIR "/tests/cuda_emu"

#include "check.h"

static EmuRunner emu;

/* The same unit with the backward's first read of a saved buffer moved to its workspace. */
static char *plant_saved_from_workspace(const char *cu) {
    const char *bwd = strstr(cu, "fusec_emu_backward(const");
    const char *at = bwd ? strstr(bwd, " *)(fc_saved + ") : NULL;
    if (!at) return NULL;
    at += strlen(" *)(");
    char *s = emu_xcalloc(strlen(cu) + 1, 1);
    memcpy(s, cu, (size_t)(at - cu));
    strcat(s, "fc_ws");
    strcat(s, at + strlen("fc_saved"));
    return s;
}

int main(void) {
    emu_precision = getenv("FUSEC_EMU_PRECISION");   /* the units at --precision (ctest *_bf16/_f16) */
    char why[2048];
    int st = emu_init(&emu, FUSEC_CXX, EMU_DIR, FUSEC_BINARY_DIR, why, sizeof why);
    if (st == 77) { printf("SKIP: %s\n", why); return 77; }
    if (st != 0) { fprintf(stderr, "%s\n", why); return 1; }
    int planted = -1;
    for (int e = 0; e < emu_nexamples; e++) {
        char *src = emu_example_source(FUSEC_SOURCE_DIR, e);
        EXPECT(src, "cannot read examples/%s.tf", emu_examples[e].file);
        if (!src) continue;
        for (int v = 0; v < 3; v++) {
            bool fuse = v != 1, file_dims = v == 2;
            if (file_dims && strcmp(emu_examples[e].file, "gpt2_mlp") != 0) continue;
            char name[128];
            snprintf(name, sizeof name, "%s_train_%s%s", emu_examples[e].file, fuse ? "fused" : "eager",
                     file_dims ? "_file_dims" : "");
            EmuCase *c = emu_add_train_block(&emu, name, src, file_dims ? NULL : emu_examples[e].dims, fuse, 42 + (uint64_t)e,
                                             1, why, sizeof why);
            EXPECT(c, "%s", why);
            if (c && planted < 0 && !strcmp(name, "gpt2_mlp_train_fused")) {
                char *bad = plant_saved_from_workspace(c->cu);
                EXPECT(bad, "%s: the backward reads no saved buffer", name);
                if (bad) planted = emu_clone_case(&emu, c->id, "planted_saved_read_from_workspace", bad)->id;
            }
        }
        free(src);
    }

    int unbuilt = emu_build(&emu, 3, 2);
    EXPECT(unbuilt == 0, "%d case(s) did not build", unbuilt);
    int passed = 0;
    for (int i = 0; i < emu.ncases; i++) {
        EmuCase *c = &emu.cases[i];
        EmuReport rep;
        double t0 = emu_now_s();
        emu_check(&emu, i, &rep);
        if (i == planted) {
            EXPECT(rep.why[0], "%s: the harness did not catch the planted bug", c->name);
            if (rep.why[0]) printf("caught   %-36s %s\n", c->name, rep.why);
            continue;
        }
        EXPECT(!rep.why[0], "%s: %s", c->name, rep.why);
        if (!rep.why[0]) {
            passed++;
            printf("ok       %-36s %.2f s (%d outputs and gradients)\n", c->name, emu_now_s() - t0, c->nout);
        }
    }
    printf("cuda emulation, training: %d of %d cases passed; compiling %.1f s (%d C++ compiles, %d from the cache)\n",
           passed, emu.ncases - (planted >= 0), emu.t_compile, emu.n_compiles, emu.n_cached);
    const char *keep = getenv("FUSEC_EMU_KEEP");
    emu_free(&emu, (keep && keep[0] == '1') || failures);
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    return 0;
}
