/* example_common.h: what both example programs need besides fusec.h: the exit statuses,
 * error reporting, device selection and tensor allocation. A program defines EXAMPLE_NAME
 * (its name, for messages) before including it.
 *
 * Exit statuses: 0 ok; 1 an error (message on stderr); 2 bad usage; 3 the requested device
 * is unavailable; 4 results disagree (each program says with what). */
#ifndef FUSEC_EXAMPLE_COMMON_H
#define FUSEC_EXAMPLE_COMMON_H

#include <fusec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EXAMPLE_NAME
#error "define EXAMPLE_NAME before including example_common.h"
#endif
#ifndef FUSEC_EXAMPLE_TF
#define FUSEC_EXAMPLE_TF "../gpt2_block.tf"
#endif

enum { EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_UNAVAILABLE = 3, EXIT_MISMATCH = 4 };

/* Prints "NAME: WHAT: STATUS: DETAIL" and gives the exit status for s. */
static int report(const char *what, FcStatus s, const char *detail) {
    fprintf(stderr, EXAMPLE_NAME ": %s: %s%s%s\n", what, fc_status_name(s), detail && *detail ? ": " : "",
            detail ? detail : "");
    if (s == FC_ERR_USAGE) return EXIT_USAGE;
    if (s == FC_ERR_UNAVAILABLE) return EXIT_UNAVAILABLE;
    return EXIT_ERROR;
}

/* Opens the device asked for; "auto" tries CUDA first and falls back to the CPU. */
static int open_device(const char *which, FcDevice **out) {
    FcDevice *d = NULL;
    FcStatus s;
    if (strcmp(which, "cpu") != 0) {
        s = fc_device_open(FC_DEVICE_CUDA, 0, &d);
        if (s == FC_OK) {
            *out = d;
            return 0;
        }
        if (strcmp(which, "cuda") == 0 || s != FC_ERR_UNAVAILABLE) {
            int rc = report("opening the CUDA device", s, d ? fc_device_last_error(d) : NULL);
            fc_device_free(d);
            return rc;
        }
        printf("CUDA unavailable (%s); using the CPU\n", d ? fc_device_last_error(d) : fc_status_name(s));
        fc_device_free(d);
        d = NULL;
    }
    s = fc_device_open(FC_DEVICE_CPU, 0, &d);
    if (s != FC_OK) {
        int rc = report("opening the CPU device", s, d ? fc_device_last_error(d) : NULL);
        fc_device_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* Frees n tensors (NULL entries allowed) and the array. */
static void free_tensors(FcTensor **t, int n) {
    for (int i = 0; t && i < n; i++) fc_tensor_free(t[i]);
    free(t);
}

/* A tensor of ti's dtype and shape on d; the exit status on failure. */
static int new_tensor(FcDevice *d, const FcTensorInfo *ti, FcTensor **out) {
    FcStatus s = fc_tensor_new(d, ti->dtype, ti->rank, ti->dims, out);
    if (s != FC_OK) {
        char what[200];
        snprintf(what, sizeof what, "creating tensor '%s' on %s", ti->name, fc_device_description(d));
        return report(what, s, fc_device_last_error(d));
    }
    return 0;
}

#endif
