/* dropout_ref.h: dropout's keep mask as docs/language.md defines it, for the tests: element i
 * is kept iff word 0 of Philox-4x32-10 with counter (low, high 32 bits of i, 0, 0) and key
 * (low, high 32 bits of seed) is >= floor(p * 2^32). Philox is the reference interpreter's,
 * whose known answers test_interp checks. */
#ifndef FUSEC_TEST_DROPOUT_REF_H
#define FUSEC_TEST_DROPOUT_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "interp.h"

static inline bool dropout_ref_kept(double p, int64_t seed, int64_t i) {
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)((uint64_t)seed >> 32)}, r[4];
    rt_interp_philox4x32_10(ctr, key, r);
    return (uint64_t)r[0] >= (uint64_t)floor(p * 4294967296.0);
}

#endif
