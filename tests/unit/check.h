/* check.h: the unit tests' assertions. EXPECT(cond, fmt, ...) counts a failure and prints
 * file:line, the condition and a message, and the test goes on; CHECK(cond) is EXPECT without a
 * message; REQUIRE(cond) stops the test (exit 1) when a later step cannot go on without it.
 * main returns failures != 0. */
#ifndef FUSEC_TEST_CHECK_H
#define FUSEC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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
#define CHECK(cond) EXPECT(cond, "%s", "")
#define REQUIRE(cond)                                                                         \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: fatal: %s\n", __FILE__, __LINE__, #cond);                 \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#endif
