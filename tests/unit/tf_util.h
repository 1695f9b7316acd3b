/* tf_util.h: helpers the unit tests that compile .tf text share (include after check.h):
 * urand(), a xorshift generator in [0, 1) whose state `rng` a test may seed; compile(),
 * which runs the frontend on a block's text and counts a failure (EXPECT) when it does not
 * compile; make_inputs(), random inputs of a graph's dtypes; rel_err(), a result's distance
 * from a reference relative to the reference's largest element. */
#ifndef FUSEC_TEST_TF_UTIL_H
#define FUSEC_TEST_TF_UTIL_H

#include "frontend.h"

#include <math.h>
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

/* element e of a buffer of dtype t (f32 or bf16) as an f32 */
static float to_f32(const void *buf, FcDtype t, int64_t e) {
    if (t != FC_BF16) return ((const float *)buf)[e];
    unsigned u = (unsigned)((const unsigned short *)buf)[e] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* max |got - ref| / max |ref| over n elements of dtype t (f32 or bf16), infinite where an
 * element differs and is not finite */
static double rel_err(const void *got, const void *ref, FcDtype t, int64_t n) {
    double worst = 0, big = 0;
    for (int64_t e = 0; e < n; e++) {
        float r = to_f32(ref, t, e);
        if (isfinite(r) && fabs(r) > big) big = fabs(r);
    }
    for (int64_t e = 0; e < n; e++) {
        float a = to_f32(got, t, e), r = to_f32(ref, t, e);
        if (a == r) continue;
        double d = isfinite(a) && isfinite(r) ? fabs((double)a - r) : INFINITY;
        if (d > worst) worst = d;
    }
    return big > 0 ? worst / big : worst;
}

#endif
