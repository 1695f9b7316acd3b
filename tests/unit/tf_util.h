/* tf_util.h: helpers the unit tests that compile .tf text share (include after check.h):
 * urand(), a xorshift generator in [0, 1) whose state `rng` a test may seed; compile(),
 * which runs the frontend on a block's text and counts a failure (EXPECT) when it does not
 * compile; make_inputs(), random inputs of a graph's dtypes. */
#ifndef FUSEC_TEST_TF_UTIL_H
#define FUSEC_TEST_TF_UTIL_H

#include "frontend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

/* The graph of `text` (its last block), or NULL after an EXPECT naming `what`. */
static IrGraph *compile(const char *what, const char *text) {
    IrGraph *g = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    if (fe_compile(text, strlen(text), "test.tf", &fo, &g, &diags, &err) != FC_OK)
        EXPECT(0, "%s: compile: %s %s", what, err.msg, diags.data ? diags.data : "");
    sb_free(&diags);
    return g;
}

/* Random inputs of g (each of its dtype: f32 in [-2, 2), bf16 in [-1, 1), i8 in [-127, 127], a
 * `s` of small positive scales), the same for a given seed. */
static void **make_inputs(const IrGraph *g, uint64_t seed) {
    void **in = calloc((size_t)g->inputs.len + 1, sizeof *in);
    rng = seed;
    for (int i = 0; i < g->inputs.len; i++) {
        const IrValue *v = ir_cval(g, g->inputs.data[i]);
        int64_t n = 1;
        ir_shape_numel(&v->shape, &n);
        in[i] = malloc((size_t)n * fc_dtype_size(v->dtype) + 1);
        bool scale = v->name && strcmp(v->name, "s") == 0;
        for (int64_t e = 0; e < n; e++) {
            float f = (float)(scale ? (urand() + 0.5) / 50 : urand() * 4 - 2);
            if (v->dtype == FC_I8) {
                ((signed char *)in[i])[e] = (signed char)((int)(urand() * 255) - 127);
            } else if (v->dtype == FC_BF16) {
                unsigned u;
                f /= 2;
                memcpy(&u, &f, 4);
                ((unsigned short *)in[i])[e] = (unsigned short)(u >> 16);
            } else {
                ((float *)in[i])[e] = f;
            }
        }
    }
    return in;
}

#endif
