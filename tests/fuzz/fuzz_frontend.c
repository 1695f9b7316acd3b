/* fuzz_frontend.c: libFuzzer target for the frontend. Any bytes go to fe_compile, which
 * must return a status without crashing, leaking or reading out of bounds; on an error
 * the diagnostics must start with the file name (every error is reported). Built only
 * with -DFUSEC_FUZZ=ON and clang (tests/fuzz.cmake). */
#include "frontend.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    IrGraph *g = NULL;
    StrBuf sb = {0};
    FcErr err = {0};
    FeDimBinding dims[1] = {{"B", 3}};
    FeOptions o = {.dims = dims, .ndims = (size & 1) ? 1 : 0};
    FcStatus s = fe_compile((const char *)data, size, "fuzz.tf", &o, &g, &sb, &err);
    if (s == FC_OK && !g) __builtin_trap();
    if (s == FC_ERR_INPUT && (!sb.data || strncmp(sb.data, "fuzz.tf", 7) != 0)) __builtin_trap();
    if (s == FC_ERR_INTERNAL) __builtin_trap();
    ir_graph_free(g);
    sb_free(&sb);
    return 0;
}
