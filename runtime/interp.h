/* interp.h: the reference interpreter, the oracle of every test.
 *
 * Runs a graph IR op by op in plain C with f64 accumulation, on the graph *before*
 * decomposition, with its own implementation of every op in the table (composites
 * included). It shares no code with decomposition, the kernel IR or the backends.
 * Every value is rounded to its dtype after each op (the op-by-op meaning of a program).
 */
#ifndef FUSEC_INTERP_H
#define FUSEC_INTERP_H

#include "ir.h"

/* inputs[i]: the i-th block input's data in its dtype (dense, row-major);
 * outputs[i]: room for the i-th output in its dtype. A gather index out of range gives
 * FC_ERR_RUNTIME_DATA; a training op FC_ERR_UNSUPPORTED. */
FcStatus rt_interp_run(const IrGraph *g, const void *const *inputs, void *const *outputs,
                       FcErr *err);

#endif
