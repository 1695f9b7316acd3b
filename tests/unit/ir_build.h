/* ir_build.h: small helpers for tests that build graph IR by hand: shapes from a dims list
 * (SH(2, 3) is [2, 3]), attribute lists, block inputs. */
#ifndef FUSEC_TEST_IR_BUILD_H
#define FUSEC_TEST_IR_BUILD_H

#include "ir.h"

static inline IrShape shp(int rank, const int64_t *dims) {
    IrShape s = {.rank = rank};
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}
#define SH(...) shp((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
/* an attribute list inside an IrAttrs initializer: (IrAttrs){LIST(0, 2)} */
#define LIST(...) .nlist = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .list = (int64_t[]){__VA_ARGS__}

static inline int inp(IrGraph *g, const char *name, FcDtype t, IrShape s, bool param) {
    return ir_add_input(g, name, t, &s, param);
}

#endif
