/* memplan.c: memory planning of a kernel program's workspace (pass_memplan, see passes.h).
 *
 * Requires: a verified kernel program whose temporaries (KIR_BUF_TEMP) each have a region of
 * their own. Leaves: the same program with the temporaries placed by liveness: a temporary is
 * live from the first launch that binds it to the last, and two temporaries share bytes only
 * when their live ranges are disjoint. workspace_bytes becomes the plan's peak.
 *
 * Placement: largest first (ties: first used first), each at the lowest 256-byte-aligned offset
 * where it overlaps no placed temporary live at the same time (first fit over the placed
 * intervals sorted by offset). Launches run in order on one stream (CPU and CUDA alike), so a
 * region freed by its last reader may be written by a later launch; but the launches the CPU
 * runs interleaved (a product with its operand kernel or its epilogue, kir_launch_unit) count
 * as one: a temporary any of them binds lives over all of them.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct Temp {
    int buf;
    int64_t bytes;     /* rounded up to 256 */
    int first, last;   /* launches */
    int64_t offset;
} Temp;

static int cmp_size(const void *a, const void *b) {
    const Temp *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->buf < y->buf ? -1 : x->buf > y->buf;
}
static int cmp_offset(const void *a, const void *b) {
    const Temp *const *x = a, *const *y = b;
    return (*x)->offset < (*y)->offset ? -1 : (*x)->offset > (*y)->offset;
}

FcStatus pass_memplan(KirProgram *p, FcErr *err) {
    FC_CHECK(err, p != NULL);
    int nb = p->buffers.len, nt = 0;
    for (int b = 0; b < nb; b++) nt += p->buffers.data[b].kind == KIR_BUF_TEMP;
    if (nt == 0) return FC_OK;
    Temp *t = fc_calloc((size_t)nt, sizeof *t);
    int *slot = fc_calloc((size_t)nb, sizeof(int));
    Temp **live = fc_calloc((size_t)nt, sizeof *live);
    if (!t || !slot || !live) {
        fc_free(t); fc_free(slot); fc_free(live);
        return FC_OOM(err);
    }
    FcStatus s = FC_OK;
    int k = 0;
    for (int b = 0; b < nb; b++) {
        slot[b] = -1;
        const KirBuffer *x = &p->buffers.data[b];
        if (x->kind != KIR_BUF_TEMP) continue;
        int64_t bytes;
        if (!fc_mul64(x->numel, (int64_t)fc_dtype_size(x->dtype), &bytes) || !fc_add64(bytes, 255, &bytes)) {
            s = fc_err_set(err, FC_ERR_INPUT, "the workspace of block '%s' overflows a 64-bit byte count", p->block_name);
            break;
        }
        t[k] = (Temp){.buf = b, .bytes = bytes / 256 * 256, .first = -1, .last = -1};
        slot[b] = k++;
    }
    for (int l = 0; l < p->launches.len && s == FC_OK; l++) {
        const KirLaunch *la = &p->launches.data[l];
        for (int a = 0; a < la->nargs; a++) {
            int b = la->args[a];
            if (b < 0 || b >= nb || slot[b] < 0) continue;
            Temp *x = &t[slot[b]];
            int lo, hi;
            kir_launch_unit(p, l, &lo, &hi);   /* run interleaved: live over all of them */
            if (x->first < 0 || lo < x->first) x->first = lo;
            if (hi > x->last) x->last = hi;
        }
    }
    if (s == FC_OK) {
        qsort(t, (size_t)nt, sizeof *t, cmp_size);
        int64_t peak = 0;
        int nplaced = 0;
        for (int i = 0; i < nt && s == FC_OK; i++) {
            Temp *x = &t[i];
            /* the placed temporaries live at the same time as x, by offset */
            int nl = 0;
            for (int j = 0; j < nplaced; j++) {
                Temp *y = &t[j];
                bool unused = x->first < 0 || y->first < 0;
                if (unused || (y->first <= x->last && x->first <= y->last)) live[nl++] = y;
            }
            qsort(live, (size_t)nl, sizeof *live, cmp_offset);
            int64_t off = 0;
            for (int j = 0; j < nl; j++) {
                if (live[j]->offset >= off + x->bytes) break;   /* x fits in the gap before it */
                int64_t end = live[j]->offset + live[j]->bytes;
                if (end > off) off = end;
            }
            int64_t end;
            if (!fc_add64(off, x->bytes, &end)) {
                s = fc_err_set(err, FC_ERR_INPUT, "the workspace of block '%s' overflows a 64-bit byte count", p->block_name);
                break;
            }
            x->offset = off;
            if (end > peak) peak = end;
            nplaced++;
        }
        for (int i = 0; i < nt && s == FC_OK; i++) p->buffers.data[t[i].buf].offset = t[i].offset;
        if (s == FC_OK) p->workspace_bytes = peak;
    }
    fc_free(t);
    fc_free(slot);
    fc_free(live);
    return s;
}
