/* check.h: the unit tests' one assertion: EXPECT(cond, fmt, ...) counts a failure and prints
 * file:line, the condition and a message, and the test goes on; main returns failures != 0. */
#ifndef FUSEC_TEST_CHECK_H
#define FUSEC_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

#endif
